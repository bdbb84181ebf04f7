// Package atomicfile replaces files and symbolic links so that a reader sees the old
// content or the new, never half of it, and a crash leaves one of the two on disk: the new
// content goes to a temporary file beside the target, is synced, and is renamed over the
// target, and the directory is synced so that the rename lasts. Replace does the same
// without the syncs, for state that need only outlive a process, not the machine.
//
// It is a leaf: it imports no kubelab component. It serves every step that leaves state
// on disk for another process or for the next start: the API server's certificates and
// keys, containerd's configuration, the CNI configuration and plugin links, the image
// store's index, the fake cloud's state and device links.
package atomicfile

// Package flock takes exclusive advisory locks (flock(2)) on files and directories, so
// that one process at a time manages what the file stands for: a data dir that `kubelab
// up` holds, the directory containerd runs from, the CNI plugin's address store, an image
// layout being imported into.
//
// Each lock is taken through a descriptor of its own, so goroutines of one process exclude
// each other as processes do, and the kernel drops it when the holder dies, kill -9
// included. Exclusive waits (until its context ends); TryExclusive does not.
//
// It is a leaf: it imports no kubelab component.
package flock

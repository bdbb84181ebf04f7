// Package rundir names the short directories where kubelab's unix sockets live, whatever
// the length of the data dir they belong to.
//
// A unix socket's address holds at most MaxSocketPath bytes of path, so a socket under a
// data dir of a hundred characters cannot be bound or dialled. Every socket of a
// cluster (its nodes' containerd, their kubelets' plugin registration and CSI sockets, the
// in-process CSI controller) is therefore under the data dir's run directory,
// For(dataDir): <Root>/<ID of the data dir>, e.g. /run/kubelab/3f2a9c1b. The ID is a hash
// of the dir's path, so the same data dir finds the same run directory at every start,
// and two data dirs never share one. Where a socket's usual place is inside a data dir
// (a kubelet root's plugins_registry), Link puts a symbolic link to its run directory
// there. Remove takes a run directory away when its owner stops.
//
// It is a leaf: it imports no kubelab component.
package rundir

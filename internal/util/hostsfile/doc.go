// Package hostsfile keeps a block of entries in a hosts file (/etc/hosts) on behalf of
// one owner: the cloud keeps its load balancers' DNS names there, so that the machine's
// resolver finds them.
//
// The block is delimited by comment lines naming the owner; everything else in the file
// is left as it is. Writers on the machine exclude each other with a lock on the file's
// directory, and the file is replaced atomically (a new file renamed over it), or, when
// it is a mount point that cannot be replaced (a container's /etc/hosts), rewritten in
// place. An empty set of entries removes the block.
//
// It is a leaf: it imports no kubelab component.
package hostsfile

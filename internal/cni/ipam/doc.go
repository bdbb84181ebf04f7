// Package ipam is the address store of the kubelab-cni plugin: it hands each pod
// attachment (a container id and an interface name) one IPv4 address of the node's
// podCIDR, the "IP" of the step "CNI gives the pod an IP".
//
// The store is a directory (the plugin's dataDir) that survives restarts of the node
// and of the plugin, shared by every plugin process of the node:
//
//   - one file per allocated address, named after it ("10.244.1.7"), created with O_EXCL
//     and holding the container id and the interface name on two lines;
//   - last_reserved_ip, the address handed out last: the next allocation starts after it
//     and goes round the range, so that an address just freed is the last to be reused;
//   - an exclusive flock on the directory for the whole of every operation, so that
//     concurrent plugin processes (and goroutines, each with its own descriptor) never
//     hand one address to two attachments.
//
// The network address, the broadcast address and the gateway (the first host address,
// which the plugin puts on the node's bridge) are never allocated: a /24 has 253
// addresses for pods, a /30 has one.
//
// Contract: Allocate is idempotent per attachment (a retried ADD gets the address it
// already holds); Release and GC free addresses and are idempotent; an exhausted range
// is an *ExhaustedError whose message names the subnet and says it is full; a lock not
// obtained before the context ends is ErrBusy. Files whose names are not addresses are
// ignored, so the directory may hold other state of the plugin.
package ipam

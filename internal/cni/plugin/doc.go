// Package plugin is kubelab-cni, the CNI plugin (spec 1.1) of kubelab's real nodes: the
// step "CNI gives the pod an IP" of the flow. Each node's containerd runs the binary
// cmd/kubelab-cni, inside the node's network namespace, when it creates or removes a pod
// sandbox; the plugin joins the pod's namespace to the node's pod bridge and gives it an
// address of the node's podCIDR.
//
// Network configuration (stdin, type "kubelab-cni"): bridge (default "cni0"), mtu
// (default 1450, leaving room for VXLAN), subnet (the node's podCIDR, IPv4, /30 or
// shorter; required), dataDir (absolute; the IPAM store and the plugin's other state;
// required), hairpinMode (default true), nodeNetNS (the node's network namespace, a path:
// every verb then runs inside it, as kubelab's containerds run outside their nodes'
// namespaces; when empty the plugin's own namespace is the node's), and the capability "portMappings", which the
// runtime fills from the pod's hostPorts into runtimeConfig.portMappings. The gateway is
// the subnet's first host address, on the bridge.
//
// VPC mode (mode "vpc", ipamdSocket: the node's IP address manager's API socket, package
// ipamd; subnet unused; mtu default 1500): the pod's address is a secondary private IP of
// one of the node's ENIs, which ADD asks the manager for (CNI_ARGS' K8S_POD_NAMESPACE and
// K8S_POD_NAME name the pod to it) and DEL gives back. There is no bridge: the node end
// of the veth is VPCHostVethName ("eni" and 8 hex digits) with a /32 route to the pod in
// main; the pod's interface has the address as a /32, a route to PodGateway
// (169.254.1.1) on-link and the default route via it, and a permanent neighbour entry
// for PodGateway at the node end's MAC; the rule "to <pod> lookup main" (priority 512)
// and, for an address of a secondary ENI, "from <pod> lookup <device+1>" (priority 1536)
// are in the node's namespace. The result lists the node end and the pod's interface, the
// /32 with gateway 169.254.1.1, and the default route. CHECK asks the manager and checks
// the veth, the /32 route, the rules and the pod's address and default route; GC has the
// manager release every address of an attachment not in cni.dev/valid-attachments and
// removes the plugin's veths and rules without one. hostPorts work as in the bridge mode.
// A node out of addresses (every ENI and address its instance type allows in use) fails
// ADD with code 102 and the manager's "failed to assign an IP address to container"; a
// manager that cannot be reached is code 106.
//
// Verbs:
//
//   - ADD makes the bridge if it is missing (up, with the gateway; idempotent and safe
//     when plugin processes race), a veth pair whose node end is HostVethName (a port of
//     the bridge, hairpin mode on) and whose pod end is CNI_IFNAME in CNI_NETNS, takes an
//     address from the IPAM store (package ipam), puts it on the pod's interface, sets the
//     interface up and routes the pod's traffic via the gateway, and DNATs the pod's
//     hostPorts. The result lists the bridge, the node end and the pod's interface (with
//     its sandbox), the address (with gateway and interface index) and the default route.
//     A retried ADD of an attachment that holds an address gets the same one; an ADD whose
//     CNI_IFNAME exists in CNI_NETNS fails. Whatever fails after the first change undoes
//     every change made so far: no address and no veth are left behind.
//   - DEL removes the hostPort rules, deletes the veth pair and releases the address; it
//     is idempotent, and a missing netns, interface or address is not an error.
//   - CHECK verifies the allocation (and that prevResult lists it), the node end on the
//     bridge, and the pod's interface with its address and default route.
//   - STATUS succeeds when the configuration is valid and dataDir writable.
//   - GC releases every address, hostPort chain and bridge port of the plugin's naming
//     whose attachment is not in cni.dev/valid-attachments.
//   - VERSION: 0.3.0, 0.3.1, 0.4.0, 1.0.0 and 1.1.0 (results are converted to the
//     configuration's version; STATUS and GC need 1.1.0).
//
// hostPorts: the table "kubelab-hostports" (family ip) in the node's namespace has base
// chains at prerouting and output (dstnat) that send packets for a node-local address
// first through the verdict map "hostip-ports" (address . protocol . port: hostPorts with
// a hostIP, loopback ones included) and then, for any node-local address but
// 127.0.0.0/8, through "hostports" (protocol . port: hostPorts on every address, hostIP
// empty or 0.0.0.0) to the chain of the pod holding that port, "hostport-" and the
// attachment's hash, which DNATs to the pod's address and container port; a pod's
// packets to its own hostPort get the mark 0x2000 and are masqueraded at postrouting
// (srcnat) so that the answer comes back through the node. DEL deletes the pod's chain
// and map elements and nothing else. A hostPort another pod holds fails the ADD: the
// same protocol and port on the same hostIP, or with either on every address (the same
// port on another hostIP or with another protocol is free); the plugin processes check
// and change the rules one at a time, under the lock of dataDir/hostports, where a marker
// file per pod says which pods have rules, so that DEL and GC of pods without hostPorts
// never run nft. The node's namespace must forward IPv4 for pods to reach a hostPort
// through the node's address; a hostPort on 127.0.0.1 is reached by node-local clients
// whose source is a non-loopback address of the node.
//
// Errors are CNI errors {cniVersion, code, msg, details}; the message alone says what
// went wrong, as the runtime shows it in the pod's events. Codes:
//
//	1   incompatible CNI version (the configuration's is not one of VERSION's; or
//	    CHECK below 0.4.0, STATUS and GC below 1.1.0)
//	4   invalid environment: a required CNI_ variable missing or malformed, CNI_NETNS
//	    not a namespace or the node's own
//	5   I/O failure writing the result
//	6   the configuration is not JSON of the expected shape
//	7   invalid network configuration: each wrong or missing field named
//	11  try again later: the IPAM store is locked by another plugin process for too long
//	50  STATUS: the plugin is not available (dataDir not writable)
//	100 CodeNodeNetwork: a link, address or route could not be made, read or removed
//	101 CodeInterfaceExists: CNI_IFNAME already exists in CNI_NETNS
//	102 CodeRangeFull: no free address in the subnet ("no free address in
//	    10.244.1.0/24: all 253 in use")
//	103 CodeStore: the IPAM store could not be read or written
//	104 CodeHostPort: hostPort rules could not be set up or removed, or a hostPort is
//	    held by another pod
//	105 CodeCheckFailed: CHECK found the attachment unlike what ADD set up
//	106 CodeIPAMD: VPC mode's IP address manager could not be reached or failed
//	999 an unexpected internal error
//
// Contract: Main is the binary; New(Config).Funcs() are the verbs for
// skel.PluginMainFuncs, each running in the calling thread's network namespace (the
// node's) and writing its result to Config.Stdout, so that tests call them in-process
// inside a namespace of their own.
package plugin

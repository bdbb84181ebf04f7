// Package overlaytest helps tests watch the pod network on the wire: Capture opens
// an AF_PACKET socket on one interface of a network namespace (a node's VPC-side
// veth, say) and decodes every frame it sees into outer addresses and ports and,
// for VXLAN (UDP port 4789 or 8472), the VNI and the encapsulated packet.
//
// Contract: Capture(netnsPath, iface) starts at once; Packets returns what was seen,
// WaitFor blocks until a packet matches or ctx ends, Close stops it. Only IPv4 is
// decoded; other frames are counted and dropped.
package overlaytest

// Package natgateway is the VPC's way out: the NAT gateway through which kubelab's real
// nodes and their pods reach addresses outside the cluster, as instances in a private
// subnet of an EKS cluster reach the internet through a NAT gateway.
//
// The VPC is a network namespace with no uplink, and the machine's own namespace must get
// no route, link, address or rule into the cluster's ranges, nor a host-wide change
// (IPv4 forwarding, a masquerade rule) as a bridge to the outside would need. So the
// gateway works as slirp4netns and pasta do for a rootless container: what a node sends
// out is ended inside the namespace and made again as a connection of kubelab's own, from
// the machine's namespace, the way any program on the machine connects; the outside sees
// the machine. slirp4netns and pasta run a TCP/IP stack of their own behind a tap device;
// the gateway needs none, since it owns the namespace the packets arrive in and lets its
// kernel end them:
//
//   - Rules (nftables table TableName, family ip, in the VPC's namespace) send every new
//     TCP connection whose destination is outside the cluster's ranges (Config.ClusterRanges,
//     and the special ones no gateway carries: this network, loopback, link-local, multicast
//     and reserved) to the gateway's listener, a socket the caller opens in that namespace
//     on the router's address: a DNAT at the prerouting hook. Nodes send such packets to the
//     router, their default gateway, and pods' packets leave their node masqueraded with the
//     node's address, so every one arrives there.
//   - For each connection the listener accepts, the gateway reads the destination the
//     client asked for from the DNAT's connection tracking (SO_ORIGINAL_DST), refuses one
//     inside the excluded ranges (a connection made to the listener itself), connects to it
//     through Config.Dial (by default a net.Dialer in kubelab's own namespace, under the
//     machine's routes and firewall), and copies bytes both ways until both sides are
//     done, passing on each side's end of stream.
//   - A connection the gateway cannot make is reset, so the client sees "connection reset
//     by peer" rather than waiting: its handshake was answered by the namespace's kernel
//     before the gateway tried.
//
// Only TCP is carried. UDP and ICMP to outside addresses reach the router and are dropped
// there; the cluster's DNS (UDP and TCP at the control plane's address, inside the VPC)
// forwards names itself. Serve makes the rules when it starts and removes them
// when it ends; Cleanup removes a table a killed kubelab left, for a start with the
// gateway off (kubelab up --offline).
package natgateway

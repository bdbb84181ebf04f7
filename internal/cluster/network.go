package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/controller/nodeipam"
	"github.com/kubelab/kubelab/internal/dns"
	"github.com/kubelab/kubelab/internal/natgateway"
	"github.com/kubelab/kubelab/internal/netpol"
	"github.com/kubelab/kubelab/internal/overlay"
	"github.com/kubelab/kubelab/internal/proxy"
	"github.com/kubelab/kubelab/internal/util/resolvconf"
	"github.com/kubelab/kubelab/internal/vpc"
)

// The network of a real cluster: its VPC's endpoints (the EC2 API, and the API server and
// cluster DNS), each node's metadata service, and the per-node agents that give pods their
// network: the overlay, the service proxy and the NetworkPolicy rules.

// runEC2Endpoint serves the cloud's API on the VPC, as VPC endpoints do: at
// ControlPlaneIP:80, and with TLS at EC2EndpointIP:443 under the names of its services
// (ec2Names, with a certificate of the cluster CA), where the nodes' hosts file
// (writeNodeHosts) and the cluster DNS point those names, so that an AWS client on a
// node or in a pod reaches it without an endpoint of its own. The cloud tells the
// services apart by the request (its SigV4 signing service, or the action of an
// unsigned STS request).
func (c *Cluster) runEC2Endpoint(ctx context.Context) error {
	cert, key, err := c.cp.APIServer.PKI().IssueServingCert(filepath.Join(c.cfg.DataDir, "pki", "ec2-endpoint"), "ec2", c.ec2Names())
	if err != nil {
		return fmt.Errorf("ec2 vpc endpoint: %w", err)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return fmt.Errorf("ec2 vpc endpoint: %w", err)
	}
	l, err := vpc.Listen(c.vpc.Path(), "tcp", net.JoinHostPort(vpc.ControlPlaneIP, "80"))
	if err != nil {
		return fmt.Errorf("ec2 vpc endpoint: %w", err)
	}
	tl, err := vpc.Listen(c.vpc.Path(), "tcp", net.JoinHostPort(vpc.EC2EndpointIP, "443"))
	if err != nil {
		l.Close()
		return fmt.Errorf("ec2 vpc endpoint: %w", err)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return serveHTTP(ctx, l, c.cloud.APIHandler()) })
	g.Go(func() error {
		return serveHTTP(ctx, tls.NewListener(tl, &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}), c.cloud.APIHandler())
	})
	return g.Wait()
}

// ec2Names are the names of the cloud's APIs, which its endpoint serves together: EC2's
// and Elastic Load Balancing's in the cluster's region, STS's (regional, and the global
// name older clients use) and IAM's (global).
func (c *Cluster) ec2Names() []string {
	return []string{"ec2." + c.cfg.Region + ".amazonaws.com", "elasticloadbalancing." + c.cfg.Region + ".amazonaws.com",
		"sts." + c.cfg.Region + ".amazonaws.com", "sts.amazonaws.com", "iam.amazonaws.com"}
}

// writeNodeHosts writes node n's hosts file, <node dir>/hosts, which `kubelab node shell`
// puts in place of /etc/hosts: the node's own name and the cloud's API names at its VPC
// endpoint, as an instance resolves them.
func (c *Cluster) writeNodeHosts(n Node) error {
	hosts := "127.0.0.1\tlocalhost\n::1\tlocalhost\n" + n.IP + "\t" + n.Name + "\n"
	for _, name := range c.ec2Names() {
		hosts += vpc.EC2EndpointIP + "\t" + name + "\n"
	}
	return os.WriteFile(filepath.Join(c.nodeDir(n), "hosts"), []byte(hosts), 0o644)
}

// runIMDS serves node n's instance metadata at 169.254.169.254:80 inside the node's
// network namespace netns, where its pods and the CSI node plugin reach it.
func (c *Cluster) runIMDS(n Node, netns string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		l, err := vpc.Listen(netns, "tcp", net.JoinHostPort(vpc.MetadataIP, "80"))
		if err != nil {
			return fmt.Errorf("imds of node %s: %w", n.Name, err)
		}
		return serveHTTP(ctx, l, c.cloud.IMDSHandler(n.InstanceID))
	}
}

// serveHTTP serves h on l until ctx ends.
func serveHTTP(ctx context.Context, l net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// vpcRegistryPort is the image registry's port at vpc.ControlPlaneIP, where the nodes'
// containerd pull from.
const vpcRegistryPort = "5000"

// The cluster DNS: kube-dns in kube-system at ClusterDNSIP, answered on the VPC.
const (
	ClusterDNSIP  = "10.96.0.10"
	ClusterDomain = "cluster.local"
	dnsService    = "kube-dns"
)

// clusterDNSObjects are the kube-dns Service and its EndpointSlice, which names the DNS
// server's address on the VPC (the Service has no selector: its endpoint is not a pod).
func clusterDNSObjects() (*corev1.Service, *discoveryv1.EndpointSlice) {
	labels := map[string]string{"k8s-app": dnsService, "kubernetes.io/name": "KubeDNS", "kubernetes.io/cluster-service": "true"}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: dnsService, Namespace: metav1.NamespaceSystem, Labels: labels},
		Spec: corev1.ServiceSpec{ClusterIP: ClusterDNSIP, Ports: []corev1.ServicePort{
			{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(53)},
			{Name: "dns-tcp", Port: 53, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(53)},
		}},
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: dnsService + "-vpc", Namespace: metav1.NamespaceSystem,
			Labels: map[string]string{discoveryv1.LabelServiceName: dnsService, discoveryv1.LabelManagedBy: "kubelab"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{vpc.ControlPlaneIP}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("dns"), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolUDP)},
			{Name: ptr.To("dns-tcp"), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolTCP)},
		},
	}
	return svc, slice
}

// ensureClusterDNSService creates the kube-dns Service and its EndpointSlice when missing.
func ensureClusterDNSService(ctx context.Context, client kubernetes.Interface) error {
	svc, slice := clusterDNSObjects()
	if err := createAddon(ctx, "Service kube-system/"+svc.Name, func(ctx context.Context) error {
		// Looked up first: creating it again would be refused for its ClusterIP, which the
		// existing one holds, before its name.
		_, err := client.CoreV1().Services(svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{})
		}
		return err
	}); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	if err := createAddon(ctx, "EndpointSlice kube-system/"+slice.Name, func(ctx context.Context) error {
		_, err := client.DiscoveryV1().EndpointSlices(slice.Namespace).Create(ctx, slice, metav1.CreateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// runOverlay runs node n's overlay agent: its VXLAN device (or direct routes) to every
// other node's pod subnet, and the masquerade of pod traffic leaving the pod network.
func (c *Cluster) runOverlay(n Node, netns string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		client, err := c.clientset("overlay/"+n.Name, overlayIdentity)
		if err != nil {
			return err
		}
		a, err := overlay.New(overlay.Config{NodeName: n.Name, NetNS: netns, Mode: c.cfg.OverlayMode,
			ClusterCIDR: nodeipam.DefaultClusterCIDR, Logger: c.cfg.Logger.With("component", "overlay", "node", n.Name)}, client)
		if err != nil {
			return err
		}
		return a.Run(ctx)
	}
}

// runClusterDNS serves the cluster domain on the VPC at ControlPlaneIP:53 (UDP and TCP),
// the endpoint of the kube-dns Service, with the EC2 endpoint's names; unless offline, it
// forwards other names to the upstream nameservers through the VPC's way out.
func (c *Cluster) runClusterDNS(ctx context.Context) error {
	client, err := c.clientset("cluster-dns", clusterDNSIdentity)
	if err != nil {
		return err
	}
	log := c.cfg.Logger.With("component", "cluster-dns")
	cfg := dns.Config{Domain: ClusterDomain, Logger: log, Hosts: map[string][]netip.Addr{}}
	for _, name := range c.ec2Names() { // as the VPC's resolver answers an endpoint's private DNS name
		cfg.Hosts[name] = []netip.Addr{netip.MustParseAddr(vpc.EC2EndpointIP)}
	}
	if !c.cfg.Offline {
		cfg.Upstreams, cfg.Dial = c.upstreamDNS(log), c.cfg.EgressDial
	}
	srv, err := dns.New(cfg, client)
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(vpc.ControlPlaneIP, "53")
	udp, err := vpc.ListenPacket(c.vpc.Path(), "udp", addr)
	if err != nil {
		return fmt.Errorf("cluster dns: %w", err)
	}
	tcp, err := vpc.Listen(c.vpc.Path(), "tcp", addr)
	if err != nil {
		udp.Close()
		return fmt.Errorf("cluster dns: %w", err)
	}
	return srv.Serve(ctx, udp, tcp)
}

// upstreamDNS are the nameservers the cluster DNS forwards to: Config.UpstreamDNS, or
// those of the machine's resolv.conf (none when it cannot be read or names none, said in
// the log: names outside the cluster are then refused).
func (c *Cluster) upstreamDNS(log *slog.Logger) []netip.AddrPort {
	if c.cfg.UpstreamDNS != nil {
		return c.cfg.UpstreamDNS
	}
	rc, err := resolvconf.Read(resolvconf.Path)
	if err != nil {
		log.Warn("no upstream nameservers: names outside the cluster are refused", "err", err)
		return nil
	}
	addrs := rc.NameserverAddrs()
	if len(addrs) == 0 {
		log.Warn("no upstream nameservers: names outside the cluster are refused", "resolv.conf", resolvconf.Path)
	}
	return addrs
}

// clusterRanges are the cluster's own ranges, which its traffic reaches inside the VPC
// and the NAT gateway never carries: the VPC's, the pods', the Services'.
func (c *Cluster) clusterRanges() ([]netip.Prefix, error) {
	services := c.cfg.ServiceCIDR
	if services == "" {
		services = defaultServiceCIDR
	}
	var out []netip.Prefix
	for _, s := range []string{vpc.CIDR, nodeipam.DefaultClusterCIDR, services} {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("cluster range %q: %w", s, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// defaultServiceCIDR is the API server's Service range when ControlPlaneConfig names none.
const defaultServiceCIDR = "10.96.0.0/12"

// runNATGateway runs the VPC's NAT gateway: TCP from pods and nodes to addresses outside
// the cluster's ranges leaves through Config.EgressDial, from a listener on the router's
// address inside the VPC's namespace.
func (c *Cluster) runNATGateway(ctx context.Context) error {
	ranges, err := c.clusterRanges()
	if err != nil {
		return fmt.Errorf("nat gateway: %w", err)
	}
	g, err := natgateway.New(natgateway.Config{NetNS: c.vpc.Path(), ClusterRanges: ranges, Dial: c.cfg.EgressDial,
		Logger: c.cfg.Logger.With("component", "nat-gateway")})
	if err != nil {
		return err
	}
	l, err := vpc.Listen(c.vpc.Path(), "tcp", net.JoinHostPort(vpc.RouterIP, "0"))
	if err != nil {
		return fmt.Errorf("nat gateway: %w", err)
	}
	return g.Serve(ctx, l)
}

// runNetworkPolicy runs node n's NetworkPolicy agent: the policies of its pods as rules in
// the node's namespace.
func (c *Cluster) runNetworkPolicy(n Node, netns string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		client, err := c.clientset("netpol/"+n.Name, netpolIdentity)
		if err != nil {
			return err
		}
		a, err := netpol.New(netpol.Config{NodeName: n.Name, NetNS: netns,
			Logger: c.cfg.Logger.With("component", "netpol", "node", n.Name)}, client)
		if err != nil {
			return err
		}
		return a.Run(ctx)
	}
}

// podRange is the range of the pods' addresses: the pod network's, or in VPC mode the
// VPC's (pods have addresses of the nodes' subnets).
func (c *Cluster) podRange() string {
	if c.cfg.vpcPods() {
		return vpc.CIDR
	}
	return nodeipam.DefaultClusterCIDR
}

// runProxy runs node n's service proxy: ClusterIPs and NodePorts as nftables rules in the
// node's namespace.
func (c *Cluster) runProxy(n Node, netns string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		client, err := c.clientset("kube-proxy/"+n.Name, kubeProxyIdentity)
		if err != nil {
			return err
		}
		log := c.cfg.Logger.With("component", "kube-proxy", "node", n.Name)
		if c.cfg.vpcPods() { // its mirror pod shows its log
			log = c.componentLogger("kube-proxy/"+n.Name, "component", "kube-proxy", "node", n.Name)
		}
		p, err := proxy.New(proxy.Config{NodeName: n.Name, NodeIPs: []string{n.IP}, ClusterCIDR: c.podRange(),
			NetNS: netns, Logger: log}, client)
		if err != nil {
			return err
		}
		return p.Run(ctx)
	}
}

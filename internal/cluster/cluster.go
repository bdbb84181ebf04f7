package cluster

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/kubelab/kubelab/internal/apiserver"
	"github.com/kubelab/kubelab/internal/cloud"
	"github.com/kubelab/kubelab/internal/controller/cloudnode"
	"github.com/kubelab/kubelab/internal/image"
	"github.com/kubelab/kubelab/internal/kubelet"
	"github.com/kubelab/kubelab/internal/natgateway"
	"github.com/kubelab/kubelab/internal/util/rundir"
	"github.com/kubelab/kubelab/internal/vpc"
)

// Cluster is a whole kubelab cluster on this machine: the control plane, the cloud, the
// CSI driver's controller with its sidecars, the scheduler and the nodes.
type Cluster struct {
	cfg      Config
	cp       *ControlPlane
	cloud    *cloud.Cloud
	registry *image.Registry // real nodes' images; nil in hollow mode
	vpc      *vpc.VPC        // real nodes' network; nil in hollow mode
	network  *clusterNetwork // the API server's way into the pods' network; nil in hollow mode
	units    units
	// nodeUnits are each real node's components, in start order (power.go).
	nodeUnits sync.Map   // node name → []*unit
	ids       identities // the components' credentials
	ready     chan struct{}
	nodes     []Node // set once, before ready is closed

	// addonPods are the EBS CSI add-on's pods run in process and the vpc pod network's
	// (set once with nodes); addonLogs their
	// containers' logs, which the components write from their start on.
	addonPods []*addonPod
	addonLogs addonLogs
	// addonRolled: the add-on's pods were of another kubelab binary and roll to this
	// one's image (set before ready is closed).
	addonRolled bool

	// nodesRunning counts real nodes not yet torn down; bootDone is closed when boot has
	// started all it will start. The cloud stops after both, so that the volumes' loop
	// devices are released only once nothing mounts them.
	nodesRunning sync.WaitGroup
	bootDone     chan struct{}

	// hollowRegistering holds a place for each hollow kubelet registering its node.
	hollowRegistering chan struct{}
}

// hollowRegisterParallel is how many hollow kubelets register their nodes at once.
const hollowRegisterParallel = 50

// Node is one node of the cluster and the instance it runs on.
type Node struct {
	Name, Zone, InstanceID, IP string
	// InstanceType is its instance's type.
	InstanceType string
	// MAC is the instance's interface's, which the node's eth0 has.
	MAC string
	// DeviceDir is where the node finds its attached volumes (xvdXX, disk/by-id).
	DeviceDir string
}

// New checks cfg and builds the cluster without starting anything.
func New(cfg Config) (*Cluster, error) {
	cfg.setDefaults()
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("cluster: data dir: %w", err)
	}
	cfg.DataDir = abs
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cpCfg := cfg.ControlPlaneConfig
	var v *vpc.VPC
	var network *clusterNetwork
	if !cfg.Hollow {
		if cpCfg.AdvertiseAddress == "" {
			cpCfg.AdvertiseAddress = vpc.ControlPlaneIP // the VPC listener is added at Run
		}
		if v, err = vpc.New(vpc.Config{DataDir: cfg.DataDir, Logger: cfg.Logger.With("component", "vpc")}); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
		network = newClusterNetwork(v)
		if cpCfg.ClusterDial == nil {
			cpCfg.ClusterDial = network.DialContext
		}
		// A real node's kubelet serves on its address in the VPC; its InternalDNS name
		// (ip-….ec2.internal, from the cloud) resolves only inside the VPC.
		if cpCfg.KubeletPreferredAddressTypes == nil {
			cpCfg.KubeletPreferredAddressTypes = []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeHostName}
		}
	}
	if len(cpCfg.ServiceAccountIssuers) == 0 {
		cpCfg.ServiceAccountIssuers = defaultServiceAccountIssuers(cpCfg)
	}
	cp, err := NewControlPlane(cpCfg)
	if err != nil {
		return nil, err
	}
	cloudCfg := cloud.Config{
		DataDir: filepath.Join(cfg.DataDir, "cloud"), Region: cfg.Region, Zones: cfg.Zones,
		Hollow: cfg.Hollow, Profile: cfg.CloudProfile, NoIMDSListeners: cfg.Hollow,
		// Real volumes' loop devices and links go when the cluster stops and come back
		// at its next start.
		ReleaseOnExit: !cfg.Hollow,
		HostsFile:     cfg.HostsFile,
		Logger:        cfg.Logger.With("component", "cloud"),
	}
	// STS checks the pods' web identity tokens as a relying party of the cluster's
	// issuer, the API server: it reads the discovery document over HTTPS, trusting the
	// cluster CA, and, with real nodes, on the VPC.
	if cloudCfg.IssuerRootCAs, err = clusterCAPool(cp.APIServer.PKI()); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if v != nil {
		cloudCfg.Dial = loadBalancerDial(v, network)
		cloudCfg.Fabric = vpcFabric{v.Fabric()}
		cloudCfg.IssuerDial = cloudCfg.Dial
	}
	c, err := cloud.New(cloudCfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	cl := &Cluster{cfg: cfg, cp: cp, cloud: c, vpc: v, network: network, ready: make(chan struct{}), bootDone: make(chan struct{}),
		hollowRegistering: make(chan struct{}, hollowRegisterParallel)}
	if !cfg.Hollow {
		ic := image.Config{Dir: filepath.Join(cfg.DataDir, "images"), PauseBinary: cfg.PauseBinary,
			Offline: cfg.Offline, Upstreams: cfg.ImageUpstreams, Keychain: authn.DefaultKeychain,
			Logger: cfg.Logger.With("component", "image-registry")}
		if cfg.csiInPods() {
			ic.KubelabBinary = cfg.KubelabBinary
		}
		cl.registry, err = image.New(ic)
		if err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	return cl, nil
}

// Ready is closed once every component runs and a user's first commands work: every node
// Ready, the default ServiceAccount made, the EBS CSI add-on's pods Ready and, with real
// nodes, cluster DNS answering (waitUsable).
func (c *Cluster) Ready() <-chan struct{} { return c.ready }

// AddonRolled says that the EBS CSI add-on's pods were of another kubelab binary (an
// earlier run on the data dir) and roll to the image of this one. Valid once Ready.
func (c *Cluster) AddonRolled() bool { return c.addonRolled }

// Kubeconfig is the admin kubeconfig's path.
func (c *Cluster) Kubeconfig() string { return c.cp.APIServer.KubeconfigPath() }

// URL is the API server's URL.
func (c *Cluster) URL() string { return c.cp.APIServer.URL() }

// CloudEndpoint is the EC2 API's URL; CloudConfigFile and CloudCredentialsFile let the
// AWS SDK and CLI reach it.
func (c *Cluster) CloudEndpoint() string        { return c.cloud.Endpoint() }
func (c *Cluster) CloudConfigFile() string      { return c.cloud.ConfigFile() }
func (c *Cluster) CloudCredentialsFile() string { return c.cloud.CredentialsFile() }

// Nodes lists the nodes; it is empty until Ready is closed.
func (c *Cluster) Nodes() []Node {
	select {
	case <-c.ready:
		return append([]Node(nil), c.nodes...)
	default:
		return nil
	}
}

// Stop stops the named component (for example "scheduler", "controller-manager",
// "csi-provisioner", "kubelet/<node>") and waits until it has stopped; Start starts it
// again from scratch, as a restarted process would.
func (c *Cluster) Stop(ctx context.Context, component string) error {
	u, err := c.units.get(component)
	if err != nil {
		return err
	}
	return u.send(ctx, false)
}

// Start starts a component that Stop stopped.
func (c *Cluster) Start(ctx context.Context, component string) error {
	u, err := c.units.get(component)
	if err != nil {
		return err
	}
	return u.send(ctx, true)
}

// Run runs the cluster until ctx ends. The control plane starts first, then the cloud,
// the EBS CSI add-on (its components, or its Deployment and DaemonSet), the controllers
// and the scheduler, then the nodes. Everything stops when ctx ends; the API server stops
// before etcd.
func (c *Cluster) Run(ctx context.Context) (err error) {
	// The run directory (the sockets, sockets.go) goes last, once every component has
	// stopped; a kill -9 leaves it for the next start to use again.
	defer func() {
		if rerr := rundir.Remove(c.runDir()); rerr != nil {
			err = errors.Join(err, fmt.Errorf("cluster: %w", rerr))
		}
	}()
	if c.cfg.csiInPods() {
		// The add-on's node plugin mounts under the kubelets' dirs from its own mount
		// namespace: the nodes' dir is a shared mount, so that those mounts reach the
		// machine's (the plugin's Bidirectional hostPath).
		nodes := filepath.Join(c.cfg.DataDir, "nodes")
		if err := ensureSharedMount(nodes); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		defer func() { // after the nodes' teardown has unmounted what is under it
			if uerr := unmountShared(nodes); uerr != nil {
				err = errors.Join(err, fmt.Errorf("cluster: %w", uerr))
			}
		}()
	}
	if c.vpc != nil {
		// The VPC's namespace goes when everything in it has stopped; a kill -9 leaves it,
		// with the nodes' and the pods' network, for the next start to find.
		defer func() {
			if rerr := c.vpc.Remove(); rerr != nil {
				err = errors.Join(err, fmt.Errorf("cluster: %w", rerr))
			}
		}()
		if err := c.vpc.Ensure(); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		// The API server on the VPC, where pods reach it through the kubernetes Service.
		l, err := vpc.Listen(c.vpc.Path(), "tcp", net.JoinHostPort(vpc.ControlPlaneIP, "443"))
		if err != nil {
			return fmt.Errorf("cluster: api server on the vpc: %w", err)
		}
		if err := c.cp.APIServer.AddListener(l); err != nil {
			return fmt.Errorf("cluster: %w", err)
		}
		// The image registry on the VPC, where the nodes' containerd pull from.
		if c.registry != nil {
			l, err := vpc.Listen(c.vpc.Path(), "tcp", net.JoinHostPort(vpc.ControlPlaneIP, vpcRegistryPort))
			if err != nil {
				return fmt.Errorf("cluster: image registry on the vpc: %w", err)
			}
			if err := c.registry.AddListener(l); err != nil {
				return fmt.Errorf("cluster: %w", err)
			}
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	c.cp.Start(ctx, g)
	cloudCtx, stopCloud := context.WithCancel(context.WithoutCancel(ctx))
	g.Go(func() error { return c.cloud.Run(cloudCtx) })
	g.Go(func() error {
		<-ctx.Done()
		<-c.bootDone
		c.nodesRunning.Wait()
		stopCloud()
		return nil
	})
	if c.registry != nil {
		g.Go(func() error { return c.registry.Run(ctx) })
	}
	g.Go(func() error {
		defer close(c.bootDone)
		if err := c.boot(ctx, g); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		return nil
	})
	return g.Wait()
}

// boot starts the components in order, each once what it needs is there.
func (c *Cluster) boot(ctx context.Context, g *errgroup.Group) error {
	log := c.cfg.Logger
	// Node statuses written before this moment are a previous run's.
	bootTime := time.Now().Truncate(time.Second)
	for what, ch := range map[string]<-chan struct{}{"API server": c.cp.APIServer.Ready(), "cloud": c.cloud.Ready()} {
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Minute):
			return fmt.Errorf("cluster: %s not ready after 2m", what)
		}
	}
	c.cfg.Progress("control plane ready: etcd, API server " + c.URL() + ", cloud")
	admin, err := c.adminClientset("kubelab-up")
	if err != nil {
		return err
	}
	if err := ensureAddons(ctx, admin); err != nil {
		return err
	}
	start := func(name string, run func(ctx context.Context) error) *unit {
		u := newUnit(name, log, run)
		c.units.add(u)
		g.Go(func() error { return u.supervise(ctx) })
		return u
	}
	// Before any pod of the add-ons is made, so that those of annotated service
	// accounts get their identity.
	if err := c.startPodIdentityWebhook(ctx, admin, start); err != nil {
		return err
	}
	// The add-on as an earlier run left it goes: the mirror pods of an in-process run (this
	// run's, if in process, are made anew), the workloads of a run with pods.
	if err := c.removeAddonMirrorPods(ctx, admin); err != nil {
		return err
	}
	if c.cfg.csiInPods() {
		if err := c.ensureCSIDriverRole(ctx, admin); err != nil {
			return err
		}
		rolled, err := ensureCSIAddon(ctx, admin, c.csiAddon())
		if err != nil {
			return err
		}
		if rolled {
			c.addonRolled = true
			log.Info("the EBS CSI add-on's pods roll to this kubelab's image", "binary", c.cfg.KubelabBinary)
		}
	} else {
		if err := removeCSIAddonWorkloads(ctx, admin); err != nil {
			return err
		}
		start("csi-controller", c.runCSIController)
		start("csi-provisioner", c.runProvisioner)
		start("csi-attacher", c.runAttacher)
		start("csi-resizer", c.runResizer)
		start("csi-snapshotter", c.runSnapshotter)
		start("liveness-probe", c.runLivenessProbe)
	}
	start("controller-manager", c.runControllerManager)
	start("cloud-controller-manager", c.runCloudControllerManager)
	start("scheduler", c.runScheduler)
	if c.vpc != nil {
		if err := ensureClusterDNSService(ctx, admin); err != nil {
			return err
		}
		start("ec2-vpc-endpoint", c.runEC2Endpoint)
		start("cluster-dns", c.runClusterDNS)
		if c.cfg.Offline {
			// A gateway's rules that a killed online run left would send connections to
			// a listener that is gone.
			if err := natgateway.Cleanup(ctx, c.vpc.Path()); err != nil {
				return fmt.Errorf("cluster: %w", err)
			}
		} else {
			start("nat-gateway", c.runNATGateway)
		}
	}

	nodes, err := c.ensureInstances(ctx)
	if err != nil {
		return err
	}
	c.nodes = nodes
	if c.network != nil {
		c.network.setNodes(nodes)
	}
	if c.registry != nil && len(nodes) > 0 {
		select {
		case <-c.registry.Ready():
			c.cfg.Progress("images ready in kubelab's registry (pause, busybox, nginx, kubelab's own)")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var clusterObjects informers.SharedInformerFactory
	var events *kubelet.SharedEvents
	if c.cfg.Hollow && len(nodes) > 0 {
		// The cluster-wide objects the hollow kubelets read (CSIDrivers) come from one
		// informer of the process rather than a watch of each node's.
		client, err := c.clientset("kubelet/cluster-objects", nodeIdentity(nodes[0].Name))
		if err != nil {
			return err
		}
		clusterObjects = informers.NewSharedInformerFactory(client, 0)
		// And one event broadcaster, each event written with its node's client.
		events = kubelet.NewSharedEvents()
		g.Go(func() error {
			<-ctx.Done()
			clusterObjects.Shutdown()
			events.Shutdown()
			return nil
		})
	}
	for _, n := range nodes {
		if c.cfg.Hollow {
			start("kubelet/"+n.Name, c.runKubelet(n, clusterObjects, events, ctx.Done()))
			continue
		}
		if err := c.startRealNode(ctx, g, start, n); err != nil {
			return err
		}
	}
	if !c.cfg.Hollow && len(nodes) > 0 {
		start("instance-power", c.runInstancePower)
	}
	if err := waitNodesReady(ctx, admin, nodes, bootTime, c.cfg.Progress); err != nil {
		return err
	}
	if c.cfg.csiInPods() {
		if err := waitCSIAddon(ctx, admin, len(nodes)); err != nil {
			return err
		}
	} else {
		c.addonPods = addonPodsOf(nodes, c.cfg.Hollow)
	}
	if c.cfg.vpcPods() {
		c.addonPods = append(c.addonPods, networkPodsOf(nodes)...)
	}
	if !c.cfg.csiInPods() || c.cfg.vpcPods() {
		start("addon-pods", c.runAddonPods)
	}
	if err := c.waitUsable(ctx, admin, nodes); err != nil {
		return err
	}
	log.Info("cluster ready", "apiserver", c.URL(), "nodes", len(nodes), "hollow", c.cfg.Hollow)
	close(c.ready)
	return nil
}

// waitNodesReady waits until every node's kubelet has reported it Ready since since (a
// Ready left over from a previous run does not count) and the cloud-controller-manager
// has initialized it, telling progress of each node once it is. It reads the nodes from
// a watch, not a request per node and poll, which thousands of hollow nodes would make
// slower than their registering; the wait is 2 minutes, 50 ms more a node beyond 2,400.
func waitNodesReady(ctx context.Context, client kubernetes.Interface, nodes []Node, since time.Time, progress func(string)) error {
	ctx, cancel := context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(client, 0)
	defer factory.Shutdown()
	defer cancel()
	lister := factory.Core().V1().Nodes().Lister()
	factory.Start(ctx.Done())
	told := map[string]bool{}
	return waitFor(ctx, "nodes", 200*time.Millisecond, nodesWait(2*time.Minute, len(nodes)), func(ctx context.Context) string {
		var waiting []string
		for _, n := range nodes {
			if told[n.Name] {
				continue
			}
			node, err := lister.Get(n.Name)
			if err != nil {
				waiting = append(waiting, fmt.Sprintf("node %s: %v", n.Name, err))
				continue
			}
			if !readySince(node, since) {
				waiting = append(waiting, "node "+n.Name+" not Ready")
				continue
			}
			if slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == cloudnode.TaintUninitialized }) {
				waiting = append(waiting, "node "+n.Name+" not initialized by the cloud-controller-manager")
				continue
			}
			told[n.Name] = true
			progress(fmt.Sprintf("node %s Ready (%s, %s)", n.Name, n.Zone, n.InstanceID))
		}
		if len(waiting) > 10 {
			waiting = append(waiting[:10], fmt.Sprintf("%d more", len(waiting)-10))
		}
		return strings.Join(waiting, "; ")
	})
}

// readySince tells whether the node is Ready with a heartbeat at or after since.
func readySince(n *corev1.Node, since time.Time) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue && !c.LastHeartbeatTime.Time.Before(since)
		}
	}
	return false
}

// clusterCAPool is the cluster CA (made now when the data dir has none yet) as a pool.
func clusterCAPool(p apiserver.PKI) (*x509.CertPool, error) {
	if err := p.EnsureCA(); err != nil {
		return nil, err
	}
	caPEM, err := os.ReadFile(p.CACert())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("no certificate in %s", p.CACert())
	}
	return pool, nil
}

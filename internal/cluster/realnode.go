package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/moby/sys/mountinfo"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/kubelab/kubelab/internal/cni"
	"github.com/kubelab/kubelab/internal/containerd"
	csiclient "github.com/kubelab/kubelab/internal/csi/client"
	"github.com/kubelab/kubelab/internal/csi/driver"
	"github.com/kubelab/kubelab/internal/csi/sidecar/livenessprobe"
	"github.com/kubelab/kubelab/internal/csi/sidecar/registrar"
	"github.com/kubelab/kubelab/internal/kubelet"
	"github.com/kubelab/kubelab/internal/kubelet/kuberuntime"
	"github.com/kubelab/kubelab/internal/kubelet/pluginmanager"
	"github.com/kubelab/kubelab/internal/kubelet/server"
	"github.com/kubelab/kubelab/internal/util/atomicfile"
	"github.com/kubelab/kubelab/internal/vpc"
)

// A real node is a network namespace on the cluster's VPC and components, each reaching
// the others over its wire: its metadata service (HTTP at 169.254.169.254 in the
// namespace), its containerd (CRI; its pods' network through kubelab-cni in the
// namespace), the EBS CSI node plugin with its node-driver-registrar (CSI and plugin
// registration sockets in the node's run directory, sockets.go), the kubelet with its plugin manager and
// the writer of its CNI configuration, and the overlay, NetworkPolicy and service-proxy
// agents (netlink and nftables in the namespace; the API server's watches).

// nodeDir is everything of node n on this machine.
func (c *Cluster) nodeDir(n Node) string { return filepath.Join(c.cfg.DataDir, "nodes", n.Name) }

// kubeletRoot is node n's kubelet root dir.
func (c *Cluster) kubeletRoot(n Node) string { return filepath.Join(c.nodeDir(n), "kubelet") }

// The machine-wide names of a node (its network namespace, its pods' cgroups) carry a
// hash of the cluster's data dir, so that two clusters on one machine never share one.

// cgroupParent is where node n's pods get their cgroups.
func (c *Cluster) cgroupParent(n Node) string { return nodeCgroupParent(c.cfg.DataDir, n.Name) }

func nodeCgroupParent(dataDir, node string) string { return CgroupRoot(dataDir) + "/" + node }

// CgroupRoot is the cgroup (in every hierarchy) under which the pods of the cluster at
// dataDir run.
func CgroupRoot(dataDir string) string {
	return "/kubelab/" + strings.TrimSuffix(strings.TrimPrefix(vpc.Prefix(dataDir), "kubelab-"), "-")
}

// cniBinDir is node n's CNI bin dir.
func (c *Cluster) cniBinDir(n Node) string { return filepath.Join(c.nodeDir(n), "cni", "bin") }

// nodeContainerd is node n's containerd (not started). It runs in the node's network
// namespace, where host-network pods are on the node's network, and pulls from the
// registry's address on the VPC.
func (c *Cluster) nodeContainerd(n Node) (*containerd.Containerd, error) {
	return containerd.New(containerd.Config{
		Name:         n.Name,
		Dir:          filepath.Join(c.nodeDir(n), "containerd"),
		SocketDir:    NodeContainerdSocketDir(c.cfg.DataDir, n.Name),
		NetNS:        c.vpc.NodePath(n.Name),
		RegistryAddr: net.JoinHostPort(vpc.ControlPlaneIP, vpcRegistryPort),
		CNIConfDir:   filepath.Join(c.nodeDir(n), "cni", "net.d"),
		CNIBinDir:    c.cniBinDir(n),
		Logger:       c.cfg.Logger.With("component", "containerd", "node", n.Name),
	})
}

// startRealNode puts node n on the VPC and starts its components as units; once they
// have all stopped, the node's teardown unmounts what its kubelet mounted and removes its
// network namespace and cgroups.
func (c *Cluster) startRealNode(ctx context.Context, g *errgroup.Group, start func(name string, run func(context.Context) error) *unit, n Node) error {
	netns, err := c.prepareNode(n)
	if err != nil {
		return err
	}
	ctrd, err := c.nodeContainerd(n)
	if err != nil {
		return err
	}
	units := []*unit{start("imds/"+n.Name, c.runIMDS(n, netns))}
	if c.cfg.vpcPods() {
		// Before containerd, stopped after it: the pods' ADDs and DELs need it.
		units = append(units, start("aws-node/"+n.Name, c.runAWSNode(n, netns)))
	}
	units = append(units,
		start("containerd/"+n.Name, func(ctx context.Context) error {
			ctrd, err := c.nodeContainerd(n) // each start afresh, as a restarted process
			if err != nil {
				return err
			}
			return ctrd.Run(ctx)
		}),
		start("kubelet/"+n.Name, c.runRealKubelet(n, ctrd.Endpoint(), netns)))
	if !c.cfg.vpcPods() {
		units = append(units, start("overlay/"+n.Name, c.runOverlay(n, netns)))
	}
	units = append(units,
		start("netpol/"+n.Name, c.runNetworkPolicy(n, netns)),
		start("kube-proxy/"+n.Name, c.runProxy(n, netns)))
	if !c.cfg.csiInPods() {
		units = append(units, start("ebs-csi-node/"+n.Name, c.runCSINode(n, netns)))
	}
	c.nodeUnits.Store(n.Name, units)
	c.nodesRunning.Add(1)
	g.Go(func() error {
		defer c.nodesRunning.Done()
		for _, u := range units {
			<-u.done
		}
		return c.tearDownNode(context.WithoutCancel(ctx), n)
	})
	return nil
}

// prepareNode makes what node n's components need before they start, as the machine of
// its instance would have it at boot: its network namespace on the VPC (returned), its
// CNI plugins, /etc/hosts, device dir and socket dirs.
func (c *Cluster) prepareNode(n Node) (string, error) {
	netns, err := c.vpc.EnsureNode(vpc.Node{Name: n.Name, IP: n.IP, MAC: n.MAC, InstanceID: n.InstanceID})
	if err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	if err := cni.InstallPlugins(c.cniBinDir(n), c.cfg.CNIBinary, containerd.DefaultCNIBinDir); err != nil {
		return "", fmt.Errorf("cluster: node %s: %w", n.Name, err)
	}
	if err := c.writeNodeHosts(n); err != nil {
		return "", fmt.Errorf("cluster: node %s: %w", n.Name, err)
	}
	if err := c.linkDeviceDir(n); err != nil {
		return "", err
	}
	if err := c.linkSocketDirs(n); err != nil {
		return "", err
	}
	return netns, nil
}

// ensureSharedMount makes dir a mount point of its own (a bind mount onto itself) whose
// mounts propagate both ways (shared), unless it is one already.
func ensureSharedMount(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	mounted, err := mountinfo.Mounted(dir)
	if err != nil {
		return fmt.Errorf("is %s a mount point: %w", dir, err)
	}
	if !mounted {
		if err := unix.Mount(dir, dir, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind-mount %s onto itself: %w", dir, err)
		}
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make %s a shared mount: %w", dir, err)
	}
	return nil
}

// unmountShared undoes ensureSharedMount: it unmounts dir (lazily if still busy) when it
// is a mount point.
func unmountShared(dir string) error {
	mounted, err := mountinfo.Mounted(dir)
	if err != nil || !mounted {
		return err
	}
	err = unix.Unmount(dir, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(dir, unix.MNT_DETACH)
	}
	if err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// linkDeviceDir makes <node dir>/dev a link to node n's instance's device dir, where
// the node plugin of the add-on's pods finds it by the node's name.
func (c *Cluster) linkDeviceDir(n Node) error {
	link := filepath.Join(c.nodeDir(n), "dev")
	if target, err := os.Readlink(link); err == nil && target == n.DeviceDir {
		return nil
	}
	if err := os.MkdirAll(c.nodeDir(n), 0o755); err != nil {
		return fmt.Errorf("cluster: node %s: %w", n.Name, err)
	}
	if err := atomicfile.Symlink(n.DeviceDir, link); err != nil {
		return fmt.Errorf("cluster: node %s: link the device dir: %w", n.Name, err)
	}
	return nil
}

// runCSINode runs the ebs.csi.aws.com node plugin of node n and its registrar. The
// plugin learns its instance and zone from the metadata service at 169.254.169.254 in the
// node's network namespace netns and finds attached volumes under the instance's device dir.
func (c *Cluster) runCSINode(n Node, netns string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		sock := c.nodeCSISocket(n)
		log := c.componentLogger("ebs-csi-node/"+n.Name, "component", "ebs-csi-node", "node", n.Name)
		imds := driver.NewIMDSVia("http://"+vpc.MetadataIP, vpc.DialContext(netns))
		d, err := driver.New(driver.Config{Mode: driver.ModeNode, Endpoint: "unix://" + sock, DeviceDir: n.DeviceDir},
			driver.Deps{Metadata: imds, Mounter: driver.NewSystemMounter(),
				Devices: driver.DeviceDir{Dir: n.DeviceDir}, Logger: log})
		if err != nil {
			return err
		}
		conn, err := csiclient.Dial("unix://" + sock)
		if err != nil {
			return fmt.Errorf("csi node %s: %w", n.Name, err)
		}
		defer conn.Close()
		reg, err := registrar.New(registrar.Config{KubeletRegistrationPath: sock,
			PluginRegistrationDir: c.nodeRegistrationDir(n),
			Logger:                c.componentLogger("node-driver-registrar/"+n.Name, "component", "node-driver-registrar", "node", n.Name)}, conn)
		if err != nil {
			return err
		}
		// The livenessprobe sidecar on the node's loopback, as the node plugin's pod has it
		// on the host network.
		probe := livenessprobe.New(livenessprobe.Config{Addr: "127.0.0.1:9808",
			Listen: func(network, addr string) (net.Listener, error) { return vpc.Listen(netns, network, addr) },
			Logger: c.componentLogger("liveness-probe/"+n.Name, "component", "liveness-probe", "node", n.Name)}, conn)
		g, ctx := errgroup.WithContext(ctx)
		g.Go(func() error { return d.Run(ctx) })
		g.Go(func() error { return reg.Run(ctx) })
		g.Go(func() error { return probe.Run(ctx) })
		return g.Wait()
	}
}

// runRealKubelet runs node n's kubelet on its containerd at criEndpoint, with the plugin
// manager that registers CSI drivers and mounts through them, and the node's CNI
// configuration (for the node's network namespace netns) once the node has its podCIDR.
func (c *Cluster) runRealKubelet(n Node, criEndpoint, netns string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		client, err := c.clientset("kubelet/"+n.Name, nodeIdentity(n.Name))
		if err != nil {
			return err
		}
		log := c.cfg.Logger.With("component", "kubelet", "node", n.Name)
		cri, err := containerd.Dial(criEndpoint)
		if err != nil {
			return fmt.Errorf("kubelet %s: %w", n.Name, err)
		}
		defer cri.Close()
		broadcaster := record.NewBroadcaster(record.WithContext(ctx))
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
		defer broadcaster.Shutdown()
		root := c.kubeletRoot(n)
		restCfg, err := c.restConfig("kubelet/"+n.Name, nodeIdentity(n.Name))
		if err != nil {
			return err
		}
		objects, err := kubelet.NewObjects(kubelet.ObjectsConfig{RootCA: restCfg.CAData, Logger: log}, client)
		if err != nil {
			return err
		}
		capacity, err := c.nodeCapacity(ctx, n)
		if err != nil {
			return err
		}
		logsDir := c.podLogsDir(n)
		factory := informers.NewSharedInformerFactory(client, 0)
		defer factory.Shutdown()
		rt, err := kuberuntime.New(kuberuntime.Config{
			NodeName: n.Name, RootDir: root, PodLogsDir: logsDir, CgroupParent: c.cgroupParent(n), NodeIP: n.IP,
			ClusterDNS: []string{ClusterDNSIP}, ClusterDomain: ClusterDomain, OfflineImages: c.cfg.Offline,
			Allocatable: capacity, Logger: log, Objects: objects, ImageVolumes: cri.ImageVolumes(),
			RuntimeClasses: kubelet.NewRuntimeClasses(factory, client),
			Recorder:       broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "kubelet", Host: n.Name}),
		}, cri.Runtime, cri.Image)
		if err != nil {
			return err
		}
		pm, err := pluginmanager.New(pluginmanager.Config{NodeName: n.Name, RootDir: root, Logger: log}, client)
		if err != nil {
			return err
		}
		cniCfg := cni.Config{NodeName: n.Name, NetNS: netns, ConfDir: filepath.Join(c.nodeDir(n), "cni", "net.d"),
			DataDir: filepath.Join(c.nodeDir(n), "cni", "ipam"), Logger: log}
		if c.cfg.vpcPods() {
			cniCfg.IPAMDSocket = c.ipamdSocket(n)
		}
		netconf, err := cni.New(cniCfg, client)
		if err != nil {
			return err
		}
		return c.serveKubelet(ctx, n, cri.Runtime, func(ctx context.Context, port int32) (*kubelet.Kubelet, error) {
			k, err := kubelet.New(kubelet.Config{
				NodeName: n.Name, Zone: n.Zone, InstanceID: n.InstanceID, InstanceType: c.cfg.InstanceType,
				Capacity: capacity, NodeIP: n.IP, RootDir: root, CSIDriverName: DriverName,
				StatusUpdateInterval: c.cfg.NodeStatusInterval, PodEvents: true, ServerPort: port,
				// The cloud-controller-manager initializes the node from its instance.
				ExternalCloudProvider: true,
			}, client, factory, kubelet.Deps{Runtime: rt, Mounter: pluginmanager.NewCSIMounter(pm), Objects: objects, Logger: log})
			if err == nil {
				factory.Start(ctx.Done())
			}
			return k, err
		}, pm.Run, netconf.Run)
	}
}

// tearDownNode removes what node n's components leave on the machine once they have
// stopped (containerd has removed its pods by then): the kubelet's mounts, deepest first,
// so that the cloud can release the volumes' loop devices; the node's network namespace,
// with its links, routes and rules; its pods' cgroup parent. A later start stages and publishes the volumes of its pods again.
func (c *Cluster) tearDownNode(ctx context.Context, n Node) error {
	var errs []error
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(c.kubeletRoot(n)))
	if err != nil {
		errs = append(errs, fmt.Errorf("list mounts of node %s: %w", n.Name, err))
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i].Mountpoint) > len(mounts[j].Mountpoint) })
	for _, m := range mounts {
		err := unix.Unmount(m.Mountpoint, 0)
		if errors.Is(err, unix.EBUSY) {
			// Still in use (a process of a pod that outlived its sandbox): detach it now,
			// the kernel lets go when the last user does.
			err = unix.Unmount(m.Mountpoint, unix.MNT_DETACH)
		}
		if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", m.Mountpoint, err))
		}
	}
	if err := c.vpc.RemoveNode(n.Name); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroup(c.cgroupParent(n)); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		// What is left is named here; the next start on this data dir cleans it.
		c.cfg.Logger.Error("node teardown", "node", n.Name, "err", err)
	}
	return nil
}

// removeCgroup removes the cgroup at path with every cgroup under it (its pods' cgroups
// that the runtime left), deepest first, in every hierarchy, and the cluster's and the
// shared parent when they are empty too. A cgroup that still has processes is named in the error.
func removeCgroup(path string) error {
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*" + path)
	if d := "/sys/fs/cgroup" + path; isDir(d) {
		dirs = append(dirs, d)
	}
	var errs []error
	for _, d := range dirs {
		var tree []string
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				tree = append(tree, p)
			}
			return nil
		})
		for i := len(tree) - 1; i >= 0; i-- { // children come after their parents
			if err := unix.Rmdir(tree[i]); err != nil && !errors.Is(err, unix.ENOENT) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", tree[i], err))
			}
		}
		_ = unix.Rmdir(filepath.Dir(d))               // the cluster's goes with its last node's
		_ = unix.Rmdir(filepath.Dir(filepath.Dir(d))) // and /kubelab with the last cluster's
	}
	return errors.Join(errs...)
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

// kubeletServerAddresses are the more addresses a hollow node names: its kubelet server
// is on the machine's loopback, where the API server reaches it (a real node's is on its
// InternalIP, port 10250, in the node's network namespace).
var kubeletServerAddresses = []corev1.NodeAddress{{Type: corev1.NodeInternalDNS, Address: "localhost"}}

// kubeletPort is a real node's kubelet server port, the kubelet's default.
const kubeletPort = 10250

// serveKubelet runs node n's kubelet server over runtime, the kubelet that build makes
// for the server's port (build starts what the kubelet reads from with ctx), and the
// node's other loops, until ctx ends. When build fails, the server already started is
// ended before serveKubelet returns.
func (c *Cluster) serveKubelet(ctx context.Context, n Node, runtime runtimeapi.RuntimeServiceClient,
	build func(ctx context.Context, port int32) (*kubelet.Kubelet, error), loops ...func(context.Context) error) error {
	var running atomic.Pointer[kubelet.Kubelet]
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g, ctx := errgroup.WithContext(ctx)
	port, err := c.startKubeletServer(ctx, g, n, runtime, &running)
	var k *kubelet.Kubelet
	if err == nil {
		k, err = build(ctx, port)
	}
	if err != nil {
		cancel()
		return errors.Join(err, g.Wait())
	}
	running.Store(k)
	for _, loop := range append(loops, k.Run) {
		g.Go(func() error { return loop(ctx) })
	}
	return g.Wait()
}

// startKubeletServer starts node n's kubelet server (logs, exec, attach, port-forward,
// pods, stats), in g, over the node's runtime and pod log directory: a real node's on its
// address, port 10250, in its network namespace, as a kubelet on an EC2 instance; a
// hollow node's on the machine's loopback. running is the kubelet whose pods it serves
// once it runs. It returns the server's port once it listens.
func (c *Cluster) startKubeletServer(ctx context.Context, g *errgroup.Group, n Node, runtime runtimeapi.RuntimeServiceClient, running *atomic.Pointer[kubelet.Kubelet]) (int32, error) {
	pki := c.cp.APIServer.PKI()
	addr, ip := "127.0.0.1:0", net.IPv4(127, 0, 0, 1)
	var (
		listen     func(network, address string) (net.Listener, error)
		dialStream func(ctx context.Context, network, addr string) (net.Conn, error)
	)
	if !c.cfg.Hollow {
		ip = net.ParseIP(n.IP)
		addr = net.JoinHostPort(n.IP, strconv.Itoa(kubeletPort))
		listen = func(network, address string) (net.Listener, error) {
			return vpc.Listen(c.vpc.NodePath(n.Name), network, address)
		}
		// The node's containerd streams from inside the node's namespace.
		dialStream = vpc.DialContext(c.vpc.NodePath(n.Name))
	}
	cert, key, err := pki.IssueKubeletServingCert(filepath.Join(c.nodeDir(n), "pki"), n.Name, []net.IP{ip})
	if err != nil {
		return 0, fmt.Errorf("kubelet %s: %w", n.Name, err)
	}
	var summary func(ctx context.Context) (*statsapi.Summary, error)
	if c.cfg.Hollow { // a hollow kubelet's containers run in its fake runtime, not in CRI
		summary = func(ctx context.Context) (*statsapi.Summary, error) {
			if k := running.Load(); k != nil {
				return k.HollowSummary(ctx)
			}
			return nil, fmt.Errorf("kubelet %s is not running yet", n.Name)
		}
	}
	srv, err := server.New(server.Config{Addr: addr, Listen: listen, CertFile: cert, KeyFile: key, ClientCAFile: pki.CACert(),
		DialStream: dialStream, Summary: summary,
		PodLogsDir: c.podLogsDir(n), Runtime: runtime, Logger: c.cfg.Logger.With("component", "kubelet", "node", n.Name),
		PodLookup: func(ns, name string) (*corev1.Pod, error) {
			if k := running.Load(); k != nil {
				return k.Pod(ns, name)
			}
			return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
		},
		PodList: func() ([]*corev1.Pod, error) {
			if k := running.Load(); k != nil {
				return k.Pods()
			}
			return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("kubelet %s is not running yet", n.Name))
		},
		Metrics: func() prometheus.Gatherer {
			if k := running.Load(); k != nil {
				return k.Metrics()
			}
			return nil
		},
		ProbeMetrics: func() prometheus.Gatherer {
			if k := running.Load(); k != nil {
				return k.ProbeMetrics()
			}
			return nil
		}})
	if err != nil {
		return 0, err
	}
	g.Go(func() error { return srv.Run(ctx) })
	select {
	case <-srv.Ready():
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	_, port, err := net.SplitHostPort(srv.Addr())
	if err != nil {
		return 0, err
	}
	p, err := strconv.Atoi(port)
	return int32(p), err
}

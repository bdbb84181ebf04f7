package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubelab/kubelab/internal/cloudcontrollermanager"
	awsprovider "github.com/kubelab/kubelab/internal/cloudprovider/aws"
	"github.com/kubelab/kubelab/internal/controllermanager"
	csiclient "github.com/kubelab/kubelab/internal/csi/client"
	"github.com/kubelab/kubelab/internal/csi/driver"
	"github.com/kubelab/kubelab/internal/csi/sidecar/attacher"
	"github.com/kubelab/kubelab/internal/csi/sidecar/livenessprobe"
	"github.com/kubelab/kubelab/internal/csi/sidecar/provisioner"
	"github.com/kubelab/kubelab/internal/csi/sidecar/resizer"
	"github.com/kubelab/kubelab/internal/csi/sidecar/snapshotter"
	"github.com/kubelab/kubelab/internal/kubelet"
	"github.com/kubelab/kubelab/internal/kubelet/kuberuntime/fakecri"
	"github.com/kubelab/kubelab/internal/leaderelection"
	"github.com/kubelab/kubelab/internal/scheduler"
)

// adminClientset is kubelab up's own client, the admin's (system:masters), for the
// add-ons and the wait for the nodes; no component uses it.
func (c *Cluster) adminClientset(name string) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("%s: load kubeconfig: %w", name, err)
	}
	cfg.UserAgent = name
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.QPS, cfg.Burst = 200, 400
	return kubernetes.NewForConfig(cfg)
}

// csiSocket is where the driver's controller plugin serves and its sidecars dial.
func (c *Cluster) csiSocket() string {
	return "unix://" + filepath.Join(c.runDir(), "csi", "controller.sock")
}

func (c *Cluster) runControllerManager(ctx context.Context) error {
	cfg, err := c.restConfig("kube-controller-manager", controllerManagerIdentity)
	if err != nil {
		return err
	}
	rootCA, err := os.ReadFile(c.cp.APIServer.PKI().CACert())
	if err != nil {
		return fmt.Errorf("controller-manager: root CA: %w", err)
	}
	leClient, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// Only the holder of the kube-controller-manager Lease runs the controllers; each
	// term starts them afresh, as a restarted process would.
	return leaderelection.Run(ctx, leaderelection.Config{Name: "kube-controller-manager",
		Logger: c.cfg.Logger.With("component", "controller-manager")}, leClient, func(ctx context.Context) error {
		cm, err := controllermanager.New(controllermanager.Config{Logger: c.cfg.Logger.With("component", "controller-manager"), RootCA: rootCA,
			ClusterSigningCertFile: c.cp.APIServer.PKI().CACert(), ClusterSigningKeyFile: c.cp.APIServer.PKI().CAKey(),
			ClusterCIDR: podCIDRRange(c.cfg.Hollow, c.cfg.Nodes, c.cfg.NodeCIDRMaskSize), NodeCIDRMaskSize: c.cfg.NodeCIDRMaskSize,
			NodeMonitorGracePeriod: c.cfg.NodeMonitorGracePeriod,
			PodGCQuarantine:        c.cfg.PodGCQuarantine,
			// Each controller is its service account in kube-system.
			ControllerConfig: func(sa string) (*rest.Config, error) {
				return c.restConfig("kube-controller-manager/"+sa, serviceAccountIdentity(metav1.NamespaceSystem, sa))
			}}, cfg)
		if err != nil {
			return err
		}
		return cm.Run(ctx)
	})
}

// runCloudControllerManager is the cloud-controller-manager; it reaches the cloud only
// through the EC2 and ELBv2 APIs with the cloud's client files. Only the holder of the
// cloud-controller-manager Lease runs the controllers.
func (c *Cluster) runCloudControllerManager(ctx context.Context) error {
	cfg, err := c.restConfig("cloud-controller-manager", ccmIdentity)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	log := c.cfg.Logger.With("component", "cloud-controller-manager")
	return leaderelection.Run(ctx, leaderelection.Config{Name: "cloud-controller-manager", Logger: log}, client, func(ctx context.Context) error {
		cloud, err := awsprovider.New(ctx, awsprovider.Config{Endpoint: c.cloud.Endpoint(), ConfigFile: c.cloud.ConfigFile(),
			CredentialsFile: c.cloud.CredentialsFile()})
		if err != nil {
			return err
		}
		m, err := cloudcontrollermanager.New(cloudcontrollermanager.Config{Instances: cloud.Instances(), LoadBalancers: cloud.LoadBalancers(), Logger: log}, cfg)
		if err != nil {
			return err
		}
		return m.Run(ctx)
	})
}

func (c *Cluster) runScheduler(ctx context.Context) error {
	client, err := c.clientset("kube-scheduler", schedulerIdentity)
	if err != nil {
		return err
	}
	// Only the holder of the kube-scheduler Lease schedules.
	return leaderelection.Run(ctx, leaderelection.Config{Name: "kube-scheduler",
		Logger: c.cfg.Logger.With("component", "scheduler")}, client, func(ctx context.Context) error {
		factory := informers.NewSharedInformerFactory(client, 0)
		s, err := scheduler.New(scheduler.Config{}, client, factory)
		if err != nil {
			return err
		}
		factory.Start(ctx.Done())
		defer factory.Shutdown()
		return s.Run(ctx)
	})
}

// runCSIController is the ebs.csi.aws.com controller plugin; it reaches the cloud only
// through the EC2 API with the cloud's client files.
func (c *Cluster) runCSIController(ctx context.Context) error {
	ec2, err := driver.NewEC2Cloud(ctx, driver.EC2Config{
		Endpoint: c.cloud.Endpoint(), ConfigFile: c.cloud.ConfigFile(), CredentialsFile: c.cloud.CredentialsFile(),
	})
	if err != nil {
		return fmt.Errorf("csi controller: %w", err)
	}
	d, err := driver.New(driver.Config{Mode: driver.ModeController, Endpoint: c.csiSocket()},
		driver.Deps{Cloud: ec2, Logger: c.componentLogger("csi-controller", "component", "csi-controller")})
	if err != nil {
		return err
	}
	return d.Run(ctx)
}

// sidecar runs a CSI sidecar built by build on its own client (the driver's controller
// service account), informers and connection to the driver's socket.
func (c *Cluster) sidecar(ctx context.Context, name string,
	build func(cfg *rest.Config, client kubernetes.Interface, factory informers.SharedInformerFactory, conn *grpc.ClientConn) (runner, error)) error {
	cfg, err := c.restConfig(name, csiControllerIdentity)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	conn, err := csiclient.Dial(c.csiSocket())
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	defer conn.Close()
	factory := informers.NewSharedInformerFactory(client, 0)
	r, err := build(cfg, client, factory, conn)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	return r.Run(ctx)
}

func (c *Cluster) tuning(name string) csiclient.Tuning {
	return csiclient.Tuning{Logger: c.componentLogger(name, "component", name)}
}

func (c *Cluster) runProvisioner(ctx context.Context) error {
	return c.sidecar(ctx, "csi-provisioner", func(cfg *rest.Config, client kubernetes.Interface, f informers.SharedInformerFactory, conn *grpc.ClientConn) (runner, error) {
		snaps, err := controllermanager.SnapshotClient(cfg)
		if err != nil {
			return nil, err
		}
		// As the EBS driver's deployment runs it: PV names pvc-<claim uid>, ext4 by
		// default, the claim's name and namespace passed as parameters.
		return provisioner.New(provisioner.Config{DriverName: DriverName, Identity: "kubelab", ExtraCreateMetadata: true,
			DefaultFSType: "ext4", Tuning: c.tuning("csi-provisioner")}, client, f, conn, snaps)
	})
}

func (c *Cluster) runAttacher(ctx context.Context) error {
	return c.sidecar(ctx, "csi-attacher", func(_ *rest.Config, client kubernetes.Interface, f informers.SharedInformerFactory, conn *grpc.ClientConn) (runner, error) {
		return attacher.New(attacher.Config{DriverName: DriverName, Tuning: c.tuning("csi-attacher")}, client, f, conn)
	})
}

func (c *Cluster) runResizer(ctx context.Context) error {
	return c.sidecar(ctx, "csi-resizer", func(_ *rest.Config, client kubernetes.Interface, f informers.SharedInformerFactory, conn *grpc.ClientConn) (runner, error) {
		return resizer.New(resizer.Config{DriverName: DriverName, Tuning: c.tuning("csi-resizer")}, client, f, conn)
	})
}

func (c *Cluster) runSnapshotter(ctx context.Context) error {
	return c.sidecar(ctx, "csi-snapshotter", func(cfg *rest.Config, client kubernetes.Interface, _ informers.SharedInformerFactory, conn *grpc.ClientConn) (runner, error) {
		snaps, err := controllermanager.SnapshotClient(cfg)
		if err != nil {
			return nil, err
		}
		snapFactory := snapinformers.NewSharedInformerFactory(snaps, 0)
		s, err := snapshotter.New(snapshotter.Config{DriverName: DriverName, Logger: c.componentLogger("csi-snapshotter", "component", "csi-snapshotter")},
			client, snaps, snapFactory, conn)
		if err != nil {
			return nil, err
		}
		return runWith{s, func(ctx context.Context) { snapFactory.Start(ctx.Done()) }, snapFactory.Shutdown}, nil
	})
}

// runLivenessProbe is the controller plugin's livenessprobe sidecar on loopback.
func (c *Cluster) runLivenessProbe(ctx context.Context) error {
	conn, err := csiclient.Dial(c.csiSocket())
	if err != nil {
		return fmt.Errorf("liveness-probe: %w", err)
	}
	defer conn.Close()
	return livenessprobe.New(livenessprobe.Config{Addr: "127.0.0.1:0",
		Logger: c.componentLogger("liveness-probe", "component", "liveness-probe")}, conn).Run(ctx)
}

// runner is a component: it blocks in Run until ctx ends.
type runner interface {
	Run(ctx context.Context) error
}

// runWith runs r with an extra informer factory started before it and shut down after.
type runWith struct {
	r        runner
	start    func(ctx context.Context)
	shutdown func()
}

func (w runWith) Run(ctx context.Context) error {
	w.start(ctx)
	defer w.shutdown()
	return w.r.Run(ctx)
}

// runKubelet runs the node's hollow kubelet (a fake runtime and mounter, the mounter
// logging as the node's CSI plugin to the add-on's node pod), with a kubelet server that
// serves the add-on pods' logs. factory and events are shared by the hollow kubelets;
// factory is started until stop.
func (c *Cluster) runKubelet(n Node, factory informers.SharedInformerFactory, events *kubelet.SharedEvents, stop <-chan struct{}) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		client, err := c.clientset("kubelet/"+n.Name, nodeIdentity(n.Name))
		if err != nil {
			return err
		}
		cfg := kubelet.Config{
			NodeName: n.Name, Zone: n.Zone, InstanceID: n.InstanceID, InstanceType: c.cfg.InstanceType,
			Capacity: c.cfg.NodeCapacity, Hollow: c.cfg.Hollow, NodeIP: n.IP,
			RootDir:       filepath.Join(c.cfg.DataDir, "nodes", n.Name, "kubelet"),
			CSIDriverName: DriverName, PodStartDelay: c.cfg.PodStartDelay,
			StatusUpdateInterval: c.cfg.NodeStatusInterval, PodEvents: true,
		}
		// Only so many nodes register at once: thousands starting together time out
		// their own requests and retry them.
		select {
		case c.hollowRegistering <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		var once sync.Once
		release := func() { once.Do(func() { <-c.hollowRegistering }) }
		defer release()
		return c.serveKubelet(ctx, n, fakecri.New(), func(ctx context.Context, port int32) (*kubelet.Kubelet, error) {
			cfg.ServerPort, cfg.Addresses = port, kubeletServerAddresses
			k, err := kubelet.New(cfg, client, factory, kubelet.Deps{Logger: c.cfg.Logger.With("component", "kubelet", "node", n.Name), Events: events,
				NodePluginLogger: c.addonOnlyLogger("ebs-csi-node/"+n.Name, "component", "ebs-csi-node", "node", n.Name)})
			if err == nil {
				factory.Start(stop)
				go func() {
					select {
					case <-k.Registered():
					case <-ctx.Done():
					}
					release()
				}()
			}
			return k, err
		})
	}
}

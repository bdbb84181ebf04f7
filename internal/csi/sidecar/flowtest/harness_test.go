package flowtest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/cloud"
	"github.com/kubelab/kubelab/internal/cloud/cloudtest"
	"github.com/kubelab/kubelab/internal/controller/attachdetach"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/controller/protection"
	"github.com/kubelab/kubelab/internal/controller/pvbinder"
	csiclient "github.com/kubelab/kubelab/internal/csi/client"
	"github.com/kubelab/kubelab/internal/csi/driver"
	"github.com/kubelab/kubelab/internal/csi/sidecar/attacher"
	"github.com/kubelab/kubelab/internal/csi/sidecar/provisioner"
	"github.com/kubelab/kubelab/internal/testutil"
)

const driverName = "ebs.csi.aws.com"

var zones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}

// env is the storage flow's control plane, not a whole cluster: the API server, the
// hollow cloud, the driver's controller on its socket, and one node per zone with an
// instance and a CSINode (controllertest.AddNode) but no kubelet or scheduler, whose
// parts the tests play step by step. The components are started and stopped by the
// tests themselves (start, running.stop), in the middle of the flow when they test a
// restart. A test that needs the whole cluster starts one with clustertest.
type env struct {
	t         testing.TB
	api       *apiservertest.Server
	client    kubernetes.Interface
	cloud     *cloud.Cloud
	ec2       *ec2.Client
	endpoint  string            // the driver's socket
	nodes     []string          // node names, one per zone
	instances map[string]string // node name -> instance id
	log       *slog.Logger
}

func shortDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "flow")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{t: t, instances: map[string]string{}, log: cloudtest.Logger(t, slog.LevelInfo)}
	e.api = apiservertest.Start(t, apiservertest.Options{})
	e.client = e.api.Client
	dir := shortDir(t)

	c, err := cloud.New(cloud.Config{DataDir: filepath.Join(dir, "cloud"), Hollow: true, NoIMDSListeners: true,
		Logger: cloudtest.Logger(t, slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Start(t, "cloud", 30*time.Second, c.Run, testutil.Closed(c.Ready()))
	e.cloud = c
	e.ec2 = cloudtest.EC2Client(t, c.Endpoint(), c.ConfigFile(), c.CredentialsFile())

	// The driver's controller plugin, reaching the cloud through its EC2 API.
	ec2c, err := driver.NewEC2Cloud(context.Background(), driver.EC2Config{Endpoint: c.Endpoint(), ConfigFile: c.ConfigFile(), CredentialsFile: c.CredentialsFile()})
	if err != nil {
		t.Fatal(err)
	}
	e.endpoint = "unix://" + filepath.Join(dir, "csi.sock")
	d, err := driver.New(driver.Config{Mode: driver.ModeController, Endpoint: e.endpoint, OperationTimeout: 5 * time.Minute},
		driver.Deps{Cloud: ec2c, Logger: cloudtest.Logger(t, slog.LevelWarn)})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Start(t, "driver", 30*time.Second, d.Run, testutil.Closed(d.Ready()))

	ctx := context.Background()
	if _, err := e.client.StorageV1().CSIDrivers().Create(ctx, &storagev1.CSIDriver{
		ObjectMeta: metav1.ObjectMeta{Name: driverName},
		Spec:       storagev1.CSIDriverSpec{AttachRequired: ptr.To(true)},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, zone := range zones {
		name := fmt.Sprintf("node-%c", 'a'+i)
		e.addNode(ctx, name, zone)
	}
	return e
}

// addNode runs an instance in zone and registers it as a Ready node with the
// driver's CSINode entry, as the kubelet and node-driver-registrar would
// (controllertest.AddNode).
func (e *env) addNode(ctx context.Context, name, zone string) {
	t := e.t
	t.Helper()
	out, err := e.ec2.RunInstances(ctx, &ec2.RunInstancesInput{
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: ec2types.InstanceTypeM5Large,
		Placement: &ec2types.Placement{AvailabilityZone: aws.String(zone)},
	})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	testutil.EventuallyWithin(t, flowTimeout, "instance "+id+" running", func() (bool, error) {
		d, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err != nil {
			return false, err
		}
		return d.Reservations[0].Instances[0].State.Name == ec2types.InstanceStateNameRunning, nil
	})
	e.instances[name] = id
	e.nodes = append(e.nodes, name)
	controllertest.AddNode(t, e.client, controllertest.Node{
		Name: name, ProviderID: "aws:///" + zone + "/" + id,
		Labels:      map[string]string{driver.TopologyKeyZone: zone, driver.TopologyKeyWellKnown: zone},
		Annotations: map[string]string{attachdetach.AnnControllerManaged: "true"},
		CSIDrivers: []storagev1.CSINodeDriver{{
			Name: driverName, NodeID: id, TopologyKeys: []string{driver.TopologyKeyZone, driver.TopologyKeyWellKnown},
			Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To[int32](25)},
		}},
	})
}

// running is a set of components started together on one informer factory.
type running struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   chan error
}

// stop ends the components and waits for them.
func (r *running) stop(t testing.TB) {
	t.Helper()
	r.cancel()
	r.wg.Wait()
	close(r.errs)
	for err := range r.errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("component stopped with: %v", err)
		}
	}
}

type runner interface{ Run(context.Context) error }

func (e *env) start(build func(kubernetes.Interface, informers.SharedInformerFactory) []runner) *running {
	t := e.t
	t.Helper()
	client := kubernetes.NewForConfigOrDie(e.api.Config)
	factory := informers.NewSharedInformerFactory(client, 0)
	rs := build(client, factory)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, errs: make(chan error, len(rs))}
	factory.Start(ctx.Done())
	for _, x := range rs {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.errs <- x.Run(ctx)
		}()
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		<-ctx.Done()
		factory.Shutdown()
	}()
	t.Cleanup(func() { cancel() })
	return r
}

// startControllers runs the controller-manager's storage controllers.
func (e *env) startControllers() *running {
	return e.start(func(client kubernetes.Interface, f informers.SharedInformerFactory) []runner {
		pv, err := pvbinder.New(pvbinder.Config{Logger: e.log, Resync: 2 * time.Second}, client, f)
		if err != nil {
			e.t.Fatal(err)
		}
		prot, err := protection.New(protection.Config{Logger: e.log}, client, f)
		if err != nil {
			e.t.Fatal(err)
		}
		ad, err := attachdetach.New(attachdetach.Config{Logger: e.log, Resync: 2 * time.Second}, client, f)
		if err != nil {
			e.t.Fatal(err)
		}
		return []runner{pv, prot, ad}
	})
}

// startSidecars runs the provisioner and the attacher on the driver's socket.
func (e *env) startSidecars() *running {
	return e.start(func(client kubernetes.Interface, f informers.SharedInformerFactory) []runner {
		return e.sidecars(client, f, true, true)
	})
}

func (e *env) sidecars(client kubernetes.Interface, f informers.SharedInformerFactory, prov, att bool) []runner {
	t := e.t
	conn := e.dial()
	var out []runner
	retry := func(c *time.Duration, m *time.Duration) { *c, *m = 100*time.Millisecond, 2*time.Second }
	if prov {
		cfg := provisioner.Config{DriverName: driverName, Identity: "test", ExtraCreateMetadata: true,
			Tuning: csiclient.Tuning{Logger: e.log, Timeout: 5 * time.Minute}}
		retry(&cfg.RetryIntervalStart, &cfg.RetryIntervalMax)
		p, err := provisioner.New(cfg, client, f, conn, snapclient.NewForConfigOrDie(e.api.Config))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	if att {
		cfg := attacher.Config{DriverName: driverName, Tuning: csiclient.Tuning{Logger: e.log, Timeout: 5 * time.Minute}}
		retry(&cfg.RetryIntervalStart, &cfg.RetryIntervalMax)
		a, err := attacher.New(cfg, client, f, conn)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

func (e *env) dial() *grpc.ClientConn {
	conn, err := csiclient.Dial(e.endpoint)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { conn.Close() })
	return conn
}

// flowTimeout is how long the tests wait for a step of the flow.
const flowTimeout = time.Minute

// cloudVolumes lists the cloud's volumes made for the PV named name.
func (e *env) cloudVolumes(name string) []ec2types.Volume {
	e.t.Helper()
	return cloudtest.VolumesOfPV(e.t, e.ec2, name)
}

// events lists the Events about an object.
func (e *env) events(ns, name string) []corev1.Event {
	return controllertest.EventsAbout(e.t, e.client, ns, name)
}

func (e *env) hasEvent(ns, name, reason string) bool {
	return controllertest.HasEvent(e.t, e.client, ns, name, reason)
}

// waitEvent waits for an Event with reason about name: events are recorded
// asynchronously, after the change they describe.
func (e *env) waitEvent(ns, name, reason string) {
	e.t.Helper()
	testutil.EventuallyWithin(e.t, flowTimeout, reason+" event on "+name, func() (bool, error) { return e.hasEvent(ns, name, reason), nil })
}

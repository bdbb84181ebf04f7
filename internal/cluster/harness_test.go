package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/kubectl/pkg/util/podutils"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/cloud/cloudtest"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
)

func TestMain(m *testing.M) {
	os.Exit(func() int {
		dir, err := os.MkdirTemp("", "kubelab-cluster-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		builtDir = dir
		return m.Run()
	}())
}

// testCluster is a hollow cluster run by the test, with an admin client and an EC2
// client of its cloud.
type testCluster struct {
	*Cluster
	t      testing.TB
	client kubernetes.Interface
	ec2    *ec2.Client
	zoneOf map[string]string // node name → zone
}

// startCluster runs a hollow cluster on a fresh data dir; tweak adjusts its config.
// The cluster stops at the test's cleanup.
func startCluster(t testing.TB, tweak func(*Config)) *testCluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "kl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg := Config{
		ControlPlaneConfig: ControlPlaneConfig{DataDir: dir,
			EtcdClientPort: apiservertest.FreePort(t), EtcdPeerPort: apiservertest.FreePort(t)},
		Hollow:             true,
		NodeStatusInterval: time.Second,
		Logger:             cloudtest.Logger(t, slog.LevelWarn),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("cluster stopped with: %v", err)
			}
		case <-time.After(time.Minute):
			t.Errorf("cluster did not stop within a minute")
		}
	})
	select {
	case <-c.Ready():
	case err := <-done:
		done <- err // for the cleanup, which waits for it
		t.Fatalf("cluster stopped before it was ready: %v", err)
	case <-time.After(3 * time.Minute):
		t.Fatal("cluster not ready after 3 minutes")
	}
	tc := &testCluster{Cluster: c, t: t, zoneOf: map[string]string{}}
	restCfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	restCfg.QPS, restCfg.Burst = 500, 1000
	tc.client = kubernetes.NewForConfigOrDie(restCfg)
	tc.ec2, err = c.ec2Client(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes() {
		tc.zoneOf[n.Name] = n.Zone
	}
	return tc
}

func waitFor(t testing.TB, what string, cond func() (bool, error)) {
	t.Helper()
	controllertest.WaitWithin(t, 2*time.Minute, what, cond)
}

// namespace creates a namespace for one test.
func (tc *testCluster) namespace(name string) string {
	tc.t.Helper()
	if _, err := tc.client.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		tc.t.Fatal(err)
	}
	return name
}

// seedObject decodes one manifest of examples/seed.
func seedObject[T runtime.Object](t testing.TB, file string) T {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "seed", file))
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
	if err != nil {
		t.Fatalf("decode %s: %v", file, err)
	}
	out, ok := obj.(T)
	if !ok {
		t.Fatalf("%s holds a %T", file, obj)
	}
	return out
}

// cloudVolumes lists the cloud's volumes made for the PV named pv.
func (tc *testCluster) cloudVolumes(pv string) []ec2types.Volume {
	tc.t.Helper()
	return cloudtest.VolumesOfPV(tc.t, tc.ec2, pv)
}

// attachedVolumes counts the cloud's volume attachments in any state but detached.
func (tc *testCluster) attachedVolumes() []string {
	tc.t.Helper()
	out, err := tc.ec2.DescribeVolumes(context.Background(), &ec2.DescribeVolumesInput{})
	if err != nil {
		tc.t.Fatal(err)
	}
	var ids []string
	for _, v := range out.Volumes {
		for _, a := range v.Attachments {
			if a.State != ec2types.VolumeAttachmentStateDetached {
				ids = append(ids, fmt.Sprintf("%s@%s", aws.ToString(v.VolumeId), aws.ToString(a.InstanceId)))
			}
		}
	}
	return ids
}

func (tc *testCluster) hasEvent(ns, name, reason string) bool {
	return controllertest.HasEvent(tc.t, tc.client, ns, name, reason)
}

// warnings are the Warning events about an object, as "Reason: message".
func (tc *testCluster) warnings(ns, name string) []string {
	var out []string
	for _, ev := range controllertest.EventsAbout(tc.t, tc.client, ns, name) {
		if ev.Type == corev1.EventTypeWarning {
			out = append(out, ev.Reason+": "+ev.Message)
		}
	}
	return out
}

func podRunning(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && podutils.IsPodReady(p)
}

// waitPodRunning waits until the pod runs and is Ready, and returns it.
func (tc *testCluster) waitPodRunning(ns, name string) *corev1.Pod {
	tc.t.Helper()
	var pod *corev1.Pod
	waitFor(tc.t, "pod "+ns+"/"+name+" Running", func() (bool, error) {
		var err error
		pod, err = tc.client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil && podRunning(pod), err
	})
	return pod
}

package nodeipam

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

func TestCIDRSet(t *testing.T) {
	s, err := newCIDRSet("10.244.0.0/16", 24)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.occupy("10.244.1.0/24"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := 0; i < 3; i++ {
		p, err := s.allocate()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, p.String())
	}
	if want := []string{"10.244.0.0/24", "10.244.2.0/24", "10.244.3.0/24"}; got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("allocated %v, want %v", got, want)
	}
	for _, bad := range []string{"10.245.0.0/24", "10.244.0.0/25", "10.244.0.5/24", "nonsense"} {
		if err := s.occupy(bad); err == nil {
			t.Errorf("occupy(%q) accepted", bad)
		}
	}
	// Exhaustion and release.
	small, err := newCIDRSet("10.0.0.0/23", 24)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := small.allocate()
	b, _ := small.allocate()
	if _, err := small.allocate(); !errors.Is(err, errFull) {
		t.Errorf("third /24 of a /23: %v, want errFull", err)
	}
	if err := small.release(a.String()); err != nil {
		t.Fatal(err)
	}
	if c, err := small.allocate(); err != nil || c != a {
		t.Errorf("after release got %v %v, want %v (b was %v)", c, err, a, b)
	}
	for _, tc := range []struct {
		cidr string
		mask int
	}{{"10.244.0.0/16", 8}, {"10.244.0.0/16", 33}, {"bad", 24}, {"10.0.0.0/8", 40}} {
		if _, err := newCIDRSet(tc.cidr, tc.mask); err == nil {
			t.Errorf("newCIDRSet(%q, %d) accepted", tc.cidr, tc.mask)
		}
	}
	v6, err := newCIDRSet("fd00:10:244::/56", 64)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := v6.allocate(); p.String() != "fd00:10:244::/64" {
		t.Errorf("first IPv6 subnet %s", p)
	}
	if p, _ := v6.allocate(); p.String() != "fd00:10:244:1::/64" {
		t.Errorf("second IPv6 subnet %s", p)
	}
}

func run(t *testing.T, client kubernetes.Interface, cfg Config) {
	t.Helper()
	controllertest.RunController(t, client, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(cfg, client, f)
	})
}

func createNode(t *testing.T, client kubernetes.Interface, name, podCIDR string) {
	t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDR: podCIDR}}
	if podCIDR != "" {
		n.Spec.PodCIDRs = []string{podCIDR}
	}
	if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func podCIDR(t *testing.T, client kubernetes.Interface, name string) string {
	t.Helper()
	var cidr string
	testutil.Eventually(t, "a pod CIDR for node "+name, func() (bool, error) {
		n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil || n.Spec.PodCIDR == "" {
			return false, err
		}
		if len(n.Spec.PodCIDRs) != 1 || n.Spec.PodCIDRs[0] != n.Spec.PodCIDR {
			t.Errorf("node %s: podCIDR %s, podCIDRs %v", name, n.Spec.PodCIDR, n.Spec.PodCIDRs)
		}
		cidr = n.Spec.PodCIDR
		return true, nil
	})
	return cidr
}

func TestNodesGetPodCIDRs(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	createNode(t, s.Client, "old", "10.244.0.0/24") // already has one
	run(t, s.Client, Config{})
	seen := map[string]string{"10.244.0.0/24": "old"}
	for _, n := range []string{"node-a", "node-b", "node-c"} {
		createNode(t, s.Client, n, "")
		c := podCIDR(t, s.Client, n)
		if other, dup := seen[c]; dup {
			t.Errorf("%s got %s, already %s's", n, c, other)
		}
		seen[c] = n
	}
	if seen["10.244.1.0/24"] == "" || seen["10.244.3.0/24"] == "" {
		t.Errorf("allocations %v, want 10.244.1-3.0/24", seen)
	}
}

func TestExhaustedRangeAndRelease(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	run(t, s.Client, Config{ClusterCIDR: "10.10.0.0/23", NodeCIDRMaskSize: 24})
	createNode(t, s.Client, "n1", "")
	createNode(t, s.Client, "n2", "")
	podCIDR(t, s.Client, "n1")
	freed := podCIDR(t, s.Client, "n2")
	createNode(t, s.Client, "n3", "")
	testutil.Eventually(t, "a CIDRNotAvailable event for the node beyond the range", func() (bool, error) {
		evs, err := s.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=n3,reason=CIDRNotAvailable"})
		return err == nil && len(evs.Items) > 0, err
	})
	if err := s.Client.CoreV1().Nodes().Delete(ctx, "n2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := podCIDR(t, s.Client, "n3"); got != freed {
		t.Errorf("n3 got %s, want the freed %s", got, freed)
	}
}

package cloudnode

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubelab/kubelab/internal/cloudprovider/fakecloud"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

var uninitializedTaint = corev1.Taint{Key: TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}

// TestInitializesNodes: a node registered with the uninitialized taint gets its
// instance's provider id, labels and addresses and loses the taint; other taints stay; a
// node whose instance the cloud does not know stays tainted.
func TestInitializesNodes(t *testing.T) {
	cloud := &fakecloud.Cloud{}
	cloud.Put(fakecloud.Instance{ID: "i-0a", Zone: "us-east-1b", Type: "m5.large", PrivateIP: "10.0.1.5", PrivateDNS: "ip-10-0-1-5.ec2.internal"})
	client := fake.NewClientset()
	other := corev1.Taint{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule}
	controllertest.AddNode(t, client, controllertest.Node{Name: "ip-10-0-1-5.ec2.internal",
		Annotations: map[string]string{AnnotationProvidedIP: "10.0.1.5"}, Taints: []corev1.Taint{uninitializedTaint, other}})
	controllertest.AddNode(t, client, controllertest.Node{Name: "ip-10-0-9-9.ec2.internal", Taints: []corev1.Taint{uninitializedTaint}})
	controllertest.RunController(t, client, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(Config{}, client, f, cloud)
	})
	ctx := context.Background()
	testutil.Eventually(t, "the node initialized", func() (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, "ip-10-0-1-5.ec2.internal", metav1.GetOptions{})
		return err == nil && !uninitialized(n), err
	})
	n, _ := client.CoreV1().Nodes().Get(ctx, "ip-10-0-1-5.ec2.internal", metav1.GetOptions{})
	if n.Spec.ProviderID != "aws:///us-east-1b/i-0a" {
		t.Errorf("providerID %q", n.Spec.ProviderID)
	}
	for k, v := range map[string]string{corev1.LabelInstanceTypeStable: "m5.large", corev1.LabelTopologyZone: "us-east-1b",
		corev1.LabelTopologyRegion: "us-east-1", labelBetaZone: "us-east-1b"} {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0] != other {
		t.Errorf("taints %+v, want only %v", n.Spec.Taints, other)
	}
	want := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.1.5"}, {Type: corev1.NodeInternalDNS, Address: "ip-10-0-1-5.ec2.internal"},
		{Type: corev1.NodeHostName, Address: "ip-10-0-1-5.ec2.internal"}}
	if len(n.Status.Addresses) != 3 || n.Status.Addresses[0] != want[0] || n.Status.Addresses[2] != want[2] {
		t.Errorf("addresses %+v, want %+v", n.Status.Addresses, want)
	}
	// The unknown instance was asked about, and its node keeps the taint.
	testutil.Eventually(t, "the unknown node asked about", func() bool { return cloud.Calls("InstanceMetadata") >= 2 })
	if u, _ := client.CoreV1().Nodes().Get(ctx, "ip-10-0-9-9.ec2.internal", metav1.GetOptions{}); !uninitialized(u) {
		t.Error("a node of no instance lost its taint")
	}
}

// TestAddresses: a provided IP that is not the instance's is an error; otherwise it is
// the only InternalIP.
func TestAddresses(t *testing.T) {
	cloud := &fakecloud.Cloud{}
	cloud.Put(fakecloud.Instance{ID: "i-0b", Zone: "us-east-1a", PrivateIP: "10.0.0.7", PrivateDNS: "n"})
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Annotations: map[string]string{AnnotationProvidedIP: "10.0.0.8"}}}
	m, err := cloud.InstanceMetadata(context.Background(), node)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := addresses(node, m); err == nil {
		t.Error("a provided IP not the instance's was accepted")
	}
	node.Annotations[AnnotationProvidedIP] = "10.0.0.7"
	got, err := addresses(node, m)
	if err != nil || got[0].Address != "10.0.0.7" || len(got) != 3 {
		t.Errorf("addresses %+v, %v", got, err)
	}
}

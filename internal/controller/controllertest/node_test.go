package controllertest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestAddNodeRegistersAReadyNodeAndItsCSINode(t *testing.T) {
	client := fake.NewClientset()
	AddNode(t, client, Node{Name: "node-a", Zone: "us-east-1a", ProviderID: "aws:///us-east-1a/i-1",
		CSIDrivers: []storagev1.CSINodeDriver{{Name: "ebs.csi.aws.com", NodeID: "i-1"}}})
	ctx := context.Background()
	n, err := client.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels[corev1.LabelTopologyZone] != "us-east-1a" || n.Labels[corev1.LabelHostname] != "node-a" || n.Spec.ProviderID != "aws:///us-east-1a/i-1" {
		t.Errorf("node %v %q, want its hostname and zone labels and its provider id", n.Labels, n.Spec.ProviderID)
	}
	ready := false
	for _, c := range n.Status.Conditions {
		ready = ready || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue)
	}
	if !ready || n.Status.Allocatable.Pods().Value() != 110 {
		t.Errorf("node status %+v, want Ready with 110 pods allocatable", n.Status)
	}
	csiNode, err := client.StorageV1().CSINodes().Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil || len(csiNode.Spec.Drivers) != 1 || csiNode.Spec.Drivers[0].NodeID != "i-1" {
		t.Errorf("CSINode %+v (%v), want the driver's node id", csiNode, err)
	}
}

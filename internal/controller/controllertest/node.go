package controllertest

import (
	"context"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Node is a node as its kubelet registers it, for tests that run no kubelet: the Node
// object, Ready, and its CSINode when CSI drivers run on it.
type Node struct {
	Name string
	// Zone labels the node topology.kubernetes.io/zone when set.
	Zone        string
	Labels      map[string]string
	Annotations map[string]string
	ProviderID  string
	Taints      []corev1.Taint
	// Allocatable is the node's allocatable and capacity (cpu 2, memory 8Gi, pods 110
	// when nil).
	Allocatable corev1.ResourceList
	// CSIDrivers are the drivers node-driver-registrar registered on the node: its
	// CSINode, made when there are any.
	CSIDrivers []storagev1.CSINodeDriver
}

// AddNode registers n with the API server as its kubelet and node-driver-registrar
// would: the Node (labelled with its hostname and zone), its status Ready with
// KubeletReady and its allocatable, and its CSINode. It returns the Node as stored.
func AddNode(t testing.TB, client kubernetes.Interface, n Node) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{corev1.LabelHostname: n.Name}
	if n.Zone != "" {
		labels[corev1.LabelTopologyZone] = n.Zone
	}
	maps.Copy(labels, n.Labels)
	node, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels, Annotations: n.Annotations},
		Spec:       corev1.NodeSpec{ProviderID: n.ProviderID, Taints: n.Taints},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	allocatable := n.Allocatable
	if allocatable == nil {
		allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"),
			corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")}
	}
	now := metav1.Now()
	node.Status.Capacity, node.Status.Allocatable = allocatable, allocatable
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
		LastHeartbeatTime: now, LastTransitionTime: now}}
	if node, err = client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if len(n.CSIDrivers) > 0 {
		if _, err := client.StorageV1().CSINodes().Create(ctx, &storagev1.CSINode{
			ObjectMeta: metav1.ObjectMeta{Name: n.Name},
			Spec:       storagev1.CSINodeSpec{Drivers: n.CSIDrivers},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return node
}

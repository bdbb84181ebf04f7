package cloudnode

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubelab/kubelab/internal/cloudprovider"
)

const (
	// TaintUninitialized is the taint a kubelet of an external cloud registers with.
	TaintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"
	// AnnotationProvidedIP is the address the kubelet was told to use (--node-ip).
	AnnotationProvidedIP = "alpha.kubernetes.io/provided-node-ip"

	labelBetaInstanceType = "beta.kubernetes.io/instance-type"
	labelBetaZone         = "failure-domain.beta.kubernetes.io/zone"
	labelBetaRegion       = "failure-domain.beta.kubernetes.io/region"
)

// uninitialized tells whether node still waits for the controller.
func uninitialized(node *corev1.Node) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == TaintUninitialized })
}

// addresses are the node's addresses from the instance's: with a provided IP, that IP
// must be the instance's and is the only InternalIP kept, first.
func addresses(node *corev1.Node, m *cloudprovider.Metadata) ([]corev1.NodeAddress, error) {
	ip := node.Annotations[AnnotationProvidedIP]
	if ip == "" {
		return slices.Clone(m.Addresses), nil
	}
	if !slices.ContainsFunc(m.Addresses, func(a corev1.NodeAddress) bool { return a.Address == ip }) {
		return nil, fmt.Errorf("node %s: the provided address %s is not one of its instance's", node.Name, ip)
	}
	out := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
	for _, a := range m.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Address != ip {
			out = append(out, a)
		}
	}
	return out, nil
}

// initialized is node with the cloud's facts (providerID, labels) and without the
// uninitialized taint.
func initialized(node *corev1.Node, m *cloudprovider.Metadata) *corev1.Node {
	n := node.DeepCopy()
	if n.Spec.ProviderID == "" {
		n.Spec.ProviderID = m.ProviderID
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	set := func(v string, keys ...string) {
		if v == "" {
			return
		}
		for _, k := range keys {
			n.Labels[k] = v
		}
	}
	set(m.InstanceType, corev1.LabelInstanceTypeStable, labelBetaInstanceType)
	set(m.Zone, corev1.LabelTopologyZone, labelBetaZone)
	set(m.Region, corev1.LabelTopologyRegion, labelBetaRegion)
	n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == TaintUninitialized })
	return n
}

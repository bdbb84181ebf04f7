package cloudnodelifecycle

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// TaintShutdown marks a node whose instance is stopped.
const TaintShutdown = "node.cloudprovider.kubernetes.io/shutdown"

// action is what the controller does to a node.
type action int

const (
	none action = iota
	addShutdownTaint
	removeShutdownTaint
	deleteNode
)

// ready tells whether node's Ready condition is True.
func ready(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func hasShutdownTaint(node *corev1.Node) bool {
	return slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == TaintShutdown })
}

// decide is the action for node given its instance: exists and shutdown are asked only
// of nodes that are not Ready (ask reports whether they are needed).
func decide(node *corev1.Node, exists, shutdown bool) action {
	switch {
	case ready(node):
		if hasShutdownTaint(node) {
			return removeShutdownTaint
		}
		return none
	case !exists:
		return deleteNode
	case shutdown && !hasShutdownTaint(node):
		return addShutdownTaint
	}
	return none
}

// withShutdownTaint is node's taints with (on) or without the shutdown taint.
func withShutdownTaint(taints []corev1.Taint, on bool) []corev1.Taint {
	out := slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool { return t.Key == TaintShutdown })
	if on {
		out = append(out, corev1.Taint{Key: TaintShutdown, Effect: corev1.TaintEffectNoSchedule})
	}
	return out
}

package namespace

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The conditions a terminating namespace's status carries, one of each type, true while
// its deletion has that trouble and false (with the reason and message below) otherwise.
var conditionTypes = []corev1.NamespaceConditionType{
	corev1.NamespaceDeletionDiscoveryFailure,
	corev1.NamespaceDeletionGVParsingFailure,
	corev1.NamespaceDeletionContentFailure,
	corev1.NamespaceContentRemaining,
	corev1.NamespaceFinalizersRemaining,
}

var okConditions = map[corev1.NamespaceConditionType]struct{ reason, message string }{
	corev1.NamespaceDeletionDiscoveryFailure: {"ResourcesDiscovered", "All resources successfully discovered"},
	corev1.NamespaceDeletionGVParsingFailure: {"ParsedGroupVersions", "All legacy kube types successfully parsed"},
	corev1.NamespaceDeletionContentFailure:   {"ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
	corev1.NamespaceContentRemaining:         {"ContentRemoved", "All content successfully removed"},
	corev1.NamespaceFinalizersRemaining:      {"ContentHasNoFinalizers", "All content-preserving finalizers finished"},
}

// deletionConditions are the conditions of a namespace whose deletion pass met
// discoveryErr (groups discovery could not list), left what left says, and failed to
// delete content with deleteErr. Their times are left to mergeConditions.
func deletionConditions(discoveryErr error, left contentLeft, deleteErr error) []corev1.NamespaceCondition {
	failing := map[corev1.NamespaceConditionType]corev1.NamespaceCondition{}
	if discoveryErr != nil {
		failing[corev1.NamespaceDeletionDiscoveryFailure] = corev1.NamespaceCondition{Reason: "DiscoveryFailed",
			Message: "Discovery failed for some groups: " + discoveryErr.Error()}
	}
	if deleteErr != nil {
		failing[corev1.NamespaceDeletionContentFailure] = corev1.NamespaceCondition{Reason: "ContentDeletionFailed",
			Message: "Failed to delete all resource types: " + deleteErr.Error()}
	}
	if len(left.objects) > 0 {
		var parts []string
		for gvr, n := range left.objects {
			parts = append(parts, fmt.Sprintf("%s.%s has %d resource instances", gvr.Resource, gvr.Group, n))
		}
		slices.Sort(parts)
		failing[corev1.NamespaceContentRemaining] = corev1.NamespaceCondition{Reason: "SomeResourcesRemain",
			Message: "Some resources are remaining: " + strings.Join(parts, ", ")}
	}
	if len(left.finalizers) > 0 {
		var parts []string
		for f, n := range left.finalizers {
			parts = append(parts, fmt.Sprintf("%s in %d resource instances", f, n))
		}
		slices.Sort(parts)
		failing[corev1.NamespaceFinalizersRemaining] = corev1.NamespaceCondition{Reason: "SomeFinalizersRemain",
			Message: "Some content in the namespace has finalizers remaining: " + strings.Join(parts, ", ")}
	}
	out := make([]corev1.NamespaceCondition, 0, len(conditionTypes))
	for _, typ := range conditionTypes {
		c, bad := failing[typ]
		c.Type, c.Status = typ, corev1.ConditionTrue
		if !bad {
			ok := okConditions[typ]
			c.Status, c.Reason, c.Message = corev1.ConditionFalse, ok.reason, ok.message
		}
		out = append(out, c)
	}
	return out
}

// mergeConditions sets want in status: a condition whose status changes gets now as its
// transition time; one that stays keeps its own. It says whether anything changed.
func mergeConditions(status *corev1.NamespaceStatus, want []corev1.NamespaceCondition, now metav1.Time) bool {
	changed := false
	for _, w := range want {
		i := slices.IndexFunc(status.Conditions, func(c corev1.NamespaceCondition) bool { return c.Type == w.Type })
		if i < 0 {
			w.LastTransitionTime = now
			status.Conditions = append(status.Conditions, w)
			changed = true
			continue
		}
		cur := &status.Conditions[i]
		if cur.Status == w.Status && cur.Reason == w.Reason && cur.Message == w.Message {
			continue
		}
		if cur.Status != w.Status {
			cur.LastTransitionTime = now
		}
		cur.Status, cur.Reason, cur.Message = w.Status, w.Reason, w.Message
		changed = true
	}
	return changed
}

// updateConditions writes conds into the terminating namespace's status when they change
// it, and returns the namespace as it now is.
func (c *Controller) updateConditions(ctx context.Context, ns *corev1.Namespace, conds []corev1.NamespaceCondition) (*corev1.Namespace, error) {
	updated := ns.DeepCopy()
	if !mergeConditions(&updated.Status, conds, metav1.Now()) {
		return ns, nil
	}
	updated, err := c.client.CoreV1().Namespaces().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return ns, nil
	}
	if err != nil {
		return ns, fmt.Errorf("update the deletion conditions of namespace %s: %w", ns.Name, err)
	}
	return updated, nil
}

package quotaeval

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	storagehelpers "k8s.io/component-helpers/storage/volume"
)

// storageClassSuffix qualifies a claim quota name by storage class:
// <class>.storageclass.storage.k8s.io/requests.storage.
const storageClassSuffix = ".storageclass.storage.k8s.io/"

var claimCountName = generic.ObjectCountQuotaResourceNameFor(corev1.Resource("persistentvolumeclaims"))

// claimResources are the quota names the claim evaluator charges (and, with the
// storage-class prefix, per class).
var claimResources = []corev1.ResourceName{corev1.ResourcePersistentVolumeClaims, corev1.ResourceRequestsStorage}

// claimEvaluator charges persistent volume claims to quotas.
type claimEvaluator struct {
	list generic.ListFuncByNamespace
}

var _ quota.Evaluator = (*claimEvaluator)(nil)

func newClaimEvaluator(list generic.ListFuncByNamespace) *claimEvaluator {
	return &claimEvaluator{list: list}
}

func (c *claimEvaluator) GroupResource() schema.GroupResource {
	return corev1.Resource("persistentvolumeclaims")
}

// Handles creates and updates: an update may grow the claim.
func (c *claimEvaluator) Handles(a admission.Attributes) bool {
	op := a.GetOperation()
	return a.GetSubresource() == "" && (op == admission.Create || op == admission.Update)
}

func (c *claimEvaluator) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }

func (c *claimEvaluator) Matches(rq *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	return generic.Matches(rq, item, c.MatchingResources, noScopes)
}

func (c *claimEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	var out []corev1.ResourceName
	for _, name := range input {
		if name == claimCountName || quota.Contains(claimResources, name) {
			out = append(out, name)
			continue
		}
		for _, r := range claimResources {
			if strings.HasSuffix(string(name), storageClassSuffix+string(r)) {
				out = append(out, name)
				break
			}
		}
	}
	return out
}

func (c *claimEvaluator) MatchingScopes(runtime.Object, []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return nil, nil
}

func (c *claimEvaluator) UncoveredQuotaScopes(limited, matched []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return uncoveredScopes(limited, matched), nil
}

func (c *claimEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	pvc, ok := item.(*corev1.PersistentVolumeClaim)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T, want a persistent volume claim", item)
	}
	return claimUsage(pvc), nil
}

func (c *claimEvaluator) UsageStats(opts quota.UsageStatsOptions) (quota.UsageStats, error) {
	return generic.CalculateUsageStats(opts, c.list, noScopes, c.Usage)
}

// claimUsage: every claim counts once, in total and for its class, and takes the
// storage it requests (or was given, if more), rounded up to whole bytes.
func claimUsage(pvc *corev1.PersistentVolumeClaim) corev1.ResourceList {
	one := *resource.NewQuantity(1, resource.DecimalSI)
	out := corev1.ResourceList{claimCountName: one, corev1.ResourcePersistentVolumeClaims: one}
	class := storagehelpers.GetPersistentVolumeClaimClass(pvc)
	if class != "" {
		out[corev1.ResourceName(class+storageClassSuffix+string(corev1.ResourcePersistentVolumeClaims))] = one
	}
	if size, ok := claimStorage(pvc); ok {
		out[corev1.ResourceRequestsStorage] = size
		if class != "" {
			out[corev1.ResourceName(class+storageClassSuffix+string(corev1.ResourceRequestsStorage))] = size
		}
	}
	return out
}

func claimStorage(pvc *corev1.PersistentVolumeClaim) (resource.Quantity, bool) {
	size, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
	if ok {
		size = size.DeepCopy()
		size.RoundUp(0)
	}
	if allocated, has := pvc.Status.AllocatedResources[corev1.ResourceStorage]; has && (!ok || allocated.Cmp(size) > 0) {
		return allocated.DeepCopy(), true
	}
	return size, ok
}

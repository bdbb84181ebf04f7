package quotaeval

import (
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apiserver/pkg/admission"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	resourcehelper "k8s.io/component-helpers/resource"
)

var podCountName = generic.ObjectCountQuotaResourceNameFor(corev1.Resource("pods"))

// podResources are the quota names the pod evaluator charges.
var podResources = []corev1.ResourceName{
	podCountName, corev1.ResourcePods,
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
}

// computeNames are the quota names that oblige every container of a pod to state the
// matching request or limit.
var computeNames = sets.New(corev1.ResourceCPU, corev1.ResourceMemory,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory)

// podEvaluator charges pods to quotas.
type podEvaluator struct {
	list generic.ListFuncByNamespace
	now  func() time.Time
}

var _ quota.Evaluator = (*podEvaluator)(nil)

func newPodEvaluator(list generic.ListFuncByNamespace) *podEvaluator {
	return &podEvaluator{list: list, now: time.Now}
}

func (p *podEvaluator) GroupResource() schema.GroupResource { return corev1.Resource("pods") }

// Handles: a pod's usage is fixed at creation.
func (p *podEvaluator) Handles(a admission.Attributes) bool {
	return a.GetSubresource() == "" && a.GetOperation() == admission.Create
}

// Constraints: a quota on cpu or memory requests or limits makes every container say
// its own.
func (p *podEvaluator) Constraints(required []corev1.ResourceName, item runtime.Object) error {
	pod, ok := item.(*corev1.Pod)
	if !ok {
		return fmt.Errorf("unexpected object %T, want a pod", item)
	}
	return missingCompute(pod, required)
}

// missingCompute says which containers lack which of the required compute resources,
// as "must specify limits.cpu for: a,b; requests.memory for: a".
func missingCompute(pod *corev1.Pod, required []corev1.ResourceName) error {
	need := sets.New(required...).Intersection(computeNames)
	if need.Len() == 0 {
		return nil
	}
	missing := map[corev1.ResourceName]sets.Set[string]{}
	check := func(c *corev1.Container) {
		has := containerUsage(c.Resources.Requests, c.Resources.Limits)
		for r := range need {
			if _, ok := has[r]; !ok {
				if missing[r] == nil {
					missing[r] = sets.New[string]()
				}
				missing[r].Insert(c.Name)
			}
		}
	}
	for i := range pod.Spec.Containers {
		check(&pod.Spec.Containers[i])
	}
	for i := range pod.Spec.InitContainers {
		check(&pod.Spec.InitContainers[i])
	}
	if len(missing) == 0 {
		return nil
	}
	names := make([]string, 0, len(missing))
	for r := range missing {
		names = append(names, string(r))
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, r := range names {
		parts = append(parts, fmt.Sprintf("%s for: %s", r, strings.Join(sets.List(missing[corev1.ResourceName(r)]), ",")))
	}
	return fmt.Errorf("must specify %s", strings.Join(parts, "; "))
}

func (p *podEvaluator) Matches(rq *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	return generic.Matches(rq, item, p.MatchingResources, p.matchesScope)
}

// MatchingResources are the names of input the pod evaluator charges: podResources, the
// hugepages-<size> and requests.hugepages-<size> names, and requests.<extended
// resource> (an extended resource is quota'd on its requests only).
func (p *podEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	out := quota.Intersection(input, podResources)
	for _, name := range input {
		s := string(name)
		switch {
		case strings.HasPrefix(s, corev1.ResourceHugePagesPrefix), strings.HasPrefix(s, corev1.ResourceRequestsHugePagesPrefix):
			out = append(out, name)
		case strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix) && extendedResource(corev1.ResourceName(strings.TrimPrefix(s, corev1.DefaultResourceRequestsPrefix))):
			out = append(out, name)
		}
	}
	return out
}

// extendedResource says whether name is an extended resource: a domain-prefixed name
// outside kubernetes.io that, prefixed with requests., is a valid quota name.
func extendedResource(name corev1.ResourceName) bool {
	s := string(name)
	if !strings.Contains(s, "/") || strings.Contains(s, corev1.ResourceDefaultNamespacePrefix) || strings.HasPrefix(s, corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+s)) == 0
}

func (p *podEvaluator) MatchingScopes(item runtime.Object, scopes []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return matchedScopes(item, scopes, p.matchesScope)
}

func (p *podEvaluator) UncoveredQuotaScopes(limited, matched []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return uncoveredScopes(limited, matched), nil
}

func (p *podEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	pod, ok := item.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T, want a pod", item)
	}
	return podUsage(pod, p.now()), nil
}

func (p *podEvaluator) UsageStats(opts quota.UsageStatsOptions) (quota.UsageStats, error) {
	return generic.CalculateUsageStats(opts, p.list, p.matchesScope, p.Usage)
}

func (p *podEvaluator) matchesScope(s corev1.ScopedResourceSelectorRequirement, item runtime.Object) (bool, error) {
	pod, ok := item.(*corev1.Pod)
	if !ok {
		return false, fmt.Errorf("unexpected object %T, want a pod", item)
	}
	return podMatchesScope(pod, s)
}

// podUsage is what pod takes from a quota at time now: count/pods always (it counts
// what is stored), the rest only while the pod is not done (podCharged).
func podUsage(pod *corev1.Pod, now time.Time) corev1.ResourceList {
	usage := corev1.ResourceList{podCountName: *resource.NewQuantity(1, resource.DecimalSI)}
	if !podCharged(pod, now) {
		return usage
	}
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	limits := resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{})
	return quota.Add(usage, containerUsage(requests, limits))
}

// containerUsage turns requests and limits into quota names: pods 1, cpu and
// requests.cpu from the request, limits.cpu from the limit, and so for memory and
// ephemeral-storage; hugepages-<size> and requests.hugepages-<size> from a hugepages
// request; requests.<name> from the request of an extended resource.
func containerUsage(requests, limits corev1.ResourceList) corev1.ResourceList {
	out := corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)}
	for _, r := range []struct{ name, request, limit corev1.ResourceName }{
		{corev1.ResourceCPU, corev1.ResourceRequestsCPU, corev1.ResourceLimitsCPU},
		{corev1.ResourceMemory, corev1.ResourceRequestsMemory, corev1.ResourceLimitsMemory},
		{corev1.ResourceEphemeralStorage, corev1.ResourceRequestsEphemeralStorage, corev1.ResourceLimitsEphemeralStorage},
	} {
		if q, ok := requests[r.name]; ok {
			out[r.name] = q.DeepCopy()
			out[r.request] = q.DeepCopy()
		}
		if q, ok := limits[r.name]; ok {
			out[r.limit] = q.DeepCopy()
		}
	}
	for name, q := range requests {
		switch {
		case strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix):
			out[name] = q.DeepCopy()
			out[corev1.DefaultResourceRequestsPrefix+name] = q.DeepCopy()
		case extendedResource(name):
			out[corev1.DefaultResourceRequestsPrefix+name] = q.DeepCopy()
		}
	}
	return out
}

// podCharged: a pod counts against compute quota until it reaches a terminal phase, or
// stays past its deletion grace period (a lost node must not hold the quota).
func podCharged(pod *corev1.Pod, now time.Time) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return false
	}
	if pod.DeletionTimestamp != nil && pod.DeletionGracePeriodSeconds != nil {
		grace := time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
		if now.After(pod.DeletionTimestamp.Time.Add(grace)) {
			return false
		}
	}
	return true
}

// podMatchesScope says whether pod falls in the quota scope s.
func podMatchesScope(pod *corev1.Pod, s corev1.ScopedResourceSelectorRequirement) (bool, error) {
	switch s.ScopeName {
	case corev1.ResourceQuotaScopeTerminating:
		return pod.Spec.ActiveDeadlineSeconds != nil && *pod.Spec.ActiveDeadlineSeconds >= 0, nil
	case corev1.ResourceQuotaScopeNotTerminating:
		return pod.Spec.ActiveDeadlineSeconds == nil || *pod.Spec.ActiveDeadlineSeconds < 0, nil
	case corev1.ResourceQuotaScopeBestEffort:
		return bestEffort(pod), nil
	case corev1.ResourceQuotaScopeNotBestEffort:
		return !bestEffort(pod), nil
	case corev1.ResourceQuotaScopePriorityClass:
		return priorityClassMatches(pod.Spec.PriorityClassName, s)
	case corev1.ResourceQuotaScopeCrossNamespacePodAffinity:
		return crossNamespaceAffinity(pod), nil
	}
	return false, nil
}

// bestEffort: no container requests or limits cpu or memory.
func bestEffort(pod *corev1.Pod) bool {
	all := append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		for _, list := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := list[r]; ok {
					return false
				}
			}
		}
	}
	return true
}

// priorityClassMatches evaluates a PriorityClass scope selector as a label selector on
// the key PriorityClass; a pod without a class has no such label.
func priorityClassMatches(class string, s corev1.ScopedResourceSelectorRequirement) (bool, error) {
	ops := map[corev1.ScopeSelectorOperator]selection.Operator{
		corev1.ScopeSelectorOpIn: selection.In, corev1.ScopeSelectorOpNotIn: selection.NotIn,
		corev1.ScopeSelectorOpExists: selection.Exists, corev1.ScopeSelectorOpDoesNotExist: selection.DoesNotExist,
	}
	op, ok := ops[s.Operator]
	if !ok {
		return false, fmt.Errorf("%q is not a valid scope selector operator", s.Operator)
	}
	req, err := labels.NewRequirement(string(s.ScopeName), op, s.Values)
	if err != nil {
		return false, fmt.Errorf("failed to parse and convert selector: %w", err)
	}
	set := labels.Set{}
	if class != "" {
		set[string(s.ScopeName)] = class
	}
	return labels.NewSelector().Add(*req).Matches(set), nil
}

// crossNamespaceAffinity: a pod (anti-)affinity term reaches beyond the pod's namespace.
func crossNamespaceAffinity(pod *corev1.Pod) bool {
	a := pod.Spec.Affinity
	if a == nil {
		return false
	}
	var terms []corev1.PodAffinityTerm
	if a.PodAffinity != nil {
		terms = append(terms, a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	if a.PodAntiAffinity != nil {
		terms = append(terms, a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution...)
		for _, w := range a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution {
			terms = append(terms, w.PodAffinityTerm)
		}
	}
	for _, t := range terms {
		if len(t.Namespaces) > 0 || t.NamespaceSelector != nil {
			return true
		}
	}
	return false
}

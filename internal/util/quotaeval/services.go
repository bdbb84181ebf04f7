package quotaeval

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
)

var serviceCountName = generic.ObjectCountQuotaResourceNameFor(corev1.Resource("services"))

// serviceResources are the quota names the service evaluator charges.
var serviceResources = []corev1.ResourceName{
	serviceCountName, corev1.ResourceServices, corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers,
}

// serviceEvaluator charges services to quotas.
type serviceEvaluator struct {
	list generic.ListFuncByNamespace
}

var _ quota.Evaluator = (*serviceEvaluator)(nil)

func newServiceEvaluator(list generic.ListFuncByNamespace) *serviceEvaluator {
	return &serviceEvaluator{list: list}
}

func (s *serviceEvaluator) GroupResource() schema.GroupResource { return corev1.Resource("services") }

// Handles creates and updates: an update may change the service's type.
func (s *serviceEvaluator) Handles(a admission.Attributes) bool {
	op := a.GetOperation()
	return a.GetSubresource() == "" && (op == admission.Create || op == admission.Update)
}

func (s *serviceEvaluator) Constraints([]corev1.ResourceName, runtime.Object) error { return nil }

func (s *serviceEvaluator) Matches(rq *corev1.ResourceQuota, item runtime.Object) (bool, error) {
	return generic.Matches(rq, item, s.MatchingResources, noScopes)
}

func (s *serviceEvaluator) MatchingResources(input []corev1.ResourceName) []corev1.ResourceName {
	return quota.Intersection(input, serviceResources)
}

func (s *serviceEvaluator) MatchingScopes(runtime.Object, []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return nil, nil
}

func (s *serviceEvaluator) UncoveredQuotaScopes(limited, matched []corev1.ScopedResourceSelectorRequirement) ([]corev1.ScopedResourceSelectorRequirement, error) {
	return uncoveredScopes(limited, matched), nil
}

func (s *serviceEvaluator) Usage(item runtime.Object) (corev1.ResourceList, error) {
	svc, ok := item.(*corev1.Service)
	if !ok {
		return nil, fmt.Errorf("unexpected object %T, want a service", item)
	}
	return serviceUsage(svc), nil
}

func (s *serviceEvaluator) UsageStats(opts quota.UsageStatsOptions) (quota.UsageStats, error) {
	return generic.CalculateUsageStats(opts, s.list, noScopes, s.Usage)
}

// serviceUsage: every service counts once; a NodePort service takes a node port per
// port, a LoadBalancer one a load balancer and the node ports it will be given (only
// the ones it names when it asks for none to be allocated).
func serviceUsage(svc *corev1.Service) corev1.ResourceList {
	n := func(v int) resource.Quantity { return *resource.NewQuantity(int64(v), resource.DecimalSI) }
	out := corev1.ResourceList{serviceCountName: n(1), corev1.ResourceServices: n(1)}
	switch svc.Spec.Type {
	case corev1.ServiceTypeNodePort:
		out[corev1.ResourceServicesNodePorts] = n(len(svc.Spec.Ports))
	case corev1.ServiceTypeLoadBalancer:
		ports := len(svc.Spec.Ports)
		if svc.Spec.AllocateLoadBalancerNodePorts != nil && !*svc.Spec.AllocateLoadBalancerNodePorts {
			ports = 0
			for _, p := range svc.Spec.Ports {
				if p.NodePort != 0 {
					ports++
				}
			}
		}
		out[corev1.ResourceServicesNodePorts] = n(ports)
		out[corev1.ResourceServicesLoadBalancers] = n(1)
	}
	return out
}

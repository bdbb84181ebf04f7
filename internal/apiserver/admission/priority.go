package admission

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/admission"
)

// priority is the admission step upstream calls Priority: a new pod's spec.priority
// (and spec.preemptionPolicy) come from its spec.priorityClassName, and a pod may not
// state a priority of its own that differs. On update the pod keeps what it was given.
//
// The scheduling.k8s.io PriorityClass kind is not served yet, so the classes are the
// two built-in ones (builtinPriorityClasses) and a pod without a class gets 0. Serving
// the kind means: resolving the name through a PriorityClass lister instead (with the
// built-in classes created at bootstrap), taking the class marked globalDefault (the
// lowest one if several are) for pods without a class, and validating PriorityClass
// writes (only one globalDefault).
type priority struct {
	*admission.Handler
}

var _ admission.MutationInterface = (*priority)(nil)

// The built-in priority classes and the priority of a pod without a class.
const (
	systemNodeCritical    = "system-node-critical"
	systemClusterCritical = "system-cluster-critical"
	// systemCriticalPriority is the lowest priority of the system classes; user classes
	// stay below it.
	systemCriticalPriority = int32(2000000000)
	noClassPriority        = int32(0)
)

// builtinPriorityClasses are the classes every cluster has, by name.
var builtinPriorityClasses = map[string]int32{
	systemNodeCritical:    systemCriticalPriority + 1000,
	systemClusterCritical: systemCriticalPriority,
}

func newPriority() *priority {
	return &priority{Handler: admission.NewHandler(admission.Create, admission.Update)}
}

func (p *priority) Admit(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("pods") || a.GetSubresource() != "" {
		return nil
	}
	pod, ok := a.GetObject().(*corev1.Pod)
	if !ok {
		return apierrors.NewBadRequest("resource was marked with kind Pod but was unable to be converted")
	}
	if a.GetOperation() == admission.Update {
		if old, ok := a.GetOldObject().(*corev1.Pod); ok {
			keepPriority(pod, old)
		}
		return nil
	}
	if err := resolvePriority(pod); err != nil {
		return admission.NewForbidden(a, err)
	}
	return nil
}

// resolvePriority sets pod's priority and preemption policy from its class, or fails
// with the reason the pod is refused.
func resolvePriority(pod *corev1.Pod) error {
	value := noClassPriority
	if name := pod.Spec.PriorityClassName; name != "" {
		v, ok := builtinPriorityClasses[name]
		if !ok {
			return fmt.Errorf("no PriorityClass with name %v was found", name)
		}
		value = v
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority != value {
		return fmt.Errorf("the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *pod.Spec.Priority, value)
	}
	policy := corev1.PreemptLowerPriority
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != policy {
		return fmt.Errorf("the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name", *pod.Spec.PreemptionPolicy, policy)
	}
	pod.Spec.Priority = &value
	pod.Spec.PreemptionPolicy = &policy
	return nil
}

// keepPriority carries the priority and preemption policy the pod was given at
// creation over an update that leaves them out.
func keepPriority(pod, old *corev1.Pod) {
	if pod.Spec.Priority == nil {
		pod.Spec.Priority = old.Spec.Priority
	}
	if pod.Spec.PreemptionPolicy == nil {
		pod.Spec.PreemptionPolicy = old.Spec.PreemptionPolicy
	}
}

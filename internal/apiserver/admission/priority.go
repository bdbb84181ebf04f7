package admission

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
)

// priority is the admission step upstream calls Priority.
//
// Pods (mutating): a new pod's spec.priority and spec.preemptionPolicy come from the
// PriorityClass its spec.priorityClassName names; an unknown name is refused ("no
// PriorityClass with name X was found"). A pod without a class gets the class marked
// globalDefault (the one with the lowest value if a race left several), and its
// priorityClassName is set to it; with no default class it gets priority 0 and
// PreemptLowerPriority. A pod may not state a priority or preemption policy that differs
// from the computed one. An update that leaves them out keeps what the pod was given.
// The system classes (system-node-critical, system-cluster-critical) are ordinary
// PriorityClass objects created at start and may be used in any namespace.
//
// PriorityClasses (validating): a create, or an update that marks another class
// globalDefault, is refused while a class is already the default ("PriorityClass X is
// already marked as default. Only one default can exist").
//
// Classes are read from the shared informer's cache, which the plugin waits to be
// synced; a name the cache does not know yet is read from the API server before the
// pod is refused, and the single-default check lists the classes from the API server,
// so a class written a moment before is seen.
type priority struct {
	*admission.Handler
	classes schedulinglisters.PriorityClassLister
	client  kubernetes.Interface
}

var (
	_ admission.MutationInterface   = (*priority)(nil)
	_ admission.ValidationInterface = (*priority)(nil)
)

// noClassPriority is the priority of a pod without a class when no class is the default.
const noClassPriority = int32(0)

func newPriority(factory informers.SharedInformerFactory, client kubernetes.Interface) *priority {
	inf := factory.Scheduling().V1().PriorityClasses()
	p := &priority{Handler: admission.NewHandler(admission.Create, admission.Update, admission.Delete),
		classes: inf.Lister(), client: client}
	p.SetReadyFunc(inf.Informer().HasSynced)
	return p
}

func (p *priority) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("pods") || a.GetSubresource() != "" {
		return nil
	}
	switch a.GetOperation() {
	case admission.Create, admission.Update:
	default:
		return nil
	}
	pod, ok := a.GetObject().(*corev1.Pod)
	if !ok {
		return apierrors.NewBadRequest("resource was marked with kind Pod but was unable to be converted")
	}
	if a.GetOperation() == admission.Update {
		old, ok := a.GetOldObject().(*corev1.Pod)
		if !ok {
			return apierrors.NewBadRequest("resource was marked with kind Pod but was unable to be converted")
		}
		keepPriority(pod, old)
		return nil
	}
	if !p.WaitForReady() {
		return admission.NewForbidden(a, errors.New("not yet ready to handle request"))
	}
	var class *schedulingv1.PriorityClass
	if name := pod.Spec.PriorityClassName; name != "" {
		pc, err := p.class(ctx, name)
		if apierrors.IsNotFound(err) {
			return admission.NewForbidden(a, fmt.Errorf("no PriorityClass with name %v was found", name))
		}
		if err != nil {
			return fmt.Errorf("failed to get PriorityClass with name %s: %w", name, err)
		}
		class = pc
	} else {
		all, err := p.classes.List(labels.Everything())
		if err != nil {
			return fmt.Errorf("failed to get default priority class: %w", err)
		}
		class = defaultPriorityClass(all)
	}
	if err := resolvePriority(pod, class); err != nil {
		return admission.NewForbidden(a, err)
	}
	return nil
}

// class is the PriorityClass called name, from the cache or, when the cache does not
// have it (yet), from the API server.
func (p *priority) class(ctx context.Context, name string) (*schedulingv1.PriorityClass, error) {
	pc, err := p.classes.Get(name)
	if err == nil || !apierrors.IsNotFound(err) {
		return pc, err
	}
	return p.client.SchedulingV1().PriorityClasses().Get(ctx, name, metav1.GetOptions{})
}

func (p *priority) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != schedulingv1.Resource("priorityclasses") || a.GetSubresource() != "" {
		return nil
	}
	op := a.GetOperation()
	if op != admission.Create && op != admission.Update {
		return nil
	}
	pc, ok := a.GetObject().(*schedulingv1.PriorityClass)
	if !ok {
		return apierrors.NewBadRequest("resource was marked with kind PriorityClass but was unable to be converted")
	}
	if !pc.GlobalDefault {
		return nil
	}
	list, err := p.client.SchedulingV1().PriorityClasses().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("failed to get default priority class: %w", err)
	}
	all := make([]*schedulingv1.PriorityClass, 0, len(list.Items))
	for i := range list.Items {
		all = append(all, &list.Items[i])
	}
	if err := checkSingleDefault(pc, op == admission.Create, defaultPriorityClass(all)); err != nil {
		return admission.NewForbidden(a, err)
	}
	return nil
}

// defaultPriorityClass is the class pods without one get: the one marked globalDefault,
// the lowest of them if several are, or nil.
func defaultPriorityClass(classes []*schedulingv1.PriorityClass) *schedulingv1.PriorityClass {
	var def *schedulingv1.PriorityClass
	for _, pc := range classes {
		if pc.GlobalDefault && (def == nil || pc.Value < def.Value) {
			def = pc
		}
	}
	return def
}

// checkSingleDefault refuses pc, marked globalDefault, when another class (current) is
// the default already: any create, or an update of a class other than the default.
func checkSingleDefault(pc *schedulingv1.PriorityClass, create bool, current *schedulingv1.PriorityClass) error {
	if current == nil || (!create && current.Name == pc.Name) {
		return nil
	}
	return fmt.Errorf("PriorityClass %v is already marked as default. Only one default can exist", current.Name)
}

// resolvePriority sets a new pod's priority and preemption policy from class (the class
// it names, or the default class for a pod that names none; nil when there is no
// default), or fails with the reason the pod is refused. A pod that named no class gets
// the default class's name.
func resolvePriority(pod *corev1.Pod, class *schedulingv1.PriorityClass) error {
	value := noClassPriority
	policy := corev1.PreemptLowerPriority
	preemption := &policy
	if class != nil {
		value = class.Value
		preemption = class.PreemptionPolicy
		if pod.Spec.PriorityClassName == "" {
			pod.Spec.PriorityClassName = class.Name
		}
	}
	if pod.Spec.Priority != nil && *pod.Spec.Priority != value {
		return fmt.Errorf("the integer value of priority (%d) must not be provided in pod spec; priority admission controller computed %d from the given PriorityClass name", *pod.Spec.Priority, value)
	}
	pod.Spec.Priority = &value
	if preemption != nil {
		policy := *preemption
		if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy != policy {
			return fmt.Errorf("the string value of PreemptionPolicy (%s) must not be provided in pod spec; priority admission controller computed %s from the given PriorityClass name", *pod.Spec.PreemptionPolicy, policy)
		}
		pod.Spec.PreemptionPolicy = &policy
	}
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

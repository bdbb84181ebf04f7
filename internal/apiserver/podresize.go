package apiserver

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"

	"github.com/kubelab/kubelab/internal/util/podutil"
)

// newPodResizeREST serves pods/resize: a pod read whole, and an update (PUT or PATCH)
// that changes only the resources (and resize policies) of its containers and init
// containers, for the node's kubelet to apply to the running containers (in-place pod
// resize). Nothing else of the pod changes through it, and a plain pod update still may
// not change resources.
func newPodResizeREST(scheme *runtime.Scheme, r *resource, store *genericregistry.Store) *podSpecREST {
	return newPodSpecREST(store, podResizeStrategy{newStrategy(scheme, r)})
}

// podResizeStrategy keeps everything of the stored pod but its containers' resources and
// resize policies (metadata as a status write does), and starts a new generation when
// they changed. A request that adds, removes or renames containers is left as it is, for
// validation to refuse.
type podResizeStrategy struct{ strategy }

func (s podResizeStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	p, op := obj.(*corev1.Pod), old.(*corev1.Pod)
	if containers, ok := withResources(op.Spec.Containers, p.Spec.Containers); ok {
		if inits, ok := withResources(op.Spec.InitContainers, p.Spec.InitContainers); ok {
			podResources := p.Spec.Resources
			if podResources == nil {
				podResources = op.Spec.Resources // a client that does not know pod-level resources
			}
			p.Spec = *op.Spec.DeepCopy()
			p.Spec.Containers, p.Spec.InitContainers, p.Spec.Resources = containers, inits, podResources
		}
	}
	p.Status = *op.Status.DeepCopy()
	metav1.ResetObjectMetaForStatus(p, op)
	if !apiequality.Semantic.DeepEqual(p.Spec, op.Spec) {
		p.Generation = op.Generation + 1
	}
}

// withResources is a copy of old with the resources and resize policies of want, when
// want has the same containers by name and in order (ok false otherwise).
func withResources(old, want []corev1.Container) ([]corev1.Container, bool) {
	if len(old) != len(want) {
		return nil, false
	}
	if len(old) == 0 {
		return want, true
	}
	out := make([]corev1.Container, len(old))
	for i := range old {
		if old[i].Name != want[i].Name {
			return nil, false
		}
		out[i] = *old[i].DeepCopy()
		out[i].Resources, out[i].ResizePolicy = want[i].Resources, want[i].ResizePolicy
	}
	return out, true
}

func (s podResizeStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	p, op := obj.(*corev1.Pod), old.(*corev1.Pod)
	errs := apivalidation.ValidateObjectMetaUpdate(&p.ObjectMeta, &op.ObjectMeta, field.NewPath("metadata"))
	errs = append(errs, s.validateObject(p)...)
	return append(errs, validatePodResize(p, op)...)
}

// validatePodResize says whether pod may replace old through pods/resize, by
// kube-apiserver's rules: not a static or Windows pod; the same QoS class; on a node whose
// kubelet reports its containers' resources; no pod-level resources (kubelab's nodes do
// not apply them); the same containers in the same order; no request or limit removed;
// and only cpu and memory changed. A non-sidecar init container whose resize policy
// restarts it is not resized.
func validatePodResize(pod, old *corev1.Pod) field.ErrorList {
	if _, mirror := old.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "static pods cannot be resized")}
	}
	if old.Spec.OS != nil && old.Spec.OS.Name == corev1.Windows {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "windows pods cannot be resized")}
	}
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if podutil.QOSClass(old) != podutil.ComputeQOSClass(pod) {
		errs = append(errs, field.Invalid(spec, pod.Status.QOSClass, "Pod QOS Class may not change as a result of resizing"))
	}
	if !resizeSupported(old) {
		errs = append(errs, field.Forbidden(spec, "Pod running on node without support for resize"))
	}
	if hasPodLevelResources(old) || hasPodLevelResources(pod) {
		return append(errs, field.Forbidden(field.NewPath(""),
			"resize of pods with pod-level resources is forbidden when InPlacePodLevelResourcesVerticalScalingEnabled feature gate is disabled"))
	}
	if order := validateResizeContainerOrder(pod, old, spec); len(order) > 0 {
		return append(errs, order...)
	}
	for i := range old.Spec.InitContainers {
		errs = append(errs, validateResourcesKept(&pod.Spec.InitContainers[i].Resources, &old.Spec.InitContainers[i].Resources,
			spec.Child("initContainers").Index(i).Child("resources"))...)
	}
	for i := range old.Spec.Containers {
		errs = append(errs, validateResourcesKept(&pod.Spec.Containers[i].Resources, &old.Spec.Containers[i].Resources,
			spec.Child("containers").Index(i).Child("resources"))...)
	}
	rest := pod.Spec.DeepCopy()
	for i := range rest.Containers {
		keepCPUMemory(&rest.Containers[i], &old.Spec.Containers[i])
		if !apiequality.Semantic.DeepEqual(rest.Containers[i], old.Spec.Containers[i]) {
			errs = append(errs, field.Forbidden(spec, "only cpu and memory resources are mutable"))
		}
	}
	for i := range rest.InitContainers {
		c, oc := &rest.InitContainers[i], &old.Spec.InitContainers[i]
		changed := !apiequality.Semantic.DeepEqual(*c, *oc)
		keepCPUMemory(c, oc)
		if !apiequality.Semantic.DeepEqual(*c, *oc) {
			errs = append(errs, field.Forbidden(spec.Child("initContainers").Index(i), "only cpu and memory resources for init or sidecar containers are mutable"))
		}
		if changed && !isRestartableInit(c) {
			for _, p := range c.ResizePolicy {
				if p.RestartPolicy == corev1.RestartContainer {
					errs = append(errs, field.Forbidden(spec.Child("initContainers").Index(i),
						"non-sidecar init containers with a resize policy of RestartContainer cannot be resized"))
				}
			}
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if !apiequality.Semantic.DeepEqual(*rest, old.Spec) {
		errs = append(errs, field.Forbidden(spec, "only cpu and memory resources are mutable"))
	}
	return errs
}

// resizeSupported says whether the pod's node reports its containers' resources (the
// first running container's status has them), as a kubelet that resizes does; a pod with
// no running container may be resized.
func resizeSupported(pod *corev1.Pod) bool {
	for _, c := range pod.Status.ContainerStatuses {
		if c.State.Running != nil {
			return c.Resources != nil
		}
	}
	return true
}

func hasPodLevelResources(pod *corev1.Pod) bool {
	r := pod.Spec.Resources
	return r != nil && len(r.Requests)+len(r.Limits) > 0
}

func isRestartableInit(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// validateResizeContainerOrder: a resize adds, removes, renames or reorders no container.
func validateResizeContainerOrder(pod, old *corev1.Pod, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, l := range []struct {
		name     string
		now, was []corev1.Container
	}{{"containers", pod.Spec.Containers, old.Spec.Containers}, {"initContainers", pod.Spec.InitContainers, old.Spec.InitContainers}} {
		if len(l.now) != len(l.was) {
			errs = append(errs, field.Forbidden(spec.Child(l.name), l.name+" may not be added or removed on resize"))
			continue
		}
		for i := range l.was {
			if l.now[i].Name != l.was[i].Name {
				errs = append(errs, field.Forbidden(spec.Child(l.name).Index(i).Child("name"), l.name+" may not be renamed or reordered on resize"))
			}
		}
	}
	return errs
}

// validateResourcesKept: a resize removes no request nor limit a container had.
func validateResourcesKept(now, was *corev1.ResourceRequirements, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if resourcesRemoved(now.Requests, was.Requests) {
		errs = append(errs, field.Forbidden(p.Child("requests"), "resource requests cannot be removed"))
	}
	if resourcesRemoved(now.Limits, was.Limits) {
		errs = append(errs, field.Forbidden(p.Child("limits"), "resource limits cannot be removed"))
	}
	return errs
}

func resourcesRemoved(now, was corev1.ResourceList) bool {
	for name := range was {
		if _, ok := now[name]; !ok {
			return true
		}
	}
	return false
}

// keepCPUMemory sets c's cpu and memory requests and limits to old's, so that what is left
// to compare is what a resize may not change.
func keepCPUMemory(c, old *corev1.Container) {
	c.Resources.Requests = withCPUMemoryOf(c.Resources.Requests, old.Resources.Requests)
	c.Resources.Limits = withCPUMemoryOf(c.Resources.Limits, old.Resources.Limits)
}

func withCPUMemoryOf(list, old corev1.ResourceList) corev1.ResourceList {
	if list == nil && old == nil {
		return nil
	}
	out := corev1.ResourceList{}
	for name, q := range list {
		if name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			out[name] = q
		}
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if q, ok := old[name]; ok {
			out[name] = q
		}
	}
	return out
}

package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// podResizeValidator is the admission step upstream calls PodResizeValidator: a resize
// (an update of pods/resize that starts a new generation) of a pod bound to a node is
// refused when the node is not a Linux one (cause UnsupportedPlatform) or when the pod
// would request more cpu or memory than the node's allocatable (cause NodeCapacity): no
// kubelet could ever grant it. Whether the node has room next to its other pods is the
// kubelet's decision.
type podResizeValidator struct {
	*admission.Handler
	nodes corelisters.NodeLister
}

var _ admission.ValidationInterface = (*podResizeValidator)(nil)

// The causes upstream's plugin adds to its Forbidden errors.
const (
	causeNodeCapacity        metav1.CauseType = "NodeCapacity"
	causeUnsupportedPlatform metav1.CauseType = "UnsupportedPlatform"
)

func newPodResizeValidator(factory informers.SharedInformerFactory) *podResizeValidator {
	inf := factory.Core().V1().Nodes()
	p := &podResizeValidator{Handler: admission.NewHandler(admission.Update), nodes: inf.Lister()}
	p.SetReadyFunc(inf.Informer().HasSynced)
	return p
}

func (p *podResizeValidator) Validate(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("pods") || a.GetSubresource() != "resize" {
		return nil
	}
	pod, ok1 := a.GetObject().(*corev1.Pod)
	old, ok2 := a.GetOldObject().(*corev1.Pod)
	if !ok1 || !ok2 || pod.Spec.NodeName == "" || pod.Generation == old.Generation {
		return nil
	}
	if !p.WaitForReady() {
		return admission.NewForbidden(a, errors.New("not yet ready to handle request"))
	}
	node, err := p.nodes.Get(pod.Spec.NodeName)
	if apierrors.IsNotFound(err) {
		return admission.NewForbidden(a, fmt.Errorf("node %q not found", pod.Spec.NodeName))
	}
	if err != nil {
		return admission.NewForbidden(a, fmt.Errorf("failed to get node %q: %w", pod.Spec.NodeName, err))
	}
	cause, err := resizeOnNode(pod, node)
	if err == nil {
		return nil
	}
	forbidden := admission.NewForbidden(a, err)
	var status *apierrors.StatusError
	if errors.As(forbidden, &status) && status.ErrStatus.Details != nil {
		status.ErrStatus.Details.Causes = append(status.ErrStatus.Details.Causes, metav1.StatusCause{Type: cause})
		return status
	}
	return forbidden
}

// resizeOnNode says why pod, at its new resources, can never run on node (with the cause
// of the refusal), or nil when it could: the node runs Linux (or does not say) and its
// allocatable cpu and memory cover the pod's requests.
func resizeOnNode(pod *corev1.Pod, node *corev1.Node) (metav1.CauseType, error) {
	if os, ok := node.Labels[corev1.LabelOSStable]; ok && os != "linux" {
		return causeUnsupportedPlatform, fmt.Errorf("pod resize is only supported on linux nodes, node %q is %q", node.Name, os)
	}
	requests := resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{})
	cpu, mem := requests[corev1.ResourceCPU], requests[corev1.ResourceMemory]
	allocCPU, allocMem := node.Status.Allocatable.Cpu(), node.Status.Allocatable.Memory()
	var msg []string
	if cpu.Cmp(*allocCPU) > 0 {
		msg = append(msg, fmt.Sprintf("cpu, requested: %d, allocatable: %d", cpu.MilliValue(), allocCPU.MilliValue()))
	}
	if mem.Cmp(*allocMem) > 0 {
		msg = append(msg, fmt.Sprintf("memory, requested: %d, allocatable: %d", mem.Value(), allocMem.Value()))
	}
	if len(msg) > 0 {
		return causeNodeCapacity, fmt.Errorf("node didn't have enough allocatable resources: %s", strings.Join(msg, "; "))
	}
	return "", nil
}

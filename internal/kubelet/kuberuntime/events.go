package kuberuntime

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Event reasons, as kubectl describe shows them.
const (
	eventPulling                = "Pulling"
	eventPulled                 = "Pulled"
	eventFailed                 = "Failed"
	eventBackOff                = "BackOff"
	eventInspectFailed          = "InspectFailed"
	eventErrImageNeverPull      = "ErrImageNeverPull"
	eventCreated                = "Created"
	eventStarted                = "Started"
	eventKilling                = "Killing"
	eventSandboxChanged         = "SandboxChanged"
	eventFailedCreatePodSandBox = "FailedCreatePodSandBox"

	eventFailedToRetrieveImagePullSecret = "FailedToRetrieveImagePullSecret"
)

// podRef is the event's object: the pod (objects from informers carry no kind).
func podRef(pod *corev1.Pod) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, Namespace: pod.Namespace,
		UID: pod.UID, ResourceVersion: pod.ResourceVersion}
}

// containerRef is the pod with the container's field path (spec.containers{name} or
// spec.initContainers{name}).
func containerRef(pod *corev1.Pod, name string) *corev1.ObjectReference {
	ref := podRef(pod)
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			ref.FieldPath = fmt.Sprintf("spec.initContainers{%s}", name)
			return ref
		}
	}
	ref.FieldPath = fmt.Sprintf("spec.containers{%s}", name)
	return ref
}

func (r *Runtime) event(pod *corev1.Pod, container, eventType, reason, format string, args ...any) {
	if r.cfg.Recorder == nil || pod == nil || pod.Name == "" {
		return
	}
	ref := podRef(pod)
	if container != "" {
		ref = containerRef(pod, container)
	}
	r.cfg.Recorder.Eventf(ref, eventType, reason, format, args...)
}

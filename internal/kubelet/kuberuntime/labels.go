package kuberuntime

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// Labels and annotations on sandboxes and containers: they let the runtime find a pod's
// objects again (by pod UID) and carry what the status needs (restart count, spec hash,
// termination message path) across kubelet restarts.
const (
	labelPodName       = "io.kubernetes.pod.name"
	labelPodNamespace  = "io.kubernetes.pod.namespace"
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"

	annotationHash                     = "io.kubernetes.container.hash"
	annotationRestartCount             = "io.kubernetes.container.restartCount"
	annotationTerminationMessagePath   = "io.kubernetes.container.terminationMessagePath"
	annotationTerminationMessagePolicy = "io.kubernetes.container.terminationMessagePolicy"
	annotationTerminationGracePeriod   = "io.kubernetes.pod.terminationGracePeriod"
	annotationPorts                    = "io.kubernetes.container.ports"
	// annotationType says whether a container is an init container, a sidecar (an init
	// container with restartPolicy Always) or an app container, so that KillPod can stop
	// them in order when it only knows the pod's UID.
	annotationType = "kubelab.io/container-type"
)

// containerType is the role of a container in its pod.
type containerType string

const (
	typeInit    containerType = "init"
	typeSidecar containerType = "sidecar"
	typeApp     containerType = "container"
)

// isSidecar says whether an init container is a sidecar (restartPolicy Always).
func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

func initType(c *corev1.Container) containerType {
	if isSidecar(c) {
		return typeSidecar
	}
	return typeInit
}

// containerHash is a hash of the container's spec but its resources: a running container
// whose hash differs from its spec's was created from an older spec (e.g. before an image
// change) and is recreated; new resources are applied in place (resize.go).
func containerHash(c *corev1.Container) string {
	withoutResources := *c
	withoutResources.Resources = corev1.ResourceRequirements{}
	b, err := json.Marshal(&withoutResources)
	if err != nil { // a corev1.Container always marshals
		panic(fmt.Sprintf("marshal container %s: %v", c.Name, err))
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	return strconv.FormatUint(h.Sum64(), 16)
}

func sandboxLabels(pod *corev1.Pod) map[string]string {
	out := make(map[string]string, len(pod.Labels)+3)
	for k, v := range pod.Labels {
		out[k] = v
	}
	out[labelPodName], out[labelPodNamespace], out[labelPodUID] = pod.Name, pod.Namespace, string(pod.UID)
	return out
}

func containerLabels(pod *corev1.Pod, c *corev1.Container) map[string]string {
	return map[string]string{
		labelPodName: pod.Name, labelPodNamespace: pod.Namespace, labelPodUID: string(pod.UID),
		labelContainerName: c.Name,
	}
}

func containerAnnotations(pod *corev1.Pod, c *corev1.Container, t containerType, restartCount uint32) map[string]string {
	out := map[string]string{
		annotationHash:                     containerHash(c),
		annotationRestartCount:             strconv.FormatUint(uint64(restartCount), 10),
		annotationTerminationMessagePath:   c.TerminationMessagePath,
		annotationTerminationMessagePolicy: string(c.TerminationMessagePolicy),
		annotationType:                     string(t),
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		out[annotationTerminationGracePeriod] = strconv.FormatInt(*g, 10)
	}
	if len(c.Ports) > 0 {
		if b, err := json.Marshal(c.Ports); err == nil {
			out[annotationPorts] = string(b)
		}
	}
	return out
}

// podFullName is how messages name a pod: name_namespace(uid).
func podFullName(pod *corev1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

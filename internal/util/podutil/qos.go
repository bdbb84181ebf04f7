package podutil

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/kubectl/pkg/util/qos"
)

// QOSClass is the pod's quality-of-service class: its status' when set, else
// ComputeQOSClass.
func QOSClass(pod *corev1.Pod) corev1.PodQOSClass {
	if pod.Status.QOSClass != "" {
		return pod.Status.QOSClass
	}
	return ComputeQOSClass(pod)
}

// ComputeQOSClass is the pod's quality-of-service class from its spec: BestEffort when no
// container asks for or limits cpu or memory, Guaranteed when every container limits
// both and asks for what it limits, Burstable otherwise. A limit without a request counts
// as a request of the limit, as the API server's defaulting makes it.
func ComputeQOSClass(pod *corev1.Pod) corev1.PodQOSClass {
	return qos.ComputePodQOS(withDefaultRequests(pod))
}

// withDefaultRequests is pod, copied where it changes, with each container's missing
// requests set to its limits.
func withDefaultRequests(pod *corev1.Pod) *corev1.Pod {
	if !missesRequests(pod.Spec.InitContainers) && !missesRequests(pod.Spec.Containers) {
		return pod
	}
	out := pod.DeepCopy()
	for _, cs := range [][]corev1.Container{out.Spec.InitContainers, out.Spec.Containers} {
		for i := range cs {
			r := &cs[i].Resources
			for name, q := range r.Limits {
				if _, ok := r.Requests[name]; !ok {
					if r.Requests == nil {
						r.Requests = corev1.ResourceList{}
					}
					r.Requests[name] = q.DeepCopy()
				}
			}
		}
	}
	return out
}

func missesRequests(cs []corev1.Container) bool {
	for _, c := range cs {
		for name := range c.Resources.Limits {
			if _, ok := c.Resources.Requests[name]; !ok {
				return true
			}
		}
	}
	return false
}

package endpointutil

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// PodServes says whether pod can back a Service at all: it has an IP and has not
// finished (Succeeded or Failed). Whether it is ready or terminating is the caller's.
func PodServes(pod *corev1.Pod) bool {
	return (pod.Status.PodIP != "" || len(pod.Status.PodIPs) > 0) &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// Protocol is the protocol of Service port sp, TCP when unset.
func Protocol(sp *corev1.ServicePort) corev1.Protocol {
	if sp.Protocol == "" {
		return corev1.ProtocolTCP
	}
	return sp.Protocol
}

// TargetPort resolves Service port sp's targetPort for pod: a number as is, a name
// through the pod's container ports of the same protocol, unset as the Service port
// itself. It reports false when a named port is not on the pod.
func TargetPort(pod *corev1.Pod, sp *corev1.ServicePort) (int32, bool) {
	tp := sp.TargetPort
	switch {
	case tp.Type == intstr.String && tp.StrVal != "":
		for _, c := range pod.Spec.Containers {
			for _, cp := range c.Ports {
				proto := cp.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				if cp.Name == tp.StrVal && proto == Protocol(sp) {
					return cp.ContainerPort, true
				}
			}
		}
		return 0, false
	case tp.Type == intstr.Int && tp.IntVal != 0:
		return tp.IntVal, true
	}
	return sp.Port, true
}

// Hostname is the hostname pod publishes in svc's endpoints: its spec.hostname when
// its spec.subdomain names svc (in the same namespace), else "".
func Hostname(pod *corev1.Pod, svc *corev1.Service) string {
	if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name && pod.Namespace == svc.Namespace {
		return pod.Spec.Hostname
	}
	return ""
}

// Package hostport holds the rule by which pods' hostPorts on one node conflict, which the
// scheduler (NodePorts), the kubelet (its admission of a pod) and the CNI plugin (its
// port mappings) share: two hostPorts conflict when they have the same protocol and port
// and either one is on every address of the node (hostIP empty or 0.0.0.0) or both are on
// the same address. The same port with another protocol, or on two different addresses,
// is no conflict.
//
// It is a leaf: it imports no kubelab component.
package hostport

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// anyAddress is how upstream writes the hostIP of a hostPort on every address.
const anyAddress = "0.0.0.0"

// Port is one hostPort held on a node.
type Port struct {
	// IP is the host address ("" for every address of the node).
	IP string
	// Protocol is TCP, UDP or SCTP.
	Protocol corev1.Protocol
	Port     int32
}

// New is the hostPort port/protocol on ip, normalized: hostIP 0.0.0.0 is "", the protocol
// upper case, TCP when empty.
func New(ip, protocol string, port int32) Port {
	if ip == anyAddress {
		ip = ""
	}
	p := corev1.Protocol(strings.ToUpper(protocol))
	if p == "" {
		p = corev1.ProtocolTCP
	}
	return Port{IP: ip, Protocol: p, Port: port}
}

// String is "[ip:]port/protocol".
func (p Port) String() string {
	if p.IP == "" {
		return fmt.Sprintf("%d/%s", p.Port, p.Protocol)
	}
	return fmt.Sprintf("%s:%d/%s", p.IP, p.Port, p.Protocol)
}

// Conflict says whether a and b cannot both be held on one node.
func Conflict(a, b Port) bool {
	return a.Port == b.Port && a.Protocol == b.Protocol && (a.IP == "" || b.IP == "" || a.IP == b.IP)
}

// OfPod is the hostPorts of pod: the ports with a hostPort of its containers and of its
// sidecars (init containers with restartPolicy Always, which run as long as the pod).
func OfPod(pod *corev1.Pod) []Port {
	var out []Port
	add := func(c corev1.Container) {
		for _, p := range c.Ports {
			if p.HostPort > 0 {
				out = append(out, New(p.HostIP, string(p.Protocol), p.HostPort))
			}
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(c)
		}
	}
	for _, c := range pod.Spec.Containers {
		add(c)
	}
	return out
}

// Taken lists the ports of want that conflict with one of used.
func Taken(want, used []Port) []Port {
	var out []Port
	for _, w := range want {
		for _, u := range used {
			if Conflict(w, u) {
				out = append(out, w)
				break
			}
		}
	}
	return out
}

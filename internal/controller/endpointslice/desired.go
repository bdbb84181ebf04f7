package endpointslice

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"
)

// Upstream names.
const (
	ControllerName        = "endpointslice-controller.k8s.io"
	EndpointsManagedBy    = "endpoints.kubernetes.io/managed-by"
	EndpointsControllerID = "endpoint-controller"
	OverCapacity          = "endpoints.kubernetes.io/over-capacity"
	HeadlessLabel         = "service.kubernetes.io/headless"
	maxEndpointsAddresses = 1000
)

// group is the endpoints of one port set and address type: one or more slices.
type group struct {
	addressType discoveryv1.AddressType
	ports       []discoveryv1.EndpointPort
	endpoints   []discoveryv1.Endpoint
}

// key identifies a group: address type and ports.
func (g *group) key() string { return groupKey(g.addressType, g.ports) }

func groupKey(t discoveryv1.AddressType, ports []discoveryv1.EndpointPort) string {
	var b strings.Builder
	b.WriteString(string(t))
	for _, p := range ports {
		fmt.Fprintf(&b, "|%s/%s/%d/%s", ptr.Deref(p.Name, ""), ptr.Deref(p.Protocol, ""), ptr.Deref(p.Port, 0), ptr.Deref(p.AppProtocol, ""))
	}
	return b.String()
}

// podInEndpoints says whether a pod can back a Service at all: it has an IP and has
// not finished.
func podInEndpoints(p *corev1.Pod) bool {
	return p.Status.PodIP != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// findPort resolves a Service port's targetPort for pod: a number as is, a name through
// the pod's container ports of the same protocol.
func findPort(pod *corev1.Pod, sp *corev1.ServicePort) (int32, bool) {
	tp := sp.TargetPort
	switch {
	case tp.Type == intstr.String && tp.StrVal != "":
		for _, c := range pod.Spec.Containers {
			for _, cp := range c.Ports {
				proto := cp.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				if cp.Name == tp.StrVal && proto == protocolOf(sp) {
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

func protocolOf(sp *corev1.ServicePort) corev1.Protocol {
	if sp.Protocol == "" {
		return corev1.ProtocolTCP
	}
	return sp.Protocol
}

// podPorts are the Service's ports as resolved for pod.
func podPorts(svc *corev1.Service, pod *corev1.Pod) []discoveryv1.EndpointPort {
	var out []discoveryv1.EndpointPort
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		n, ok := findPort(pod, sp)
		if !ok {
			continue
		}
		out = append(out, discoveryv1.EndpointPort{Name: ptr.To(sp.Name), Protocol: ptr.To(protocolOf(sp)), Port: ptr.To(n), AppProtocol: sp.AppProtocol})
	}
	return out
}

// addressType says which slice family an IP belongs to.
func addressType(ip string) (discoveryv1.AddressType, bool) {
	a, err := netip.ParseAddr(ip)
	if err != nil {
		return "", false
	}
	if a.Is4() {
		return discoveryv1.AddressTypeIPv4, true
	}
	return discoveryv1.AddressTypeIPv6, true
}

// desiredGroups computes the endpoints of svc from pods: one group per address type and
// resolved port set, endpoints sorted by address. zones maps node name → zone.
func desiredGroups(svc *corev1.Service, pods []*corev1.Pod, zones map[string]string) []*group {
	groups := map[string]*group{}
	for _, pod := range pods {
		if !podInEndpoints(pod) {
			continue
		}
		ports := podPorts(svc, pod)
		ready := podutils.IsPodReady(pod)
		terminating := pod.DeletionTimestamp != nil
		ips := []string{pod.Status.PodIP}
		if len(pod.Status.PodIPs) > 0 {
			ips = nil
			for _, ip := range pod.Status.PodIPs {
				ips = append(ips, ip.IP)
			}
		}
		for _, ip := range ips {
			at, ok := addressType(ip)
			if !ok {
				continue
			}
			ep := discoveryv1.Endpoint{
				Addresses: []string{ip},
				Conditions: discoveryv1.EndpointConditions{
					Ready:       ptr.To(svc.Spec.PublishNotReadyAddresses || (ready && !terminating)),
					Serving:     ptr.To(svc.Spec.PublishNotReadyAddresses || ready),
					Terminating: ptr.To(terminating),
				},
				TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
			}
			if pod.Spec.NodeName != "" {
				ep.NodeName = ptr.To(pod.Spec.NodeName)
				if z := zones[pod.Spec.NodeName]; z != "" {
					ep.Zone = ptr.To(z)
				}
			}
			if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name {
				ep.Hostname = ptr.To(pod.Spec.Hostname)
			}
			k := groupKey(at, ports)
			g := groups[k]
			if g == nil {
				g = &group{addressType: at, ports: ports}
				groups[k] = g
			}
			g.endpoints = append(g.endpoints, ep)
		}
	}
	var out []*group
	for _, g := range groups {
		sort.Slice(g.endpoints, func(i, j int) bool { return g.endpoints[i].Addresses[0] < g.endpoints[j].Addresses[0] })
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key() < out[j].key() })
	return out
}

// chunk splits endpoints into slices of at most n.
func chunk(eps []discoveryv1.Endpoint, n int) [][]discoveryv1.Endpoint {
	var out [][]discoveryv1.Endpoint
	for len(eps) > n {
		out = append(out, eps[:n])
		eps = eps[n:]
	}
	if len(eps) > 0 {
		out = append(out, eps)
	}
	return out
}

// desiredSubsets is the core/v1 Endpoints content for svc: ready pods in addresses,
// not-ready ones in notReadyAddresses, terminating ones left out (unless
// publishNotReadyAddresses), grouped by resolved ports. It reports whether it had to
// truncate to maxEndpointsAddresses.
func desiredSubsets(svc *corev1.Service, pods []*corev1.Pod) ([]corev1.EndpointSubset, bool) {
	type sub struct {
		ports           []corev1.EndpointPort
		ready, notReady []corev1.EndpointAddress
	}
	subs := map[string]*sub{}
	total := 0
	truncated := false
	for _, pod := range pods {
		if !podInEndpoints(pod) {
			continue
		}
		if pod.DeletionTimestamp != nil && !svc.Spec.PublishNotReadyAddresses {
			continue
		}
		var ports []corev1.EndpointPort
		var key strings.Builder
		for i := range svc.Spec.Ports {
			sp := &svc.Spec.Ports[i]
			n, ok := findPort(pod, sp)
			if !ok {
				continue
			}
			ports = append(ports, corev1.EndpointPort{Name: sp.Name, Port: n, Protocol: protocolOf(sp), AppProtocol: sp.AppProtocol})
			fmt.Fprintf(&key, "|%s/%s/%d", sp.Name, protocolOf(sp), n)
		}
		if len(svc.Spec.Ports) > 0 && len(ports) == 0 {
			continue
		}
		addr := corev1.EndpointAddress{IP: pod.Status.PodIP,
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}
		if pod.Spec.NodeName != "" {
			addr.NodeName = ptr.To(pod.Spec.NodeName)
		}
		if pod.Spec.Hostname != "" && pod.Spec.Subdomain == svc.Name {
			addr.Hostname = pod.Spec.Hostname
		}
		if total >= maxEndpointsAddresses {
			truncated = true
			continue
		}
		total++
		s := subs[key.String()]
		if s == nil {
			s = &sub{ports: ports}
			subs[key.String()] = s
		}
		if svc.Spec.PublishNotReadyAddresses || podutils.IsPodReady(pod) {
			s.ready = append(s.ready, addr)
		} else {
			s.notReady = append(s.notReady, addr)
		}
	}
	keys := make([]string, 0, len(subs))
	for k := range subs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []corev1.EndpointSubset
	byIP := func(a []corev1.EndpointAddress) {
		sort.Slice(a, func(i, j int) bool { return a[i].IP < a[j].IP })
	}
	for _, k := range keys {
		s := subs[k]
		byIP(s.ready)
		byIP(s.notReady)
		out = append(out, corev1.EndpointSubset{Addresses: s.ready, NotReadyAddresses: s.notReady, Ports: s.ports})
	}
	return out, truncated
}

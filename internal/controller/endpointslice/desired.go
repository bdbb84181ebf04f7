package endpointslice

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/util/endpointutil"
)

// ControllerName is the managed-by label value of the slices this controller keeps, as
// upstream's.
const ControllerName = "endpointslice-controller.k8s.io"

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

// podPorts are the Service's ports as resolved for pod.
func podPorts(svc *corev1.Service, pod *corev1.Pod) []discoveryv1.EndpointPort {
	var out []discoveryv1.EndpointPort
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		n, ok := endpointutil.TargetPort(pod, sp)
		if !ok {
			continue
		}
		out = append(out, discoveryv1.EndpointPort{Name: ptr.To(sp.Name), Protocol: ptr.To(endpointutil.Protocol(sp)), Port: ptr.To(n), AppProtocol: sp.AppProtocol})
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
		if !endpointutil.PodServes(pod) {
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
			if h := endpointutil.Hostname(pod, svc); h != "" {
				ep.Hostname = ptr.To(h)
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

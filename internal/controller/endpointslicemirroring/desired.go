package endpointslicemirroring

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

// Upstream names.
const (
	// ControllerName is the managed-by label value of the slices this controller keeps.
	ControllerName = "endpointslicemirroring-controller.k8s.io"
	// EventSource is the component its Events come from.
	EventSource = "endpoint-slice-mirroring-controller"
)

// group is the mirrored endpoints of one address family and port set: one slice.
type group struct {
	addressType discoveryv1.AddressType
	ports       []discoveryv1.EndpointPort
	endpoints   []discoveryv1.Endpoint
}

func (g *group) key() string { return groupKey(g.addressType, g.ports) }

// groupKey identifies a group: address type and ports, in order.
func groupKey(t discoveryv1.AddressType, ports []discoveryv1.EndpointPort) string {
	var b strings.Builder
	b.WriteString(string(t))
	for _, p := range ports {
		fmt.Fprintf(&b, "|%s/%s/%d/%s", ptr.Deref(p.Name, ""), ptr.Deref(p.Protocol, ""), ptr.Deref(p.Port, 0), ptr.Deref(p.AppProtocol, ""))
	}
	return b.String()
}

// mirrored says whether ep is to be mirrored at all (its Service is checked apart).
func mirrored(ep *corev1.Endpoints) bool {
	if ep.Labels[discoveryv1.LabelSkipMirror] == "true" {
		return false
	}
	_, lock := ep.Annotations[resourcelock.LeaderElectionRecordAnnotationKey]
	return !lock
}

// slicePorts are the EndpointSlice ports of an Endpoints subset, in a canonical order.
func slicePorts(ports []corev1.EndpointPort) []discoveryv1.EndpointPort {
	out := make([]discoveryv1.EndpointPort, 0, len(ports))
	for _, p := range ports {
		out = append(out, discoveryv1.EndpointPort{Name: ptr.To(p.Name), Port: ptr.To(p.Port), Protocol: ptr.To(p.Protocol), AppProtocol: p.AppProtocol})
	}
	sort.Slice(out, func(i, j int) bool { return groupKey("", out[i:i+1]) < groupKey("", out[j:j+1]) })
	return out
}

// mirror is what desiredGroups makes of an Endpoints: its groups, and how many
// addresses were skipped as not being IPs or beyond the per-subset cap.
type mirror struct {
	groups           []*group
	invalid, overCap int
}

// desiredGroups computes the slices that mirror ep, at most maxPerSubset addresses of
// each subset.
func desiredGroups(ep *corev1.Endpoints, maxPerSubset int) mirror {
	var m mirror
	groups := map[string]*group{}
	index := map[string]map[string]int{} // group key → address → index in endpoints
	add := func(ports []discoveryv1.EndpointPort, a corev1.EndpointAddress, ready bool) bool {
		ip, err := netip.ParseAddr(a.IP)
		if err != nil {
			return false
		}
		at := discoveryv1.AddressTypeIPv4
		if ip.Is6() && !ip.Is4In6() {
			at = discoveryv1.AddressTypeIPv6
		}
		ip = ip.Unmap()
		k := groupKey(at, ports)
		g := groups[k]
		if g == nil {
			g = &group{addressType: at, ports: ports}
			groups[k] = g
			index[k] = map[string]int{}
		}
		e := discoveryv1.Endpoint{Addresses: []string{ip.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)},
			NodeName: a.NodeName}
		if a.TargetRef != nil {
			e.TargetRef = a.TargetRef.DeepCopy()
		}
		if a.Hostname != "" {
			e.Hostname = ptr.To(a.Hostname)
		}
		if i, seen := index[k][ip.String()]; seen {
			if ready { // listed as ready somewhere: ready
				g.endpoints[i] = e
			}
			return true
		}
		index[k][ip.String()] = len(g.endpoints)
		g.endpoints = append(g.endpoints, e)
		return true
	}
	for _, s := range ep.Subsets {
		ports := slicePorts(s.Ports)
		taken := 0
		for _, list := range []struct {
			addrs []corev1.EndpointAddress
			ready bool
		}{{s.Addresses, true}, {s.NotReadyAddresses, false}} {
			for _, a := range list.addrs {
				if taken >= maxPerSubset {
					m.overCap++
					continue
				}
				if !add(ports, a, list.ready) {
					m.invalid++
					continue
				}
				taken++
			}
		}
	}
	for _, g := range groups {
		sort.Slice(g.endpoints, func(i, j int) bool { return g.endpoints[i].Addresses[0] < g.endpoints[j].Addresses[0] })
		m.groups = append(m.groups, g)
	}
	sort.Slice(m.groups, func(i, j int) bool { return m.groups[i].key() < m.groups[j].key() })
	return m
}

// sliceLabels are the labels of ep's mirrored slices.
func sliceLabels(ep *corev1.Endpoints) map[string]string {
	l := make(map[string]string, len(ep.Labels)+2)
	for k, v := range ep.Labels {
		l[k] = v
	}
	l[discoveryv1.LabelServiceName] = ep.Name
	l[discoveryv1.LabelManagedBy] = ControllerName
	return l
}

// sliceAnnotations are the annotations of ep's mirrored slices: ep's, but the trigger
// time and kubectl's last applied configuration.
func sliceAnnotations(ep *corev1.Endpoints) map[string]string {
	a := map[string]string{}
	for k, v := range ep.Annotations {
		if k == corev1.EndpointsLastChangeTriggerTime || k == corev1.LastAppliedConfigAnnotation {
			continue
		}
		a[k] = v
	}
	return a
}

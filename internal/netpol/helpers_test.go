package netpol

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func mkPod(ns, name, node, ip string, lbl map[string]string, ports ...corev1.ContainerPort) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbl},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "busybox", Ports: ports}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}}},
	}
}

func mkNS(name string, lbl map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbl}}
}

func cport(name string, proto corev1.Protocol, n int32) corev1.ContainerPort {
	return corev1.ContainerPort{Name: name, Protocol: proto, ContainerPort: n}
}

func sel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func lbl(kv ...string) map[string]string { return sel(kv...).MatchLabels }

func mkPolicy(ns, name string, podSel *metav1.LabelSelector, types ...networkingv1.PolicyType) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       networkingv1.NetworkPolicySpec{PodSelector: *podSel, PolicyTypes: types},
	}
}

func withIngress(np *networkingv1.NetworkPolicy, rules ...networkingv1.NetworkPolicyIngressRule) *networkingv1.NetworkPolicy {
	np.Spec.Ingress = append(np.Spec.Ingress, rules...)
	return np
}

func withEgress(np *networkingv1.NetworkPolicy, rules ...networkingv1.NetworkPolicyEgressRule) *networkingv1.NetworkPolicy {
	np.Spec.Egress = append(np.Spec.Egress, rules...)
	return np
}

func podPeer(s *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{PodSelector: s}
}

func nsPeer(s *metav1.LabelSelector) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{NamespaceSelector: s}
}

func blockPeer(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

func numPort(proto corev1.Protocol, port int32) networkingv1.NetworkPolicyPort {
	p := intstr.FromInt32(port)
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &p}
}

func rangePort(proto corev1.Protocol, port, end int32) networkingv1.NetworkPolicyPort {
	p := numPort(proto, port)
	p.EndPort = &end
	return p
}

func namedPolicyPort(proto corev1.Protocol, name string) networkingv1.NetworkPolicyPort {
	p := intstr.FromString(name)
	return networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &p}
}

func protoOnly(proto corev1.Protocol) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: &proto}
}

// allowed evaluates the model the way the rendered table does for a new connection from
// src to dst: the sender's egress chain (when it is an isolated pod of the node), then
// the receiver's ingress chain.
func allowed(d *Desired, src, dst string, proto corev1.Protocol, port int32) bool {
	s, t := netip.MustParseAddr(src), netip.MustParseAddr(dst)
	if s == t { // a pod reaching itself through a Service
		return true
	}
	for _, pp := range d.Pods {
		if pp.Addr == s && pp.Egress != nil && !isolationAllows(d, Egress, pp.Egress, t, t, proto, port) {
			return false
		}
	}
	for _, pp := range d.Pods {
		if pp.Addr == t && pp.Ingress != nil && !isolationAllows(d, Ingress, pp.Ingress, s, t, proto, port) {
			return false
		}
	}
	return true
}

func isolationAllows(d *Desired, dir Direction, iso *Isolation, peer, dst netip.Addr, proto corev1.Protocol, port int32) bool {
	for _, a := range iso.Allows {
		p := d.Peers[a.Rule]
		if p == nil {
			continue
		}
		peerOK := p.Any || p.Selects && slices.Contains(p.Pods, peer)
		for _, b := range p.Blocks {
			peerOK = peerOK || b.Contains(peer)
		}
		portOK := a.AnyPort
		for _, pt := range a.Ports {
			end := pt.EndPort
			if end == 0 {
				end = pt.Port
			}
			if pt.Protocol == proto && (pt.Port == 0 || port >= pt.Port && port <= end) {
				portOK = true
			}
		}
		if peerOK && portOK {
			return true
		}
		if a.Named && dir == Egress && slices.Contains(p.Named, Dest{Addr: dst, Protocol: proto, Port: port}) {
			return true
		}
	}
	return false
}

package endpoint

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/util/endpointutil"
)

// Upstream names and limits.
const (
	// ControllerName is the controller's name: the value of its managed-by label and
	// the source of its Events.
	ControllerName = "endpoint-controller"
	// ManagedByLabel marks the Endpoints this controller keeps.
	ManagedByLabel = "endpoints.kubernetes.io/managed-by"
	// MaxAddresses is the most addresses one Endpoints object holds.
	MaxAddresses = 1000
	// truncated is the value of the over-capacity annotation.
	truncated = "truncated"
)

// desiredSubsets is the core/v1 Endpoints content for svc's selected pods, before any
// truncation: subsets by resolved ports (in key order), addresses by IP.
func desiredSubsets(svc *corev1.Service, pods []*corev1.Pod) []corev1.EndpointSubset {
	headless := svc.Spec.ClusterIP == corev1.ClusterIPNone
	if len(svc.Spec.Ports) == 0 && !headless {
		return nil
	}
	type sub struct {
		ports           []corev1.EndpointPort
		ready, notReady []corev1.EndpointAddress
	}
	subs := map[string]*sub{}
	publish := svc.Spec.PublishNotReadyAddresses
	for _, pod := range pods {
		if !endpointutil.PodServes(pod) || (pod.DeletionTimestamp != nil && !publish) {
			continue
		}
		var ports []corev1.EndpointPort
		var key strings.Builder
		for i := range svc.Spec.Ports {
			sp := &svc.Spec.Ports[i]
			n, ok := endpointutil.TargetPort(pod, sp)
			if !ok {
				continue
			}
			proto := endpointutil.Protocol(sp)
			ports = append(ports, corev1.EndpointPort{Name: sp.Name, Port: n, Protocol: proto, AppProtocol: sp.AppProtocol})
			fmt.Fprintf(&key, "|%s/%s/%d/%s", sp.Name, proto, n, ptr.Deref(sp.AppProtocol, ""))
		}
		if len(svc.Spec.Ports) > 0 && len(ports) == 0 {
			continue
		}
		ip := pod.Status.PodIP
		if ip == "" {
			ip = pod.Status.PodIPs[0].IP
		}
		addr := corev1.EndpointAddress{IP: ip, Hostname: endpointutil.Hostname(pod, svc),
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}}
		if pod.Spec.NodeName != "" {
			addr.NodeName = ptr.To(pod.Spec.NodeName)
		}
		s := subs[key.String()]
		if s == nil {
			s = &sub{ports: ports}
			subs[key.String()] = s
		}
		if publish || podutils.IsPodReady(pod) {
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
	byIP := func(a []corev1.EndpointAddress) {
		sort.Slice(a, func(i, j int) bool { return a[i].IP < a[j].IP })
	}
	var out []corev1.EndpointSubset
	for _, k := range keys {
		s := subs[k]
		byIP(s.ready)
		byIP(s.notReady)
		out = append(out, corev1.EndpointSubset{Addresses: s.ready, NotReadyAddresses: s.notReady, Ports: s.ports})
	}
	return out
}

// truncate keeps at most max addresses of subsets: ready ones first, then not-ready
// ones, each kind cut in every subset in proportion to its share. It reports whether
// anything was cut.
func truncate(subsets []corev1.EndpointSubset, max int) ([]corev1.EndpointSubset, bool) {
	ready := make([]int, len(subsets))
	notReady := make([]int, len(subsets))
	totalReady, totalNotReady := 0, 0
	for i, s := range subsets {
		ready[i], notReady[i] = len(s.Addresses), len(s.NotReadyAddresses)
		totalReady += ready[i]
		totalNotReady += notReady[i]
	}
	if totalReady+totalNotReady <= max {
		return subsets, false
	}
	keepReady := min(totalReady, max)
	readyShare := share(ready, keepReady)
	notReadyShare := share(notReady, max-keepReady)
	var out []corev1.EndpointSubset
	for i, s := range subsets {
		if readyShare[i]+notReadyShare[i] == 0 {
			continue
		}
		s.Addresses = s.Addresses[:readyShare[i]]
		s.NotReadyAddresses = s.NotReadyAddresses[:notReadyShare[i]]
		if len(s.Addresses) == 0 {
			s.Addresses = nil
		}
		if len(s.NotReadyAddresses) == 0 {
			s.NotReadyAddresses = nil
		}
		out = append(out, s)
	}
	return out, true
}

// share splits n among groups of the given sizes in proportion to them: each gets the
// floor of its share, and what is left goes one by one to the groups, in order, that
// still have room. n is at most the sum of sizes.
func share(sizes []int, n int) []int {
	total := 0
	for _, s := range sizes {
		total += s
	}
	out := make([]int, len(sizes))
	if total == 0 || n <= 0 {
		return out
	}
	given := 0
	for i, s := range sizes {
		out[i] = s * n / total
		given += out[i]
	}
	for i := 0; given < n; i = (i + 1) % len(sizes) {
		if out[i] < sizes[i] {
			out[i]++
			given++
		}
	}
	return out
}

// desiredLabels are the labels of svc's Endpoints: the Service's, the managed-by label
// and, for a headless Service, the headless label.
func desiredLabels(svc *corev1.Service) map[string]string {
	l := make(map[string]string, len(svc.Labels)+2)
	for k, v := range svc.Labels {
		l[k] = v
	}
	delete(l, corev1.IsHeadlessService)
	if svc.Spec.ClusterIP == corev1.ClusterIPNone || svc.Spec.ClusterIP == "" {
		l[corev1.IsHeadlessService] = ""
	}
	l[ManagedByLabel] = ControllerName
	return l
}

// upToDate says whether cur already holds subsets and wantLabels with the capacity
// annotation as over says; the trigger-time annotation alone never calls for a write.
func upToDate(cur *corev1.Endpoints, subsets []corev1.EndpointSubset, wantLabels map[string]string, over bool) bool {
	_, annotated := cur.Annotations[corev1.EndpointsOverCapacity]
	return annotated == over && labels.Equals(cur.Labels, wantLabels) &&
		apiequality.Semantic.DeepEqual(normalize(cur.Subsets), normalize(subsets))
}

// normalize treats empty and nil lists alike.
func normalize(s []corev1.EndpointSubset) []corev1.EndpointSubset {
	if len(s) == 0 {
		return nil
	}
	out := make([]corev1.EndpointSubset, len(s))
	for i, x := range s {
		if len(x.Addresses) == 0 {
			x.Addresses = nil
		}
		if len(x.NotReadyAddresses) == 0 {
			x.NotReadyAddresses = nil
		}
		if len(x.Ports) == 0 {
			x.Ports = nil
		}
		out[i] = x
	}
	return out
}

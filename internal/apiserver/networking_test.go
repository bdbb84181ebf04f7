package apiserver_test

import (
	"context"
	"regexp"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

func TestNetworkPolicies(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	policies := s.Client.NetworkingV1().NetworkPolicies("default")

	// A watch from the list's resource version, re-established if the server ends it
	// (as it may while its watch cache starts).
	initial, err := policies.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, initial.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return policies.Watch(ctx, o)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	np, err := policies.Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(5432))}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To(intstr.FromInt32(53)),
					EndPort: ptr.To[int32](54)}},
			}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Defaults: TCP for a port without protocol; both policy types, as there are egress rules.
	if p := np.Spec.Ingress[0].Ports[0].Protocol; p == nil || *p != corev1.ProtocolTCP {
		t.Errorf("ingress port protocol %v, want TCP", p)
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}) {
		t.Errorf("policyTypes %v, want [Ingress Egress]", np.Spec.PolicyTypes)
	}
	if np.Generation != 1 {
		t.Errorf("generation %d, want 1", np.Generation)
	}
	select {
	case ev := <-w.ResultChan():
		if got, ok := ev.Object.(*networkingv1.NetworkPolicy); ev.Type != watch.Added || !ok || got.Name != "db" {
			t.Errorf("watch event %s %#v, want ADDED db", ev.Type, ev.Object)
		}
	case <-ctx.Done():
		t.Fatal("no watch event for the created policy")
	}

	// An ingress-only policy (deny all ingress).
	deny, err := policies.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-all"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(deny.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policyTypes of a policy without egress rules: %v, want [Ingress]", deny.Spec.PolicyTypes)
	}

	got, err := policies.Get(ctx, "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.Ingress[0].Ports[0].Port = ptr.To(intstr.FromString("postgres"))
	updated, err := policies.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Generation != 2 || updated.Spec.Ingress[0].Ports[0].Port.StrVal != "postgres" {
		t.Errorf("after a spec update: generation %d, port %v", updated.Generation, updated.Spec.Ingress[0].Ports[0].Port)
	}
	list, err := policies.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 2 {
		t.Errorf("listed %d policies, want 2", len(list.Items))
	}

	// Validation.
	for _, tc := range []struct {
		name, field string
		spec        networkingv1.NetworkPolicySpec
	}{
		{"bad selector", "spec.podSelector.matchLabels", networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "not valid!"}}}},
		{"bad operator", "spec.podSelector.matchExpressions[0].operator", networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}}},
		{"bad protocol", "spec.ingress[0].ports[0].protocol", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: ptr.To(corev1.Protocol("ICMP"))}}}}}},
		{"port out of range", "spec.ingress[0].ports[0].port", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(70000))}}}}}},
		{"endPort below port", "spec.egress[0].ports[0].endPort", networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(100)), EndPort: ptr.To[int32](99)}}}}}},
		{"endPort with a named port", "spec.egress[0].ports[0].endPort", networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromString("http")), EndPort: ptr.To[int32](99)}}}}}},
		{"bad cidr", "spec.ingress[0].from[0].ipBlock.cidr", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/33"}}}}}}},
		{"except outside cidr", "spec.ingress[0].from[0].ipBlock.except[0]", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.1.0.0/24"}}}}}}}},
		{"except as wide as cidr", "spec.ingress[0].from[0].ipBlock.except[0]", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/16", Except: []string{"10.0.0.0/16"}}}}}}}},
		{"empty peer", "spec.egress[0].to[0]", networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{
			To: []networkingv1.NetworkPolicyPeer{{}}}}}},
		{"ipBlock and selector", "spec.egress[0].to[0]", networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{
			To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8"}, PodSelector: &metav1.LabelSelector{}}}}}}},
		{"bad policy type", "spec.policyTypes[0]", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{"Sideways"}}},
	} {
		_, err := policies.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-"}, Spec: tc.spec}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: %v, want Invalid", tc.name, err)
			continue
		}
		var fields []string
		for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
			fields = append(fields, c.Field)
		}
		if !slices.Contains(fields, tc.field) {
			t.Errorf("%s: error on %v, want %s: %v", tc.name, fields, tc.field, err)
		}
	}

	k := newKubectl(t, s.Kubeconfig)
	out := k.run("get", "networkpolicies")
	for _, re := range []string{`(?m)^NAME\s+POD-SELECTOR\s+AGE$`, `(?m)^db\s+app=db\s+\S+$`, `(?m)^deny-all\s+<none>\s+\S+$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("kubectl get networkpolicies: no line matching %s:\n%s", re, out)
		}
	}
	expectLines(t, k.run("get", "netpol", "db", "-o", "jsonpath={.spec.policyTypes}"), `["Ingress","Egress"]`)
	expectLines(t, k.run("delete", "netpol", "deny-all"), `networkpolicy.networking.k8s.io "deny-all" deleted`)
	expectLines(t, k.run("explain", "networkpolicy.spec.podSelector"), "podSelector")
}

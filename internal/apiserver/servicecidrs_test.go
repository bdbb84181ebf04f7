package apiserver_test

import (
	"context"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestServiceCIDRsAndIPAddresses: the API server keeps the ServiceCIDR of its Service
// range, named "kubernetes" and Ready, readable through /status too; ServiceCIDRs and
// IPAddresses are checked as kube-apiserver checks them, and IPAddresses go through
// create, patch, update, list, delete and deletecollection.
func TestServiceCIDRsAndIPAddresses(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{ServiceCIDR: "10.97.0.0/16"})
	ctx := context.Background()
	cidrs := s.Client.NetworkingV1().ServiceCIDRs()

	var def *networkingv1.ServiceCIDR
	testutil.Eventually(t, "the default ServiceCIDR is Ready", func() bool {
		c, err := cidrs.Get(ctx, "kubernetes", metav1.GetOptions{})
		def = c
		return err == nil && apimeta.IsStatusConditionTrue(c.Status.Conditions, networkingv1.ServiceCIDRConditionReady)
	})
	if !slices.Equal(def.Spec.CIDRs, []string{"10.97.0.0/16"}) {
		t.Errorf("default ServiceCIDR cidrs %v, want [10.97.0.0/16]", def.Spec.CIDRs)
	}
	dyn := dynamic.NewForConfigOrDie(s.Config)
	st, err := dyn.Resource(networkingv1.SchemeGroupVersion.WithResource("servicecidrs")).Get(ctx, "kubernetes", metav1.GetOptions{}, "status")
	if err != nil {
		t.Fatalf("GET servicecidrs/kubernetes/status: %v", err)
	}
	if st.GetUID() != def.UID || st.GroupVersionKind() != networkingv1.SchemeGroupVersion.WithKind("ServiceCIDR") {
		t.Errorf("status of the default ServiceCIDR: %s %s, want %s ServiceCIDR", st.GroupVersionKind(), st.GetUID(), def.UID)
	}

	changed := def.DeepCopy()
	changed.Spec.CIDRs = []string{"10.98.0.0/16"}
	if _, err := cidrs.Update(ctx, changed, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("changing the default ServiceCIDR's range: %v, want Invalid (immutable)", err)
	}
	for name, spec := range map[string][]string{
		"no-cidrs":       nil,
		"same-family":    {"10.0.0.0/24", "10.1.0.0/24"},
		"three":          {"10.0.0.0/24", "fd00::/64", "10.1.0.0/24"},
		"not-canonical":  {"10.0.0.1/24"},
		"not-a-cidr":     {"10.0.0.0"},
		"family-per-one": {"10.0.0.0/24", "fd00::/64"},
	} {
		_, err := cidrs.Create(ctx, &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: networkingv1.ServiceCIDRSpec{CIDRs: spec}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if valid := name == "family-per-one"; valid != (err == nil) || (err != nil && !apierrors.IsInvalid(err)) {
			t.Errorf("ServiceCIDR %s %v: %v", name, spec, err)
		}
	}

	ips := s.Client.NetworkingV1().IPAddresses()
	parent := &networkingv1.ParentReference{Group: "mygroup", Resource: "myresources", Namespace: "foo", Name: "bar"}
	v4, err := ips.Create(ctx, &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "255.255.255.255", Labels: map[string]string{"type": "broadcast"}},
		Spec: networkingv1.IPAddressSpec{ParentRef: parent}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ips.Create(ctx, &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: "fe80::42:1dff:fe84:f9e2", Labels: map[string]string{"type": "link-local"}},
		Spec: networkingv1.IPAddressSpec{ParentRef: parent}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []*networkingv1.IPAddress{
		{ObjectMeta: metav1.ObjectMeta{Name: "fe80:0::1"}, Spec: networkingv1.IPAddressSpec{ParentRef: parent}},
		{ObjectMeta: metav1.ObjectMeta{Name: "10.0.0.300"}, Spec: networkingv1.IPAddressSpec{ParentRef: parent}},
		{ObjectMeta: metav1.ObjectMeta{Name: "10.0.0.3"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "10.0.0.4"}, Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "a/b", Name: "x"}}},
	} {
		if _, err := ips.Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
			t.Errorf("IPAddress %s parentRef %+v: %v, want Invalid", bad.Name, bad.Spec.ParentRef, err)
		}
	}
	patched, err := ips.Patch(ctx, v4.Name, types.MergePatchType, []byte(`{"metadata":{"annotations":{"patched":"true"}}}`), metav1.PatchOptions{})
	if err != nil || patched.Annotations["patched"] != "true" || patched.ResourceVersion == v4.ResourceVersion {
		t.Fatalf("patch IPAddress: %v", err)
	}
	moved := patched.DeepCopy()
	moved.Spec.ParentRef.Name = "other"
	if _, err := ips.Update(ctx, moved, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("changing an IPAddress's parentRef: %v, want Invalid (immutable)", err)
	}
	patched.Annotations["updated"] = "true"
	if updated, err := ips.Update(ctx, patched, metav1.UpdateOptions{}); err != nil || updated.Annotations["updated"] != "true" {
		t.Fatalf("update IPAddress: %v", err)
	}
	if l, err := ips.List(ctx, metav1.ListOptions{LabelSelector: "type=broadcast"}); err != nil || len(l.Items) != 1 {
		t.Fatalf("list IPAddresses type=broadcast: %v %v", l, err)
	}
	if err := ips.Delete(ctx, v4.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := ips.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "type=link-local"}); err != nil {
		t.Fatal(err)
	}
	if l, err := ips.List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		t.Fatalf("IPAddresses left after deletecollection: %v %v", l, err)
	}
}

package certificates

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"slices"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

func TestRecognized(t *testing.T) {
	kubelet := certificatesv1.KubeAPIServerClientKubeletSignerName
	for _, tc := range []struct {
		name     string
		signer   string
		username string
		tmpl     *x509.CertificateRequest
		usages   []certificatesv1.KeyUsage
		want     []string
	}{
		{"a node renewing", kubelet, "system:node:n1", &x509.CertificateRequest{Subject: nodeSubject("n1")}, clientUsages, []string{"selfnodeclient", "nodeclient"}},
		{"a bootstrapper", kubelet, "system:bootstrap:abcdef", &x509.CertificateRequest{Subject: nodeSubject("n1")}, clientUsages, []string{"nodeclient"}},
		{"a node asking for another", kubelet, "system:node:n2", &x509.CertificateRequest{Subject: nodeSubject("n1")}, clientUsages, []string{"nodeclient"}},
		{"serving usages", kubelet, "system:node:n1", &x509.CertificateRequest{Subject: nodeSubject("n1")}, servingUsages, nil},
		{"a SAN", kubelet, "system:node:n1", &x509.CertificateRequest{Subject: nodeSubject("n1"), DNSNames: []string{"n1"}}, clientUsages, nil},
		{"not a node", kubelet, "bob", &x509.CertificateRequest{Subject: pkix.Name{CommonName: "bob", Organization: []string{"system:nodes"}}}, clientUsages, nil},
		{"another signer", certificatesv1.KubeAPIServerClientSignerName, "system:node:n1", &x509.CertificateRequest{Subject: nodeSubject("n1")}, clientUsages, nil},
		{"kubelet serving", certificatesv1.KubeletServingSignerName, "system:node:n1", &x509.CertificateRequest{Subject: nodeSubject("n1"), DNSNames: []string{"n1"}}, servingUsages, nil},
	} {
		csr := newCSR(t, "x", tc.signer, tc.tmpl, tc.usages...)
		csr.Spec.Username = tc.username
		var got []string
		for _, r := range recognized(csr, parsedCSR(t, tc.tmpl)) {
			got = append(got, r.permission.Subresource)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: recognized as %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSubjectAccessReviewSpec(t *testing.T) {
	csr := newCSR(t, "x", certificatesv1.KubeAPIServerClientKubeletSignerName, &x509.CertificateRequest{Subject: nodeSubject("n1")}, clientUsages...)
	csr.Spec.Username, csr.Spec.UID, csr.Spec.Groups = "system:bootstrap:abc", "uid-1", []string{"system:bootstrappers"}
	csr.Spec.Extra = map[string]certificatesv1.ExtraValue{"scopes": {"a", "b"}}
	spec := subjectAccessReviewSpec(csr, recognizers[1].permission)
	ra := spec.ResourceAttributes
	if spec.User != "system:bootstrap:abc" || spec.UID != "uid-1" || !slices.Equal(spec.Groups, []string{"system:bootstrappers"}) ||
		!slices.Equal(spec.Extra["scopes"], authorizationv1.ExtraValue{"a", "b"}) ||
		ra == nil || ra.Group != "certificates.k8s.io" || ra.Resource != "certificatesigningrequests" || ra.Verb != "create" || ra.Subresource != "nodeclient" {
		t.Errorf("spec %+v %+v", spec, ra)
	}
}

// The controller approves the kubelet client requests whose requestor may ask for one,
// after a SubjectAccessReview, and leaves the others pending.
func TestApprovingController(t *testing.T) {
	kubelet := certificatesv1.KubeAPIServerClientKubeletSignerName
	self := newCSR(t, "self", kubelet, &x509.CertificateRequest{Subject: nodeSubject("n1")}, clientUsages...)
	self.Spec.Username = "system:node:n1"
	boot := newCSR(t, "bootstrap", kubelet, &x509.CertificateRequest{Subject: nodeSubject("n2")}, clientUsages...)
	boot.Spec.Username, boot.Spec.Groups = "system:bootstrap:abc", []string{"system:bootstrappers"}
	stranger := newCSR(t, "stranger", kubelet, &x509.CertificateRequest{Subject: nodeSubject("n3")}, clientUsages...)
	stranger.Spec.Username = "mallory"
	other := newCSR(t, "other", certificatesv1.KubeAPIServerClientSignerName, &x509.CertificateRequest{Subject: nodeSubject("n1")}, clientUsages...)
	other.Spec.Username = "system:node:n1"
	denied := withCondition(boot, certificatesv1.CertificateDenied, t0)
	denied.Name = "denied"

	cs := fake.NewClientset()
	// The policy: nodes may renew their own certificates, bootstrappers ask for any.
	var mu sync.Mutex
	var reviews []string
	cs.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		sar := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		ra := sar.Spec.ResourceAttributes
		mu.Lock()
		reviews = append(reviews, sar.Spec.User+" "+ra.Subresource)
		mu.Unlock()
		sar.Status.Allowed = (ra.Subresource == "selfnodeclient" && sar.Spec.User == "system:node:n1") ||
			(ra.Subresource == "nodeclient" && slices.Contains(sar.Spec.Groups, "system:bootstrappers"))
		return true, sar, nil
	})
	for _, o := range []*certificatesv1.CertificateSigningRequest{self, boot, stranger, other, denied} {
		if _, err := cs.CertificatesV1().CertificateSigningRequests().Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	clk := clocktesting.NewFakeClock(t0)
	controllertest.RunController(t, cs, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return NewApprovingController(ApprovingConfig{Clock: clk, Logger: quiet}, cs, f)
	})
	get := func(name string) *certificatesv1.CertificateSigningRequest {
		csr, err := cs.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return csr
	}
	testutil.EventuallyWithin(t, 10*time.Second, "the allowed requests approved", func() (bool, error) {
		// mu is not held across get: the reactor takes mu inside the fake clientset's lock.
		mu.Lock()
		reviewed := slices.Contains(reviews, "mallory nodeclient")
		mu.Unlock()
		return reviewed && len(get("self").Status.Conditions) > 0 && len(get("bootstrap").Status.Conditions) > 0, nil
	})
	for name, msg := range map[string]string{
		"self":      "Auto approving self kubelet client certificate after SubjectAccessReview.",
		"bootstrap": "Auto approving kubelet client certificate after SubjectAccessReview.",
	} {
		conds := get(name).Status.Conditions
		if len(conds) != 1 || conds[0].Type != certificatesv1.CertificateApproved || conds[0].Status != corev1.ConditionTrue ||
			conds[0].Reason != AutoApproved || conds[0].Message != msg || !conds[0].LastUpdateTime.Time.Equal(t0) {
			t.Errorf("%s: conditions %+v", name, conds)
		}
	}
	if c := get("stranger").Status.Conditions; len(c) != 0 {
		t.Errorf("a request not allowed was acted on: %+v", c)
	}
	if c := get("other").Status.Conditions; len(c) != 0 {
		t.Errorf("a request of another signer was acted on: %+v", c)
	}
	if c := get("denied").Status.Conditions; len(c) != 1 {
		t.Errorf("a denied request was acted on: %+v", c)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range reviews {
		if r == "system:node:n1 nodeclient" || r == "system:bootstrap:abc selfnodeclient" {
			t.Errorf("unexpected review %q", r)
		}
	}
}

func TestIgnorable(t *testing.T) {
	if !isIgnorable(ignorableError("x")) || isIgnorable(context.Canceled) {
		t.Error("isIgnorable")
	}
}

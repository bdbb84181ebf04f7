package certificates

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"slices"
	"sort"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// issuedCSR is csr approved at approvedAt and issued a certificate ending at notAfter.
func issuedCSR(t testing.TB, csr *certificatesv1.CertificateSigningRequest, ca testCA, approvedAt, notAfter time.Time) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	a, err := loadAuthority(ca.certPEM, ca.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	cr, _ := parseCSR(csr.Spec.Request)
	now := notAfter.Add(-time.Hour)
	der, err := a.sign(cr, signingPolicy{TTL: time.Hour, Usages: clientUsages, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	out := withCondition(csr, certificatesv1.CertificateApproved, approvedAt)
	out.Status.Certificate = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return out
}

func TestCleanReason(t *testing.T) {
	ca := newTestCA(t, t0.Add(10*365*24*time.Hour))
	base := newCSR(t, "x", certificatesv1.KubeAPIServerClientSignerName, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "jane"}}, clientUsages...)
	now := t0.Add(2 * time.Hour)
	bad := issuedCSR(t, base, ca, now, now.Add(time.Hour))
	bad.Status.Certificate = []byte("not PEM")
	for _, tc := range []struct {
		name string
		csr  *certificatesv1.CertificateSigningRequest
		want string
	}{
		{"pending, new", base, ""},
		{"pending a day", func() *certificatesv1.CertificateSigningRequest {
			c := base.DeepCopy()
			c.CreationTimestamp = metav1.NewTime(now.Add(-25 * time.Hour))
			return c
		}(), "Cleaning CSR as it is more than pendingExpiration duration old and unhandled."},
		{"approved, not issued, long ago", withCondition(base, certificatesv1.CertificateApproved, now.Add(-48*time.Hour)), ""},
		{"issued a minute ago", issuedCSR(t, base, ca, now.Add(-time.Minute), now.Add(time.Hour)), ""},
		{"issued over an hour ago", issuedCSR(t, base, ca, now.Add(-61*time.Minute), now.Add(time.Hour)),
			"Cleaning CSR as it is more than approvedExpiration duration old and approved."},
		{"approval without a time", func() *certificatesv1.CertificateSigningRequest {
			c := issuedCSR(t, base, ca, now, now.Add(time.Hour))
			c.Status.Conditions[0].LastUpdateTime = metav1.Time{}
			return c
		}(), ""},
		{"issued, expired", issuedCSR(t, base, ca, now.Add(-time.Minute), now.Add(-time.Second)),
			"Cleaning CSR as the associated certificate is expired."},
		{"unreadable certificate", bad, ""},
		{"denied a minute ago", withCondition(base, certificatesv1.CertificateDenied, now.Add(-time.Minute)), ""},
		{"denied over an hour ago", withCondition(base, certificatesv1.CertificateDenied, now.Add(-61*time.Minute)),
			"Cleaning CSR as it is more than deniedExpiration duration old and denied."},
		{"failed over an hour ago", withCondition(withCondition(base, certificatesv1.CertificateApproved, now), certificatesv1.CertificateFailed, now.Add(-61*time.Minute)),
			"Cleaning CSR as it is more than deniedExpiration duration old and failed."},
		{"failed a minute ago", withCondition(base, certificatesv1.CertificateFailed, now.Add(-time.Minute)), ""},
	} {
		if got := cleanReason(tc.csr, now); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// The cleaner deletes what cleanReason gives a reason for, at start and each interval.
func TestCleanerController(t *testing.T) {
	ca := newTestCA(t, t0.Add(10*365*24*time.Hour))
	mk := func(name string) *certificatesv1.CertificateSigningRequest {
		return newCSR(t, name, certificatesv1.KubeAPIServerClientSignerName, &x509.CertificateRequest{Subject: pkix.Name{CommonName: name}}, clientUsages...)
	}
	clk := clocktesting.NewFakeClock(t0.Add(30 * time.Minute))
	cs := fake.NewClientset()
	for _, o := range []*certificatesv1.CertificateSigningRequest{
		mk("pending"),
		withCondition(mk("denied-old"), certificatesv1.CertificateDenied, t0.Add(-time.Hour)),
		withCondition(mk("denied-new"), certificatesv1.CertificateDenied, t0),
		issuedCSR(t, mk("issued"), ca, t0, t0.Add(24*time.Hour)),
	} {
		if _, err := cs.CertificatesV1().CertificateSigningRequests().Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	controllertest.RunController(t, cs, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return NewCleanerController(CleanerConfig{Clock: clk, Logger: quiet}, cs, f)
	})
	left := func() []string {
		list, err := cs.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range list.Items {
			names = append(names, c.Name)
		}
		sort.Strings(names)
		return names
	}
	testutil.EventuallyWithin(t, 10*time.Second, "the old denied request deleted", func() (bool, error) {
		return slices.Equal(left(), []string{"denied-new", "issued", "pending"}), nil
	})
	// An hour on, the issued and the other denied request go; a day on, the pending one.
	testutil.EventuallyWithin(t, 10*time.Second, "the next look", func() (bool, error) {
		if clk.HasWaiters() {
			clk.Step(time.Hour)
		}
		return slices.Equal(left(), []string{"pending"}), nil
	})
	testutil.EventuallyWithin(t, 10*time.Second, "the pending request deleted", func() (bool, error) {
		if clk.HasWaiters() {
			clk.Step(time.Hour)
		}
		return len(left()) == 0, nil
	})
}

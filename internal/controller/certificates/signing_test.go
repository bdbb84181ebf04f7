package certificates

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"net/url"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	certificatesv1beta1 "k8s.io/api/certificates/v1beta1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

func TestSigningDuration(t *testing.T) {
	year := DefaultSigningDuration
	for _, tc := range []struct {
		name      string
		max       time.Duration
		requested *int32
		want      time.Duration
	}{
		{"none asked", year, nil, year},
		{"shorter asked", year, ptr.To[int32](3600), time.Hour},
		{"longer asked", 24 * time.Hour, ptr.To[int32](7 * 24 * 3600), 24 * time.Hour},
		{"under the minimum", year, ptr.To[int32](60), 10 * time.Minute},
		{"the minimum", year, ptr.To[int32](600), 10 * time.Minute},
	} {
		if got := signingDuration(tc.max, tc.requested); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSignerRules(t *testing.T) {
	const (
		serving = certificatesv1.KubeletServingSignerName
		kubelet = certificatesv1.KubeAPIServerClientKubeletSignerName
		client  = certificatesv1.KubeAPIServerClientSignerName
		legacy  = certificatesv1beta1.LegacyUnknownSignerName
	)
	ip := []net.IP{net.ParseIP("10.0.0.1")}
	u, _ := url.Parse("spiffe://x/y")
	noRSA := func(extra certificatesv1.KeyUsage) []certificatesv1.KeyUsage {
		return []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, extra}
	}
	for _, tc := range []struct {
		name    string
		signer  string
		tmpl    *x509.CertificateRequest
		usages  []certificatesv1.KeyUsage
		wantErr string
	}{
		{"serving", serving, &x509.CertificateRequest{Subject: nodeSubject("n1"), DNSNames: []string{"n1"}}, servingUsages, ""},
		{"serving, IP only, no key encipherment", serving, &x509.CertificateRequest{Subject: nodeSubject("n1"), IPAddresses: ip}, noRSA(certificatesv1.UsageServerAuth), ""},
		{"serving, duplicated usages", serving, &x509.CertificateRequest{Subject: nodeSubject("n1"), IPAddresses: ip}, append(servingUsages, certificatesv1.UsageServerAuth), ""},
		{"serving, other organization", serving, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:n1", Organization: []string{"system:nodes", "x"}}, DNSNames: []string{"n1"}}, servingUsages,
			"subject organization is not system:nodes"},
		{"serving, no SAN", serving, &x509.CertificateRequest{Subject: nodeSubject("n1")}, servingUsages, "DNS or IP subjectAltName is required"},
		{"serving, email SAN", serving, &x509.CertificateRequest{Subject: nodeSubject("n1"), DNSNames: []string{"n1"}, EmailAddresses: []string{"a@b"}}, servingUsages, "Email subjectAltNames are not allowed"},
		{"serving, URI SAN", serving, &x509.CertificateRequest{Subject: nodeSubject("n1"), DNSNames: []string{"n1"}, URIs: []*url.URL{u}}, servingUsages, "URI subjectAltNames are not allowed"},
		{"serving, client auth", serving, &x509.CertificateRequest{Subject: nodeSubject("n1"), DNSNames: []string{"n1"}}, clientUsages,
			"usages did not match [digital signature key encipherment server auth]"},
		{"serving, no server auth", serving, &x509.CertificateRequest{Subject: nodeSubject("n1"), DNSNames: []string{"n1"}}, noRSA(certificatesv1.UsageKeyEncipherment),
			"usages did not match [digital signature key encipherment server auth]"},
		{"serving, not a node", serving, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "n1", Organization: []string{"system:nodes"}}, DNSNames: []string{"n1"}}, servingUsages,
			"subject common name does not begin with system:node:"},

		{"kubelet client", kubelet, &x509.CertificateRequest{Subject: nodeSubject("n1")}, clientUsages, ""},
		{"kubelet client, no key encipherment", kubelet, &x509.CertificateRequest{Subject: nodeSubject("n1")}, noRSA(certificatesv1.UsageClientAuth), ""},
		{"kubelet client, DNS SAN", kubelet, &x509.CertificateRequest{Subject: nodeSubject("n1"), DNSNames: []string{"n1"}}, clientUsages, "DNS subjectAltNames are not allowed"},
		{"kubelet client, IP SAN", kubelet, &x509.CertificateRequest{Subject: nodeSubject("n1"), IPAddresses: ip}, clientUsages, "IP subjectAltNames are not allowed"},
		{"kubelet client, no organization", kubelet, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:n1"}}, clientUsages, "subject organization is not system:nodes"},
		{"kubelet client, not a node", kubelet, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "bob", Organization: []string{"system:nodes"}}}, clientUsages,
			"subject common name does not begin with system:node:"},
		{"kubelet client, server auth", kubelet, &x509.CertificateRequest{Subject: nodeSubject("n1")}, servingUsages,
			"usages did not match [client auth digital signature key encipherment]"},

		{"client", client, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "jane", Organization: []string{"devs"}}, DNSNames: []string{"anything"}}, clientUsages, ""},
		{"client, client auth only", client, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "jane"}}, []certificatesv1.KeyUsage{certificatesv1.UsageClientAuth}, ""},
		{"client, server auth", client, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "jane"}}, append(clientUsages, certificatesv1.UsageServerAuth),
			"invalid usage for client certificate: server auth"},
		{"client, no client auth", client, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "jane"}}, []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature},
			"missing required usage for client certificate: client auth"},

		{"legacy unknown takes anything", legacy, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "x"}, EmailAddresses: []string{"a@b"}}, []certificatesv1.KeyUsage{certificatesv1.UsageCodeSigning}, ""},
	} {
		err := signers[tc.signer](parsedCSR(t, tc.tmpl), tc.usages)
		if got := fmt.Sprint(err); (tc.wantErr == "" && err != nil) || (tc.wantErr != "" && got != tc.wantErr) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.wantErr)
		}
	}
	if _, ok := signers["example.com/mine"]; ok {
		t.Error("a signer of another domain is handled")
	}
}

// The controller signs approved requests of its signers, marks those their signer
// refuses Failed, and leaves the rest alone.
func TestSigningController(t *testing.T) {
	ca := newTestCA(t, t0.Add(10*365*24*time.Hour))
	serving := newCSR(t, "serving", certificatesv1.KubeletServingSignerName,
		&x509.CertificateRequest{Subject: nodeSubject("n1"), DNSNames: []string{"n1"}, IPAddresses: []net.IP{net.ParseIP("10.0.0.1")}}, servingUsages...)
	serving.Spec.ExpirationSeconds = ptr.To[int32](3600)
	badServing := newCSR(t, "bad-serving", certificatesv1.KubeletServingSignerName,
		&x509.CertificateRequest{Subject: nodeSubject("n1")}, servingUsages...)
	client := newCSR(t, "client", certificatesv1.KubeAPIServerClientSignerName,
		&x509.CertificateRequest{Subject: pkix.Name{CommonName: "jane", Organization: []string{"devs"}}}, clientUsages...)
	objs := []*certificatesv1.CertificateSigningRequest{
		withCondition(serving, certificatesv1.CertificateApproved, t0),
		withCondition(badServing, certificatesv1.CertificateApproved, t0),
		withCondition(client, certificatesv1.CertificateApproved, t0),
		newCSR(t, "pending", certificatesv1.KubeAPIServerClientSignerName, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "p"}}, clientUsages...),
		withCondition(withCondition(client, certificatesv1.CertificateApproved, t0), certificatesv1.CertificateDenied, t0),
		withCondition(withCondition(badServing, certificatesv1.CertificateApproved, t0), certificatesv1.CertificateFailed, t0),
		withCondition(newCSR(t, "other-signer", "example.com/mine", &x509.CertificateRequest{Subject: pkix.Name{CommonName: "o"}}, clientUsages...), certificatesv1.CertificateApproved, t0),
	}
	objs[4].Name, objs[5].Name = "denied", "failed"
	cs := fake.NewClientset()
	for _, o := range objs {
		if _, err := cs.CertificatesV1().CertificateSigningRequests().Create(context.Background(), o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	clk := clocktesting.NewFakeClock(t0)
	controllertest.RunController(t, cs, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return NewSigningController(SigningConfig{CACert: ca.certPEM, CAKey: ca.keyPEM, Clock: clk, Logger: quiet}, cs, f)
	})
	get := func(name string) *certificatesv1.CertificateSigningRequest {
		csr, err := cs.CertificatesV1().CertificateSigningRequests().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return csr
	}
	testutil.EventuallyWithin(t, 10*time.Second, "the approved requests handled", func() (bool, error) {
		return len(get("serving").Status.Certificate) > 0 && len(get("client").Status.Certificate) > 0 && len(get("bad-serving").Status.Conditions) == 2, nil
	})

	cert := verifyIssued(t, get("serving").Status.Certificate, ca.cert, t0, x509.ExtKeyUsageServerAuth)
	if cert.Subject.CommonName != "system:node:n1" || len(cert.DNSNames) != 1 || len(cert.IPAddresses) != 1 ||
		cert.KeyUsage != x509.KeyUsageDigitalSignature|x509.KeyUsageKeyEncipherment {
		t.Errorf("serving certificate %+v", cert)
	}
	if !cert.NotBefore.Equal(t0.Add(-5*time.Minute)) || !cert.NotAfter.Equal(t0.Add(time.Hour)) {
		t.Errorf("serving certificate valid %v – %v, want an hour from %v (backdated 5m)", cert.NotBefore, cert.NotAfter, t0)
	}
	cert = verifyIssued(t, get("client").Status.Certificate, ca.cert, t0, x509.ExtKeyUsageClientAuth)
	if !cert.NotAfter.Equal(t0.Add(DefaultSigningDuration - 5*time.Minute)) {
		t.Errorf("client certificate ends %v, want a year (less 5m) from %v", cert.NotAfter, t0)
	}

	bad := get("bad-serving")
	c := bad.Status.Conditions[1]
	if len(bad.Status.Certificate) > 0 || c.Type != certificatesv1.CertificateFailed || c.Status != corev1.ConditionTrue ||
		c.Reason != SignerValidationFailure || c.Message != "DNS or IP subjectAltName is required" || !c.LastUpdateTime.Time.Equal(t0) {
		t.Errorf("refused request: %+v", bad.Status)
	}
	for _, name := range []string{"pending", "denied", "failed", "other-signer"} {
		if csr := get(name); len(csr.Status.Certificate) > 0 || len(csr.Status.Conditions) > 2 {
			t.Errorf("%s was acted on: %+v", name, csr.Status)
		}
	}
	// Approving a pending request gets it signed.
	pending := withCondition(get("pending"), certificatesv1.CertificateApproved, t0)
	if _, err := cs.CertificatesV1().CertificateSigningRequests().UpdateApproval(context.Background(), "pending", pending, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 10*time.Second, "the approved request signed", func() (bool, error) { return len(get("pending").Status.Certificate) > 0, nil })
}

func TestSigningConfigIsChecked(t *testing.T) {
	cs := fake.NewClientset()
	f := informers.NewSharedInformerFactory(cs, 0)
	if _, err := NewSigningController(SigningConfig{}, cs, f); err == nil {
		t.Error("a signer without a CA")
	}
	if _, err := NewSigningController(SigningConfig{CACertFile: "/nonexistent/ca.crt", CAKeyFile: "/nonexistent/ca.key"}, cs, f); err == nil {
		t.Error("a signer with missing CA files")
	}
	ca, other := newTestCA(t, t0.Add(time.Hour)), newTestCA(t, t0.Add(time.Hour))
	if _, err := NewSigningController(SigningConfig{CACert: ca.certPEM, CAKey: other.keyPEM}, cs, f); err == nil {
		t.Error("a signer whose key is not its certificate's")
	}
}

package apiserver_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// pcrSigner is a CA that issues pod certificates in tests.
type pcrSigner struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
}

func newPCRSigner(t *testing.T) *pcrSigner {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pcr-test-ca"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &pcrSigner{key: key, cert: cert}
}

// issue is the PEM of a certificate for pub valid from notBefore for lifetime.
func (s *pcrSigner) issue(t *testing.T, pub crypto.PublicKey, notBefore time.Time, lifetime time.Duration) string {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), NotBefore: notBefore, NotAfter: notBefore.Add(lifetime),
		DNSNames: []string{"pod.example"}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.cert, pub, s.key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

// stubRequest is a key and an empty PKCS#10 request signed with it.
func stubRequest(t *testing.T) (*ecdsa.PrivateKey, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{}, key)
	if err != nil {
		t.Fatal(err)
	}
	return key, der
}

func podCertificateRequest(name string, stub []byte) *certificatesv1.PodCertificateRequest {
	return &certificatesv1.PodCertificateRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.PodCertificateRequestSpec{SignerName: "example.com/pods", PodName: "web", PodUID: "pod-uid",
			ServiceAccountName: "default", ServiceAccountUID: "sa-uid", NodeName: "node-a", NodeUID: "node-uid", StubPKCS10Request: stub}}
}

// issued is r's status with the chain and times of an issuance.
func issued(r *certificatesv1.PodCertificateRequest, chain string, notBefore time.Time, lifetime time.Duration) *certificatesv1.PodCertificateRequest {
	r = r.DeepCopy()
	notBefore = notBefore.Truncate(time.Second)
	r.Status = certificatesv1.PodCertificateRequestStatus{
		Conditions: []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue,
			Reason: "Issued", Message: "issued", LastTransitionTime: metav1.Now()}},
		CertificateChain: chain, NotBefore: ptr.To(metav1.NewTime(notBefore)), NotAfter: ptr.To(metav1.NewTime(notBefore.Add(lifetime))),
		BeginRefreshAt: ptr.To(metav1.NewTime(notBefore.Add(lifetime / 2))),
	}
	return r
}

// PodCertificateRequests are served as kube-apiserver serves them: a day's lifetime by
// default, a fixed spec, field selectors, a status only a signer may write, once, with a
// certificate for the request's key.
func TestPodCertificateRequests(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	pcrs := s.Client.CertificatesV1().PodCertificateRequests("default")
	key, stub := stubRequest(t)

	for _, tc := range []struct {
		name string
		mut  func(r *certificatesv1.PodCertificateRequest)
		want string
	}{
		{"too short", func(r *certificatesv1.PodCertificateRequest) { r.Spec.MaxExpirationSeconds = ptr.To[int32](3599) },
			"spec.maxExpirationSeconds: Invalid value: 3599: must be in the range [3600, 7862400]"},
		{"a kubernetes.io signer's day", func(r *certificatesv1.PodCertificateRequest) {
			r.Spec.SignerName, r.Spec.MaxExpirationSeconds = "kubernetes.io/pods", ptr.To[int32](86401)
		}, "must be in the range [3600, 86400]"},
		{"no stub request", func(r *certificatesv1.PodCertificateRequest) { r.Spec.StubPKCS10Request = nil },
			"exactly one of (stubPKCS10Request) or (pkixPublicKey, proofOfPossession) must be set"},
		{"not a request", func(r *certificatesv1.PodCertificateRequest) { r.Spec.StubPKCS10Request = []byte("junk") },
			"spec.stubPKCS10Request: Invalid value: must be a valid PKCS#10 CSR"},
		{"no pod UID", func(r *certificatesv1.PodCertificateRequest) { r.Spec.PodUID = "" }, "spec.podUID: Invalid value: \"\": must not be empty"},
	} {
		r := podCertificateRequest("bad", stub)
		tc.mut(r)
		if _, err := pcrs.Create(ctx, r, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want 422 saying %q", tc.name, err, tc.want)
		}
	}

	r, err := pcrs.Create(ctx, podCertificateRequest("req-1", stub), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Spec.MaxExpirationSeconds == nil || *r.Spec.MaxExpirationSeconds != 86400 {
		t.Errorf("maxExpirationSeconds %v, want the default 86400", r.Spec.MaxExpirationSeconds)
	}
	list, err := pcrs.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-a,spec.podName=web,spec.signerName=example.com/pods"})
	if err != nil || len(list.Items) != 1 {
		t.Fatalf("list by node, pod and signer: %v, %v", list, err)
	}
	changed := r.DeepCopy()
	changed.Spec.PodName = "other"
	if _, err := pcrs.Update(ctx, changed, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "field is immutable") {
		t.Errorf("spec update: %v, want 422 field is immutable", err)
	}

	signer := newPCRSigner(t)
	now := time.Now().Add(-time.Minute)
	// A user who may write the status but not sign for the signer.
	rbac := s.Client.RbacV1()
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "pcr-status-writer"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "update"}, APIGroups: []string{"certificates.k8s.io"},
			Resources: []string{"podcertificaterequests/status"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pcr-status-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "pcr-status-writer"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "not-a-signer"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	asOther := s.ClientAs(t, "not-a-signer").CertificatesV1().PodCertificateRequests("default")
	good := issued(r, signer.issue(t, key.Public(), now.Truncate(time.Second), 2*time.Hour), now, 2*time.Hour)
	testutil.Eventually(t, "a user without sign rights refused", func() (bool, error) {
		_, err := asOther.UpdateStatus(ctx, good, metav1.UpdateOptions{})
		return apierrors.IsInvalid(err) && strings.Contains(err.Error(), `User "not-a-signer" is not permitted to "sign" for signer "example.com/pods"`), nil
	})

	otherKey, _ := stubRequest(t)
	for _, tc := range []struct {
		name string
		r    *certificatesv1.PodCertificateRequest
		want string
	}{
		{"another key", issued(r, signer.issue(t, otherKey.Public(), now.Truncate(time.Second), 2*time.Hour), now, 2*time.Hour),
			"leaf certificate was not issued to the requested public key"},
		{"too long", issued(r, signer.issue(t, key.Public(), now.Truncate(time.Second), 25*time.Hour), now, 25*time.Hour),
			"leaf certificate lifetime must be <= spec.maxExpirationSeconds (86400)"},
		{"too short", issued(r, signer.issue(t, key.Public(), now.Truncate(time.Second), 30*time.Minute), now, 30*time.Minute),
			"leaf certificate lifetime must be >= 1 hour"},
		{"long ago", issued(r, signer.issue(t, key.Public(), now.Add(-time.Hour).Truncate(time.Second), 2*time.Hour), now.Add(-time.Hour), 2*time.Hour),
			"must be set to within 5 minutes of kube-apiserver's current time"},
		{"times not the certificate's", issued(r, signer.issue(t, key.Public(), now.Add(-time.Minute).Truncate(time.Second), 2*time.Hour), now, 2*time.Hour),
			"must be set to the NotBefore time encoded in the leaf certificate"},
		{"two conditions", func() *certificatesv1.PodCertificateRequest {
			d := good.DeepCopy()
			d.Status.Conditions = append(d.Status.Conditions, metav1.Condition{Type: "Denied", Status: metav1.ConditionTrue,
				Reason: "No", Message: "no", LastTransitionTime: metav1.Now()})
			return d
		}(), `There may be at most one condition with type "Issued", "Denied", or "Failed"`},
	} {
		if _, err := pcrs.UpdateStatus(ctx, tc.r, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want 422 saying %q", tc.name, err, tc.want)
		}
	}
	done, err := pcrs.UpdateStatus(ctx, good, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("issue: %v", err)
	}
	if done.Status.CertificateChain == "" || done.Spec.PodName != "web" {
		t.Errorf("issued request %+v", done)
	}
	kubeletRequests(t, s)

	again := done.DeepCopy()
	again.Status.BeginRefreshAt = ptr.To(metav1.NewTime(again.Status.BeginRefreshAt.Add(time.Minute)))
	if _, err := pcrs.UpdateStatus(ctx, again, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) ||
		!strings.Contains(err.Error(), "immutable after PodCertificateRequest is issued, denied, or failed") {
		t.Errorf("a second status: %v, want 422 immutable", err)
	}
}

// kubeletRequests: a kubelet creates PodCertificateRequests only for its own pods, as
// their service account, for a signer they mount; it lists and watches only those of
// its node, and never writes their status.
func kubeletRequests(t *testing.T, s *apiservertest.Server) {
	ctx := context.Background()
	kubeletA := kubeletClient(s, t, "pcr-node-a")
	nodeA, err := kubeletA.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "pcr-node-a"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the default service account", func() (bool, error) {
		_, err := s.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	sa, err := s.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := func(name, signer string) *corev1.Pod {
		p, err := s.Client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: "pcr-node-a", Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
				Volumes: []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
					Sources: []corev1.VolumeProjection{{PodCertificate: &corev1.PodCertificateProjection{
						SignerName: signer, KeyType: "ECDSAP256", CredentialBundlePath: "creds.pem"}}}}}}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	withCert, otherSigner := pod("pcr-with-cert", "example.com/pods"), pod("pcr-other-signer", "example.com/other")
	_, stub := stubRequest(t)
	request := func(p *corev1.Pod) *certificatesv1.PodCertificateRequest {
		r := podCertificateRequest("", stub)
		r.GenerateName = "req-"
		r.Spec.PodName, r.Spec.PodUID = p.Name, p.UID
		r.Spec.ServiceAccountUID = sa.UID
		r.Spec.NodeName, r.Spec.NodeUID = "pcr-node-a", nodeA.UID
		return r
	}
	asA := kubeletA.CertificatesV1().PodCertificateRequests("default")
	var created *certificatesv1.PodCertificateRequest
	testutil.Eventually(t, "node-a's request for its pod", func() error {
		created, err = asA.Create(ctx, request(withCert), metav1.CreateOptions{})
		return err
	})
	for _, tc := range []struct {
		name string
		r    *certificatesv1.PodCertificateRequest
		want string
	}{
		{"another signer", request(otherSigner), `pod "default/pcr-other-signer" does not mount a podCertificate projected volume for signer "example.com/pods"`},
		{"another node", func() *certificatesv1.PodCertificateRequest {
			r := request(withCert)
			r.Spec.NodeName = "pcr-node-b"
			return r
		}(), `PodCertificateRequest.Spec.NodeName="pcr-node-b", which is not the requesting node "pcr-node-a"`},
		{"another service account", func() *certificatesv1.PodCertificateRequest {
			r := request(withCert)
			r.Spec.ServiceAccountName = "builder"
			return r
		}(), `contains serviceAccountName ("builder") that differs from running pod ("default")`},
	} {
		if _, err := asA.Create(ctx, tc.r, metav1.CreateOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want 403 saying %q", tc.name, err, tc.want)
		}
	}
	if _, err := asA.List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=pcr-node-a"}); err != nil {
		t.Errorf("node-a lists its requests: %v", err)
	}
	if _, err := asA.List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node-a lists every request: %v, want 403", err)
	}
	testutil.Eventually(t, "node-a gets its request", func() error {
		_, err := asA.Get(ctx, created.Name, metav1.GetOptions{})
		return err
	})
	if _, err := kubeletClient(s, t, "pcr-node-b").CertificatesV1().PodCertificateRequests("default").Get(ctx, created.Name, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node-b gets node-a's request: %v, want 403", err)
	}
	if _, err := asA.UpdateStatus(ctx, created, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node-a writes a request's status: %v, want 403", err)
	}
}

package kubelet

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
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// A projected podCertificate source's files: the key then the chain, the key, the
// chain, each at its path, with the volume's mode.
func TestProjectedPayloadPodCertificate(t *testing.T) {
	pod := configPod()
	src := &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []corev1.VolumeProjection{
		{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Items: []corev1.KeyToPath{{Key: "mode", Path: "mode"}}}},
		{PodCertificate: &corev1.PodCertificateProjection{SignerName: "example.com/pods", KeyType: "ED25519",
			CredentialBundlePath: "bundle.pem", KeyPath: "key.pem", CertificateChainPath: "chain.pem"}},
	}}
	var asked []string
	in := payloadInput{objects: testObjects(), volume: "certs", podCertificate: func(p *corev1.Pod, volume string, index int, s *corev1.PodCertificateProjection) ([]byte, []byte, error) {
		asked = append(asked, volume+"/"+string(rune('0'+index))+"/"+s.SignerName)
		return []byte("KEY;"), []byte("CHAIN;"), nil
	}}
	got, err := projectedPayload(pod, src, in)
	if err != nil {
		t.Fatal(err)
	}
	wantFiles(t, "projected", got, map[string]string{"mode": "fast (644)", "bundle.pem": "KEY;CHAIN; (644)", "key.pem": "KEY; (644)", "chain.pem": "CHAIN; (644)"})
	if strings.Join(asked, ",") != "certs/1/example.com/pods" {
		t.Errorf("asked for %v, want the source at index 1 of volume certs", asked)
	}
	in.podCertificate = nil
	if _, err := projectedPayload(pod, src, in); err == nil || err.Error() != "podCertificate sources are not supported on this node" {
		t.Errorf("a node without pod certificates: %v", err)
	}
}

// testSigner issues certificates for PodCertificateRequests as a signer would.
type testSigner struct {
	key  *ecdsa.PrivateKey
	cert *x509.Certificate
}

func newTestSigner(t *testing.T) *testSigner {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "pod-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testSigner{key: key, cert: cert}
}

// issue writes r's status: a certificate for its key, valid for an hour from a minute
// ago, to be refreshed after half of it.
func (s *testSigner) issue(t *testing.T, r *certificatesv1.PodCertificateRequest) *certificatesv1.PodCertificateRequest {
	t.Helper()
	req, err := x509.ParseCertificateRequest(r.Spec.StubPKCS10Request)
	if err != nil {
		t.Fatal(err)
	}
	notBefore := time.Now().Add(-time.Minute).Truncate(time.Second)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), NotBefore: notBefore, NotAfter: notBefore.Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.cert, req.PublicKey, s.key)
	if err != nil {
		t.Fatal(err)
	}
	r = r.DeepCopy()
	r.Status = certificatesv1.PodCertificateRequestStatus{
		Conditions: []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeIssued, Status: metav1.ConditionTrue,
			Reason: "Issued", Message: "issued", LastTransitionTime: metav1.Now()}},
		CertificateChain: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})) +
			string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.cert.Raw})),
		NotBefore: ptr.To(metav1.NewTime(notBefore)), NotAfter: ptr.To(metav1.NewTime(notBefore.Add(time.Hour))),
		BeginRefreshAt: ptr.To(metav1.NewTime(notBefore.Add(30 * time.Minute))),
	}
	return r
}

// Against the API server, with a kubelet's credentials: the first lookup makes a key and
// a request for the pod; once the signer issued it the source has the key and chain
// (the key the certificate's); at beginRefreshAt a new request is made while the old
// certificate is served; a denied request fails the source, with an event.
func TestPodCertificatesFromTheAPIServer(t *testing.T) {
	api := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	kubelet := api.ClientAs(t, "system:node:pc-node", "system:nodes")
	node, err := kubelet.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "pc-node"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the default service account", func() (bool, error) {
		_, err := api.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	src := &corev1.PodCertificateProjection{SignerName: "example.com/pods", KeyType: "ECDSAP256", CredentialBundlePath: "creds.pem",
		MaxExpirationSeconds: ptr.To[int32](3600), UserAnnotations: map[string]string{"example.com/path": "/web"}}
	pod, err := api.Client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pc-web"},
		Spec: corev1.PodSpec{NodeName: "pc-node", Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Volumes: []corev1.Volume{{Name: "certs", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{PodCertificate: src}}}}}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	clock := clocktesting.NewFakePassiveClock(time.Now())
	recorder := record.NewFakeRecorder(10)
	var mu sync.Mutex
	changed := map[string]int{}
	m := newPodCertificates(kubelet, "pc-node", func() (types.UID, error) { return node.UID, nil }, clock, recorder, func(ns, p string) {
		mu.Lock()
		defer mu.Unlock()
		changed[ns+"/"+p]++
	})
	testutil.Start(t, "the pod certificates", 10*time.Second, func(ctx context.Context) error { m.Run(ctx); return nil }, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.ctx != nil
	})
	pcrs := api.Client.CertificatesV1().PodCertificateRequests("default")
	onlyRequest := func(skip string) *certificatesv1.PodCertificateRequest {
		t.Helper()
		var found *certificatesv1.PodCertificateRequest
		testutil.Eventually(t, "a new request", func() (bool, error) {
			list, err := pcrs.List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			for i := range list.Items {
				if list.Items[i].Name != skip {
					found = &list.Items[i]
				}
			}
			return found != nil, nil
		})
		return found
	}

	if _, _, _, err := m.credentials(ctx, pod, "certs", 0, src); err == nil || !strings.Contains(err.Error(), "no certificate yet") {
		t.Fatalf("before issuance: %v", err)
	}
	first := onlyRequest("")
	spec := first.Spec
	if spec.PodUID != pod.UID || spec.PodName != "pc-web" || spec.ServiceAccountName != "default" || spec.ServiceAccountUID == "" ||
		spec.NodeName != "pc-node" || spec.NodeUID != node.UID || ptr.Deref(spec.MaxExpirationSeconds, 0) != 3600 ||
		spec.UnverifiedUserAnnotations["example.com/path"] != "/web" || len(first.OwnerReferences) != 1 || first.OwnerReferences[0].UID != pod.UID {
		t.Errorf("request %+v", first)
	}
	if _, _, _, err := m.credentials(ctx, pod, "certs", 0, src); err == nil {
		t.Fatal("a pending request gave credentials")
	}

	signer := newTestSigner(t)
	issued, err := pcrs.UpdateStatus(ctx, signer.issue(t, first), metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the issuance reported for the pod", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return changed["default/pc-web"] >= 2, nil // the request's add and its update
	})
	var key, chain []byte
	var next time.Time
	testutil.Eventually(t, "the credentials", func() error {
		key, chain, next, err = m.credentials(ctx, pod, "certs", 0, src)
		return err
	})
	if string(chain) != issued.Status.CertificateChain {
		t.Errorf("chain %q, want the issued one", chain)
	}
	if !next.Equal(issued.Status.BeginRefreshAt.Time) {
		t.Errorf("next look at %v, want beginRefreshAt %v", next, issued.Status.BeginRefreshAt)
	}
	blk, _ := pem.Decode(key)
	priv, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil || blk.Type != "PRIVATE KEY" {
		t.Fatalf("key %s: %v", blk.Type, err)
	}
	leafBlock, _ := pem.Decode(chain)
	leaf, _ := x509.ParseCertificate(leafBlock.Bytes)
	if !priv.(crypto.Signer).Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(leaf.PublicKey) {
		t.Error("the key is not the certificate's")
	}

	// At beginRefreshAt: a second request, the first certificate still served.
	clock.SetTime(issued.Status.BeginRefreshAt.Add(time.Second))
	key2, chain2, next2, err := m.credentials(ctx, pod, "certs", 0, src)
	if err != nil || string(key2) != string(key) || string(chain2) != string(chain) {
		t.Fatalf("during the refresh: %v", err)
	}
	if want := clock.Now().Add(tokenRetry); !next2.Equal(want) {
		t.Errorf("next look during the refresh at %v, want %v", next2, want)
	}
	second := onlyRequest(first.Name)
	second.Status.Conditions = []metav1.Condition{{Type: certificatesv1.PodCertificateRequestConditionTypeDenied, Status: metav1.ConditionTrue,
		Reason: "Policy", Message: "not for you", LastTransitionTime: metav1.Now()}}
	if _, err := pcrs.UpdateStatus(ctx, second, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the denial", func() (bool, error) {
		_, _, _, err := m.credentials(ctx, pod, "certs", 0, src)
		return err != nil && strings.Contains(err.Error(), `was denied, reason="Policy", message="not for you"`), nil
	})
	if evs := drainEvents(recorder); len(evs) != 1 || !strings.HasPrefix(evs[0], "Warning Denied PodCertificateRequest default/"+second.Name+" was denied") {
		t.Errorf("events %v", evs)
	}
	m.forget(pod.UID)
	if _, _, _, err := m.credentials(ctx, pod, "certs", 0, src); err == nil || !strings.Contains(err.Error(), "no certificate yet") {
		t.Errorf("after forget: %v, want a new request", err)
	}
}

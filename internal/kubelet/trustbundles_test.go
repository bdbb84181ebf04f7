package kubelet

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// caPEM is a self-signed CA certificate named cn, as PEM.
func caPEM(t *testing.T, cn string) string {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, priv)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func trustBundle(name, signer, bundle string, labels map[string]string) *certificatesv1.ClusterTrustBundle {
	return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: bundle}}
}

// pemCommonNames are the common names of the certificates of a PEM bundle, in order.
func pemCommonNames(t *testing.T, data []byte) []string {
	t.Helper()
	var out []string
	for {
		var blk *pem.Block
		if blk, data = pem.Decode(data); blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" || len(blk.Headers) != 0 {
			t.Errorf("block %s with headers %v, want CERTIFICATE without", blk.Type, blk.Headers)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c.Subject.CommonName)
	}
	if len(strings.TrimSpace(string(data))) != 0 {
		t.Errorf("trailing bytes %q", data)
	}
	return out
}

// A source by name takes that bundle; by signer, the signer's bundles its selector
// matches (nil: none, empty: all); the certificates come once each, in the order of
// their DER bytes. Nothing selected is an error unless the source is optional.
func TestSelectTrustAnchors(t *testing.T) {
	a, b, c, d := caPEM(t, "a"), caPEM(t, "b"), caPEM(t, "c"), caPEM(t, "d")
	all := []*certificatesv1.ClusterTrustBundle{
		trustBundle("plain", "", d+a, nil),
		trustBundle("example.com:one:1", "example.com/one", a+b, map[string]string{"alive": "true"}),
		trustBundle("example.com:one:2", "example.com/one", b+c, map[string]string{"alive": "false"}),
		trustBundle("example.com:two:1", "example.com/two", d, map[string]string{"alive": "true"}),
	}
	// sorted are the common names of the certificates in the order of their DER bytes.
	sorted := func(pems ...string) []string {
		type cert struct{ der, cn string }
		var certs []cert
		for _, p := range pems {
			blk, _ := pem.Decode([]byte(p))
			certs = append(certs, cert{string(blk.Bytes), pemCommonNames(t, []byte(p))[0]})
		}
		slices.SortFunc(certs, func(x, y cert) int { return strings.Compare(x.der, y.der) })
		var out []string
		for _, c := range certs {
			out = append(out, c.cn)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		src     corev1.ClusterTrustBundleProjection
		want    []string
		wantErr string
	}{
		{name: "by name", src: corev1.ClusterTrustBundleProjection{Name: ptr.To("plain")}, want: sorted(a, d)},
		{name: "missing name", src: corev1.ClusterTrustBundleProjection{Name: ptr.To("nope")},
			wantErr: `while getting ClusterTrustBundle: clustertrustbundle.certificates.k8s.io "nope" not found`},
		{name: "missing name, optional", src: corev1.ClusterTrustBundleProjection{Name: ptr.To("nope"), Optional: ptr.To(true)}, want: nil},
		{name: "signer and labels", src: corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/one"),
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"alive": "true"}}}, want: sorted(a, b)},
		{name: "signer, empty selector", src: corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/one"),
			LabelSelector: &metav1.LabelSelector{}}, want: sorted(a, b, c)},
		{name: "signer, nil selector", src: corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/one")},
			wantErr: "combination of signerName and labelSelector matched zero ClusterTrustBundles"},
		{name: "signer, nil selector, optional", src: corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/one"), Optional: ptr.To(true)}},
		{name: "signer, selector matching nothing", src: corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/one"),
			LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"alive": "unknown"}}},
			wantErr: "combination of signerName and labelSelector matched zero ClusterTrustBundles"},
	} {
		got, err := selectTrustAnchors(all, &tc.src)
		if tc.wantErr != "" {
			if err == nil || err.Error() != tc.wantErr {
				t.Errorf("%s: %v, want %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if got == nil {
			t.Errorf("%s: nil file content, want bytes", tc.name)
		}
		if names := pemCommonNames(t, got); strings.Join(names, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: certificates %v, want %v", tc.name, names, tc.want)
		}
	}
}

// A projected clusterTrustBundle source's file holds what the node's source gives, with
// the volume's mode (0600 with a fsGroup).
func TestProjectedPayloadTrustBundle(t *testing.T) {
	pod := configPod()
	src := &corev1.ProjectedVolumeSource{DefaultMode: ptr.To[int32](0o644), Sources: []corev1.VolumeProjection{
		{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: ptr.To("plain"), Path: "ca.pem"}},
	}}
	in := payloadInput{objects: testObjects(), trustAnchors: func(s *corev1.ClusterTrustBundleProjection) ([]byte, error) {
		return []byte("pem-of-" + *s.Name), nil
	}}
	got, err := projectedPayload(pod, src, in)
	if err != nil {
		t.Fatal(err)
	}
	wantFiles(t, "projected", got, map[string]string{"ca.pem": "pem-of-plain (644)"})
	pod.Spec.SecurityContext = &corev1.PodSecurityContext{FSGroup: ptr.To[int64](2000)}
	if got, err = projectedPayload(pod, src, in); err != nil || got["ca.pem"].mode != 0o600 {
		t.Errorf("with a fsGroup: %v, %v", got["ca.pem"], err)
	}
	in.trustAnchors = nil
	if _, err := projectedPayload(pod, src, in); err == nil || err.Error() != "clusterTrustBundle sources are not supported on this node" {
		t.Errorf("a node without trust bundles: %v", err)
	}
}

func TestProjectsTrustBundle(t *testing.T) {
	pod := configPod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "ctb", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Name: ptr.To("plain"), Path: "a.pem"}},
			{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{SignerName: ptr.To("example.com/one"), Path: "b.pem"}},
		}}}}}
	for _, tc := range []struct {
		ctb  *certificatesv1.ClusterTrustBundle
		want bool
	}{
		{trustBundle("plain", "", "", nil), true},
		{trustBundle("example.com:one:x", "example.com/one", "", nil), true},
		{trustBundle("other", "", "", nil), false},
		{trustBundle("example.com:two:x", "example.com/two", "", nil), false},
	} {
		if got := projectsTrustBundle(pod, []*certificatesv1.ClusterTrustBundle{tc.ctb}); got != tc.want {
			t.Errorf("bundle %s of %q: %v, want %v", tc.ctb.Name, tc.ctb.Spec.SignerName, got, tc.want)
		}
	}
}

// Against the API server, with a kubelet's credentials: lookups start the watch, see
// bundles created and changed after it, and every change is reported.
func TestClusterTrustBundlesWatch(t *testing.T) {
	api := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	ctbs := api.Client.CertificatesV1().ClusterTrustBundles()
	var mu sync.Mutex
	changed := map[string]int{}
	tb := newClusterTrustBundles(api.ClientAs(t, "system:node:ctb-node", "system:nodes"), func(bs ...*certificatesv1.ClusterTrustBundle) {
		mu.Lock()
		defer mu.Unlock()
		for _, b := range bs {
			changed[b.Name]++
		}
	})
	byName := &corev1.ClusterTrustBundleProjection{Name: ptr.To("kubelet-ctb-test"), Path: "ca.pem"}
	first, second := caPEM(t, "first"), caPEM(t, "second")
	if _, err := ctbs.Create(ctx, trustBundle("kubelet-ctb-test", "", first, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ctbs.Delete(context.Background(), "kubelet-ctb-test", metav1.DeleteOptions{}) })
	// Before Run, lookups ask the API server.
	data, err := tb.trustAnchors(byName)
	if err != nil || strings.Join(pemCommonNames(t, data), ",") != "first" {
		t.Fatalf("a lookup before Run: %q, %v", data, err)
	}
	testutil.Start(t, "the ClusterTrustBundle source", 10*time.Second, func(ctx context.Context) error { tb.Run(ctx); return nil }, func() bool {
		tb.mu.Lock()
		defer tb.mu.Unlock()
		return tb.ctx != nil
	})
	wantNames := func(want string) {
		t.Helper()
		testutil.Eventually(t, "the bundle's certificates "+want, func() (bool, error) {
			data, err := tb.trustAnchors(byName)
			if err != nil {
				return false, nil
			}
			return strings.Join(pemCommonNames(t, data), ",") == want, nil
		})
	}
	wantNames("first")
	b, err := ctbs.Get(ctx, "kubelet-ctb-test", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Spec.TrustBundle = second
	if _, err := ctbs.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wantNames("second")
	testutil.Eventually(t, "the add and the update reported", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return changed["kubelet-ctb-test"] >= 3, nil // the watch's add, then old and new of the update
	})
	if err := ctbs.Delete(ctx, "kubelet-ctb-test", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the deleted bundle gone", func() (bool, error) {
		_, err := tb.trustAnchors(byName)
		return apierrors.IsNotFound(err), nil
	})
}

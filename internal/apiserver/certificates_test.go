package apiserver_test

import (
	"context"
	"strings"
	"testing"

	certificatesv1 "k8s.io/api/certificates/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

// ClusterTrustBundles of a signer are named after it ("example.com:signer:<name>" for
// example.com/signer), are listed by spec.signerName, and keep their signer; one
// without a signer has no ":" in its name.
func TestClusterTrustBundleSigners(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	ctbs := s.Client.CertificatesV1().ClusterTrustBundles()
	ca := corpusCertPEM("ctb-test-ca", true)
	bundle := func(name, signer string) *certificatesv1.ClusterTrustBundle {
		return &certificatesv1.ClusterTrustBundle{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer, TrustBundle: ca}}
	}
	for _, b := range []*certificatesv1.ClusterTrustBundle{
		bundle("example.com:signer-a:one", "example.com/signer-a"),
		bundle("example.com:signer-a:two", "example.com/signer-a"),
		bundle("example.com:signer-b:one", "example.com/signer-b"),
		bundle("unsigned", ""),
	} {
		if _, err := ctbs.Create(ctx, b, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s: %v", b.Name, err)
		}
		t.Cleanup(func() { _ = ctbs.Delete(context.Background(), b.Name, metav1.DeleteOptions{}) })
	}
	for _, tc := range []struct {
		b    *certificatesv1.ClusterTrustBundle
		want string
	}{
		{bundle("example.com:signer-a:three", ""), `ClusterTrustBundle without signer name must not have ":" in its name`},
		{bundle("three", "example.com/signer-a"), "ClusterTrustBundle for signerName example.com/signer-a must be named with prefix example.com:signer-a:"},
		{bundle("example.com:signer-b:three", "example.com/signer-a"), "must be named with prefix example.com:signer-a:"},
	} {
		if _, err := ctbs.Create(ctx, tc.b, metav1.CreateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("create %s for %q: %v, want 422 saying %q", tc.b.Name, tc.b.Spec.SignerName, err, tc.want)
		}
	}

	list, err := ctbs.List(ctx, metav1.ListOptions{FieldSelector: "spec.signerName=example.com/signer-a"})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range list.Items {
		names = append(names, b.Name)
	}
	if strings.Join(names, ",") != "example.com:signer-a:one,example.com:signer-a:two" {
		t.Errorf("bundles of example.com/signer-a: %v", names)
	}

	b, err := ctbs.Get(ctx, "example.com:signer-b:one", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b.Spec.SignerName = "example.com/signer-a"
	if _, err := ctbs.Update(ctx, b, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.signerName: Invalid value") {
		t.Errorf("changing the signer: %v, want 422 naming spec.signerName", err)
	}
}

package cloud

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// caIssuer serves the test issuer's handler with a leaf certificate for 127.0.0.1
// issued by a CA of its own, sending only the leaf (as a cluster's API server does).
func caIssuer(t *testing.T, is *testIssuer) (ca *x509.Certificate, srv *httptest.Server) {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ = x509.ParseCertificate(caDER)
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "issuer"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	srv = httptest.NewUnstartedServer(is.srv.Config.Handler)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{leafDER}, PrivateKey: leafKey}}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return ca, srv
}

// TestWebIdentityIssuerTrust checks how STS trusts an issuer's HTTPS: by a thumbprint of
// a certificate it serves, by a thumbprint of the configured root that issued its
// certificate, or, with no thumbprint, by the configured roots alone.
func TestWebIdentityIssuerTrust(t *testing.T) {
	is := newTestIssuer(t)
	ca, caSrv := caIssuer(t, is)
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, tc := range []struct {
		name   string
		roots  *x509.CertPool
		thumbs []string
		code   string
	}{
		{"CA thumbprint, CA among the roots", roots, []string{Thumbprint(ca.Raw)}, ""},
		{"CA thumbprint, no roots", nil, []string{Thumbprint(ca.Raw)}, "InvalidIdentityToken"},
		{"no thumbprint, CA among the roots", roots, nil, ""},
		{"no thumbprint, no roots", nil, nil, "IDPCommunicationError"},
		{"other thumbprint, CA among the roots", roots, []string{Thumbprint(is.srv.Certificate().Raw)}, "InvalidIdentityToken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := startCloud(t, Config{Hollow: true, IssuerRootCAs: tc.roots})
			ctx := context.Background()
			ic := newIAMClient(t, r.Cloud)
			prov, err := ic.CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{Url: aws.String(caSrv.URL),
				ClientIDList: []string{"sts.amazonaws.com"}, ThumbprintList: tc.thumbs})
			if err != nil {
				t.Fatal(err)
			}
			trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Federated":"` + *prov.OpenIDConnectProviderArn +
				`"},"Action":"sts:AssumeRoleWithWebIdentity"}]}`
			role, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("r"), AssumeRolePolicyDocument: aws.String(trust)})
			if err != nil {
				t.Fatal(err)
			}
			tok := signJWT(t, is.key, is.kid, map[string]any{"iss": caSrv.URL, "sub": "system:serviceaccount:default:app",
				"aud": "sts.amazonaws.com", "exp": time.Now().Add(time.Hour).Unix()})
			_, err = anonymousSTS(r.Cloud).AssumeRoleWithWebIdentity(ctx, &sts.AssumeRoleWithWebIdentityInput{
				RoleArn: role.Role.Arn, RoleSessionName: aws.String("s1"), WebIdentityToken: aws.String(tok)})
			if tc.code == "" {
				if err != nil {
					t.Fatalf("assume role: %v", err)
				}
				return
			}
			wantCode(t, err, tc.code)
		})
	}
}

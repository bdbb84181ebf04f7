package apiserver

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubelab/kubelab/internal/util/atomicfile"
)

// Identities: every component reaches the API server as itself, with a client
// certificate of the cluster CA whose CN is its user name and whose O are its groups
// (system:kube-scheduler, system:node:<name> in system:nodes, a service account's
// system:serviceaccount:<namespace>:<name> in system:serviceaccounts…), so that RBAC
// and the Node authorizer give it exactly its own rights. Only the admin is in
// system:masters.

// ClientCert returns the certificate and key files of user in groups, under
// DataDir/pki/clients, issuing them when missing or when the existing certificate
// names another subject or is no longer valid.
func (p PKI) ClientCert(user string, groups ...string) (certFile, keyFile string, err error) {
	if user == "" {
		return "", "", fmt.Errorf("client certificate: empty user name")
	}
	dir := filepath.Join(p.Dir, "clients")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("client certificate %s: %w", user, err)
	}
	base := filepath.Join(dir, strings.NewReplacer(":", "_", "/", "_").Replace(user))
	certFile, keyFile = base+".crt", base+".key"
	caCert, caKey, err := p.loadCA()
	if err != nil {
		return "", "", err
	}
	if identityCertCurrent(certFile, keyFile, caCert, user, groups) {
		return certFile, keyFile, nil
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: user, Organization: groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := issue(tmpl, caCert, caKey, certFile, keyFile); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// identityCertCurrent says whether certFile and keyFile are a pair, signed by ca, for
// user in groups, and valid for 30 more days.
func identityCertCurrent(certFile, keyFile string, ca *x509.Certificate, user string, groups []string) bool {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil || pair.Leaf == nil {
		return false
	}
	cert := pair.Leaf
	return cert.Subject.CommonName == user && slices.Equal(cert.Subject.Organization, groups) &&
		cert.CheckSignatureFrom(ca) == nil && time.Until(cert.NotAfter) >= 30*24*time.Hour
}

// WriteKubeconfig writes to path a kubeconfig that reaches server as user in groups
// (ClientCert).
func (p PKI) WriteKubeconfig(path, server, user string, groups ...string) error {
	certFile, keyFile, err := p.ClientCert(user, groups...)
	if err != nil {
		return err
	}
	files := map[string][]byte{}
	for _, f := range []string{p.CACert(), certFile, keyFile} {
		if files[f], err = os.ReadFile(f); err != nil {
			return err
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubelab"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: files[p.CACert()]}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: files[certFile], ClientKeyData: files[keyFile]}
	cfg.Contexts["kubelab"] = &clientcmdapi.Context{Cluster: "kubelab", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "kubelab"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, 0o600)
}

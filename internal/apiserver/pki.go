package apiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kubelab/kubelab/internal/apiserver/auth/serviceaccount"
	"github.com/kubelab/kubelab/internal/util/atomicfile"
)

// PKI is the cluster's certificate authority and the certificates made from it at first
// start: the API server's serving certificate, the admin's client certificate and the
// API server's client certificate toward kubelets; beside it the front proxy's CA and
// client certificate (frontproxypki.go) and etcd's (etcdpki.go). Kubelets' serving
// certificates are issued on demand (IssueKubeletServingCert).
type PKI struct {
	Dir string
}

func (p PKI) CACert() string      { return filepath.Join(p.Dir, "ca.crt") }
func (p PKI) CAKey() string       { return filepath.Join(p.Dir, "ca.key") }
func (p PKI) ServingCert() string { return filepath.Join(p.Dir, "apiserver.crt") }
func (p PKI) ServingKey() string  { return filepath.Join(p.Dir, "apiserver.key") }
func (p PKI) AdminCert() string   { return filepath.Join(p.Dir, "admin.crt") }
func (p PKI) AdminKey() string    { return filepath.Join(p.Dir, "admin.key") }
func (p PKI) TokenFile() string   { return filepath.Join(p.Dir, "tokens.csv") }

// KubeletClientCert and KubeletClientKey are the API server's client certificate toward
// kubelets (user KubeletClientUser): kubelets serve clients whose certificate the cluster
// CA signed.
func (p PKI) KubeletClientCert() string { return filepath.Join(p.Dir, "apiserver-kubelet-client.crt") }
func (p PKI) KubeletClientKey() string  { return filepath.Join(p.Dir, "apiserver-kubelet-client.key") }
func (p PKI) adminTokenFile() string    { return filepath.Join(p.Dir, "admin.token") }

// ServiceAccountKey and ServiceAccountPublicKey are the key pair service account tokens
// are signed and checked with (sa.key, sa.pub: serviceaccount.EnsureKeyPair).
func (p PKI) ServiceAccountKey() string       { return filepath.Join(p.Dir, "sa.key") }
func (p PKI) ServiceAccountPublicKey() string { return filepath.Join(p.Dir, "sa.pub") }

// AdminUser and AdminGroup are the identity of the admin kubeconfig.
const (
	AdminUser  = "kubelab-admin"
	AdminGroup = "system:masters"
)

// KubeletClientUser is the API server's identity toward kubelets.
const KubeletClientUser = "kube-apiserver-kubelet-client"

// ensure creates whatever of the PKI is missing; existing files are kept, so clients'
// kubeconfigs stay valid across restarts. The serving certificate names localhost,
// 127.0.0.1, the "kubernetes" Service's DNS names and servingIPs (its ClusterIP, the
// advertised address); one lacking any of them, not signed by the CA or expiring within
// 30 days is replaced (clients trust the CA, not the certificate).
func (p PKI) ensure(servingIPs ...net.IP) error {
	if err := p.EnsureCA(); err != nil {
		return err
	}
	caCert, caKey, err := p.loadCA()
	if err != nil {
		return err
	}
	dnsNames, ips := servingNames(servingIPs)
	if !servingCertCovers(p.ServingCert(), p.ServingKey(), caCert, dnsNames, ips) {
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: "kube-apiserver"},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
			DNSNames:    dnsNames,
			IPAddresses: ips,
		}
		if err := issue(tmpl, caCert, caKey, p.ServingCert(), p.ServingKey()); err != nil {
			return err
		}
	}
	if !exists(p.AdminCert()) || !exists(p.AdminKey()) {
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: AdminUser, Organization: []string{AdminGroup}},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if err := issue(tmpl, caCert, caKey, p.AdminCert(), p.AdminKey()); err != nil {
			return err
		}
	}
	if !exists(p.KubeletClientCert()) || !exists(p.KubeletClientKey()) {
		tmpl := &x509.Certificate{
			Subject:     pkix.Name{CommonName: KubeletClientUser},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if err := issue(tmpl, caCert, caKey, p.KubeletClientCert(), p.KubeletClientKey()); err != nil {
			return err
		}
	}
	if !exists(p.TokenFile()) {
		b := make([]byte, 24)
		if _, err := rand.Read(b); err != nil {
			return err
		}
		token := hex.EncodeToString(b)
		// token,user,uid,"group1,group2" — the static token file format.
		line := fmt.Sprintf("%s,%s,%s,\"%s\"\n", token, AdminUser, AdminUser, AdminGroup)
		if err := atomicfile.WriteFile(p.TokenFile(), []byte(line), 0o600); err != nil {
			return err
		}
		if err := atomicfile.WriteFile(p.adminTokenFile(), []byte(token+"\n"), 0o600); err != nil {
			return err
		}
	}
	if err := serviceaccount.EnsureKeyPair(p.ServiceAccountKey(), p.ServiceAccountPublicKey()); err != nil {
		return err
	}
	return p.ensureFrontProxy()
}

// EnsureCA makes the cluster CA (ca.crt, ca.key) when it is missing, as the server's
// start does, for those who must trust it before the server runs.
func (p PKI) EnsureCA() error {
	if err := os.MkdirAll(p.Dir, 0o700); err != nil {
		return fmt.Errorf("create pki dir: %w", err)
	}
	if !exists(p.CACert()) || !exists(p.CAKey()) {
		return createCA(p.CACert(), p.CAKey(), "kubelab-ca")
	}
	return nil
}

// createCA writes a new self-signed CA, valid for 10 years, named cn.
func createCA(certPath, keyPath, cn string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return fmt.Errorf("create CA %s: %w", cn, err)
	}
	return writePair(certPath, keyPath, der, key)
}

func (p PKI) loadCA() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	return loadCAFiles(p.CACert(), p.CAKey())
}

// loadCAFiles reads a CA's certificate and EC key.
func loadCAFiles(certPath, keyPath string) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, nil, err
	}
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("pki: CA files are not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: parse CA certificate: %w", err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, fmt.Errorf("pki: parse CA key: %w", err)
	}
	return cert, key, nil
}

// IssueKubeletServingCert makes sure dir/kubelet.crt and dir/kubelet.key hold a serving
// certificate for a node's kubelet, signed by the cluster CA, naming the node (a DNS name)
// and its addresses ips (and localhost when one of them is a loopback address), and
// returns their paths. A certificate already there is kept when
// the current CA signed it, it names exactly these names and addresses and it stays valid
// for 30 more days; otherwise a new one replaces it. The CA must exist: the API server
// makes it at its first start.
func (p PKI) IssueKubeletServingCert(dir, nodeName string, ips []net.IP) (certFile, keyFile string, err error) {
	if nodeName == "" && len(ips) == 0 {
		return "", "", errors.New("pki: a kubelet serving certificate needs a node name or an address")
	}
	caCert, caKey, err := p.loadCA()
	if err != nil {
		return "", "", fmt.Errorf("pki: load CA: %w", err)
	}
	certFile, keyFile = filepath.Join(dir, "kubelet.crt"), filepath.Join(dir, "kubelet.key")
	var dnsNames []string
	if nodeName != "" {
		dnsNames = []string{nodeName}
	}
	for _, ip := range ips {
		if ip.IsLoopback() { // a kubelet on this machine's loopback is localhost too
			dnsNames = append(dnsNames, "localhost")
			break
		}
	}
	subject := pkix.Name{CommonName: "system:node:" + nodeName, Organization: []string{"system:nodes"}}
	if err := issueServing(certFile, keyFile, caCert, caKey, subject, dnsNames, ips); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// IssueServingCert makes sure dir/name.crt and dir/name.key hold a serving certificate
// for names (DNS names, and IP addresses for those that parse as one), signed by the
// cluster CA, and returns their paths (kept as IssueKubeletServingCert keeps its own).
func (p PKI) IssueServingCert(dir, name string, names []string) (certFile, keyFile string, err error) {
	if len(names) == 0 {
		return "", "", errors.New("pki: a serving certificate needs a name")
	}
	caCert, caKey, err := p.loadCA()
	if err != nil {
		return "", "", fmt.Errorf("pki: load CA: %w", err)
	}
	var dnsNames []string
	var ips []net.IP
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			ips = append(ips, ip)
		} else {
			dnsNames = append(dnsNames, n)
		}
	}
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := issueServing(certFile, keyFile, caCert, caKey, pkix.Name{CommonName: names[0]}, dnsNames, ips); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

// issueServing writes a serving certificate for dnsNames and ips to certFile and keyFile
// unless a current one is there.
func issueServing(certFile, keyFile string, caCert *x509.Certificate, caKey *ecdsa.PrivateKey, subject pkix.Name, dnsNames []string, ips []net.IP) error {
	if servingCertCurrent(certFile, keyFile, caCert, dnsNames, ips) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(certFile), 0o755); err != nil {
		return fmt.Errorf("pki: create %s: %w", filepath.Dir(certFile), err)
	}
	tmpl := &x509.Certificate{
		Subject:     subject,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    dnsNames,
		IPAddresses: ips,
	}
	return issue(tmpl, caCert, caKey, certFile, keyFile)
}

// servingNames are the DNS names and addresses the API server's certificate names.
func servingNames(extra []net.IP) ([]string, []net.IP) {
	dnsNames := []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local"}
	ips := []net.IP{net.ParseIP("127.0.0.1")}
	for _, ip := range extra {
		if ip != nil && !containsIP(ips, ip) {
			ips = append(ips, ip)
		}
	}
	return dnsNames, ips
}

func containsIP(list []net.IP, ip net.IP) bool {
	for _, x := range list {
		if x.Equal(ip) {
			return true
		}
	}
	return false
}

// servingCertCovers says whether certFile and keyFile are a pair, signed by ca, naming
// at least dnsNames and ips, and valid for 30 more days.
func servingCertCovers(certFile, keyFile string, ca *x509.Certificate, dnsNames []string, ips []net.IP) bool {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return false
	}
	cert := pair.Leaf
	if cert == nil || cert.CheckSignatureFrom(ca) != nil || time.Until(cert.NotAfter) < 30*24*time.Hour {
		return false
	}
	for _, n := range dnsNames {
		if !slices.Contains(cert.DNSNames, n) {
			return false
		}
	}
	for _, ip := range ips {
		if !containsIP(cert.IPAddresses, ip) {
			return false
		}
	}
	return true
}

// servingCertCurrent says whether certFile and keyFile are a pair, signed by ca, naming
// exactly dnsNames and ips, and valid for 30 more days.
func servingCertCurrent(certFile, keyFile string, ca *x509.Certificate, dnsNames []string, ips []net.IP) bool {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return false
	}
	cert := pair.Leaf
	if cert == nil || cert.CheckSignatureFrom(ca) != nil || time.Until(cert.NotAfter) < 30*24*time.Hour {
		return false
	}
	if len(cert.DNSNames) != len(dnsNames) || len(cert.IPAddresses) != len(ips) {
		return false
	}
	for i := range dnsNames {
		if cert.DNSNames[i] != dnsNames[i] {
			return false
		}
	}
	for i := range ips {
		if !cert.IPAddresses[i].Equal(ips[i]) {
			return false
		}
	}
	return true
}

// WriteAdminKubeconfig writes a kubeconfig for the admin (client certificate) to path.
func (p PKI) WriteAdminKubeconfig(path, server string) error {
	ca, err := os.ReadFile(p.CACert())
	if err != nil {
		return err
	}
	cert, err := os.ReadFile(p.AdminCert())
	if err != nil {
		return err
	}
	key, err := os.ReadFile(p.AdminKey())
	if err != nil {
		return err
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kubelab"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca}
	cfg.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{ClientCertificateData: cert, ClientKeyData: key}
	cfg.Contexts["kubelab"] = &clientcmdapi.Context{Cluster: "kubelab", AuthInfo: AdminUser, Namespace: "default"}
	cfg.CurrentContext = "kubelab"
	data, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(path, data, 0o600)
}

// AdminToken is the bearer token of the admin, for clients that cannot use certificates.
func (p PKI) AdminToken() (string, error) {
	b, err := os.ReadFile(p.adminTokenFile())
	if err != nil {
		return "", err
	}
	return string(trimNewline(b)), nil
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

func issue(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certPath, keyPath string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().AddDate(5, 0, 0)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return fmt.Errorf("issue %s: %w", tmpl.Subject.CommonName, err)
	}
	return writePair(certPath, keyPath, der, key)
}

func writePair(certPath, keyPath string, der []byte, key *ecdsa.PrivateKey) error {
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		return err
	}
	return atomicfile.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

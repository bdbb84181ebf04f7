package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/kubelet/server/servertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue makes a certificate and key (PEM) for a server (IP SAN 127.0.0.1) or a client.
func (ca *testCA) issue(t *testing.T, cn string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// fixture is a running kubelet server with a fake runtime and the pods a test adds.
type fixture struct {
	t       *testing.T
	srv     *Server
	rt      *servertest.Runtime
	logsDir string
	pods    map[string]*corev1.Pod
	ca      *testCA
	// client authenticates with a certificate of the client CA.
	client     *http.Client
	restConfig *rest.Config
	base       string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	rt := servertest.NewRuntime(t)
	f := newFixtureWith(t, rt, filepath.Join(t.TempDir(), "pod-logs"))
	f.rt = rt
	return f
}

// newFixtureWith runs a kubelet server on the runtime; opts change its Config.
func newFixtureWith(t *testing.T, runtime runtimeapi.RuntimeServiceClient, logsDir string, opts ...func(*Config)) *fixture {
	t.Helper()
	dir := t.TempDir()
	ca := newTestCA(t, "test-ca")
	certPEM, keyPEM := ca.issue(t, "node-a", true)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	f := &fixture{t: t, logsDir: logsDir, pods: map[string]*corev1.Pod{}, ca: ca}
	cfg := Config{
		Addr: "127.0.0.1:0", CertFile: write("kubelet.crt", certPEM), KeyFile: write("kubelet.key", keyPEM),
		ClientCAFile: write("ca.crt", ca.certPEM), PodLogsDir: f.logsDir, Runtime: runtime,
		PodLookup: func(ns, name string) (*corev1.Pod, error) {
			if p := f.pods[ns+"/"+name]; p != nil {
				return p.DeepCopy(), nil
			}
			return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
		},
		PodList: func() ([]*corev1.Pod, error) {
			var out []*corev1.Pod
			for _, p := range f.pods {
				out = append(out, p.DeepCopy())
			}
			return out, nil
		},
		followRecheck: 50 * time.Millisecond,
	}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	testutil.Start(t, "the kubelet server", testutil.DefaultTimeout, srv.Run, testutil.Closed(srv.Ready()))
	f.base = "https://" + srv.Addr()
	clientCert, clientKey := ca.issue(t, "kube-apiserver-kubelet-client", false)
	f.restConfig = &rest.Config{Host: f.base, TLSClientConfig: rest.TLSClientConfig{CertData: clientCert, KeyData: clientKey, CAData: ca.certPEM}}
	f.client = f.httpClient(clientCert, clientKey)
	return f
}

// httpClient trusts the test CA and presents the given client certificate (none if nil).
func (f *fixture) httpClient(certPEM, keyPEM []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(f.ca.certPEM)
	cfg := &tls.Config{RootCAs: pool}
	if certPEM != nil {
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			f.t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	tr := &http.Transport{TLSClientConfig: cfg}
	f.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// addPod adds a pod (UID uid-<name>) with the given containers and no status.
func (f *fixture) addPod(ns, name string, containers ...string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}}
	for _, c := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: c, Image: "busybox"})
	}
	f.pods[ns+"/"+name] = pod
	return pod
}

// runContainer makes a container instance that runs (or ran) and returns its log path.
func (f *fixture) runContainer(pod *corev1.Pod, name, id string, restart int, running bool) string {
	dir := filepath.Join(f.logsDir, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	path := filepath.Join(dir, fmt.Sprintf("%d.log", restart))
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		f.t.Fatal(err)
	}
	f.rt.AddContainer(servertest.Container{ID: id, PodUID: string(pod.UID), Name: name, Running: running, LogPath: path})
	return path
}

// get does a GET and returns the status code and body.
func (f *fixture) get(path string) (int, string) {
	f.t.Helper()
	resp, err := f.client.Get(f.base + path)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	if _, err := io.Copy(&b, resp.Body); err != nil {
		f.t.Fatal(err)
	}
	return resp.StatusCode, b.String()
}

// cri formats one CRI log record.
func cri(ts time.Time, stream, tag, text string) string {
	return ts.UTC().Format(time.RFC3339Nano) + " " + stream + " " + tag + " " + text + "\n"
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	if _, err := fh.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

package apiserver_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/apiserver"
	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

// TestEtcdBehindMutualTLS: the API server stores a Secret in the embedded etcd over
// mutual TLS; a local process without etcd's client certificate cannot read it, one with
// the API server's etcd client certificate can; the data dir is private.
func TestEtcdBehindMutualTLS(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	name := fmt.Sprintf("mtls-%d", time.Now().UnixNano())
	if _, err := s.Client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string][]byte{"password": []byte("hunter2")},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Client.CoreV1().Secrets("default").Delete(ctx, name, metav1.DeleteOptions{}) })
	key := "/registry/secrets/default/" + name
	endpoint := fmt.Sprintf("https://127.0.0.1:%d", s.EtcdClientPort)
	pki := apiserver.PKI{Dir: filepath.Join(s.DataDir, "pki")}

	resp, err := s.EtcdClient(t).Get(ctx, key)
	if err != nil || len(resp.Kvs) != 1 || !strings.Contains(string(resp.Kvs[0].Value), "hunter2") {
		t.Fatalf("read with the API server's etcd client certificate: %v %v", resp, err)
	}

	// Without a client certificate: the handshake fails.
	tc, err := transport.TLSInfo{TrustedCAFile: pki.EtcdCACert()}.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := tls.Dial("tcp", strings.TrimPrefix(endpoint, "https://"), tc)
	if err == nil {
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Fatalf("TLS without a client certificate: %v, want etcd to require one", err)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tc, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err == nil {
		defer c.Close()
		getCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if resp, err := c.Get(getCtx, key); err == nil {
			t.Fatalf("a client without a certificate read %d keys", len(resp.Kvs))
		}
	}
	// Plain http.
	c2, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://127.0.0.1:" + strings.Split(endpoint, ":")[2]},
		DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err == nil {
		defer c2.Close()
		getCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		if resp, err := c2.Get(getCtx, key); err == nil {
			t.Fatalf("a plain-http client read %d keys", len(resp.Kvs))
		}
	}

	fi, err := os.Stat(filepath.Join(s.DataDir, "etcd"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("etcd data dir: %v %v, want mode 0700", fi.Mode(), err)
	}
}

// TestExternalEtcdWithTLS: an external etcd that requires client certificates works
// when the API server is given the CA, certificate and key files.
func TestExternalEtcdWithTLS(t *testing.T) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("etcd (Debian's etcd-server) is not installed; hack/setup.sh --test installs it")
	}
	dir := t.TempDir()
	certs := apiserver.PKI{Dir: filepath.Join(dir, "certs")}
	if err := certs.EnsureEtcd("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	client := fmt.Sprintf("https://127.0.0.1:%d", apiservertest.FreePort(t))
	peer := fmt.Sprintf("http://127.0.0.1:%d", apiservertest.FreePort(t))
	cmd := exec.Command(bin, "--name", "external-tls", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", "external-tls="+peer,
		"--cert-file", certs.EtcdServerCert(), "--key-file", certs.EtcdServerKey(),
		"--trusted-ca-file", certs.EtcdCACert(), "--client-cert-auth")
	logf, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
	})
	s := apiservertest.Start(t, apiservertest.Options{EtcdServers: []string{client},
		EtcdCAFile: certs.EtcdCACert(), EtcdCertFile: certs.APIServerEtcdClientCert(), EtcdKeyFile: certs.APIServerEtcdClientKey()})
	ctx := context.Background()
	cm, err := s.Client.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "external-tls-"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.EtcdClient(t).Get(ctx, "/registry/configmaps/default/"+cm.Name)
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("the ConfigMap is not in the external etcd: %v %v", resp, err)
	}
}

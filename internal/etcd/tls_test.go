package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/kubelab/kubelab/internal/apiserver"
	"github.com/kubelab/kubelab/internal/testutil"
)

// testPKI makes etcd's certificates, as kubelab lays them out, in a temporary dir.
func testPKI(t *testing.T) apiserver.PKI {
	t.Helper()
	pki := apiserver.PKI{Dir: filepath.Join(t.TempDir(), "pki")}
	if err := pki.EnsureEtcd("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	return pki
}

// pkiOf is the PKI runEtcd gave s.
func pkiOf(s *Server) apiserver.PKI {
	return apiserver.PKI{Dir: filepath.Dir(filepath.Dir(s.cfg.ClientTLS.TrustedCAFile))}
}

// clientTLS is a TLS configuration trusting s's CA with the client certificate of who:
// "apiserver", "healthcheck", "none" (no certificate) or "foreign" (one of another CA).
func clientTLS(t *testing.T, s *Server, who string) *tls.Config {
	t.Helper()
	pki := pkiOf(s)
	info := transport.TLSInfo{TrustedCAFile: pki.EtcdCACert()}
	switch who {
	case "apiserver":
		info.CertFile, info.KeyFile = pki.APIServerEtcdClientCert(), pki.APIServerEtcdClientKey()
	case "healthcheck":
		info.CertFile, info.KeyFile = pki.EtcdHealthcheckClientCert(), pki.EtcdHealthcheckClientKey()
	case "foreign":
		other := testPKI(t)
		info.CertFile, info.KeyFile = other.APIServerEtcdClientCert(), other.APIServerEtcdClientKey()
	case "none":
	default:
		t.Fatalf("unknown client %q", who)
	}
	tc, err := info.ClientConfig()
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// waitReady waits until s, run by runEtcd with errc, is ready; a Run that ends first
// fails the test.
func waitReady(t *testing.T, s *Server, errc chan error) {
	t.Helper()
	ready := testutil.Closed(s.Ready())
	testutil.EventuallyWithin(t, 30*time.Second, "etcd to be ready", func() bool {
		select {
		case err := <-errc:
			t.Fatalf("Run: %v", err)
		default:
		}
		return ready()
	})
}

// TestMutualTLS: etcd serves only clients with a certificate of its CA. Without one, or
// with one of another CA, the TLS handshake fails and nothing is read; with the API
// server's client certificate reads and writes work; plain http gets no answer.
func TestMutualTLS(t *testing.T) {
	s, errc, _ := runEtcd(t, Config{DataDir: filepath.Join(t.TempDir(), "etcd"), MinFreeBytes: -1})
	waitReady(t, s, errc)
	if !strings.HasPrefix(s.Endpoints()[0], "https://") {
		t.Fatalf("endpoint %s is not https", s.Endpoints()[0])
	}
	addr := strings.TrimPrefix(s.Endpoints()[0], "https://")

	if err := put(newClient(t, s), "/registry/secrets/default/s1", "secret"); err != nil {
		t.Fatalf("put with the API server's certificate: %v", err)
	}

	for _, who := range []string{"none", "foreign"} {
		t.Run("handshake without a certificate of etcd's CA: "+who, func(t *testing.T) {
			// In TLS 1.3 the client learns of the refusal at its first read.
			conn, err := tls.Dial("tcp", addr, clientTLS(t, s, who))
			if err == nil {
				defer conn.Close()
				conn.SetDeadline(time.Now().Add(5 * time.Second))
				_, err = conn.Read(make([]byte, 1))
			}
			if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the handshake went through (%v), want etcd to refuse the client", err)
			}
			t.Logf("refused: %v", err)
			if who == "none" && !strings.Contains(err.Error(), "certificate required") {
				t.Errorf("error %q does not say a certificate is required", err)
			}
			if who == "foreign" && !strings.Contains(err.Error(), "certificate") {
				t.Errorf("error %q does not name the certificate", err)
			}

			c, err := clientv3.New(clientv3.Config{Endpoints: s.Endpoints(), TLS: clientTLS(t, s, who),
				DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
			if err != nil {
				return // refused while dialing
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if resp, err := c.Get(ctx, "/registry/secrets/", clientv3.WithPrefix()); err == nil {
				t.Fatalf("a client without etcd's certificate read %d keys", len(resp.Kvs))
			}
		})
	}

	t.Run("plain http", func(t *testing.T) {
		hc := &http.Client{Timeout: 5 * time.Second}
		resp, err := hc.Get("http://" + addr + "/health")
		if err == nil {
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode == http.StatusOK && strings.Contains(string(body), "health") {
				t.Fatalf("plain http got an answer: %s %s", resp.Status, body)
			}
		}
	})

	t.Run("health check certificate", func(t *testing.T) {
		hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS(t, s, "healthcheck")}}
		resp, err := hc.Get(s.Endpoints()[0] + "/health")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"health":"true"`) {
			t.Fatalf("GET /health: %s %s", resp.Status, body)
		}
	})
}

// TestDataDirMode: Run creates the data dir with mode 0700 and makes an existing one
// that is open to others 0700 again.
func TestDataDirMode(t *testing.T) {
	for _, tc := range []struct {
		name   string
		before os.FileMode // 0: the dir does not exist yet
	}{{"new", 0}, {"open to others", 0o755}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "etcd")
			if tc.before != 0 {
				if err := os.Mkdir(dir, tc.before); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(dir, tc.before); err != nil { // past the umask
					t.Fatal(err)
				}
			}
			rec := &recorder{}
			s, errc, cancel := runEtcd(t, Config{DataDir: dir, MinFreeBytes: -1, Logger: slog.New(rec)})
			waitReady(t, s, errc)
			fi, err := os.Stat(dir)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o700 {
				t.Fatalf("data dir mode %04o, want 0700", fi.Mode().Perm())
			}
			cancel() // etcd logs from its goroutines until it has stopped
			if err := runError(t, errc, 30*time.Second); err != nil {
				t.Fatalf("Run: %v", err)
			}
			warned := false
			for _, r := range rec.records {
				warned = warned || strings.Contains(r.Message, "open to other users")
			}
			if warned != (tc.before != 0) {
				t.Errorf("warned about the mode: %v, want %v", warned, tc.before != 0)
			}
		})
	}
}

// TestConfigNeedsTLS: New refuses http URLs and missing certificate files.
func TestConfigNeedsTLS(t *testing.T) {
	files := TLSFiles{CertFile: "s.crt", KeyFile: "s.key", TrustedCAFile: "ca.crt"}
	ok := Config{DataDir: "/d", ClientURL: "https://127.0.0.1:2379", PeerURL: "https://127.0.0.1:2380", ClientTLS: files, PeerTLS: files}
	if _, err := New(ok); err != nil {
		t.Fatalf("New(%+v): %v", ok, err)
	}
	for name, mod := range map[string]func(*Config){
		"http client URL": func(c *Config) { c.ClientURL = "http://127.0.0.1:2379" },
		"http peer URL":   func(c *Config) { c.PeerURL = "http://127.0.0.1:2380" },
		"no client CA":    func(c *Config) { c.ClientTLS.TrustedCAFile = "" },
		"no peer key":     func(c *Config) { c.PeerTLS.KeyFile = "" },
	} {
		c := ok
		mod(&c)
		if _, err := New(c); err == nil {
			t.Errorf("%s: New accepted %+v", name, c)
		} else if !strings.Contains(err.Error(), "https") && !strings.Contains(err.Error(), "TLS") {
			t.Errorf("%s: error %q does not say what is missing", name, err)
		}
	}
	if s, _ := New(ok); s.cfg.MaxRequestBytes != DefaultMaxRequestBytes || DefaultMaxRequestBytes != 1572864 {
		t.Errorf("max request bytes %d, want etcd's 1.5 MiB", s.cfg.MaxRequestBytes)
	}
}

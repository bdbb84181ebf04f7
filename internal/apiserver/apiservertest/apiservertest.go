// Package apiservertest starts kubelab's API server, on an embedded etcd or an etcd the
// caller gives, for tests of any package: real HTTPS on a free loopback port, real etcd
// in a temporary directory, stopped in t.Cleanup.
package apiservertest

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubelab/kubelab/internal/apiserver"
	"github.com/kubelab/kubelab/internal/etcd"
)

// Options say where state lives; zero values pick fresh temporary ones.
type Options struct {
	// DataDir for the API server's PKI and kubeconfig (and the embedded etcd's data).
	DataDir string
	// EtcdServers of an external etcd; empty starts an embedded one in DataDir/etcd,
	// behind mutual TLS with the certificates of DataDir/pki (PKI.EnsureEtcd).
	EtcdServers []string
	// EtcdCAFile, EtcdCertFile and EtcdKeyFile are the API server's TLS toward an
	// external etcd; empty for one served over http. The embedded etcd sets its own.
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
	// Port to serve on; 0 picks a free one.
	Port int
	// EtcdPorts of the embedded etcd (client, peer); zero picks free ones.
	EtcdClientPort, EtcdPeerPort int
	// ServiceCIDR, ServiceRepairInterval, AdvertiseAddress and AdvertisePort are passed
	// to the API server's Config; zero values take its defaults.
	ServiceCIDR           string
	ServiceRepairInterval time.Duration
	AdvertiseAddress      string
	AdvertisePort         int
	// Listeners are handed to the server (Server.AddListener) between New and Run; the
	// server closes them when it stops, so a restart needs new ones.
	Listeners []net.Listener
	// GCPercent is the API server's Config.GCPercent (0: the default, tuned).
	GCPercent int
	// NoDefaultServiceAccounts: the helper does not create the "default" ServiceAccount
	// of each namespace (see keepDefaultServiceAccounts), for tests of whatever does.
	NoDefaultServiceAccounts bool
	// ServiceAccountIssuers and ServiceAccountJWKSURI are passed to the API server's
	// Config (--service-account-issuer, --service-account-jwks-uri).
	ServiceAccountIssuers []string
	ServiceAccountJWKSURI string
	// ClusterDial is the API server's Config.ClusterDial (ClusterNetwork.Dial, say).
	ClusterDial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Server is a running API server.
type Server struct {
	Options
	URL        string
	Kubeconfig string
	Config     *rest.Config
	Client     kubernetes.Interface
	// API is the server itself (for AddListener, say).
	API *apiserver.Server

	stop        func()
	etcdServers []string
	etcdTLS     [3]string // CA, certificate, key; empty without TLS
}

// Start runs an API server until the test ends (or Stop is called).
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	if opts.Port == 0 {
		opts.Port = FreePort(t)
	}
	// The API server stops before its etcd, as it would in a cluster being shut down.
	ctx, cancel := context.WithCancel(context.Background())
	etcdCtx, cancelEtcd := context.WithCancel(context.Background())
	done := make(chan error, 1)
	etcdDone := make(chan error, 1)
	servers := opts.EtcdServers
	etcdCA, etcdCert, etcdKey := opts.EtcdCAFile, opts.EtcdCertFile, opts.EtcdKeyFile
	var etcdReady <-chan struct{}
	if len(servers) == 0 {
		if opts.EtcdClientPort == 0 {
			opts.EtcdClientPort, opts.EtcdPeerPort = FreePort(t), FreePort(t)
		}
		pki := apiserver.PKI{Dir: filepath.Join(opts.DataDir, "pki")}
		err := pki.EnsureEtcd("127.0.0.1")
		var e *etcd.Server
		if err == nil {
			e, err = etcd.New(etcd.Config{
				DataDir:         filepath.Join(opts.DataDir, "etcd"),
				ClientURL:       fmt.Sprintf("https://127.0.0.1:%d", opts.EtcdClientPort),
				PeerURL:         fmt.Sprintf("https://127.0.0.1:%d", opts.EtcdPeerPort),
				ClientTLS:       etcd.TLSFiles{CertFile: pki.EtcdServerCert(), KeyFile: pki.EtcdServerKey(), TrustedCAFile: pki.EtcdCACert()},
				PeerTLS:         etcd.TLSFiles{CertFile: pki.EtcdPeerCert(), KeyFile: pki.EtcdPeerKey(), TrustedCAFile: pki.EtcdCACert()},
				MaxRequestBytes: apiserver.EtcdMaxRequestBytes,
			})
		}
		if err != nil {
			cancel()
			cancelEtcd()
			t.Fatal(err)
		}
		go func() { etcdDone <- e.Run(etcdCtx) }()
		servers, etcdReady = e.Endpoints(), e.Ready()
		etcdCA, etcdCert, etcdKey = pki.EtcdCACert(), pki.APIServerEtcdClientCert(), pki.APIServerEtcdClientKey()
	}
	api, err := apiserver.New(apiserver.Config{DataDir: opts.DataDir, Port: opts.Port, EtcdServers: servers,
		EtcdCAFile: etcdCA, EtcdCertFile: etcdCert, EtcdKeyFile: etcdKey,
		ServiceCIDR: opts.ServiceCIDR, ServiceRepairInterval: opts.ServiceRepairInterval,
		AdvertiseAddress: opts.AdvertiseAddress, AdvertisePort: opts.AdvertisePort, ClusterDial: opts.ClusterDial,
		ServiceAccountIssuers: opts.ServiceAccountIssuers, ServiceAccountJWKSURI: opts.ServiceAccountJWKSURI,
		GCPercent: opts.GCPercent})
	if err == nil {
		for _, l := range opts.Listeners {
			if err = api.AddListener(l); err != nil {
				break
			}
		}
	}
	if err != nil {
		cancel()
		cancelEtcd()
		t.Fatal(err)
	}
	go func() {
		if etcdReady != nil {
			select {
			case <-etcdReady:
			case <-ctx.Done():
				done <- nil
				return
			}
		}
		done <- api.Run(ctx)
	}()
	s := &Server{Options: opts, API: api, etcdServers: servers, etcdTLS: [3]string{etcdCA, etcdCert, etcdKey}}
	stopped := false
	s.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		wait := func(what string, ch <-chan error) {
			select {
			case err := <-ch:
				if err != nil && !errors.Is(err, context.Canceled) {
					t.Logf("%s stopped with: %v", what, err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("%s did not stop within 30s", what)
			}
		}
		wait("API server", done)
		cancelEtcd()
		if etcdReady != nil {
			wait("etcd", etcdDone)
		}
	}
	t.Cleanup(s.stop)
	select {
	case <-api.Ready():
	case err := <-done:
		s.stop()
		t.Fatalf("API server did not start: %v", err)
	case <-time.After(2 * time.Minute):
		s.stop()
		t.Fatal("API server not ready within 2m")
	}
	s.URL, s.Kubeconfig = api.URL(), api.KubeconfigPath()
	s.Config, err = clientcmd.BuildConfigFromFlags("", s.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	s.Config.QPS, s.Config.Burst = 1000, 2000
	s.Client = kubernetes.NewForConfigOrDie(s.Config)
	if !opts.NoDefaultServiceAccounts {
		s.keepDefaultServiceAccounts(t)
	}
	return s
}

// EtcdClient is a client of the server's etcd with the API server's own credentials (the
// apiserver-etcd-client certificate for the embedded etcd), closed when the test ends.
func (s *Server) EtcdClient(t testing.TB) *clientv3.Client {
	t.Helper()
	var tc *tls.Config
	if s.etcdTLS[0] != "" {
		var err error
		tc, err = transport.TLSInfo{TrustedCAFile: s.etcdTLS[0], CertFile: s.etcdTLS[1], KeyFile: s.etcdTLS[2]}.ClientConfig()
		if err != nil {
			t.Fatal(err)
		}
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: s.etcdServers, TLS: tc, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Stop stops the server (and its embedded etcd) now; state stays in DataDir.
func (s *Server) Stop() { s.stop() }

// FreePort returns a loopback TCP port that was free a moment ago and that no earlier
// call in this process returned: the kernel may hand a port it just released out again,
// and a server and its etcd given the same port cannot both listen.
func FreePort(t testing.TB) int {
	t.Helper()
	givenMu.Lock()
	defer givenMu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !given[port] {
			given[port] = true
			return port
		}
	}
}

// given are the ports FreePort returned.
var (
	givenMu sync.Mutex
	given   = map[int]bool{}
)

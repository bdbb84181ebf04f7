// Package apiservertest starts kubelab's API server, on an embedded etcd or an etcd the
// caller gives, for tests of any package: real HTTPS on a free loopback port, real etcd
// in a temporary directory, stopped in t.Cleanup.
package apiservertest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"testing"
	"time"

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
	// EtcdServers of an external etcd; empty starts an embedded one in DataDir/etcd.
	EtcdServers []string
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

	stop func()
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
	var etcdReady <-chan struct{}
	if len(servers) == 0 {
		if opts.EtcdClientPort == 0 {
			opts.EtcdClientPort, opts.EtcdPeerPort = FreePort(t), FreePort(t)
		}
		e, err := etcd.New(etcd.Config{
			DataDir:   filepath.Join(opts.DataDir, "etcd"),
			ClientURL: fmt.Sprintf("http://127.0.0.1:%d", opts.EtcdClientPort),
			PeerURL:   fmt.Sprintf("http://127.0.0.1:%d", opts.EtcdPeerPort),
		})
		if err != nil {
			cancel()
			cancelEtcd()
			t.Fatal(err)
		}
		go func() { etcdDone <- e.Run(etcdCtx) }()
		servers, etcdReady = e.Endpoints(), e.Ready()
	}
	api, err := apiserver.New(apiserver.Config{DataDir: opts.DataDir, Port: opts.Port, EtcdServers: servers,
		ServiceCIDR: opts.ServiceCIDR, ServiceRepairInterval: opts.ServiceRepairInterval,
		AdvertiseAddress: opts.AdvertiseAddress, AdvertisePort: opts.AdvertisePort})
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
	s := &Server{Options: opts, API: api}
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
	return s
}

// Stop stops the server (and its embedded etcd) now; state stays in DataDir.
func (s *Server) Stop() { s.stop() }

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

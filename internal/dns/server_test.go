package dns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kubelab/kubelab/internal/testutil"
)

type testServer struct {
	client   *fake.Clientset
	udp, tcp string
	// watching receives the resource of each watch the server's informers start.
	watching chan string
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// newTestServer makes a server over a fake cluster holding objs, with sockets on
// 127.0.0.1; serve starts it.
func newTestServer(t *testing.T, objs ...runtime.Object) (*testServer, *Server, net.PacketConn, net.Listener) {
	t.Helper()
	return newTestServerWith(t, Config{Logger: quiet}, objs...)
}

// newTestServerWith is newTestServer with the server's config cfg.
func newTestServerWith(t *testing.T, cfg Config, objs ...runtime.Object) (*testServer, *Server, net.PacketConn, net.Listener) {
	t.Helper()
	ts := &testServer{client: fake.NewClientset(objs...), watching: make(chan string, 100)}
	// The watch is registered with the tracker before it is announced, so an object
	// created after the announcement reaches the informer.
	ts.client.PrependWatchReactor("*", func(a k8stesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := a.(k8stesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := ts.client.Tracker().Watch(a.GetResource(), a.GetNamespace(), opts)
		if err == nil {
			select {
			case ts.watching <- a.GetResource().Resource:
			default:
			}
		}
		return true, w, err
	})
	srv, err := New(cfg, ts.client)
	if err != nil {
		t.Fatal(err)
	}
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { udp.Close() })
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tcp.Close() })
	ts.udp, ts.tcp = udp.LocalAddr().String(), tcp.Addr().String()
	return ts, srv, udp, tcp
}

// serve runs srv until the test ends.
func serve(t *testing.T, srv *Server, udp net.PacketConn, tcp net.Listener) {
	t.Helper()
	testutil.Start(t, "the DNS server", 0, func(ctx context.Context) error { return srv.Serve(ctx, udp, tcp) }, testutil.NoWait)
}

// startServer serves objs and waits until the informers watch.
func startServer(t *testing.T, objs ...runtime.Object) *testServer {
	t.Helper()
	return startServerWith(t, Config{Logger: quiet}, objs...)
}

// startServerWith is startServer with the server's config cfg.
func startServerWith(t *testing.T, cfg Config, objs ...runtime.Object) *testServer {
	t.Helper()
	ts, srv, udp, tcp := newTestServerWith(t, cfg, objs...)
	serve(t, srv, udp, tcp)
	want := map[string]bool{"services": true, "endpointslices": true, "namespaces": true}
	deadline := time.After(10 * time.Second)
	for len(want) > 0 {
		select {
		case res := <-ts.watching:
			delete(want, res)
		case <-deadline:
			t.Fatalf("informers never watched %v", want)
		}
	}
	return ts
}

func exchange(t *testing.T, network, addr string, req *mdns.Msg) *mdns.Msg {
	t.Helper()
	c := &mdns.Client{Net: network, Timeout: 5 * time.Second}
	m, _, err := c.Exchange(req, addr)
	if err != nil {
		t.Fatalf("%s query %s %s: %v", network, req.Question[0].Name, mdns.TypeToString[req.Question[0].Qtype], err)
	}
	return m
}

func (ts *testServer) ask(t *testing.T, network, name string, qtype uint16) *mdns.Msg {
	t.Helper()
	addr := ts.udp
	if network == "tcp" {
		addr = ts.tcp
	}
	return exchange(t, network, addr, query(name, qtype, 0))
}

// waitFor asks name over UDP until check holds for the answer.
func (ts *testServer) waitFor(t *testing.T, name string, qtype uint16, what string, check func(*mdns.Msg) bool) *mdns.Msg {
	t.Helper()
	var m *mdns.Msg
	testutil.EventuallyWithin(t, 10*time.Second, name+" "+mdns.TypeToString[qtype]+" "+what, func() (bool, error) {
		m = ts.ask(t, "udp", name, qtype)
		if !check(m) {
			return false, fmt.Errorf("last answer:\n%v", m)
		}
		return true, nil
	})
	return m
}

func answers(m *mdns.Msg) []string { return rrs(m.Answer) }

func TestServeUDPAndTCP(t *testing.T) {
	ts := startServer(t, fixture()...)
	for _, network := range []string{"udp", "tcp"} {
		m := ts.ask(t, network, "web.default.svc.cluster.local.", mdns.TypeA)
		if m.Rcode != mdns.RcodeSuccess || !m.Authoritative || !slices.Equal(answers(m), []string{"web.default.svc.cluster.local. A 10.96.0.20"}) {
			t.Errorf("%s: web A: %v", network, m)
		}
		m = ts.ask(t, network, "_postgres._tcp.pg.db.svc.cluster.local.", mdns.TypeSRV)
		if len(m.Answer) != 3 || len(m.Extra) != 3 {
			t.Errorf("%s: pg SRV: %v", network, m)
		}
		// NXDOMAIN and NODATA, both with the SOA.
		m = ts.ask(t, network, "nope.default.svc.cluster.local.", mdns.TypeA)
		if m.Rcode != mdns.RcodeNameError || len(m.Answer) != 0 || len(m.Ns) != 1 || m.Ns[0].Header().Rrtype != mdns.TypeSOA {
			t.Errorf("%s: nope A: %v", network, m)
		}
		m = ts.ask(t, network, "web.default.svc.cluster.local.", mdns.TypeAAAA)
		if m.Rcode != mdns.RcodeSuccess || len(m.Answer) != 0 || len(m.Ns) != 1 || m.Ns[0].Header().Rrtype != mdns.TypeSOA {
			t.Errorf("%s: web AAAA: %v", network, m)
		}
		m = ts.ask(t, network, "ext.default.svc.cluster.local.", mdns.TypeA)
		if !slices.Equal(answers(m), []string{"ext.default.svc.cluster.local. CNAME Example.com."}) {
			t.Errorf("%s: ext A: %v", network, m)
		}
		m = ts.ask(t, network, "20.0.96.10.in-addr.arpa.", mdns.TypePTR)
		if !slices.Equal(answers(m), []string{"20.0.96.10.in-addr.arpa. PTR web.default.svc.cluster.local."}) {
			t.Errorf("%s: PTR: %v", network, m)
		}
		m = ts.ask(t, network, "example.com.", mdns.TypeA)
		if m.Rcode != mdns.RcodeRefused {
			t.Errorf("%s: example.com: %v", network, m)
		}
	}
	// The nameserver is kube-dns's ClusterIP.
	if m := ts.ask(t, "udp", "ns.dns.cluster.local.", mdns.TypeA); !slices.Equal(answers(m), []string{"ns.dns.cluster.local. A 10.96.0.10"}) {
		t.Errorf("ns.dns: %v", m)
	}
}

func TestServeFollowsTheCluster(t *testing.T) {
	ts := startServer(t, namespace("default"))
	ctx := context.Background()
	const name = "late.default.svc.cluster.local."
	soa := func() uint32 {
		m := ts.ask(t, "udp", "cluster.local.", mdns.TypeSOA)
		if len(m.Answer) != 1 {
			t.Fatalf("SOA: %v", m)
		}
		return m.Answer[0].(*mdns.SOA).Serial
	}
	if m := ts.ask(t, "udp", name, mdns.TypeA); m.Rcode != mdns.RcodeNameError {
		t.Fatalf("before the Service: %v", m)
	}
	serial := soa()

	// A Service created after the start appears.
	svc := clusterIPService("default", "late", []string{"10.96.0.50"}, port("http", 80, corev1.ProtocolTCP))
	if _, err := ts.client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ts.waitFor(t, name, mdns.TypeA, "answered 10.96.0.50", func(m *mdns.Msg) bool {
		return slices.Equal(answers(m), []string{name + " A 10.96.0.50"})
	})
	if s := soa(); s <= serial {
		t.Errorf("SOA serial %d after a change, was %d", s, serial)
	}

	// A headless one follows its endpoints' readiness.
	const hl = "hl.default.svc.cluster.local."
	if _, err := ts.client.CoreV1().Services("default").Create(ctx, headlessService("default", "hl"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sl := slice("default", "hl", "hl-1", discoveryv1.AddressTypeIPv4, nil, ep{addr: "10.244.0.5", hostname: "hl-0", ready: yes})
	if _, err := ts.client.DiscoveryV1().EndpointSlices("default").Create(ctx, sl, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ts.waitFor(t, "hl-0."+hl, mdns.TypeA, "answered 10.244.0.5", func(m *mdns.Msg) bool {
		return slices.Equal(answers(m), []string{"hl-0." + hl + " A 10.244.0.5"})
	})
	sl.Endpoints[0].Conditions.Ready = no
	if _, err := ts.client.DiscoveryV1().EndpointSlices("default").Update(ctx, sl, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ts.waitFor(t, hl, mdns.TypeA, "NXDOMAIN without ready endpoints", func(m *mdns.Msg) bool { return m.Rcode == mdns.RcodeNameError })

	// A deleted Service disappears.
	if err := ts.client.CoreV1().Services("default").Delete(ctx, "late", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ts.waitFor(t, name, mdns.TypeA, "NXDOMAIN", func(m *mdns.Msg) bool { return m.Rcode == mdns.RcodeNameError && len(m.Ns) == 1 })

	// So does a namespace.
	if err := ts.client.CoreV1().Namespaces().Delete(ctx, "default", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ts.waitFor(t, "default.svc.cluster.local.", mdns.TypeA, "NXDOMAIN", func(m *mdns.Msg) bool { return m.Rcode == mdns.RcodeNameError })
}

// A large answer is truncated over UDP; the client gets it whole over TCP.
func TestServeTruncation(t *testing.T) {
	ts := startServer(t, bigHeadless(100)...)
	const name = "big.default.svc.cluster.local."
	m := ts.ask(t, "udp", name, mdns.TypeA)
	if !m.Truncated || len(m.Answer) >= 100 {
		t.Fatalf("udp: truncated %v with %d answers", m.Truncated, len(m.Answer))
	}
	m = exchange(t, "udp", ts.udp, query(name, mdns.TypeA, 4096))
	if !m.Truncated || len(m.Answer) >= 100 {
		t.Fatalf("udp with EDNS(0): truncated %v with %d answers", m.Truncated, len(m.Answer))
	}
	m = ts.ask(t, "tcp", name, mdns.TypeA)
	if m.Truncated || len(m.Answer) != 100 {
		t.Fatalf("tcp: truncated %v with %d answers", m.Truncated, len(m.Answer))
	}
	m = ts.ask(t, "tcp", name, mdns.TypeSRV)
	if m.Truncated || len(m.Answer) != 100 || len(m.Extra) != 100 {
		t.Fatalf("tcp SRV: truncated %v with %d answers, %d extra", m.Truncated, len(m.Answer), len(m.Extra))
	}
}

// A query that arrives before the caches synced is answered from the synced caches.
func TestServeWaitsForSync(t *testing.T) {
	ts, srv, udp, tcp := newTestServer(t, fixture()...)
	release := make(chan struct{})
	listed := make(chan struct{}, 1)
	ts.client.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		select {
		case listed <- struct{}{}:
		default:
		}
		<-release
		return false, nil, nil
	})
	serve(t, srv, udp, tcp)
	<-listed
	got := make(chan *mdns.Msg, 1)
	go func() {
		c := &mdns.Client{Net: "udp", Timeout: 10 * time.Second}
		m, _, err := c.Exchange(query("web.default.svc.cluster.local.", mdns.TypeA, 0), ts.udp)
		if err != nil {
			t.Errorf("query: %v", err)
		}
		got <- m
	}()
	close(release)
	if m := <-got; m == nil || !slices.Equal(answers(m), []string{"web.default.svc.cluster.local. A 10.96.0.20"}) {
		t.Errorf("answer to the early query: %v", m)
	}
}

func TestServeEnds(t *testing.T) {
	_, srv, udp, tcp := newTestServer(t, fixture()...)
	if err := srv.Serve(context.Background(), nil, nil); err == nil || !strings.Contains(err.Error(), "needs a UDP socket or a TCP listener") {
		t.Errorf("serve without sockets: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, udp, tcp) }()
	// Answering proves it serves.
	exchange(t, "tcp", tcp.Addr().String(), query("web.default.svc.cluster.local.", mdns.TypeA, 0))
	u2, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(ctx, u2, nil); err == nil || !strings.Contains(err.Error(), "already served") {
		t.Errorf("second serve: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after its context ended")
	}
	// The sockets are closed.
	if _, err := tcp.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("tcp listener after serve: %v", err)
	}
	if _, _, err := udp.ReadFrom(make([]byte, 10)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("udp socket after serve: %v", err)
	}
}

// Serve gives up when its context ends before the caches synced.
func TestServeEndsBeforeSync(t *testing.T) {
	ts, srv, udp, tcp := newTestServer(t, fixture()...)
	ctx, cancel := context.WithCancel(context.Background())
	listed := make(chan struct{}, 1)
	// The list hangs until the request is abandoned, as a cluster that does not answer.
	ts.client.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
		select {
		case listed <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return true, nil, ctx.Err()
	})
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, udp, nil) }()
	<-listed
	cancel()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "caches did not sync") || !errors.Is(err, context.Canceled) {
			t.Errorf("serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after its context ended")
	}
	if _, _, err := udp.ReadFrom(make([]byte, 10)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("udp socket after serve: %v", err)
	}
	_ = tcp
}

func TestNewErrors(t *testing.T) {
	if _, err := New(Config{}, nil); err == nil {
		t.Error("New without a client succeeded")
	}
	if _, err := New(Config{Domain: "bad_domain"}, fake.NewClientset()); err == nil || !strings.Contains(err.Error(), "dns config") {
		t.Errorf("New with a bad domain: %v", err)
	}
}

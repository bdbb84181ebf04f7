package dns

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// benchObjects is the fixture plus 1000 ClusterIP Services and a headless Service with
// 100 endpoints.
func benchObjects() []runtime.Object {
	objs := append(fixture(), bigHeadless(100)[1:]...)
	for i := range 1000 {
		objs = append(objs, clusterIPService("default", fmt.Sprintf("svc-%d", i), []string{fmt.Sprintf("10.97.%d.%d", i/250, i%250+1)},
			port("http", 80, corev1.ProtocolTCP)))
	}
	return objs
}

func benchRespond(b *testing.B, name string, qtype uint16) {
	r := testResolver(b, benchObjects()...)
	req := query(name, qtype, 1232)
	b.ReportAllocs()
	for b.Loop() {
		if m := r.respond(req, false); m.Rcode != mdns.RcodeSuccess || len(m.Answer) == 0 {
			b.Fatalf("answer: %v", m)
		}
	}
}

// In-process: from the request to the response message (no wire).
func BenchmarkRespondClusterIP(b *testing.B) {
	benchRespond(b, "svc-500.default.svc.cluster.local.", mdns.TypeA)
}
func BenchmarkRespondHeadless100(b *testing.B) {
	benchRespond(b, "big.default.svc.cluster.local.", mdns.TypeA)
}
func BenchmarkRespondSRV(b *testing.B) {
	benchRespond(b, "_postgres._tcp.pg.db.svc.cluster.local.", mdns.TypeSRV)
}
func BenchmarkRespondPTR(b *testing.B) {
	benchRespond(b, "5.1.244.10.in-addr.arpa.", mdns.TypePTR)
}

// A query's round trip over UDP on 127.0.0.1 to a serving Server.
func BenchmarkExchangeUDP(b *testing.B) {
	srv, err := New(Config{Logger: quiet}, fake.NewClientset(benchObjects()...))
	if err != nil {
		b.Fatal(err)
	}
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, udp, nil) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
	}()
	c := &mdns.Client{Net: "udp", Timeout: 5 * time.Second}
	conn, err := c.Dial(udp.LocalAddr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	req := query("svc-500.default.svc.cluster.local.", mdns.TypeA, 0)
	b.ReportAllocs()
	for b.Loop() {
		m, _, err := c.ExchangeWithConn(req, conn)
		if err != nil || len(m.Answer) != 1 {
			b.Fatalf("exchange: %v %v", m, err)
		}
	}
}

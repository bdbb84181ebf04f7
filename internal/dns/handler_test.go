package dns

import (
	"fmt"
	"testing"

	mdns "github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// bigHeadless is a headless Service big/default with n ready endpoints.
func bigHeadless(n int) []runtime.Object {
	var eps []ep
	for i := range n {
		eps = append(eps, ep{addr: fmt.Sprintf("10.244.%d.%d", i/200, i%200+1), hostname: fmt.Sprintf("big-%d", i)})
	}
	return []runtime.Object{namespace("default"), headlessService("default", "big", port("http", 80, corev1.ProtocolTCP)),
		slice("default", "big", "big-1", discoveryv1.AddressTypeIPv4,
			[]discoveryv1.EndpointPort{slicePort("http", 80, corev1.ProtocolTCP)}, eps...)}
}

func query(name string, qtype uint16, edns int) *mdns.Msg {
	m := new(mdns.Msg)
	m.SetQuestion(name, qtype)
	if edns > 0 {
		m.SetEdns0(uint16(edns), false)
	}
	return m
}

func TestRespondTruncates(t *testing.T) {
	r := testResolver(t, bigHeadless(100)...)
	tests := []struct {
		what      string
		edns      int
		tcp       bool
		truncated bool
		max       int // bytes
	}{
		{what: "udp", edns: 0, truncated: true, max: 512},
		{what: "udp edns 1000", edns: 1000, truncated: true, max: 1000},
		{what: "udp edns 4096 (capped)", edns: 4096, truncated: true, max: udpPayload},
		{what: "udp edns 100 (raised)", edns: 100, truncated: true, max: 512},
		{what: "tcp", tcp: true, max: mdns.MaxMsgSize},
	}
	for _, tt := range tests {
		m := r.respond(query("big.default.svc.cluster.local.", mdns.TypeA, tt.edns), tt.tcp)
		wire, err := m.Pack()
		if err != nil {
			t.Fatalf("%s: pack: %v", tt.what, err)
		}
		if m.Truncated != tt.truncated || len(wire) > tt.max {
			t.Errorf("%s: truncated %v, %d bytes; want truncated %v, at most %d", tt.what, m.Truncated, len(wire), tt.truncated, tt.max)
		}
		if tt.truncated && (len(m.Answer) == 0 || len(m.Answer) >= 100) {
			t.Errorf("%s: %d answers in a truncated response", tt.what, len(m.Answer))
		}
		if !tt.truncated && len(m.Answer) != 100 {
			t.Errorf("%s: %d answers, want 100", tt.what, len(m.Answer))
		}
		if opt := m.IsEdns0(); (opt != nil) != (tt.edns > 0) || (opt != nil && opt.UDPSize() != udpPayload) {
			t.Errorf("%s: OPT %v in the response", tt.what, opt)
		}
	}
	// A small answer is not truncated over UDP.
	if m := r.respond(query("big-7.big.default.svc.cluster.local.", mdns.TypeA, 0), false); m.Truncated || len(m.Answer) != 1 {
		t.Errorf("small answer: truncated %v, %d answers", m.Truncated, len(m.Answer))
	}
}

func TestRespondHeader(t *testing.T) {
	r := testResolver(t, fixture()...)
	req := query("Web.default.svc.cluster.local.", mdns.TypeA, 0)
	m := r.respond(req, false)
	if m.Id != req.Id || !m.Response || !m.Authoritative || !m.RecursionDesired || m.RecursionAvailable ||
		m.Rcode != mdns.RcodeSuccess || len(m.Question) != 1 || m.Question[0].Name != "Web.default.svc.cluster.local." {
		t.Errorf("response header: %v", m)
	}
	m = r.respond(query("nope.default.svc.cluster.local.", mdns.TypeA, 1232), false)
	if m.Rcode != mdns.RcodeNameError || len(m.Ns) != 1 || m.IsEdns0() == nil {
		t.Errorf("NXDOMAIN with EDNS(0): %v", m)
	}
	// Additional records come before the OPT record.
	m = r.respond(query("_http._tcp.web.default.svc.cluster.local.", mdns.TypeSRV, 1232), false)
	if len(m.Extra) != 2 || m.Extra[1].Header().Rrtype != mdns.TypeOPT {
		t.Errorf("extra = %v", m.Extra)
	}
	// EDNS version 1 is not supported.
	req = query("web.default.svc.cluster.local.", mdns.TypeA, 1232)
	req.IsEdns0().SetVersion(1)
	m = r.respond(req, false)
	if m.Rcode != mdns.RcodeBadVers || len(m.Answer) != 0 {
		t.Errorf("EDNS version 1: rcode %s", mdns.RcodeToString[m.Rcode])
	}
	if _, err := m.Pack(); err != nil {
		t.Errorf("BADVERS response: %v", err)
	}
	// Updates are not implemented.
	req = query("cluster.local.", mdns.TypeSOA, 0)
	req.Opcode = mdns.OpcodeUpdate
	if m := r.respond(req, false); m.Rcode != mdns.RcodeNotImplemented {
		t.Errorf("update: rcode %s", mdns.RcodeToString[m.Rcode])
	}
	req = query("cluster.local.", mdns.TypeSOA, 0)
	req.Question = nil
	if m := r.respond(req, false); m.Rcode != mdns.RcodeFormatError {
		t.Errorf("no question: rcode %s", mdns.RcodeToString[m.Rcode])
	}
}

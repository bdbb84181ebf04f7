package dns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	"k8s.io/client-go/kubernetes/fake"
)

// Which questions go upstream: names outside the zones as asked, reverse names the
// cluster does not know; never a name in the cluster domain, a zone transfer or a
// malformed query.
func TestForwards(t *testing.T) {
	r := testResolver(t, fixture()...)
	q := func(name string, qtype uint16) *mdns.Msg { return query(name, qtype, 0) }
	notify := q("example.com.", mdns.TypeSOA)
	notify.Opcode = mdns.OpcodeNotify
	two := q("example.com.", mdns.TypeA)
	two.Question = append(two.Question, two.Question[0])
	badVers := q("example.com.", mdns.TypeA)
	badVers.SetEdns0(1232, false)
	badVers.IsEdns0().SetVersion(1)
	chaos := q("version.bind.", mdns.TypeTXT)
	chaos.Question[0].Qclass = mdns.ClassCHAOS
	tests := []struct {
		what string
		req  *mdns.Msg
		want bool
	}{
		{"a name outside the zones", q("www.example.test.", mdns.TypeA), true},
		{"its other types", q("www.example.test.", mdns.TypeMX), true},
		{"upper case", q("WWW.Example.TEST.", mdns.TypeAAAA), true},
		{"a single label", q("example.", mdns.TypeA), true},
		{"the root", q(".", mdns.TypeNS), true},
		{"another class", chaos, true},
		{"a reverse name of an address outside the cluster", q("7.100.51.198.in-addr.arpa.", mdns.TypePTR), true},
		{"an IPv6 reverse name outside the cluster", q("1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.", mdns.TypePTR), true},
		{"a ClusterIP's reverse name", q("20.0.96.10.in-addr.arpa.", mdns.TypePTR), false},
		{"an endpoint's reverse name", q("10.1.244.10.in-addr.arpa.", mdns.TypePTR), false},
		{"a Service", q("web.default.svc.cluster.local.", mdns.TypeA), false},
		{"a name the search list made", q("www.example.test.default.svc.cluster.local.", mdns.TypeA), false},
		{"the last search name", q("www.example.test.cluster.local.", mdns.TypeA), false},
		{"the domain", q("cluster.local.", mdns.TypeSOA), false},
		{"a zone transfer", q("example.com.", mdns.TypeAXFR), false},
		{"an incremental one", q("example.com.", mdns.TypeIXFR), false},
		{"a notify", notify, false},
		{"two questions", two, false},
		{"an EDNS version the server does not speak", badVers, false},
	}
	for _, tt := range tests {
		m := r.respond(tt.req, false)
		if got := r.forwards(tt.req, m.Rcode); got != tt.want {
			t.Errorf("%s (%s, rcode %s): forwards = %v, want %v", tt.what, tt.req.Question[0].Name, mdns.RcodeToString[m.Rcode], got, tt.want)
		}
	}
}

// upstream is a stand-in nameserver on 127.0.0.1 (UDP and TCP on one port) answering A
// queries from its records and PTR queries with one name; it remembers what it was asked.
type upstream struct {
	addr    netip.AddrPort
	records map[string]string // lower-case name → IPv4 address
	mu      sync.Mutex
	asked   []string // "<network> <name>"
}

func startUpstream(t *testing.T, records map[string]string) *upstream {
	t.Helper()
	u := &upstream{records: records}
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	udp, err := net.ListenPacket("udp", tcp.Addr().String())
	if err != nil {
		tcp.Close()
		t.Fatal(err)
	}
	u.addr = netip.MustParseAddrPort(tcp.Addr().String())
	for _, srv := range []*mdns.Server{{Listener: tcp, Handler: u}, {PacketConn: udp, Handler: u}} {
		go srv.ActivateAndServe()
		t.Cleanup(func() { srv.Shutdown() })
	}
	return u
}

func (u *upstream) ServeDNS(w mdns.ResponseWriter, req *mdns.Msg) {
	q := req.Question[0]
	u.mu.Lock()
	u.asked = append(u.asked, w.RemoteAddr().Network()+" "+q.Name)
	u.mu.Unlock()
	m := new(mdns.Msg)
	m.SetReply(req)
	name := strings.ToLower(q.Name)
	switch {
	case q.Qtype == mdns.TypePTR:
		m.Answer = append(m.Answer, &mdns.PTR{Hdr: mdns.RR_Header{Name: q.Name, Rrtype: mdns.TypePTR, Class: mdns.ClassINET, Ttl: 60}, Ptr: "www.example.test."})
	case name == "many.example.test.":
		for i := range 100 {
			m.Answer = append(m.Answer, &mdns.A{Hdr: mdns.RR_Header{Name: q.Name, Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: 60},
				A: net.IPv4(198, 51, 100, byte(i+1))})
		}
	case u.records[name] != "":
		if q.Qtype == mdns.TypeA {
			m.Answer = append(m.Answer, &mdns.A{Hdr: mdns.RR_Header{Name: q.Name, Rrtype: mdns.TypeA, Class: mdns.ClassINET, Ttl: 60},
				A: net.ParseIP(u.records[name])})
		}
	default:
		m.Rcode = mdns.RcodeNameError
	}
	if req.IsEdns0() != nil {
		m.SetEdns0(4096, false)
	}
	_ = w.WriteMsg(m)
}

func (u *upstream) questions() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.asked)
}

// deadUpstream is an address on 127.0.0.1 where nothing answers, over UDP or TCP.
func deadUpstream(t *testing.T) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := netip.MustParseAddrPort(l.Addr().String())
	l.Close()
	return addr
}

// The server forwards what is not the cluster's to its upstreams, in order, through its
// dialer, over the client's transport; the upstreams' answers reach the client as given.
func TestServeForwards(t *testing.T) {
	up := startUpstream(t, map[string]string{"www.example.test.": "198.51.100.7"})
	dead := deadUpstream(t)
	var mu sync.Mutex
	var dialed []string
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		dialed = append(dialed, network+" "+addr)
		mu.Unlock()
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	ts := startServerWith(t, Config{Logger: quiet, Upstreams: []netip.AddrPort{dead, up.addr}, Dial: dial,
		Hosts: map[string][]netip.Addr{"ec2.us-east-1.amazonaws.com": {netip.MustParseAddr("172.31.0.3")}}}, fixture()...)
	if m := ts.ask(t, "udp", "ec2.us-east-1.amazonaws.com.", mdns.TypeA); !slices.Equal(answers(m), []string{"ec2.us-east-1.amazonaws.com. A 172.31.0.3"}) {
		t.Errorf("a host's name: %v", m)
	}
	for _, network := range []string{"udp", "tcp"} {
		m := ts.ask(t, network, "www.example.test.", mdns.TypeA)
		if m.Rcode != mdns.RcodeSuccess || m.Authoritative || !slices.Equal(answers(m), []string{"www.example.test. A 198.51.100.7"}) {
			t.Errorf("%s: www.example.test A: %v", network, m)
		}
		if m := ts.ask(t, network, "nope.example.test.", mdns.TypeA); m.Rcode != mdns.RcodeNameError || len(m.Ns) != 0 {
			t.Errorf("%s: nope.example.test: %v, want the upstream's NXDOMAIN", network, m)
		}
	}
	// The names a pod's search list makes of www.example.test are the cluster's own.
	for _, name := range []string{"www.example.test.default.svc.cluster.local.", "www.example.test.svc.cluster.local.", "www.example.test.cluster.local."} {
		if m := ts.ask(t, "udp", name, mdns.TypeA); m.Rcode != mdns.RcodeNameError || !m.Authoritative {
			t.Errorf("%s: %v, want the cluster's NXDOMAIN", name, m)
		}
	}
	// Reverse names: the cluster's own, the others upstream.
	if m := ts.ask(t, "udp", "20.0.96.10.in-addr.arpa.", mdns.TypePTR); !slices.Equal(answers(m), []string{"20.0.96.10.in-addr.arpa. PTR web.default.svc.cluster.local."}) {
		t.Errorf("a ClusterIP's PTR: %v", m)
	}
	if m := ts.ask(t, "udp", "7.100.51.198.in-addr.arpa.", mdns.TypePTR); !slices.Equal(answers(m), []string{"7.100.51.198.in-addr.arpa. PTR www.example.test."}) {
		t.Errorf("an outside address's PTR: %v", m)
	}
	want := []string{"udp www.example.test.", "udp nope.example.test.", "tcp www.example.test.", "tcp nope.example.test.", "udp 7.100.51.198.in-addr.arpa."}
	if got := up.questions(); !slices.Equal(got, want) {
		t.Errorf("the upstream was asked %q, want %q", got, want)
	}
	mu.Lock()
	if len(dialed) < 2 || dialed[0] != "udp "+dead.String() || dialed[1] != "udp "+up.addr.String() {
		t.Errorf("dialed %q; want the dead upstream first, then the live one", dialed)
	}
	mu.Unlock()

	// A large answer is cut to the client's buffer over UDP, whole over TCP.
	m := exchange(t, "udp", ts.udp, query("many.example.test.", mdns.TypeA, 4096))
	if !m.Truncated || len(m.Answer) >= 100 {
		t.Errorf("udp: truncated %v with %d answers", m.Truncated, len(m.Answer))
	}
	m.Compress = true // as it came
	if wire, err := m.Pack(); err != nil || len(wire) > udpPayload {
		t.Errorf("udp: %d bytes (%v), want at most %d", len(wire), err, udpPayload)
	}
	if m := ts.ask(t, "tcp", "many.example.test.", mdns.TypeA); m.Truncated || len(m.Answer) != 100 {
		t.Errorf("tcp: truncated %v with %d answers", m.Truncated, len(m.Answer))
	}
}

// When no upstream answers, the client gets SERVFAIL; without upstreams, names outside the
// zones are refused and nothing is dialed.
func TestServeForwardFailures(t *testing.T) {
	dead := deadUpstream(t)
	ts := startServerWith(t, Config{Logger: quiet, Upstreams: []netip.AddrPort{dead}}, fixture()...)
	for _, network := range []string{"udp", "tcp"} {
		start := time.Now()
		if m := ts.ask(t, network, "www.example.test.", mdns.TypeA); m.Rcode != mdns.RcodeServerFailure {
			t.Errorf("%s with a dead upstream: %v, want SERVFAIL", network, m)
		}
		if d := time.Since(start); d > upstreamTimeout+time.Second {
			t.Errorf("%s: SERVFAIL took %v", network, d)
		}
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		t.Errorf("dialed %s %s without upstreams", network, addr)
		return nil, fmt.Errorf("no dial")
	}
	off := startServerWith(t, Config{Logger: quiet, Dial: dial}, fixture()...)
	if m := off.ask(t, "udp", "www.example.test.", mdns.TypeA); m.Rcode != mdns.RcodeRefused {
		t.Errorf("without upstreams: %v, want REFUSED", m)
	}
	if m := off.ask(t, "udp", "7.100.51.198.in-addr.arpa.", mdns.TypePTR); m.Rcode != mdns.RcodeNameError || !m.Authoritative {
		t.Errorf("reverse without upstreams: %v, want the cluster's NXDOMAIN", m)
	}
}

func TestNewUpstreamErrors(t *testing.T) {
	for _, u := range []netip.AddrPort{{}, netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), 0)} {
		if _, err := New(Config{Upstreams: []netip.AddrPort{u}}, fake.NewClientset()); err == nil || !strings.Contains(err.Error(), "upstream") {
			t.Errorf("New with upstream %v: %v", u, err)
		}
	}
}

// A name of Config.Hosts is answered by the server (A and AAAA from its addresses, NODATA
// for other types) and never goes upstream.
func TestHosts(t *testing.T) {
	r := testResolver(t, fixture()...)
	r.hosts = map[string][]netip.Addr{"ec2.us-east-1.amazonaws.com.": {netip.MustParseAddr("172.31.0.3")}}
	for _, tt := range []struct {
		name   string
		qtype  uint16
		answer []string
	}{
		{"ec2.us-east-1.amazonaws.com.", mdns.TypeA, []string{"ec2.us-east-1.amazonaws.com. A 172.31.0.3"}},
		{"EC2.us-east-1.AmazonAWS.com.", mdns.TypeA, []string{"EC2.us-east-1.AmazonAWS.com. A 172.31.0.3"}},
		{"ec2.us-east-1.amazonaws.com.", mdns.TypeAAAA, nil},
		{"ec2.us-east-1.amazonaws.com.", mdns.TypeMX, nil},
	} {
		req := query(tt.name, tt.qtype, 0)
		m := r.respond(req, false)
		if m.Rcode != mdns.RcodeSuccess || !m.Authoritative || !slices.Equal(answers(m), tt.answer) {
			t.Errorf("%s %s: %v, want %v", tt.name, mdns.TypeToString[tt.qtype], m, tt.answer)
		}
		if r.forwards(req, m.Rcode) {
			t.Errorf("%s %s goes upstream", tt.name, mdns.TypeToString[tt.qtype])
		}
	}
	// Other names of the same domain are not the server's.
	req := query("s3.us-east-1.amazonaws.com.", mdns.TypeA, 0)
	if m := r.respond(req, false); m.Rcode != mdns.RcodeRefused || !r.forwards(req, m.Rcode) {
		t.Errorf("s3.us-east-1.amazonaws.com: %v, want it refused here and forwarded", m)
	}

	for _, hosts := range []map[string][]netip.Addr{
		{"bad_name.example.": nil},
		{".": nil},
		{"web.default.svc.cluster.local": nil},
		{"1.0.0.10.in-addr.arpa": nil},
		{"ok.example": {{}}},
	} {
		if _, err := New(Config{Hosts: hosts}, fake.NewClientset()); err == nil || !strings.Contains(err.Error(), "host") {
			t.Errorf("New with hosts %v: %v", hosts, err)
		}
	}
}

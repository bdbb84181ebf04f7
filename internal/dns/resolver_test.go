package dns

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	mdns "github.com/miekg/dns"
)

func TestResolve(t *testing.T) {
	r := testResolver(t, fixture()...)
	const (
		A, AAAA, SRV, PTR, TXT, CNAME, SOA, NS, ANY = mdns.TypeA, mdns.TypeAAAA, mdns.TypeSRV, mdns.TypePTR,
			mdns.TypeTXT, mdns.TypeCNAME, mdns.TypeSOA, mdns.TypeNS, mdns.TypeANY
		ok, nx, refused = mdns.RcodeSuccess, mdns.RcodeNameError, mdns.RcodeRefused
	)
	web := "web.default.svc.cluster.local."
	pgSRV := []string{
		"pg.db.svc.cluster.local. SRV 0 33 5432 10-244-3-7.pg.db.svc.cluster.local.",
		"pg.db.svc.cluster.local. SRV 0 33 5432 pg-0.pg.db.svc.cluster.local.",
		"pg.db.svc.cluster.local. SRV 0 33 5432 pg-1.pg.db.svc.cluster.local.",
	}
	pgExtra := []string{"10-244-3-7.pg.db.svc.cluster.local. A 10.244.3.7", "pg-0.pg.db.svc.cluster.local. A 10.244.1.5",
		"pg-1.pg.db.svc.cluster.local. A 10.244.2.6"}
	tests := []struct {
		name   string
		qtype  uint16
		rcode  int
		answer []string
		extra  []string // checked when not nil
	}{
		// ClusterIP Services.
		{name: web, qtype: A, rcode: ok, answer: []string{web + " A 10.96.0.20"}},
		{name: "WEB.Default.SVC.Cluster.LOCAL.", qtype: A, rcode: ok, answer: []string{"WEB.Default.SVC.Cluster.LOCAL. A 10.96.0.20"}},
		{name: web, qtype: AAAA, rcode: ok},
		{name: web, qtype: TXT, rcode: ok},
		{name: web, qtype: CNAME, rcode: ok},
		{name: "dual.default.svc.cluster.local.", qtype: AAAA, rcode: ok, answer: []string{"dual.default.svc.cluster.local. AAAA fd00::30"}},
		{name: "dual.default.svc.cluster.local.", qtype: A, rcode: ok, answer: []string{"dual.default.svc.cluster.local. A 10.96.0.30"}},
		{name: web, qtype: SRV, rcode: ok, answer: []string{web + " SRV 0 33 514 " + web, web + " SRV 0 33 80 " + web,
			web + " SRV 0 33 9090 " + web}, extra: []string{web + " A 10.96.0.20"}},
		{name: web, qtype: ANY, rcode: ok, answer: []string{web + " A 10.96.0.20", web + " SRV 0 33 514 " + web,
			web + " SRV 0 33 80 " + web, web + " SRV 0 33 9090 " + web}},
		{name: "_http._tcp." + web, qtype: SRV, rcode: ok, answer: []string{"_http._tcp." + web + " SRV 0 100 80 " + web},
			extra: []string{web + " A 10.96.0.20"}},
		{name: "_HTTP._TCP." + web, qtype: SRV, rcode: ok, answer: []string{"_HTTP._TCP." + web + " SRV 0 100 80 " + web}},
		{name: "_metrics._tcp." + web, qtype: SRV, rcode: ok, answer: []string{"_metrics._tcp." + web + " SRV 0 100 9090 " + web}},
		{name: "_syslog._udp." + web, qtype: SRV, rcode: ok, answer: []string{"_syslog._udp." + web + " SRV 0 100 514 " + web}},
		{name: "_http._udp." + web, qtype: SRV, rcode: nx},
		{name: "_nope._tcp." + web, qtype: SRV, rcode: nx},
		{name: "http.tcp." + web, qtype: SRV, rcode: nx},
		{name: "_http._tcp." + web, qtype: A, rcode: ok},
		{name: "_tcp." + web, qtype: A, rcode: ok},
		{name: "_sctp." + web, qtype: A, rcode: nx},
		{name: "10-244-1-10." + web, qtype: A, rcode: ok, answer: []string{"10-244-1-10." + web + " A 10.244.1.10"}},
		{name: "10-244-1-10." + web, qtype: SRV, rcode: ok, answer: []string{"10-244-1-10." + web + " SRV 0 100 8080 10-244-1-10." + web},
			extra: []string{"10-244-1-10." + web + " A 10.244.1.10"}},
		{name: "10-244-1-11." + web, qtype: A, rcode: nx},
		{name: "a.b.c." + web, qtype: A, rcode: nx},
		{name: web + "default.svc.cluster.local.", qtype: A, rcode: nx},
		{name: "nope.default.svc.cluster.local.", qtype: A, rcode: nx},
		{name: "default.svc.cluster.local.", qtype: A, rcode: ok},
		{name: "nons.svc.cluster.local.", qtype: A, rcode: nx},
		{name: "web.nons.svc.cluster.local.", qtype: A, rcode: nx},
		{name: "svc.cluster.local.", qtype: A, rcode: ok},
		// Headless Services.
		{name: "pg.db.svc.cluster.local.", qtype: A, rcode: ok, answer: []string{"pg.db.svc.cluster.local. A 10.244.1.5",
			"pg.db.svc.cluster.local. A 10.244.2.6", "pg.db.svc.cluster.local. A 10.244.3.7"}},
		{name: "pg.db.svc.cluster.local.", qtype: SRV, rcode: ok, answer: pgSRV, extra: pgExtra},
		{name: "_postgres._tcp.pg.db.svc.cluster.local.", qtype: SRV, rcode: ok, answer: []string{
			"_postgres._tcp.pg.db.svc.cluster.local. SRV 0 33 5432 10-244-3-7.pg.db.svc.cluster.local.",
			"_postgres._tcp.pg.db.svc.cluster.local. SRV 0 33 5432 pg-0.pg.db.svc.cluster.local.",
			"_postgres._tcp.pg.db.svc.cluster.local. SRV 0 33 5432 pg-1.pg.db.svc.cluster.local."}, extra: pgExtra},
		{name: "_postgres._udp.pg.db.svc.cluster.local.", qtype: SRV, rcode: nx},
		{name: "pg-0.pg.db.svc.cluster.local.", qtype: A, rcode: ok, answer: []string{"pg-0.pg.db.svc.cluster.local. A 10.244.1.5"}},
		{name: "PG-1.pg.db.svc.cluster.local.", qtype: A, rcode: ok, answer: []string{"PG-1.pg.db.svc.cluster.local. A 10.244.2.6"}},
		{name: "pg-0.pg.db.svc.cluster.local.", qtype: SRV, rcode: ok,
			answer: []string{"pg-0.pg.db.svc.cluster.local. SRV 0 100 5432 pg-0.pg.db.svc.cluster.local."},
			extra:  []string{"pg-0.pg.db.svc.cluster.local. A 10.244.1.5"}},
		{name: "pg-0.pg.db.svc.cluster.local.", qtype: AAAA, rcode: ok},
		{name: "10-244-3-7.pg.db.svc.cluster.local.", qtype: A, rcode: ok, answer: []string{"10-244-3-7.pg.db.svc.cluster.local. A 10.244.3.7"}},
		{name: "pg-2.pg.db.svc.cluster.local.", qtype: A, rcode: nx},       // not ready
		{name: "10-244-1-5.pg.db.svc.cluster.local.", qtype: A, rcode: nx}, // named by its hostname
		{name: "empty.db.svc.cluster.local.", qtype: A, rcode: nx},         // no endpoints
		{name: "noports.db.svc.cluster.local.", qtype: SRV, rcode: ok},     // endpoints without ports
		{name: "noports.db.svc.cluster.local.", qtype: A, rcode: ok, answer: []string{"noports.db.svc.cluster.local. A 10.244.5.9"}},
		// ExternalName Services.
		{name: "ext.default.svc.cluster.local.", qtype: A, rcode: ok, answer: []string{"ext.default.svc.cluster.local. CNAME Example.com."}},
		{name: "ext.default.svc.cluster.local.", qtype: CNAME, rcode: ok, answer: []string{"ext.default.svc.cluster.local. CNAME Example.com."}},
		{name: "ext.default.svc.cluster.local.", qtype: SRV, rcode: ok, answer: []string{"ext.default.svc.cluster.local. CNAME Example.com."}},
		{name: "_http._tcp.ext.default.svc.cluster.local.", qtype: SRV, rcode: nx},
		{name: "alias.default.svc.cluster.local.", qtype: A, rcode: ok, answer: []string{
			"alias.default.svc.cluster.local. CNAME web.default.svc.cluster.local.", web + " A 10.96.0.20"}},
		{name: "alias.default.svc.cluster.local.", qtype: CNAME, rcode: ok, answer: []string{
			"alias.default.svc.cluster.local. CNAME web.default.svc.cluster.local."}},
		{name: "loop.default.svc.cluster.local.", qtype: A, rcode: ok, answer: []string{
			"loop.default.svc.cluster.local. CNAME loop.default.svc.cluster.local."}},
		{name: "ipext.default.svc.cluster.local.", qtype: A, rcode: nx},
		// Pods.
		{name: "10-1-2-3.default.pod.cluster.local.", qtype: A, rcode: ok, answer: []string{"10-1-2-3.default.pod.cluster.local. A 10.1.2.3"}},
		{name: "10-1-2-3.default.pod.cluster.local.", qtype: AAAA, rcode: ok},
		{name: "fd00--1.default.pod.cluster.local.", qtype: AAAA, rcode: ok, answer: []string{"fd00--1.default.pod.cluster.local. AAAA fd00::1"}},
		{name: "10-1-2.default.pod.cluster.local.", qtype: A, rcode: nx},
		{name: "10-1-2-3.nons.pod.cluster.local.", qtype: A, rcode: nx},
		{name: "x.10-1-2-3.default.pod.cluster.local.", qtype: A, rcode: nx},
		{name: "default.pod.cluster.local.", qtype: A, rcode: ok},
		{name: "pod.cluster.local.", qtype: A, rcode: ok},
		// Reverse zones.
		{name: "20.0.96.10.in-addr.arpa.", qtype: PTR, rcode: ok, answer: []string{"20.0.96.10.in-addr.arpa. PTR " + web}},
		{name: "20.0.96.10.in-addr.arpa.", qtype: A, rcode: ok},
		{name: "5.1.244.10.in-addr.arpa.", qtype: PTR, rcode: ok, answer: []string{"5.1.244.10.in-addr.arpa. PTR pg-0.pg.db.svc.cluster.local."}},
		{name: "7.3.244.10.IN-ADDR.ARPA.", qtype: PTR, rcode: ok, answer: []string{"7.3.244.10.IN-ADDR.ARPA. PTR 10-244-3-7.pg.db.svc.cluster.local."}},
		{name: "10.1.244.10.in-addr.arpa.", qtype: PTR, rcode: ok, answer: []string{"10.1.244.10.in-addr.arpa. PTR 10-244-1-10." + web}},
		{name: "8.4.244.10.in-addr.arpa.", qtype: PTR, rcode: nx}, // not ready
		{name: "9.9.9.9.in-addr.arpa.", qtype: PTR, rcode: nx},
		{name: "96.10.in-addr.arpa.", qtype: PTR, rcode: ok},
		{name: "300.0.96.10.in-addr.arpa.", qtype: PTR, rcode: nx},
		{name: "1.20.0.96.10.in-addr.arpa.", qtype: PTR, rcode: nx},
		{name: reverse6("fd00::30"), qtype: PTR, rcode: ok, answer: []string{reverse6("fd00::30") + " PTR dual.default.svc.cluster.local."}},
		{name: "in-addr.arpa.", qtype: SOA, rcode: ok, answer: []string{"in-addr.arpa. SOA ns.dns.cluster.local. hostmaster.cluster.local. 42 7200 1800 86400 5"}},
		// The apex and special names.
		{name: "cluster.local.", qtype: SOA, rcode: ok, answer: []string{"cluster.local. SOA ns.dns.cluster.local. hostmaster.cluster.local. 42 7200 1800 86400 5"}},
		{name: "cluster.local.", qtype: NS, rcode: ok, answer: []string{"cluster.local. NS ns.dns.cluster.local."},
			extra: []string{"ns.dns.cluster.local. A 10.96.0.10"}},
		{name: "cluster.local.", qtype: A, rcode: ok},
		{name: "ns.dns.cluster.local.", qtype: A, rcode: ok, answer: []string{"ns.dns.cluster.local. A 10.96.0.10"}},
		{name: "dns.cluster.local.", qtype: A, rcode: ok},
		{name: "dns-version.cluster.local.", qtype: TXT, rcode: ok, answer: []string{`dns-version.cluster.local. TXT "1.1.0"`}},
		{name: "foo.cluster.local.", qtype: A, rcode: nx},
		{name: "x.dns-version.cluster.local.", qtype: A, rcode: nx},
		// Outside the zones.
		{name: "example.com.", qtype: A, rcode: refused},
		{name: "local.", qtype: A, rcode: refused},
		{name: ".", qtype: NS, rcode: refused},
		{name: "cluster.local.", qtype: mdns.TypeAXFR, rcode: refused},
	}
	for _, tt := range tests {
		rep := r.resolve(mdns.Question{Name: tt.name, Qtype: tt.qtype, Qclass: mdns.ClassINET})
		what := tt.name + " " + mdns.TypeToString[tt.qtype]
		if rep.rcode != tt.rcode {
			t.Errorf("%s: rcode %s, want %s", what, mdns.RcodeToString[rep.rcode], mdns.RcodeToString[tt.rcode])
			continue
		}
		if got := rrs(rep.answer); !slices.Equal(got, tt.answer) {
			t.Errorf("%s: answer\n%s\nwant\n%s", what, strings.Join(got, "\n"), strings.Join(tt.answer, "\n"))
		}
		if tt.extra != nil && !slices.Equal(rrs(rep.extra), tt.extra) {
			t.Errorf("%s: extra %q, want %q", what, rrs(rep.extra), tt.extra)
		}
		if tt.rcode == refused {
			if rep.authoritative || len(rep.answer)+len(rep.ns) > 0 {
				t.Errorf("%s: refused with data: %+v", what, rep)
			}
			continue
		}
		if !rep.authoritative {
			t.Errorf("%s: not authoritative", what)
		}
		// NXDOMAIN and NODATA carry the zone's SOA.
		if len(rep.answer) == 0 || tt.rcode == nx {
			zone := "cluster.local."
			if strings.HasSuffix(strings.ToLower(tt.name), ".arpa.") {
				zone = reverseZone(strings.ToLower(tt.name))
			}
			if len(rep.ns) != 1 || rep.ns[0].Header().Name != zone || rep.ns[0].Header().Rrtype != SOA {
				t.Errorf("%s: authority %v, want the SOA of %s", what, rep.ns, zone)
			}
		} else if len(rep.ns) != 0 {
			t.Errorf("%s: authority %v with an answer", what, rep.ns)
		}
	}
}

func reverse6(addr string) string {
	name, err := mdns.ReverseAddr(addr)
	if err != nil {
		panic(err)
	}
	return name
}

func TestResolveClassAndDomain(t *testing.T) {
	r := testResolver(t, fixture()...)
	if rep := r.resolve(mdns.Question{Name: "web.default.svc.cluster.local.", Qtype: mdns.TypeA, Qclass: mdns.ClassCHAOS}); rep.rcode != mdns.RcodeRefused {
		t.Errorf("CHAOS class: %s, want REFUSED", mdns.RcodeToString[rep.rcode])
	}
	if rep := r.resolve(mdns.Question{Name: "web.default.svc.cluster.local.", Qtype: mdns.TypeA, Qclass: mdns.ClassANY}); len(rep.answer) != 1 {
		t.Errorf("ANY class: %v", rep.answer)
	}
	// Another domain.
	r.domain = "corp.example."
	if rep := r.resolve(mdns.Question{Name: "web.default.svc.corp.example.", Qtype: mdns.TypeA, Qclass: mdns.ClassINET}); len(rep.answer) != 1 {
		t.Errorf("web in corp.example: %v (%s)", rep.answer, mdns.RcodeToString[rep.rcode])
	}
	if rep := r.resolve(mdns.Question{Name: "web.default.svc.cluster.local.", Qtype: mdns.TypeA, Qclass: mdns.ClassINET}); rep.rcode != mdns.RcodeRefused {
		t.Errorf("cluster.local when serving corp.example: %s", mdns.RcodeToString[rep.rcode])
	}
}

// Without a kube-dns Service the nameserver is the server's own address.
func TestNameserverFallback(t *testing.T) {
	r := testResolver(t, namespace("default"))
	rep := r.resolve(mdns.Question{Name: "cluster.local.", Qtype: mdns.TypeNS, Qclass: mdns.ClassINET})
	if got := rrs(rep.extra); !slices.Equal(got, []string{"ns.dns.cluster.local. A 127.0.0.1"}) {
		t.Errorf("glue = %q", got)
	}
	r.listen = nil
	rep = r.resolve(mdns.Question{Name: "ns.dns.cluster.local.", Qtype: mdns.TypeA, Qclass: mdns.ClassINET})
	if rep.rcode != mdns.RcodeSuccess || len(rep.answer) != 0 {
		t.Errorf("ns.dns without addresses: %s %v", mdns.RcodeToString[rep.rcode], rep.answer)
	}
}

func TestReverseAddr(t *testing.T) {
	tests := []struct {
		labels, zone string
		ip           string
		partial, ok  bool
	}{
		{"4.3.2.1", reverseZoneV4, "1.2.3.4", false, true},
		{"0.0.0.0", reverseZoneV4, "0.0.0.0", false, true},
		{"3.2.1", reverseZoneV4, "", true, true},
		{"5.4.3.2.1", reverseZoneV4, "", false, false},
		{"04.3.2.1", reverseZoneV4, "", false, false},
		{"256.3.2.1", reverseZoneV4, "", false, false},
		{"x.3.2.1", reverseZoneV4, "", false, false},
		{strings.TrimSuffix(reverse6("fd00::1:2"), ".ip6.arpa."), reverseZoneV6, "fd00::1:2", false, true},
		{"0.0.d.f", reverseZoneV6, "", true, true},
		{"00.0.d.f", reverseZoneV6, "", false, false},
		{"g.0.d.f", reverseZoneV6, "", false, false},
	}
	for _, tt := range tests {
		ip, partial, ok := reverseAddr(tt.labels, tt.zone)
		if ok != tt.ok || partial != tt.partial || (tt.ip != "" && ip != netip.MustParseAddr(tt.ip)) {
			t.Errorf("reverseAddr(%q) = %v %v %v, want %s %v %v", tt.labels, ip, partial, ok, tt.ip, tt.partial, tt.ok)
		}
	}
}

func TestDashed(t *testing.T) {
	for _, tt := range []struct{ ip, label string }{
		{"10.244.1.5", "10-244-1-5"}, {"fd00::5", "fd00--5"}, {"fd00::", "fd00--0"}, {"::1", "--1"},
	} {
		ip := netip.MustParseAddr(tt.ip)
		if got := dashed(ip); got != tt.label {
			t.Errorf("dashed(%s) = %q, want %q", tt.ip, got, tt.label)
		}
		if back, ok := undashed(tt.label); !ok || back != ip {
			t.Errorf("undashed(%q) = %v %v, want %s", tt.label, back, ok, tt.ip)
		}
	}
	for _, bad := range []string{"10-244-1", "10-244-1-256", "web", "10-244-1-5-6", "1-2-3-4%eth0", ""} {
		if ip, ok := undashed(bad); ok {
			t.Errorf("undashed(%q) = %v, want no address", bad, ip)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		cfg  Config
		want string // "" for valid
	}{
		{Config{}, ""},
		{Config{Domain: "Cluster.Local."}, ""},
		{Config{Domain: "corp.example", TTL: 3600}, ""},
		{Config{Domain: "."}, "domain must not be the root"},
		{Config{Domain: "bad_domain.local"}, `domain "bad_domain.local" is not a domain name`},
		{Config{Domain: "a..b"}, `domain "a..b" is not a domain name`},
		{Config{Domain: "-a.local"}, `domain "-a.local" is not a domain name`},
		{Config{Domain: "10.in-addr.arpa"}, `domain "10.in-addr.arpa" is in a reverse zone`},
		{Config{TTL: 3601}, "ttl 3601 is above 3600"},
	} {
		err := tt.cfg.validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("validate(%+v) = %v, want %q", tt.cfg, err, tt.want)
		}
	}
	cfg := Config{Domain: "Corp.Example"}
	cfg.defaults()
	if cfg.Domain != "corp.example." || cfg.TTL != DefaultTTL || cfg.Logger == nil {
		t.Errorf("defaults: %+v", cfg)
	}
}

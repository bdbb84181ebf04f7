package resolvconf

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	const conf = `# generated
nameserver 192.168.1.1
nameserver 192.168.1.2 # second
; another comment
nameserver
search old.example
search corp.example. . lab.example corp.example
options ndots:2 edns0
options ndots:3 timeout:1
sortlist 130.155.160.0/255.255.240.0
`
	cfg, err := Parse(strings.NewReader(conf))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(cfg.Nameservers, []string{"192.168.1.1", "192.168.1.2"}) || !slices.Equal(cfg.Searches, []string{"corp.example", "lab.example"}) ||
		!slices.Equal(cfg.Options, []string{"ndots:3", "edns0", "timeout:1"}) {
		t.Errorf("parsed %+v", cfg)
	}
	cfg, err = Parse(strings.NewReader("domain home.example\n"))
	if err != nil || !slices.Equal(cfg.Searches, []string{"home.example"}) || len(cfg.Nameservers) != 0 {
		t.Errorf("domain line: %+v, %v", cfg, err)
	}
	if _, err := Read(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("reading a missing file succeeded")
	}
}

// The nameservers' addresses: port 53, IPv6 (with a zone) too, duplicates and lines that
// are no address left out.
func TestNameserverAddrs(t *testing.T) {
	cfg, err := Parse(strings.NewReader(`nameserver 127.0.0.53
nameserver fe80::1%eth0
nameserver resolver.example
nameserver 127.0.0.53
nameserver ::ffff:10.0.0.2
`))
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.AddrPort{netip.MustParseAddrPort("127.0.0.53:53"), netip.MustParseAddrPort("[fe80::1%eth0]:53"),
		netip.MustParseAddrPort("10.0.0.2:53")}
	if got := cfg.NameserverAddrs(); !slices.Equal(got, want) {
		t.Errorf("NameserverAddrs() = %v, want %v", got, want)
	}
	if got := (&Config{}).NameserverAddrs(); len(got) != 0 {
		t.Errorf("no nameserver: %v", got)
	}
}

package ipam

import (
	"net/netip"
	"strings"
	"testing"
)

func TestNewRange(t *testing.T) {
	for _, tc := range []struct {
		subnet, gw, first, last string
		size                    int
	}{
		{"10.244.1.0/24", "10.244.1.1", "10.244.1.2", "10.244.1.254", 253},
		{"10.244.0.0/16", "10.244.0.1", "10.244.0.2", "10.244.255.254", 65533},
		{"192.168.7.8/29", "192.168.7.9", "192.168.7.10", "192.168.7.14", 5},
		{"10.0.0.4/30", "10.0.0.5", "10.0.0.6", "10.0.0.6", 1},
	} {
		r, err := NewRange(netip.MustParsePrefix(tc.subnet))
		if err != nil {
			t.Fatalf("%s: %v", tc.subnet, err)
		}
		if r.Gateway.String() != tc.gw || r.First.String() != tc.first || r.Last.String() != tc.last || r.Size != tc.size {
			t.Errorf("%s: gateway %s first %s last %s size %d, want %s %s %s %d", tc.subnet, r.Gateway, r.First, r.Last, r.Size, tc.gw, tc.first, tc.last, tc.size)
		}
	}
	for _, tc := range []struct{ subnet, want string }{
		{"10.0.0.0/31", "/30 or shorter"},
		{"10.0.0.1/32", "/30 or shorter"},
		{"fd00::/64", "IPv4"},
		{"10.244.1.5/24", "not a network address (want 10.244.1.0/24)"},
	} {
		_, err := NewRange(netip.MustParsePrefix(tc.subnet))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.subnet, err, tc.want)
		}
	}
	if _, err := NewRange(netip.Prefix{}); err == nil {
		t.Error("zero prefix: no error")
	}
}

func TestRangeNext(t *testing.T) {
	r, err := NewRange(netip.MustParsePrefix("10.1.0.0/29")) // .2 to .6
	if err != nil {
		t.Fatal(err)
	}
	a := netip.MustParseAddr
	set := func(addrs ...string) func(netip.Addr) bool {
		m := map[netip.Addr]bool{}
		for _, s := range addrs {
			m[a(s)] = true
		}
		return func(x netip.Addr) bool { return m[x] }
	}
	for _, tc := range []struct {
		last string
		used []string
		want string // "" = none
	}{
		{"", nil, "10.1.0.2"},
		{"10.1.0.2", nil, "10.1.0.3"}, // after the last one, not the freed .2
		{"10.1.0.6", nil, "10.1.0.2"}, // round the range
		{"10.1.0.4", []string{"10.1.0.5", "10.1.0.6"}, "10.1.0.2"},
		{"10.9.9.9", nil, "10.1.0.2"}, // stale marker from another subnet
		{"10.1.0.1", nil, "10.1.0.2"}, // gateway is never handed out
		{"10.1.0.3", []string{"10.1.0.2", "10.1.0.3", "10.1.0.4", "10.1.0.5", "10.1.0.6"}, ""},
	} {
		var last netip.Addr
		if tc.last != "" {
			last = a(tc.last)
		}
		got, ok := r.Next(last, set(tc.used...))
		if tc.want == "" {
			if ok {
				t.Errorf("last %s used %v: got %s, want none", tc.last, tc.used, got)
			}
			continue
		}
		if !ok || got.String() != tc.want {
			t.Errorf("last %s used %v: got %s %v, want %s", tc.last, tc.used, got, ok, tc.want)
		}
	}
}

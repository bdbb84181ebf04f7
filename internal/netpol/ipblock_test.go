package netpol

import (
	"net/netip"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestBlockPrefixes(t *testing.T) {
	tests := []struct {
		name   string
		blocks []*networkingv1.IPBlock
		want   []string
	}{
		{"one cidr", []*networkingv1.IPBlock{{CIDR: "10.0.0.0/8"}}, []string{"10.0.0.0/8"}},
		{"non-canonical cidr is masked", []*networkingv1.IPBlock{{CIDR: "10.1.2.3/16"}}, []string{"10.1.0.0/16"}},
		{"except in the middle", []*networkingv1.IPBlock{{CIDR: "10.0.0.0/30", Except: []string{"10.0.0.1/32"}}},
			[]string{"10.0.0.0/32", "10.0.0.2/31"}},
		{"except everything", []*networkingv1.IPBlock{{CIDR: "10.0.0.0/24", Except: []string{"10.0.0.0/23"}}}, nil},
		{"except at the end", []*networkingv1.IPBlock{{CIDR: "10.0.0.0/23", Except: []string{"10.0.1.0/24"}}},
			[]string{"10.0.0.0/24"}},
		{"overlapping blocks merge", []*networkingv1.IPBlock{{CIDR: "10.0.0.0/24"}, {CIDR: "10.0.0.128/25"}, {CIDR: "10.0.1.0/24"}},
			[]string{"10.0.0.0/23"}},
		{"block of another rule's except comes back", []*networkingv1.IPBlock{
			{CIDR: "10.0.0.0/24", Except: []string{"10.0.0.0/25"}}, {CIDR: "10.0.0.0/25"}}, []string{"10.0.0.0/24"}},
		{"everything", []*networkingv1.IPBlock{{CIDR: "0.0.0.0/0"}}, []string{"0.0.0.0/0"}},
		{"everything but the top", []*networkingv1.IPBlock{{CIDR: "0.0.0.0/0", Except: []string{"128.0.0.0/1"}}},
			[]string{"0.0.0.0/1"}},
		{"top address", []*networkingv1.IPBlock{{CIDR: "255.255.255.254/31", Except: []string{"255.255.255.254/32"}}},
			[]string{"255.255.255.255/32"}},
		{"ipv6 is not this table's", []*networkingv1.IPBlock{{CIDR: "fd00::/8"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rs []ipRange
			for _, b := range tt.blocks {
				r, _, err := blockRanges(b, field.NewPath("ipBlock"))
				if err != nil {
					t.Fatal(err)
				}
				rs = append(rs, r...)
			}
			var got []string
			for _, p := range rangesPrefixes(mergeRanges(rs)) {
				got = append(got, p.String())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("prefixes = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBlockErrors(t *testing.T) {
	for _, b := range []*networkingv1.IPBlock{
		{CIDR: "10.0.0.0"}, {CIDR: "nonsense"}, {CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/33"}},
		{CIDR: "10.0.0.0/8", Except: []string{"fd00::/8"}},
	} {
		if _, _, err := blockRanges(b, field.NewPath("ipBlock")); err == nil {
			t.Errorf("%+v: no error", b)
		}
	}
}

func TestRangesContain(t *testing.T) {
	rs := mergeRanges([]ipRange{
		prefixRange(netip.MustParsePrefix("10.0.0.0/24")), prefixRange(netip.MustParsePrefix("10.0.2.0/24")),
	})
	for addr, want := range map[string]bool{
		"10.0.0.0": true, "10.0.0.255": true, "10.0.1.0": false, "10.0.2.7": true, "9.255.255.255": false, "10.0.3.0": false,
	} {
		if got := rangesContain(rs, netip.MustParseAddr(addr)); got != want {
			t.Errorf("contains %s = %v, want %v", addr, got, want)
		}
	}
}

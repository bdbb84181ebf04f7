package netpol

import (
	"math/bits"
	"net/netip"
	"sort"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// ipRange is the IPv4 addresses lo through hi, inclusive, as numbers.
type ipRange struct{ lo, hi uint32 }

func addrNum(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func numAddr(n uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(n >> 24), byte(n >> 16), byte(n >> 8), byte(n)})
}

func prefixRange(p netip.Prefix) ipRange {
	lo := addrNum(p.Masked().Addr())
	size := uint64(1) << (32 - p.Bits())
	return ipRange{lo: lo, hi: uint32(uint64(lo) + size - 1)}
}

// blockRanges is what an ipBlock covers: its cidr minus its excepts. v4 is false for an
// IPv6 block, which this (IPv4) table does not enforce.
func blockRanges(b *networkingv1.IPBlock, path *field.Path) (out []ipRange, v4 bool, err error) {
	cidr, err := netip.ParsePrefix(b.CIDR)
	if err != nil {
		return nil, false, field.Invalid(path.Child("cidr"), b.CIDR, "must be a valid CIDR")
	}
	if !cidr.Addr().Is4() {
		return nil, false, nil
	}
	out = []ipRange{prefixRange(cidr)}
	for i, e := range b.Except {
		ex, err := netip.ParsePrefix(e)
		if err != nil || !ex.Addr().Is4() {
			return nil, false, field.Invalid(path.Child("except").Index(i), e, "must be a valid IPv4 CIDR")
		}
		out = subtractRange(out, prefixRange(ex))
	}
	return out, true, nil
}

// subtractRange removes x from every range of rs.
func subtractRange(rs []ipRange, x ipRange) []ipRange {
	var out []ipRange
	for _, r := range rs {
		if x.hi < r.lo || x.lo > r.hi {
			out = append(out, r)
			continue
		}
		if x.lo > r.lo {
			out = append(out, ipRange{lo: r.lo, hi: x.lo - 1})
		}
		if x.hi < r.hi {
			out = append(out, ipRange{lo: x.hi + 1, hi: r.hi})
		}
	}
	return out
}

// mergeRanges sorts rs and joins the ranges that overlap or touch.
func mergeRanges(rs []ipRange) []ipRange {
	if len(rs) == 0 {
		return nil
	}
	s := append([]ipRange(nil), rs...)
	sort.Slice(s, func(i, j int) bool { return s[i].lo < s[j].lo })
	out := []ipRange{s[0]}
	for _, r := range s[1:] {
		last := &out[len(out)-1]
		if uint64(r.lo) <= uint64(last.hi)+1 {
			if r.hi > last.hi {
				last.hi = r.hi
			}
			continue
		}
		out = append(out, r)
	}
	return out
}

// rangesPrefixes writes sorted, disjoint ranges as the fewest prefixes.
func rangesPrefixes(rs []ipRange) []netip.Prefix {
	var out []netip.Prefix
	for _, r := range rs {
		lo := uint64(r.lo)
		hi := uint64(r.hi)
		for lo <= hi {
			// The largest block aligned at lo that does not pass hi.
			size := uint64(1) << 32
			if lo != 0 {
				size = uint64(1) << bits.TrailingZeros64(lo)
			}
			for size > hi-lo+1 {
				size >>= 1
			}
			out = append(out, netip.PrefixFrom(numAddr(uint32(lo)), 32-bits.TrailingZeros64(size)))
			lo += size
		}
	}
	return out
}

// rangesContain reports whether a falls in one of the sorted, disjoint ranges rs.
func rangesContain(rs []ipRange, a netip.Addr) bool {
	n := addrNum(a)
	i := sort.Search(len(rs), func(i int) bool { return rs[i].hi >= n })
	return i < len(rs) && rs[i].lo <= n
}

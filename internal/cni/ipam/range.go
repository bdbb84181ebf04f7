package ipam

import (
	"fmt"
	"net/netip"
)

// Range is the part of a subnet that pods get addresses from: every host address
// but the gateway.
type Range struct {
	// Subnet is the node's podCIDR, an IPv4 network address and prefix of /30 or shorter.
	Subnet netip.Prefix
	// Gateway is Subnet's first host address; it is never allocated.
	Gateway netip.Addr
	// First and Last bound the allocatable addresses (both included).
	First, Last netip.Addr
	// Size is the number of allocatable addresses.
	Size int
}

// NewRange checks subnet and returns its allocatable range.
func NewRange(subnet netip.Prefix) (Range, error) {
	if !subnet.IsValid() {
		return Range{}, fmt.Errorf("subnet %q is not a valid prefix", subnet.String())
	}
	if !subnet.Addr().Is4() {
		return Range{}, fmt.Errorf("subnet %s: want an IPv4 prefix", subnet)
	}
	if subnet.Bits() > 30 {
		return Range{}, fmt.Errorf("subnet %s: want a prefix of /30 or shorter (at least one address for pods besides network, gateway and broadcast)", subnet)
	}
	if m := subnet.Masked(); m != subnet {
		return Range{}, fmt.Errorf("subnet %s is not a network address (want %s)", subnet, m)
	}
	gw := Gateway(subnet)
	last := broadcast(subnet).Prev()
	return Range{
		Subnet:  subnet,
		Gateway: gw,
		First:   gw.Next(),
		Last:    last,
		Size:    1<<(32-subnet.Bits()) - 3,
	}, nil
}

// Gateway is subnet's first host address, the address of the node's bridge.
func Gateway(subnet netip.Prefix) netip.Addr {
	return subnet.Masked().Addr().Next()
}

func broadcast(subnet netip.Prefix) netip.Addr {
	b := subnet.Masked().Addr().As4()
	host := uint32(1)<<(32-subnet.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Contains says whether a is allocatable in r.
func (r Range) Contains(a netip.Addr) bool {
	return a.Is4() && a.Compare(r.First) >= 0 && a.Compare(r.Last) <= 0
}

// Next is the address an allocation takes: the first one after last, going round the
// range, that used does not report; ok is false when every address is used. A last
// outside the range starts the search at First.
func (r Range) Next(last netip.Addr, used func(netip.Addr) bool) (a netip.Addr, ok bool) {
	a = r.First
	if r.Contains(last) && last != r.Last {
		a = last.Next()
	}
	for range r.Size {
		if !used(a) {
			return a, true
		}
		if a == r.Last {
			a = r.First
		} else {
			a = a.Next()
		}
	}
	return netip.Addr{}, false
}

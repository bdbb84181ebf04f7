package nodeipam

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"
)

// errFull is returned when every CIDR of the range is taken.
var errFull = errors.New("no remaining CIDRs in the cluster range")

// cidrSet hands out the subnets of size /mask of a cluster range, lowest free first.
type cidrSet struct {
	base  netip.Prefix
	mask  int
	used  *big.Int // bit i: subnet i is taken
	count int
	next  int
}

func newCIDRSet(clusterCIDR string, mask int) (*cidrSet, error) {
	p, err := netip.ParsePrefix(clusterCIDR)
	if err != nil {
		return nil, fmt.Errorf("cluster CIDR %q: %w", clusterCIDR, err)
	}
	p = p.Masked()
	bits := p.Addr().BitLen()
	if mask < p.Bits() || mask > bits {
		return nil, fmt.Errorf("node CIDR mask /%d does not fit in cluster CIDR %s", mask, p)
	}
	if mask-p.Bits() > 24 {
		return nil, fmt.Errorf("node CIDR mask /%d splits %s into more than 2^24 subnets", mask, p)
	}
	return &cidrSet{base: p, mask: mask, used: new(big.Int), count: 1 << (mask - p.Bits())}, nil
}

// subnet is the i-th subnet of the range.
func (s *cidrSet) subnet(i int) netip.Prefix {
	a := s.base.Addr().AsSlice()
	v := new(big.Int).SetBytes(a)
	v.Add(v, new(big.Int).Lsh(big.NewInt(int64(i)), uint(s.base.Addr().BitLen()-s.mask)))
	b := v.FillBytes(make([]byte, len(a)))
	addr, _ := netip.AddrFromSlice(b)
	return netip.PrefixFrom(addr, s.mask)
}

// index is the position of p in the range, or an error if p is not one of its subnets.
func (s *cidrSet) index(p netip.Prefix) (int, error) {
	if p.Bits() != s.mask || !s.base.Contains(p.Addr()) || p.Masked() != p {
		return 0, fmt.Errorf("%s is not a /%d subnet of %s", p, s.mask, s.base)
	}
	off := new(big.Int).Sub(new(big.Int).SetBytes(p.Addr().AsSlice()), new(big.Int).SetBytes(s.base.Addr().AsSlice()))
	return int(off.Rsh(off, uint(s.base.Addr().BitLen()-s.mask)).Int64()), nil
}

// allocate takes the next free subnet.
func (s *cidrSet) allocate() (netip.Prefix, error) {
	for k := 0; k < s.count; k++ {
		i := (s.next + k) % s.count
		if s.used.Bit(i) == 0 {
			s.used.SetBit(s.used, i, 1)
			s.next = (i + 1) % s.count
			return s.subnet(i), nil
		}
	}
	return netip.Prefix{}, errFull
}

// occupy marks cidr as taken (a node already has it).
func (s *cidrSet) occupy(cidr string) error {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return fmt.Errorf("pod CIDR %q: %w", cidr, err)
	}
	i, err := s.index(p)
	if err != nil {
		return err
	}
	s.used.SetBit(s.used, i, 1)
	return nil
}

// release frees cidr.
func (s *cidrSet) release(cidr string) error {
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return fmt.Errorf("pod CIDR %q: %w", cidr, err)
	}
	i, err := s.index(p)
	if err != nil {
		return err
	}
	s.used.SetBit(s.used, i, 0)
	return nil
}

package overlaytest

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

func ipv4(src, dst string, proto uint8, l4 []byte) []byte {
	h := make([]byte, 20)
	h[0] = 0x45
	binary.BigEndian.PutUint16(h[2:4], uint16(20+len(l4)))
	h[8] = 64
	h[9] = proto
	s, d := netip.MustParseAddr(src).As4(), netip.MustParseAddr(dst).As4()
	copy(h[12:16], s[:])
	copy(h[16:20], d[:])
	return append(h, l4...)
}

func ports(src, dst uint16, rest int) []byte {
	b := make([]byte, 4+rest)
	binary.BigEndian.PutUint16(b[0:2], src)
	binary.BigEndian.PutUint16(b[2:4], dst)
	return b
}

func ether(etherType uint16, payload []byte) []byte {
	f := make([]byte, 14)
	copy(f[0:6], []byte{0x02, 0, 0, 0, 0, 2})
	copy(f[6:12], []byte{0x02, 0, 0, 0, 0, 1})
	binary.BigEndian.PutUint16(f[12:14], etherType)
	return append(f, payload...)
}

func vxlan(vni uint32, inner []byte) []byte {
	h := make([]byte, 8)
	h[0] = 0x08
	h[4], h[5], h[6] = byte(vni>>16), byte(vni>>8), byte(vni)
	return append(h, inner...)
}

func TestDecodeFrame(t *testing.T) {
	tcp := ether(0x0800, ipv4("10.244.1.2", "10.244.2.2", ProtoTCP, ports(40000, 8080, 16)))
	udpHeader := func(src, dst uint16, payload []byte) []byte {
		b := ports(src, dst, 4)
		binary.BigEndian.PutUint16(b[4:6], uint16(8+len(payload)))
		return append(b, payload...)
	}
	encap := ether(0x0800, ipv4("172.31.1.10", "172.31.2.10", ProtoUDP, udpHeader(51234, 8472, vxlan(0x010203, tcp))))

	p, ok := DecodeFrame(encap)
	if !ok {
		t.Fatal("encapsulated frame not decoded")
	}
	want := "172.31.1.10:51234 > 172.31.2.10:8472 proto 17 vxlan vni 66051 [10.244.1.2:40000 > 10.244.2.2:8080 proto 6]"
	if p.String() != want {
		t.Errorf("got  %s\nwant %s", p, want)
	}
	if !p.VXLAN || p.Inner == nil || p.Inner.Src != netip.MustParseAddr("10.244.1.2") || p.Inner.VXLAN {
		t.Errorf("decoded %+v", p)
	}

	for _, tc := range []struct {
		name  string
		frame []byte
		ok    bool
		want  string
	}{
		{"tcp", tcp, true, "10.244.1.2:40000 > 10.244.2.2:8080 proto 6"},
		{"vlan", ether(0x8100, append([]byte{0, 5, 0x08, 0x00}, ipv4("10.0.0.1", "10.0.0.2", ProtoICMP, make([]byte, 8))...)),
			true, "10.0.0.1:0 > 10.0.0.2:0 proto 1"},
		{"udp elsewhere is not vxlan", ether(0x0800, ipv4("10.0.0.1", "10.0.0.2", ProtoUDP, udpHeader(1, 53, vxlan(1, tcp)))),
			true, "10.0.0.1:1 > 10.0.0.2:53 proto 17"},
		{"vxlan without the I flag", ether(0x0800, ipv4("10.0.0.1", "10.0.0.2", ProtoUDP, udpHeader(1, 4789, make([]byte, 8)))),
			true, "10.0.0.1:1 > 10.0.0.2:4789 proto 17"},
		{"arp", ether(0x0806, make([]byte, 28)), false, ""},
		{"short", tcp[:20], false, ""},
		{"ipv6 version", ether(0x0800, append([]byte{0x60}, make([]byte, 39)...)), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, ok := DecodeFrame(tc.frame)
			if ok != tc.ok || (ok && p.String() != tc.want) {
				t.Errorf("DecodeFrame = %s, %v; want %s, %v", p, ok, tc.want, tc.ok)
			}
		})
	}

	frag := ipv4("10.0.0.1", "10.0.0.2", ProtoUDP, ports(1, 8472, 20))
	binary.BigEndian.PutUint16(frag[6:8], 10) // a later fragment: no ports in it
	if p, ok := DecodeFrame(ether(0x0800, frag)); !ok || p.SrcPort != 0 || p.VXLAN {
		t.Errorf("fragment decoded as %s", p)
	}
}

package overlaytest

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// IP protocol numbers of Packet.Proto.
const (
	ProtoICMP = 1
	ProtoTCP  = 6
	ProtoUDP  = 17
)

// Packet is one decoded IPv4 packet.
type Packet struct {
	// Outgoing is true for a frame the interface sent, false for one it received.
	Outgoing bool
	Src, Dst netip.Addr
	// Proto is the IP protocol (ProtoTCP, ProtoUDP, ...).
	Proto uint8
	// SrcPort and DstPort are set for TCP and UDP (first fragments only).
	SrcPort, DstPort uint16
	// VXLAN is true when the packet is UDP to port 4789 (IANA's) or 8472 (Linux's
	// and the overlay's default) carrying a VXLAN header; then VNI is its network identifier and Inner the packet it carries
	// (nil when that is not IPv4).
	VXLAN bool
	VNI   uint32
	Inner *Packet
}

func (p Packet) String() string {
	s := fmt.Sprintf("%s:%d > %s:%d proto %d", p.Src, p.SrcPort, p.Dst, p.DstPort, p.Proto)
	if p.VXLAN {
		s += fmt.Sprintf(" vxlan vni %d", p.VNI)
		if p.Inner != nil {
			s += " [" + p.Inner.String() + "]"
		}
	}
	return s
}

const (
	etherTypeIPv4 = 0x0800
	etherTypeVLAN = 0x8100
)

// DecodeFrame decodes an Ethernet frame holding IPv4; ok is false for anything else
// or a frame too short for its headers.
func DecodeFrame(frame []byte) (p Packet, ok bool) {
	return decodeFrame(frame, true)
}

func decodeFrame(frame []byte, outer bool) (Packet, bool) {
	if len(frame) < 14 {
		return Packet{}, false
	}
	etherType := binary.BigEndian.Uint16(frame[12:14])
	payload := frame[14:]
	if etherType == etherTypeVLAN {
		if len(payload) < 4 {
			return Packet{}, false
		}
		etherType = binary.BigEndian.Uint16(payload[2:4])
		payload = payload[4:]
	}
	if etherType != etherTypeIPv4 {
		return Packet{}, false
	}
	return decodeIPv4(payload, outer)
}

// decodeIPv4 decodes an IPv4 packet; outer says whether VXLAN is looked into.
func decodeIPv4(b []byte, outer bool) (Packet, bool) {
	if len(b) < 20 || b[0]>>4 != 4 {
		return Packet{}, false
	}
	ihl := int(b[0]&0x0f) * 4
	if ihl < 20 || len(b) < ihl {
		return Packet{}, false
	}
	p := Packet{
		Proto: b[9],
		Src:   netip.AddrFrom4([4]byte(b[12:16])),
		Dst:   netip.AddrFrom4([4]byte(b[16:20])),
	}
	fragOffset := binary.BigEndian.Uint16(b[6:8]) & 0x1fff
	l4 := b[ihl:]
	if fragOffset != 0 || (p.Proto != ProtoTCP && p.Proto != ProtoUDP) || len(l4) < 4 {
		return p, true
	}
	p.SrcPort = binary.BigEndian.Uint16(l4[0:2])
	p.DstPort = binary.BigEndian.Uint16(l4[2:4])
	if !outer || p.Proto != ProtoUDP || len(l4) < 8+8 || !isVXLANPort(p.DstPort) {
		return p, true
	}
	vx := l4[8:]
	if vx[0]&0x08 == 0 { // the I flag: a valid VNI follows
		return p, true
	}
	p.VXLAN = true
	p.VNI = uint32(vx[4])<<16 | uint32(vx[5])<<8 | uint32(vx[6])
	if inner, ok := decodeFrame(vx[8:], false); ok {
		p.Inner = &inner
	}
	return p, true
}

func isVXLANPort(port uint16) bool {
	return port == 4789 || port == 8472
}

package overlay

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
)

func TestVTEPMAC(t *testing.T) {
	a, b := vtepMAC("node-a"), vtepMAC("node-b")
	if a.String() != vtepMAC("node-a").String() {
		t.Error("not stable")
	}
	if a.String() == b.String() {
		t.Errorf("nodes share the MAC %s", a)
	}
	for _, m := range []net.HardwareAddr{a, b} {
		if len(m) != 6 || m[0]&0x01 != 0 || m[0]&0x02 == 0 {
			t.Errorf("%s is not a locally administered unicast MAC", m)
		}
		if _, err := parseVTEPMAC(m.String()); err != nil {
			t.Errorf("%s does not parse back: %v", m, err)
		}
	}
}

func TestVXLANReusable(t *testing.T) {
	spec := vxlanSpec{name: "kubelab.1", vni: 1, port: 8472, mac: vtepMAC("n"), local: netip.MustParseAddr("172.31.1.10"),
		underlay: 2, mtu: 1450}
	if err := spec.reusable(spec.link()); err != nil {
		t.Fatalf("the spec's own link is not reusable: %v", err)
	}
	mtu := spec.link()
	mtu.MTU = 1500
	if err := spec.reusable(mtu); err != nil {
		t.Errorf("an MTU difference makes the device again (it is set in place): %v", err)
	}
	for _, tc := range []struct {
		change func(*netlink.Vxlan)
		want   string
	}{
		{func(v *netlink.Vxlan) { v.VxlanId = 2 }, "vni 2, want 1"},
		{func(v *netlink.Vxlan) { v.Port = 4789 }, "dstport 4789, want 8472"},
		{func(v *netlink.Vxlan) { v.VtepDevIndex = 3 }, "dev ifindex 3, want 2"},
		{func(v *netlink.Vxlan) { v.SrcAddr = net.ParseIP("172.31.1.11") }, "local 172.31.1.11, want 172.31.1.10"},
		{func(v *netlink.Vxlan) { v.Learning = true }, "learning on"},
		{func(v *netlink.Vxlan) { v.Group = net.ParseIP("239.1.1.1") }, "remote/group 239.1.1.1 set"},
		{func(v *netlink.Vxlan) { v.FlowBased = true }, "external"},
		{func(v *netlink.Vxlan) { v.HardwareAddr = vtepMAC("other") }, "address "},
	} {
		l := spec.link()
		tc.change(l)
		if err := spec.reusable(l); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("reusable = %v, want an error containing %q", err, tc.want)
		}
	}
	if err := spec.reusable(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "kubelab.1"}}); err == nil ||
		!strings.Contains(err.Error(), "is a dummy, not a vxlan") {
		t.Errorf("reusable(dummy) = %v", err)
	}
}

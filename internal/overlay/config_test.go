package overlay

import (
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
)

func TestConfigDefaults(t *testing.T) {
	c := Config{NodeName: "n"}.withDefaults()
	if c.Underlay != "eth0" || c.Mode != ModeVXLAN || c.VNI != 1 || c.Port != 8472 || c.Device != "kubelab.1" ||
		c.ClusterCIDR != "10.244.0.0/16" || c.ResyncPeriod != DefaultResyncPeriod || c.Logger == nil {
		t.Errorf("defaults: %+v", c)
	}
	if err := c.validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no node", Config{}, "node name is empty"},
		{"mode", Config{NodeName: "n", Mode: "host-gw"}, `mode "host-gw" is neither`},
		{"vni", Config{NodeName: "n", VNI: 1 << 24}, "vni 16777216 is outside"},
		{"negative vni", Config{NodeName: "n", VNI: -1}, "vni -1 is outside"},
		{"port", Config{NodeName: "n", Port: 70000}, "port 70000 is outside"},
		{"long device", Config{NodeName: "n", Device: "a-very-long-device"}, "longer than 15 bytes"},
		{"device slash", Config{NodeName: "n", Device: "a/b"}, "device: interface name \"a/b\""},
		{"underlay space", Config{NodeName: "n", Underlay: "eth 0"}, "underlay: interface name"},
		{"same links", Config{NodeName: "n", Device: "eth0"}, `device and underlay are both "eth0"`},
		{"cidr", Config{NodeName: "n", ClusterCIDR: "10.244.0.0"}, `cluster CIDR "10.244.0.0"`},
		{"cidr v6", Config{NodeName: "n", ClusterCIDR: "fd00::/64"}, "is not IPv4"},
		{"cidr host bits", Config{NodeName: "n", ClusterCIDR: "10.244.1.0/16"}, "host bits set (the network is 10.244.0.0/16)"},
		{"resync", Config{NodeName: "n", ResyncPeriod: -1}, "resync period -1ns is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg, fake.NewClientset())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

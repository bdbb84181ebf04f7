package plugin

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
)

func TestLoadNetConfDefaults(t *testing.T) {
	c, err := LoadNetConf([]byte(`{"cniVersion":"1.0.0","name":"n","type":"kubelab-cni","subnet":"10.244.1.0/24","dataDir":"/var/lib/kubelab/ipam"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Bridge != "cni0" || c.MTU != 1450 || !*c.HairpinMode || c.rng.Gateway.String() != "10.244.1.1" || c.rng.Size != 253 {
		t.Fatalf("defaults: %+v", c)
	}
	c, err = LoadNetConf([]byte(`{"cniVersion":"1.0.0","name":"n","subnet":"10.244.1.0/24","dataDir":"/d","bridge":"br1","mtu":9000,"hairpinMode":false,
		"runtimeConfig":{"portMappings":[{"hostPort":8080,"containerPort":80,"protocol":"TCP"},{"hostPort":53,"containerPort":53,"protocol":"udp","hostIP":"0.0.0.0"},
		{"hostPort":9090,"containerPort":90,"hostIP":"172.31.0.9"},{"hostPort":7070,"containerPort":70,"hostIP":"fd00::1"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []PortMapping{{8080, 80, "tcp", ""}, {53, 53, "udp", ""}, {9090, 90, "tcp", "172.31.0.9"}}
	if c.Bridge != "br1" || c.MTU != 9000 || *c.HairpinMode || len(c.ports) != len(want) {
		t.Fatalf("explicit values: %+v ports %+v", c, c.ports)
	}
	for i := range want {
		if c.ports[i] != want[i] {
			t.Fatalf("port %d: %+v, want %+v (IPv6 host addresses skipped)", i, c.ports[i], want[i])
		}
	}
}

func TestLoadNetConfErrors(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		code       uint
		want       []string
	}{
		{"not json", `{"subnet": `, types.ErrDecodingFailure, []string{"decode network config"}},
		{"wrong type", `{"subnet": 24, "dataDir": "/d"}`, types.ErrDecodingFailure, []string{"subnet"}},
		{"missing both", `{"name":"n"}`, types.ErrInvalidNetworkConfig, []string{"subnet is required", "dataDir is required"}},
		{"bad subnet", `{"subnet":"10.244.1.0","dataDir":"/d"}`, types.ErrInvalidNetworkConfig, []string{`subnet "10.244.1.0" is not a CIDR`}},
		{"ipv6", `{"subnet":"fd00::/64","dataDir":"/d"}`, types.ErrInvalidNetworkConfig, []string{"want an IPv4 prefix"}},
		{"too small", `{"subnet":"10.0.0.0/31","dataDir":"/d"}`, types.ErrInvalidNetworkConfig, []string{"/30 or shorter"}},
		{"host bits", `{"subnet":"10.244.1.7/24","dataDir":"/d"}`, types.ErrInvalidNetworkConfig, []string{"want 10.244.1.0/24"}},
		{"relative", `{"subnet":"10.244.1.0/24","dataDir":"ipam"}`, types.ErrInvalidNetworkConfig, []string{"must be an absolute path"}},
		{"bridge", `{"subnet":"10.244.1.0/24","dataDir":"/d","bridge":"a-very-long-bridge-name"}`, types.ErrInvalidNetworkConfig, []string{"bridge:"}},
		{"mtu", `{"subnet":"10.244.1.0/24","dataDir":"/d","mtu":70000}`, types.ErrInvalidNetworkConfig, []string{"mtu 70000"}},
		{"port", `{"subnet":"10.244.1.0/24","dataDir":"/d","runtimeConfig":{"portMappings":[{"hostPort":0,"containerPort":80}]}}`, types.ErrInvalidNetworkConfig, []string{"portMappings[0]: hostPort 0"}},
		{"proto", `{"subnet":"10.244.1.0/24","dataDir":"/d","runtimeConfig":{"portMappings":[{"hostPort":1,"containerPort":80,"protocol":"icmp"}]}}`, types.ErrInvalidNetworkConfig, []string{`protocol "icmp"`}},
	} {
		_, err := LoadNetConf([]byte(tc.conf))
		var e *types.Error
		if !errors.As(err, &e) || e.Code != tc.code {
			t.Errorf("%s: %v, want code %d", tc.name, err, tc.code)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(e.Msg, w) {
				t.Errorf("%s: message %q does not say %q", tc.name, e.Msg, w)
			}
		}
	}
}

func TestNames(t *testing.T) {
	a, b := HostVethName("0123456789abcdef", "eth0"), HostVethName("0123456789abcdef", "net1")
	if a == b || len(a) != 12 || !isHostVethName(a) || a != HostVethName("0123456789abcdef", "eth0") {
		t.Fatalf("veth names %q %q: want distinct, stable, veth and 8 hex digits", a, b)
	}
	if c := hostPortChain("0123456789abcdef", "eth0"); c != "hostport-"+a[4:] {
		t.Fatalf("chain %q", c)
	}
}

func TestNetConfRoundTrip(t *testing.T) {
	// What a node's conflist writer marshals is what the plugin loads.
	b, err := json.Marshal(NetConf{CNIVersion: "1.0.0", Name: "kubelab", Type: "kubelab-cni", Subnet: "10.244.3.0/24", DataDir: "/var/lib/kubelab/n1/cni",
		Capabilities: map[string]bool{"portMappings": true}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "runtimeConfig") || strings.Contains(string(b), "prevResult") {
		t.Fatalf("marshalled runtime-only fields: %s", b)
	}
	c, err := LoadNetConf(b)
	if err != nil || c.Bridge != DefaultBridge || c.rng.Gateway.String() != "10.244.3.1" || !c.Capabilities["portMappings"] {
		t.Fatalf("round trip of %s: %+v %v", b, c, err)
	}
}

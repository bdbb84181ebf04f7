package kuberuntime

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestPodDNSConfig(t *testing.T) {
	host := &runtimeapi.DNSConfig{Servers: []string{"192.168.1.1", "192.168.1.2"}, Searches: []string{"corp.example"},
		Options: []string{"edns0", "ndots:1"}}
	clusterDNS := []string{"10.96.0.10"}
	clusterSearch := []string{"shop.svc.cluster.local", "svc.cluster.local", "cluster.local"}
	two := "2"
	long := strings.Repeat("a", 250) + ".example"
	var many, manyLong []string
	for i := range 40 {
		many = append(many, strings.Repeat("x", 3)+string(rune('a'+i%26))+string(rune('a'+i/26))+".example")
	}
	for i := range 10 {
		manyLong = append(manyLong, strings.Repeat(string(rune('a'+i)), 240)+".example")
	}
	tests := []struct {
		name        string
		policy      corev1.DNSPolicy
		hostNetwork bool
		dnsConfig   *corev1.PodDNSConfig
		clusterDNS  []string
		domain      string
		want        *runtimeapi.DNSConfig
		warnings    []string // reasons
	}{
		{name: "cluster first", policy: corev1.DNSClusterFirst, clusterDNS: clusterDNS, domain: "cluster.local",
			want: &runtimeapi.DNSConfig{Servers: clusterDNS, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{name: "no policy is cluster first", clusterDNS: clusterDNS, domain: "cluster.local.",
			want: &runtimeapi.DNSConfig{Servers: clusterDNS, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{name: "unknown policy is cluster first", policy: "Sideways", clusterDNS: clusterDNS, domain: "cluster.local",
			want: &runtimeapi.DNSConfig{Servers: clusterDNS, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{name: "cluster first, another domain", policy: corev1.DNSClusterFirst, clusterDNS: []string{"10.96.0.10", "fd00::10"}, domain: "corp.internal",
			want: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10", "fd00::10"},
				Searches: []string{"shop.svc.corp.internal", "svc.corp.internal", "corp.internal"}, Options: []string{"ndots:5"}}},
		{name: "cluster first without domain", policy: corev1.DNSClusterFirst, clusterDNS: clusterDNS,
			want: &runtimeapi.DNSConfig{Servers: clusterDNS, Options: []string{"ndots:5"}}},
		{name: "cluster first on the host network is default", policy: corev1.DNSClusterFirst, hostNetwork: true, clusterDNS: clusterDNS,
			domain: "cluster.local", want: host},
		{name: "cluster first with host net", policy: corev1.DNSClusterFirstWithHostNet, hostNetwork: true, clusterDNS: clusterDNS,
			domain: "cluster.local", want: &runtimeapi.DNSConfig{Servers: clusterDNS, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{name: "cluster first with host net, pod network", policy: corev1.DNSClusterFirstWithHostNet, clusterDNS: clusterDNS,
			domain: "cluster.local", want: &runtimeapi.DNSConfig{Servers: clusterDNS, Searches: clusterSearch, Options: []string{"ndots:5"}}},
		{name: "cluster first without cluster DNS", policy: corev1.DNSClusterFirst, domain: "cluster.local", want: host,
			warnings: []string{eventMissingClusterDNS}},
		{name: "cluster first with host net without cluster DNS", policy: corev1.DNSClusterFirstWithHostNet, hostNetwork: true,
			domain: "cluster.local", want: host, warnings: []string{eventMissingClusterDNS}},
		{name: "default", policy: corev1.DNSDefault, clusterDNS: clusterDNS, domain: "cluster.local", want: host},
		{name: "none", policy: corev1.DNSNone, clusterDNS: clusterDNS, domain: "cluster.local",
			dnsConfig: &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"}, Searches: []string{"a.example"},
				Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &two}}},
			want: &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}, Searches: []string{"a.example"}, Options: []string{"ndots:2"}}},
		{name: "none without dnsConfig", policy: corev1.DNSNone, clusterDNS: clusterDNS, domain: "cluster.local",
			want: &runtimeapi.DNSConfig{}},
		{name: "cluster first merged", policy: corev1.DNSClusterFirst, clusterDNS: clusterDNS, domain: "cluster.local",
			dnsConfig: &corev1.PodDNSConfig{Nameservers: []string{"10.96.0.10", "8.8.8.8"}, Searches: []string{"svc.cluster.local", "my.example"},
				Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &two}, {Name: "single-request-reopen"}, {Name: "edns0"}}},
			want: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10", "8.8.8.8"}, Searches: append(slices.Clone(clusterSearch), "my.example"),
				Options: []string{"ndots:2", "single-request-reopen", "edns0"}}},
		{name: "default merged", policy: corev1.DNSDefault, dnsConfig: &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"},
			Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: &two}}},
			want: &runtimeapi.DNSConfig{Servers: []string{"192.168.1.1", "192.168.1.2", "1.1.1.1"}, Searches: []string{"corp.example"},
				Options: []string{"edns0", "ndots:2"}}},
		{name: "too many nameservers", policy: corev1.DNSDefault, dnsConfig: &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "8.8.8.8"}},
			want: &runtimeapi.DNSConfig{Servers: []string{"192.168.1.1", "192.168.1.2", "1.1.1.1"}, Searches: []string{"corp.example"},
				Options: []string{"edns0", "ndots:1"}}, warnings: []string{eventDNSConfigForming}},
		{name: "too many search domains", policy: corev1.DNSClusterFirst, clusterDNS: clusterDNS, domain: "cluster.local",
			dnsConfig: &corev1.PodDNSConfig{Searches: many},
			want:      &runtimeapi.DNSConfig{Servers: clusterDNS, Searches: append(slices.Clone(clusterSearch), many[:29]...), Options: []string{"ndots:5"}},
			warnings:  []string{eventDNSConfigForming}},
		{name: "search domain too long", policy: corev1.DNSNone, dnsConfig: &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"},
			Searches: []string{"a.example", long, "b.example"}},
			want:     &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}, Searches: []string{"a.example", "b.example"}},
			warnings: []string{eventDNSConfigForming}},
		{name: "search line too long", policy: corev1.DNSNone, dnsConfig: &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1"},
			Searches: manyLong},
			want:     &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1"}, Searches: manyLong[:8]}, // 8×248 characters and 7 spaces
			warnings: []string{eventDNSConfigForming}},
	}
	for _, tt := range tests {
		pod := testPod(corev1.RestartPolicyAlways, nil, "app")
		pod.Namespace = "shop"
		pod.Spec.DNSPolicy, pod.Spec.HostNetwork, pod.Spec.DNSConfig = tt.policy, tt.hostNetwork, tt.dnsConfig
		got, warnings := podDNSConfig(pod, tt.clusterDNS, tt.domain, host)
		if !slices.Equal(got.GetServers(), tt.want.GetServers()) || !slices.Equal(got.GetSearches(), tt.want.GetSearches()) ||
			!slices.Equal(got.GetOptions(), tt.want.GetOptions()) {
			t.Errorf("%s: config %v, want %v", tt.name, got, tt.want)
		}
		var reasons []string
		for _, w := range warnings {
			reasons = append(reasons, w.reason)
		}
		if !slices.Equal(reasons, tt.warnings) {
			t.Errorf("%s: warnings %v, want %v", tt.name, warnings, tt.warnings)
		}
	}
	// The node's configuration is left alone.
	if !slices.Equal(host.Servers, []string{"192.168.1.1", "192.168.1.2"}) || !slices.Equal(host.Options, []string{"edns0", "ndots:1"}) {
		t.Errorf("host configuration changed: %v", host)
	}
}

func TestPodDNSConfigMessages(t *testing.T) {
	pod := testPod(corev1.RestartPolicyAlways, nil, "app")
	_, warnings := podDNSConfig(pod, nil, "cluster.local", &runtimeapi.DNSConfig{})
	want := `pod: "web_default(uid-1)". kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" policy. Falling back to "Default" policy.`
	if len(warnings) != 1 || warnings[0].message != want {
		t.Errorf("warnings %v, want %q", warnings, want)
	}
	pod.Spec.DNSPolicy = corev1.DNSNone
	pod.Spec.DNSConfig = &corev1.PodDNSConfig{Nameservers: []string{"1.1.1.1", "1.1.1.2", "1.1.1.3", "1.1.1.4"}}
	_, warnings = podDNSConfig(pod, nil, "cluster.local", &runtimeapi.DNSConfig{})
	want = "Nameserver limits were exceeded, some nameservers have been omitted, the applied nameserver line is: 1.1.1.1 1.1.1.2 1.1.1.3"
	if len(warnings) != 1 || warnings[0].message != want {
		t.Errorf("warnings %v, want %q", warnings, want)
	}
}

// The sandbox gets the pod's DNS configuration; a ClusterFirst pod on a kubelet without
// cluster DNS gets the node's, with a warning event.
func TestSandboxDNSConfig(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(conf, []byte("nameserver 192.168.7.1\nsearch node.example\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := hostResolvConf
	hostResolvConf = conf
	t.Cleanup(func() { hostResolvConf = old })

	r, env := newTestRuntime(t)
	pod := testPod(corev1.RestartPolicyAlways, nil, "app")
	dns := r.sandboxConfig(pod, 0).GetDnsConfig()
	if !slices.Equal(dns.GetServers(), []string{"192.168.7.1"}) || !slices.Equal(dns.GetSearches(), []string{"node.example"}) {
		t.Errorf("without cluster DNS: %v", dns)
	}
	if evs := env.events(); !hasEvent(evs, "Warning MissingClusterDNS pod: \"web_default(uid-1)\". kubelet does not have ClusterDNS IP") {
		t.Errorf("events %q", evs)
	}

	r.cfg.ClusterDNS = []string{"10.96.0.10"}
	dns = r.sandboxConfig(pod, 0).GetDnsConfig()
	if !slices.Equal(dns.GetServers(), []string{"10.96.0.10"}) ||
		!slices.Equal(dns.GetSearches(), []string{"default.svc.cluster.local", "svc.cluster.local", "cluster.local"}) ||
		!slices.Equal(dns.GetOptions(), []string{"ndots:5"}) {
		t.Errorf("with cluster DNS: %v", dns)
	}
	if evs := env.events(); len(evs) != 0 {
		t.Errorf("events %q", evs)
	}

	// An unreadable node configuration leaves Default pods with an empty one.
	hostResolvConf = filepath.Join(t.TempDir(), "missing")
	pod.Spec.DNSPolicy = corev1.DNSDefault
	if dns := r.sandboxConfig(pod, 0).GetDnsConfig(); dns == nil || len(dns.Servers)+len(dns.Searches)+len(dns.Options) != 0 {
		t.Errorf("without the node's resolv.conf: %v", dns)
	}
}

func TestConfigClusterDNS(t *testing.T) {
	base := Config{NodeName: "n", RootDir: "/var/lib/kubelet"}
	for _, tt := range []struct {
		dns    []string
		domain string
		want   string
	}{
		{dns: []string{"10.96.0.10", "fd00::10"}, domain: "cluster.local."},
		{dns: []string{"10.96.0.300"}, want: `cluster DNS "10.96.0.300" is not an IP address`},
		{dns: []string{"kube-dns"}, want: `cluster DNS "kube-dns" is not an IP address`},
		{domain: "Cluster_Local", want: `cluster domain "Cluster_Local"`},
	} {
		cfg := base
		cfg.ClusterDNS, cfg.ClusterDomain = tt.dns, tt.domain
		err := cfg.validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("validate(%v, %q) = %v, want %q", tt.dns, tt.domain, err, tt.want)
		}
	}
	cfg := base
	cfg.defaults()
	if cfg.ClusterDomain != "cluster.local" {
		t.Errorf("default cluster domain %q", cfg.ClusterDomain)
	}
	cfg = base
	cfg.ClusterDomain = "corp.internal."
	cfg.defaults()
	if cfg.ClusterDomain != "corp.internal" {
		t.Errorf("cluster domain %q", cfg.ClusterDomain)
	}
}

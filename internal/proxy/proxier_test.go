package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"github.com/kubelab/kubelab/internal/testutil"
)

func TestConfigValidate(t *testing.T) {
	good := Config{NodeName: "n", NodeIPs: []string{"172.31.0.5"}, ClusterCIDR: "10.244.0.0/16"}
	cases := map[string]struct {
		mutate func(*Config)
		want   string
	}{
		"no node":       {func(c *Config) { c.NodeName = "" }, "node name"},
		"bad node IP":   {func(c *Config) { c.NodeIPs = []string{"nope"} }, `node IP "nope"`},
		"IPv6 node IP":  {func(c *Config) { c.NodeIPs = []string{"fd00::1"} }, `node IP "fd00::1"`},
		"loopback":      {func(c *Config) { c.NodeIPs = []string{"127.0.0.1"} }, `node IP "127.0.0.1"`},
		"no cluster":    {func(c *Config) { c.ClusterCIDR = "" }, "cluster CIDR"},
		"host bits":     {func(c *Config) { c.ClusterCIDR = "10.244.0.1/16" }, `cluster CIDR "10.244.0.1/16"`},
		"negative sync": {func(c *Config) { c.SyncPeriod = -time.Second }, "sync period"},
		"long table":    {func(c *Config) { c.Table = strings.Repeat("t", 300) }, "table"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := good
			c.mutate(&cfg)
			_, err := NewWithNFTables(cfg, fake.NewClientset(), knftables.NewFake(knftables.IPv4Family, table))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v, want one naming %q", err, c.want)
			}
		})
	}
	if _, err := NewWithNFTables(good, fake.NewClientset(), knftables.NewFake(knftables.IPv4Family, table)); err != nil {
		t.Errorf("good config: %v", err)
	}
	if _, err := NewWithNFTables(good, nil, knftables.NewFake(knftables.IPv4Family, table)); err == nil {
		t.Error("nil client accepted")
	}
	if _, err := NewWithNFTables(good, fake.NewClientset(), nil); err == nil {
		t.Error("nil nftables accepted")
	}
}

// runProxier runs a Proxier on a fake clientset and a fake nft until the test ends.
func runProxier(t *testing.T, cfg Config, objects ...any) (*Proxier, *fake.Clientset, *knftables.Fake) {
	t.Helper()
	client := fake.NewClientset()
	nft := knftables.NewFake(knftables.IPv4Family, table)
	cfg.NodeName = testNode
	cfg.NodeIPs = []string{"172.31.0.5"}
	cfg.ClusterCIDR = testCluster
	cfg.Logger = testLogger(t)
	p, err := NewWithNFTables(cfg, client, nft)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Start(t, "the proxier", 0, p.Run, testutil.NoWait)
	return p, client, nft
}

func hasLine(nft *knftables.Fake, line string) bool { return dumpLines(nft)[line] }

func TestRunFollowsServicesAndSlices(t *testing.T) {
	p, client, nft := runProxier(t, Config{MinSyncPeriod: -1})
	ctx := context.Background()
	testutil.Eventually(t, "first sync", p.HasSynced)

	web := makeService("ns", "web", "10.96.0.10", nodePort(30080))
	if _, err := client.CoreV1().Services("ns").Create(ctx, web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reject := element + `no-endpoint-services { 10.96.0.10 . tcp . 80 comment "ns/web:http" : goto reject-chain }`
	testutil.Eventually(t, "reject for a Service without endpoints", func() bool { return hasLine(nft, reject) })

	slice := makeSlice(web, "web-1", 8080, ep{ip: "10.244.1.2"}, ep{ip: "10.244.2.2"})
	if _, err := client.DiscoveryV1().EndpointSlices("ns").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	webChain := chainName(clusterChainPrefix, "ns", "web")
	testutil.Eventually(t, "two endpoints", func() bool {
		return hasLine(nft, prefix+webChain+" meta l4proto tcp dnat ip addr . port to numgen random mod 2 map @"+dnatMapName(webChain)) &&
			!hasLine(nft, reject)
	})

	// The endpoint on 10.244.2.2 is no longer ready.
	slice.Endpoints[1].Conditions.Ready = ptr.To(false)
	if _, err := client.DiscoveryV1().EndpointSlices("ns").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "one endpoint", func() bool {
		return hasLine(nft, prefix+webChain+" meta l4proto tcp dnat ip addr . port to numgen random mod 1 map @"+dnatMapName(webChain)) &&
			!strings.Contains(nft.Dump(), "10.244.2.2")
	})

	// A slice moving to another Service updates both.
	other := makeService("ns", "other", "10.96.0.11")
	if _, err := client.CoreV1().Services("ns").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice.Labels[discovery.LabelServiceName] = "other"
	if _, err := client.DiscoveryV1().EndpointSlices("ns").Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	otherChain := chainName(clusterChainPrefix, "ns", "other")
	testutil.Eventually(t, "slice moved", func() bool {
		return hasLine(nft, prefix+otherChain+" meta l4proto tcp dnat ip addr . port to numgen random mod 1 map @"+dnatMapName(otherChain)) &&
			hasLine(nft, reject)
	})

	if err := client.CoreV1().Services("ns").Delete(ctx, "other", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Services("ns").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "Services gone", func() bool {
		d := nft.Dump()
		return !strings.Contains(d, "ns/") && !strings.Contains(d, "10.96.0.1")
	})
}

func TestRunStartsFromExistingObjectsAndResyncs(t *testing.T) {
	client := fake.NewClientset()
	web := makeService("ns", "web", "10.96.0.10")
	if _, err := client.CoreV1().Services("ns").Create(context.Background(), web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices("ns").Create(context.Background(),
		makeSlice(web, "web-1", 8080, ep{ip: "10.244.1.2"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nft := knftables.NewFake(knftables.IPv4Family, table)
	// A chain of a Service deleted while the proxy was down.
	tx := nft.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Add(&knftables.Chain{Name: "service-XXXXXXXX-ns/gone/tcp/http"})
	if err := nft.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}

	p, err := NewWithNFTables(Config{NodeName: testNode, ClusterCIDR: testCluster, SyncPeriod: 50 * time.Millisecond,
		MinSyncPeriod: -1, Logger: testLogger(t)}, client, nft)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Start(t, "the proxier", testutil.DefaultTimeout, p.Run, p.HasSynced)
	if err := p.Run(context.Background()); err == nil {
		t.Error("a second Run was accepted")
	}
	webChain := chainName(clusterChainPrefix, "ns", "web")
	dnat := prefix + webChain + " meta l4proto tcp dnat ip addr . port to numgen random mod 1 map @" + dnatMapName(webChain)
	requireLines(t, nft, dnat, element+dnatMapName(webChain)+" { 0 : 10.244.1.2 . 8080 }")
	forbidLines(t, nft, "ns/gone/")

	// Someone empties a chain; the periodic full resync puts it back.
	tx = nft.NewTransaction()
	tx.Flush(&knftables.Chain{Name: webChain})
	if err := nft.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "resync", func() bool { return hasLine(nft, dnat) })
}

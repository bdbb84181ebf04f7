package netpol

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"sigs.k8s.io/knftables"

	"github.com/kubelab/kubelab/internal/testutil"
)

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// startAgent runs an agent until the returned stop (also run at cleanup) is called.
func startAgent(t testing.TB, cfg Config, client kubernetes.Interface, opts ...Option) (stop func()) {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	a, err := New(cfg, client, opts...)
	if err != nil {
		t.Fatalf("new agent: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	stop = sync.OnceFunc(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("agent %s: %v", cfg.NodeName, err)
		}
	})
	t.Cleanup(stop)
	return stop
}

func TestConfigValidate(t *testing.T) {
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "node name is required"},
		{Config{NodeName: "n", Table: "bad table"}, `table "bad table"`},
		{Config{NodeName: "n", FullSyncPeriod: -time.Second}, "must not be negative"},
	} {
		_, err := New(tt.cfg, fake.NewClientset())
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "netpol config: ") {
			t.Errorf("New(%+v) = %v, want an error with %q", tt.cfg, err, tt.want)
		}
	}
	if _, err := New(Config{NodeName: "n"}, nil); err == nil {
		t.Error("New without a client: no error")
	}
}

// seed creates in's namespaces, pods and policies through client.
func seed(t testing.TB, client kubernetes.Interface, in Inputs) {
	t.Helper()
	ctx := context.Background()
	for _, ns := range in.Namespaces {
		if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range in.Pods {
		if _, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, np := range in.Policies {
		if _, err := client.NetworkingV1().NetworkPolicies(np.Namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAgentFollowsTheCluster(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	seed(t, client, testCluster())
	nft := knftables.NewFake(knftables.IPv4Family, testTable)
	startAgent(t, Config{NodeName: "n1", Table: testTable}, client, WithNFTables(nft))

	// No policy: the table exists with an empty forward path.
	testutil.EventuallyWithin(t, 10*time.Second, "empty table", func() error {
		if s := fakeState(nft); !strings.Contains(s, "map ingress-pods") || strings.Contains(s, "jump") {
			return fmt.Errorf("table:\n%s", s)
		}
		return nil
	})

	np := withIngress(mkPolicy("default", "allow-a", sel("app", "b"), ingressT),
		networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{podPeer(sel("app", "a"))}})
	if _, err := client.NetworkingV1().NetworkPolicies("default").Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hasElement := func(set string, key ...string) func() error {
		return func() error {
			nft.RLock()
			defer nft.RUnlock()
			if nft.Table == nil || nft.Table.Sets[set] == nil || nft.Table.Sets[set].FindElement(key...) == nil {
				return fmt.Errorf("set %s lacks %v", set, key)
			}
			return nil
		}
	}
	testutil.EventuallyWithin(t, 10*time.Second, "policy applied", hasElement("peers-default/allow-a-ingress-0", ipA))
	if s := fakeState(nft); !strings.Contains(s, ipB+" : jump ingress-default/b") {
		t.Fatalf("b is not isolated:\n%s", s)
	}

	// A new pod labelled app=a is a new peer.
	p := mkPod("default", "a2", "n2", "10.244.2.50", lbl("app", "a"))
	if _, err := client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 10*time.Second, "new peer", hasElement("peers-default/allow-a-ingress-0", "10.244.2.50"))

	// Relabelling it takes it out again.
	p.Labels = lbl("app", "other")
	if _, err := client.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 10*time.Second, "relabelled peer", func() error {
		if hasElement("peers-default/allow-a-ingress-0", "10.244.2.50")() == nil {
			return fmt.Errorf("10.244.2.50 is still a peer")
		}
		return nil
	})

	// A namespace label change reaches namespaceSelector peers.
	np2 := withIngress(mkPolicy("default", "from-ns", sel("app", "b"), ingressT),
		networkingv1.NetworkPolicyIngressRule{From: []networkingv1.NetworkPolicyPeer{nsPeer(sel("team", "c"))}})
	if _, err := client.NetworkingV1().NetworkPolicies("default").Create(ctx, np2, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 10*time.Second, "second policy", func() error {
		nft.RLock()
		defer nft.RUnlock()
		if nft.Table == nil || nft.Table.Sets["peers-default/from-ns-ingress-0"] == nil {
			return fmt.Errorf("no set for from-ns")
		}
		return nil
	})
	third := mkNS("third", lbl("team", "c"))
	if _, err := client.CoreV1().Namespaces().Update(ctx, third, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 10*time.Second, "namespace relabelled", hasElement("peers-default/from-ns-ingress-0", ipZ))

	// Deleting the policies opens b again and removes their objects.
	for _, name := range []string{"allow-a", "from-ns"} {
		if err := client.NetworkingV1().NetworkPolicies("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.EventuallyWithin(t, 10*time.Second, "policies deleted", func() error {
		if s := fakeState(nft); strings.Contains(s, "jump") || strings.Contains(s, "set ") {
			return fmt.Errorf("table:\n%s", s)
		}
		return nil
	})
}

func TestAgentFullSyncRepairsTable(t *testing.T) {
	ctx := context.Background()
	in := testCluster()
	in.Policies = []*networkingv1.NetworkPolicy{mkPolicy("default", "deny", sel("app", "b"), ingressT)}
	client := fake.NewClientset()
	seed(t, client, in)
	nft := knftables.NewFake(knftables.IPv4Family, testTable)
	startAgent(t, Config{NodeName: "n1", Table: testTable, FullSyncPeriod: 50 * time.Millisecond}, client, WithNFTables(nft))
	isolated := func() error {
		if s := fakeState(nft); !strings.Contains(s, ipB+" : jump ingress-default/b") {
			return fmt.Errorf("b is not isolated:\n%s", s)
		}
		return nil
	}
	testutil.EventuallyWithin(t, 10*time.Second, "b isolated", isolated)
	// Someone deletes the table; the periodic full sync puts it back.
	tx := nft.NewTransaction()
	tx.Delete(&knftables.Table{})
	if err := nft.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, 10*time.Second, "table repaired", isolated)
}

package netpol

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/knftables"
)

const testTable = "kubelab-netpol-test"

// fakeState prints the fake's table in a stable form: chains with their rules in order,
// sets and maps with their elements sorted. "" when there is no table.
func fakeState(fake *knftables.Fake) string {
	fake.RLock()
	defer fake.RUnlock()
	t := fake.Table
	if t == nil {
		return ""
	}
	var b strings.Builder
	for _, name := range sortedKeys(t.Chains) {
		c := t.Chains[name]
		fmt.Fprintf(&b, "chain %s", name)
		if c.Hook != nil {
			fmt.Fprintf(&b, " hook %s priority %s policy %s", *c.Hook, *c.Priority, *c.Policy)
		}
		b.WriteString("\n")
		for _, r := range c.Rules {
			fmt.Fprintf(&b, "  %s\n", r.Rule)
		}
	}
	elements := func(es []*knftables.Element) []string {
		var out []string
		for _, e := range es {
			s := strings.Join(e.Key, " . ")
			if len(e.Value) > 0 {
				s += " : " + strings.Join(e.Value, " . ")
			}
			out = append(out, s)
		}
		slices.Sort(out)
		return out
	}
	for _, name := range sortedKeys(t.Sets) {
		s := t.Sets[name]
		fmt.Fprintf(&b, "set %s %s %v\n", name, s.Type, s.Flags)
		for _, e := range elements(s.Elements) {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}
	for _, name := range sortedKeys(t.Maps) {
		m := t.Maps[name]
		fmt.Fprintf(&b, "map %s %s\n", name, m.Type)
		for _, e := range elements(m.Elements) {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}
	return b.String()
}

// clusterSteps is a cluster going through changes that touch every kind of object the
// table holds.
func clusterSteps() []Inputs {
	var steps []Inputs
	step := func(change func(in *Inputs)) {
		in := testCluster()
		if len(steps) > 0 {
			prev := steps[len(steps)-1]
			in.Pods = slices.Clone(prev.Pods)
			in.Namespaces = slices.Clone(prev.Namespaces)
			in.Policies = slices.Clone(prev.Policies)
		}
		change(&in)
		steps = append(steps, in)
	}
	web := withIngress(mkPolicy("default", "web", sel("app", "b"), ingressT),
		networkingv1.NetworkPolicyIngressRule{
			From:  []networkingv1.NetworkPolicyPeer{podPeer(sel("app", "a")), blockPeer("10.244.2.0/24", ipY+"/32")},
			Ports: []networkingv1.NetworkPolicyPort{numPort(tcp, 9090), rangePort(udp, 1000, 1010)},
		},
		networkingv1.NetworkPolicyIngressRule{Ports: []networkingv1.NetworkPolicyPort{namedPolicyPort(tcp, "http"), protoOnly(sctp)}},
	)
	out := withEgress(mkPolicy("default", "out", sel("app", "a"), egressT),
		networkingv1.NetworkPolicyEgressRule{
			To:    []networkingv1.NetworkPolicyPeer{nsPeer(sel("team", "b"))},
			Ports: []networkingv1.NetworkPolicyPort{namedPolicyPort(tcp, "http"), numPort(udp, 53)},
		})
	step(func(in *Inputs) {}) // no policy: an empty table
	step(func(in *Inputs) { in.Policies = append(in.Policies, web) })
	step(func(in *Inputs) { in.Policies = append(in.Policies, out) })
	step(func(in *Inputs) { // a new peer pod: elements only
		in.Pods = append(in.Pods, mkPod("default", "a2", "n2", "10.244.2.20", lbl("app", "a")))
	})
	step(func(in *Inputs) { // a named port appears on a destination pod: elements only
		in.Pods = append(in.Pods, mkPod("other", "w", "n2", "10.244.2.21", lbl("app", "w"), cport("http", tcp, 8443)))
	})
	step(func(in *Inputs) { // a namespace stops matching
		in.Namespaces = []*corev1.Namespace{mkNS("default", lbl("team", "a")), mkNS("other", nil), mkNS("third", nil)}
	})
	step(func(in *Inputs) { // the policy changes: chain rewritten, a set goes
		np := web.DeepCopy()
		np.Spec.Ingress = np.Spec.Ingress[1:]
		in.Policies = []*networkingv1.NetworkPolicy{np, out}
	})
	step(func(in *Inputs) { // a local pod becomes selected too
		in.Pods = append(in.Pods, mkPod("default", "b2", "n1", "10.244.1.20", lbl("app", "b")))
	})
	step(func(in *Inputs) { // the isolated pod gets another address
		for i, p := range in.Pods {
			if p.Name == "b" {
				q := p.DeepCopy()
				q.Status.PodIP, q.Status.PodIPs = "10.244.1.30", []corev1.PodIP{{IP: "10.244.1.30"}}
				in.Pods[i] = q
			}
		}
	})
	step(func(in *Inputs) { in.Policies = nil })
	return steps
}

func TestSyncDiffEqualsFull(t *testing.T) {
	ctx := context.Background()
	incremental := knftables.NewFake(knftables.IPv4Family, testTable)
	inc := &tableSyncer{nft: incremental}
	for i, in := range clusterSteps() {
		d := Compute(in)
		if len(d.Problems) > 0 {
			t.Fatalf("step %d: problems %v", i, d.Problems)
		}
		rs := Render(d)
		if _, err := inc.apply(ctx, rs, false); err != nil {
			t.Fatalf("step %d: incremental: %v", i, err)
		}
		fresh := knftables.NewFake(knftables.IPv4Family, testTable)
		if _, err := (&tableSyncer{nft: fresh}).apply(ctx, rs, true); err != nil {
			t.Fatalf("step %d: full: %v", i, err)
		}
		if got, want := fakeState(incremental), fakeState(fresh); got != want {
			t.Fatalf("step %d: incremental table differs from a full sync:\n%s\nwant:\n%s", i, got, want)
		}
		if i > 0 && strings.Contains(incremental.LastTransaction.String(), "delete table") {
			t.Errorf("step %d: an incremental sync replaced the table:\n%s", i, incremental.LastTransaction)
		}
	}
}

func TestSyncPeerChangesAreElementChanges(t *testing.T) {
	ctx := context.Background()
	steps := clusterSteps()
	fake := knftables.NewFake(knftables.IPv4Family, testTable)
	s := &tableSyncer{nft: fake}
	for _, i := range []int{2, 3, 4, 5} { // policies in place, then pods and namespaces change
		if _, err := s.apply(ctx, Render(Compute(steps[i])), false); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(fake.LastTransaction.String()), "\n") {
			if !strings.HasPrefix(line, "add element ") && !strings.HasPrefix(line, "delete element ") {
				t.Errorf("step %d: operation %q is not an element change", i, line)
			}
		}
	}
	// The new peer pod 10.244.2.20 was added to web's peer set by step 3.
	if e := fake.Table.Sets["peers-default/web-ingress-0"].FindElement("10.244.2.20"); e == nil {
		t.Errorf("peer set lacks the new pod:\n%s", fakeState(fake))
	}
	if e := fake.Table.Sets["named-default/out-egress-0"].FindElement("10.244.2.21", "tcp", "8443"); e != nil {
		t.Errorf("named set still has a pod of a namespace that stopped matching:\n%s", fakeState(fake))
	}
}

func TestSyncNothingToDo(t *testing.T) {
	ctx := context.Background()
	fake := knftables.NewFake(knftables.IPv4Family, testTable)
	s := &tableSyncer{nft: fake}
	rs := Render(Compute(clusterSteps()[2]))
	if n, err := s.apply(ctx, rs, false); err != nil || n == 0 {
		t.Fatalf("first apply: %d operations, %v", n, err)
	}
	if n, err := s.apply(ctx, Render(Compute(clusterSteps()[2])), false); err != nil || n != 0 {
		t.Errorf("second apply of the same state: %d operations, %v; want none", n, err)
	}
	if n, err := s.apply(ctx, rs, true); err != nil || n == 0 {
		t.Errorf("forced full apply: %d operations, %v", n, err)
	}
}

// failingNFT fails the transactions while fail is set.
type failingNFT struct {
	*knftables.Fake
	fail bool
}

func (f *failingNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	if f.fail {
		return errors.New("injected failure")
	}
	return f.Fake.Run(ctx, tx)
}

func TestSyncAfterFailureRewritesTable(t *testing.T) {
	ctx := context.Background()
	steps := clusterSteps()
	f := &failingNFT{Fake: knftables.NewFake(knftables.IPv4Family, testTable)}
	s := &tableSyncer{nft: f}
	if _, err := s.apply(ctx, Render(Compute(steps[2])), false); err != nil {
		t.Fatal(err)
	}
	f.fail = true
	if _, err := s.apply(ctx, Render(Compute(steps[3])), false); err == nil || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("apply = %v, want the injected failure", err)
	}
	// Someone changes the table behind the agent's back.
	tx := f.NewTransaction()
	tx.Add(&knftables.Element{Set: "peers-default/web-ingress-0", Key: []string{"10.9.9.9"}})
	f.fail = false
	if err := f.Fake.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.apply(ctx, Render(Compute(steps[4])), false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.LastTransaction.String(), "delete table") {
		t.Errorf("the sync after a failure did not rewrite the table:\n%s", f.LastTransaction)
	}
	want := knftables.NewFake(knftables.IPv4Family, testTable)
	if _, err := (&tableSyncer{nft: want}).apply(ctx, Render(Compute(steps[4])), true); err != nil {
		t.Fatal(err)
	}
	if got, want := fakeState(f.Fake), fakeState(want); got != want {
		t.Errorf("table after recovery:\n%s\nwant:\n%s", got, want)
	}
}

func TestFullSyncContent(t *testing.T) {
	ctx := context.Background()
	in := testCluster()
	in.Policies = []*networkingv1.NetworkPolicy{
		mkPolicy("default", "deny", sel("app", "b"), ingressT),
		withEgress(mkPolicy("default", "out", sel("app", "a"), egressT),
			networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{podPeer(sel("app", "c"))}}),
	}
	fake := knftables.NewFake(knftables.IPv4Family, testTable)
	if _, err := (&tableSyncer{nft: fake}).apply(ctx, Render(Compute(in)), false); err != nil {
		t.Fatal(err)
	}
	want := `chain egress-default/a
  ip daddr 10.244.1.10 return
  ip daddr @peers-default/out-egress-0 return
  drop
chain forward hook forward priority filter policy accept
  ct state established,related accept
  ip saddr vmap @egress-pods
  ip daddr vmap @ingress-pods
chain ingress-default/b
  ip saddr 10.244.1.11 return
  drop
set peers-default/out-egress-0 ipv4_addr []
  10.244.1.12
map egress-pods ipv4_addr : verdict
  10.244.1.10 : jump egress-default/a
map ingress-pods ipv4_addr : verdict
  10.244.1.11 : jump ingress-default/b
`
	if got := fakeState(fake); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
}

func TestCleanupFake(t *testing.T) {
	ctx := context.Background()
	fake := knftables.NewFake(knftables.IPv4Family, testTable)
	cfg := Config{NodeName: "n1", Table: testTable}
	if err := Cleanup(ctx, cfg, WithNFTables(fake)); err != nil {
		t.Fatalf("cleanup without a table: %v", err)
	}
	in := testCluster()
	in.Policies = []*networkingv1.NetworkPolicy{mkPolicy("default", "deny", &metav1.LabelSelector{}, ingressT)}
	if _, err := (&tableSyncer{nft: fake}).apply(ctx, Render(Compute(in)), false); err != nil {
		t.Fatal(err)
	}
	if err := Cleanup(ctx, cfg, WithNFTables(fake)); err != nil {
		t.Fatal(err)
	}
	if s := fakeState(fake); s != "" {
		t.Errorf("table left after cleanup:\n%s", s)
	}
	if err := Cleanup(ctx, Config{Table: "1bad"}, WithNFTables(fake)); err == nil {
		t.Error("cleanup of an invalid table name: no error")
	}
}

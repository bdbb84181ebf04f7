package netpol

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/knftables"

	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/util/netns"
)

// benchCluster is a cluster of 20 nodes with 50 pods each in 20 namespaces, and per
// namespace 5 policies: deny-all, allow from the namespace's frontends on a named port,
// allow from a labelled namespace, an ipBlock with except, and an egress policy.
func benchCluster() Inputs {
	in := Inputs{NodeName: "node-0"}
	for n := 0; n < 20; n++ {
		ns := fmt.Sprintf("ns-%d", n)
		in.Namespaces = append(in.Namespaces, mkNS(ns, lbl("team", fmt.Sprint(n%4))))
		np := func(name string) *networkingv1.NetworkPolicy {
			return mkPolicy(ns, name, sel("app", "backend"), ingressT)
		}
		in.Policies = append(in.Policies,
			np("deny"),
			withIngress(np("frontends"), networkingv1.NetworkPolicyIngressRule{
				From:  []networkingv1.NetworkPolicyPeer{podPeer(sel("app", "frontend"))},
				Ports: []networkingv1.NetworkPolicyPort{namedPolicyPort(tcp, "http")},
			}),
			withIngress(np("team"), networkingv1.NetworkPolicyIngressRule{
				From: []networkingv1.NetworkPolicyPeer{nsPeer(sel("team", "0"))},
			}),
			withIngress(np("block"), networkingv1.NetworkPolicyIngressRule{
				From:  []networkingv1.NetworkPolicyPeer{blockPeer("10.0.0.0/8", "10.244.0.0/16")},
				Ports: []networkingv1.NetworkPolicyPort{rangePort(tcp, 8000, 8100)},
			}),
			withEgress(mkPolicy(ns, "out", sel("app", "frontend"), networkingv1.PolicyTypeEgress),
				networkingv1.NetworkPolicyEgressRule{
					To:    []networkingv1.NetworkPolicyPeer{podPeer(sel("app", "backend"))},
					Ports: []networkingv1.NetworkPolicyPort{namedPolicyPort(tcp, "http")},
				}),
		)
	}
	for node := 0; node < 20; node++ {
		for i := 0; i < 50; i++ {
			app := "frontend"
			if i%2 == 1 {
				app = "backend"
			}
			in.Pods = append(in.Pods, mkPod(fmt.Sprintf("ns-%d", i%20), fmt.Sprintf("p-%d-%d", node, i),
				fmt.Sprintf("node-%d", node), fmt.Sprintf("10.244.%d.%d", node, i+2), lbl("app", app),
				cport("http", tcp, 8080)))
		}
	}
	return in
}

// BenchmarkCompute is the pure part of a sync: the model and the table content of one
// node from the whole cluster's objects.
func BenchmarkCompute(b *testing.B) {
	in := benchCluster()
	b.ReportAllocs()
	for b.Loop() {
		d := Compute(in)
		if len(d.Pods) != 50 {
			b.Fatalf("%d isolated pods", len(d.Pods))
		}
		Render(d)
	}
}

// BenchmarkSyncPeerAdded is one sync after a peer pod appeared on another node: compute,
// render and plan the transaction (element changes only) against a fake table.
func BenchmarkSyncPeerAdded(b *testing.B) {
	ctx := context.Background()
	in := benchCluster()
	more := in
	more.Pods = append(append([]*corev1.Pod(nil), in.Pods...),
		mkPod("ns-0", "new", "node-5", "10.244.5.200", lbl("app", "frontend"), cport("http", tcp, 8080)))
	states := []*Ruleset{Render(Compute(in)), Render(Compute(more))}
	fake := knftables.NewFake(knftables.IPv4Family, testTable)
	s := &tableSyncer{nft: fake}
	if _, err := s.apply(ctx, states[0], true); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		d := Compute(in)
		if i%2 == 1 {
			d = Compute(more)
		}
		n, err := s.apply(ctx, Render(d), false)
		if err != nil || n == 0 || n > 10 {
			b.Fatalf("apply: %d operations, %v", n, err)
		}
	}
}

// BenchmarkRealNFTPeerAdded is the nft transaction of a peer change against a real table
// of the bench cluster inside a network namespace.
func BenchmarkRealNFTPeerAdded(b *testing.B) {
	testutil.RequireRoot(b, "nft")
	ctx := context.Background()
	node := testutil.NetNS(b)
	nft, err := netns.NFTables(node.Path(), knftables.IPv4Family, testTable)
	if err != nil {
		b.Fatal(err)
	}
	in := benchCluster()
	more := in
	more.Pods = append(append([]*corev1.Pod(nil), in.Pods...),
		mkPod("ns-0", "new", "node-5", "10.244.5.200", lbl("app", "frontend"), cport("http", tcp, 8080)))
	states := []*Ruleset{Render(Compute(in)), Render(Compute(more))}
	s := &tableSyncer{nft: nft}
	if _, err := s.apply(ctx, states[0], true); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		if _, err := s.apply(ctx, states[i%2], false); err != nil {
			b.Fatal(err)
		}
	}
}

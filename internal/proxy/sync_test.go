package proxy

import (
	"context"
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"
)

const table = "kubelab-proxy"

// fakeSyncer is a syncer writing into a knftables fake; NodePorts answer on 172.31.0.5.
func fakeSyncer(t *testing.T) (*syncer, *knftables.Fake) {
	fake := knftables.NewFake(knftables.IPv4Family, table)
	return newSyncer(fake, []string{"172.31.0.5"}, testCluster, testLogger(t)), fake
}

// world is a set of Services and their slices, turned into states.
type world map[types.NamespacedName]struct {
	svc    *v1.Service
	slices []*discovery.EndpointSlice
}

func (w world) add(svc *v1.Service, slices ...*discovery.EndpointSlice) {
	w[nn(svc)] = struct {
		svc    *v1.Service
		slices []*discovery.EndpointSlice
	}{svc, slices}
}

func (w world) states() map[types.NamespacedName]*ServiceState {
	out := map[types.NamespacedName]*ServiceState{}
	for k, v := range w {
		if st := ComputeServiceState(v.svc, v.slices, testParams); st != nil {
			out[k] = st
		}
	}
	return out
}

func (w world) state(svc *v1.Service) map[types.NamespacedName]*ServiceState {
	v := w[nn(svc)]
	return map[types.NamespacedName]*ServiceState{nn(svc): ComputeServiceState(v.svc, v.slices, testParams)}
}

func mustFull(t *testing.T, s *syncer, desired map[types.NamespacedName]*ServiceState) {
	t.Helper()
	if _, err := s.fullSync(context.Background(), desired); err != nil {
		t.Fatal(err)
	}
}

func mustPartial(t *testing.T, s *syncer, changes map[types.NamespacedName]*ServiceState) syncStats {
	t.Helper()
	stats, err := s.partialSync(context.Background(), changes)
	if err != nil {
		t.Fatal(err)
	}
	return stats
}

const (
	prefix  = "add rule ip kubelab-proxy "
	element = "add element ip kubelab-proxy "
)

func TestFullSyncContent(t *testing.T) {
	s, fake := fakeSyncer(t)
	w := world{}
	web := makeService("ns", "web", "10.96.0.10", nodePort(30080))
	w.add(web, makeSlice(web, "web-1", 8080, ep{ip: "10.244.1.2"}, ep{ip: "10.244.2.2"}))
	sticky := makeService("ns", "sticky", "10.96.0.11", affinity(60))
	w.add(sticky, makeSlice(sticky, "sticky-1", 9000, ep{ip: "10.244.1.5"}))
	empty := makeService("ns", "empty", "10.96.0.12", nodePort(30082))
	w.add(empty, makeSlice(empty, "empty-1", 8080, ep{ip: "10.244.1.9", notReady: true}))
	mustFull(t, s, w.states())

	webChain := chainName(clusterChainPrefix, "ns", "web")
	webExt := chainName(externalChainPrefix, "ns", "web")
	stickyChain := chainName(clusterChainPrefix, "ns", "sticky")
	stickyEP := endpointChain("ns", "sticky", "10.244.1.5:9000")
	stickySet := affinitySetName("ns", "sticky", "10.244.1.5:9000")

	requireLines(t, fake,
		// The fixed part.
		"add chain ip kubelab-proxy nat-prerouting { type nat hook prerouting priority -100 ; }",
		"add chain ip kubelab-proxy nat-output { type nat hook output priority -100 ; }",
		"add chain ip kubelab-proxy nat-postrouting { type nat hook postrouting priority 100 ; }",
		"add chain ip kubelab-proxy filter-prerouting { type filter hook prerouting priority -110 ; }",
		"add chain ip kubelab-proxy filter-input { type filter hook input priority -110 ; }",
		prefix+"nat-prerouting jump services",
		prefix+"nat-output jump services",
		prefix+"nat-postrouting jump masquerading",
		prefix+`services ip daddr @cluster-ips ip saddr != 10.244.0.0/16 jump mark-for-masquerade comment "ClusterIP traffic from outside the cluster CIDR"`,
		prefix+"services ip daddr . meta l4proto . th dport vmap @service-ips",
		prefix+"services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports",
		element+"nodeport-ips { 172.31.0.5 }",
		prefix+"filter-prerouting ct state new jump service-endpoints-check",
		prefix+"filter-output ct state new jump service-endpoints-check",
		prefix+"filter-input ct state new jump nodeport-endpoints-check",
		prefix+"service-endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services",
		prefix+"nodeport-endpoints-check ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports",
		prefix+"reject-chain meta l4proto tcp reject with tcp reset",
		prefix+"reject-chain reject",
		prefix+"mark-for-masquerade mark set mark or 0x4000",
		"add set ip kubelab-proxy hairpin { type ipv4_addr . ipv4_addr ; comment \"endpoint address . endpoint address\" ; }",
		prefix+`masquerading ct status dnat ip saddr . ip daddr @hairpin jump mark-for-masquerade comment "an endpoint reaching itself through its Service"`,
		prefix+"masquerading mark and 0x4000 == 0 return",
		prefix+"masquerading masquerade fully-random",

		// ClusterIP and NodePort of web.
		element+"service-ips { 10.96.0.10 . tcp . 80 : goto "+webChain+" }",
		element+"service-nodeports { tcp . 30080 : goto "+webExt+" }",
		element+"cluster-ips { 10.96.0.10 }",
		prefix+webExt+" jump mark-for-masquerade",
		prefix+webExt+" goto "+webChain,
		prefix+webChain+" meta l4proto tcp dnat ip addr . port to numgen random mod 2 map @"+dnatMapName(webChain),
		"add map ip kubelab-proxy "+dnatMapName(webChain)+" { typeof numgen random mod 1 : ip daddr . tcp dport ; }",
		element+dnatMapName(webChain)+" { 0 : 10.244.1.2 . 8080 }",
		element+dnatMapName(webChain)+" { 1 : 10.244.2.2 . 8080 }",
		element+"hairpin { 10.244.1.2 . 10.244.1.2 }",
		element+"hairpin { 10.244.2.2 . 10.244.2.2 }",
		element+"hairpin { 10.244.1.5 . 10.244.1.5 }",

		// ClientIP affinity of sticky: a chain per endpoint.
		"add map ip kubelab-proxy lb-"+stickyChain+" { typeof numgen random mod 1 : verdict ; }",
		prefix+stickyChain+" numgen random mod 1 vmap @lb-"+stickyChain,
		element+"lb-"+stickyChain+" { 0 : goto "+stickyEP+" }",
		"add set ip kubelab-proxy "+stickySet+" { type ipv4_addr ; flags dynamic,timeout ; timeout 60s ; }",
		prefix+stickyChain+" ip saddr @"+stickySet+" goto "+stickyEP,
		prefix+stickyEP+" update @"+stickySet+" { ip saddr }",
		prefix+stickyEP+" meta l4proto tcp dnat to 10.244.1.5:9000",

		// empty has no ready endpoint: rejected.
		element+`no-endpoint-services { 10.96.0.12 . tcp . 80 comment "ns/empty:http" : goto reject-chain }`,
		element+`no-endpoint-nodeports { tcp . 30082 comment "ns/empty:http" : goto reject-chain }`,
	)
	forbidLines(t, fake, "ns/empty/", "10.244.1.9", "endpoint-"+hashed("ns/web"))
}

func TestFullSyncWithoutNodeIPs(t *testing.T) {
	fake := knftables.NewFake(knftables.IPv4Family, table)
	s := newSyncer(fake, nil, testCluster, testLogger(t))
	mustFull(t, s, nil)
	requireLines(t, fake,
		prefix+"services fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @service-nodeports",
		prefix+"nodeport-endpoints-check fib daddr type local ip daddr != 127.0.0.0/8 meta l4proto . th dport vmap @no-endpoint-nodeports")
}

func TestReadinessChangeDropsEndpoint(t *testing.T) {
	s, fake := fakeSyncer(t)
	w := world{}
	web := makeService("ns", "web", "10.96.0.10")
	w.add(web, makeSlice(web, "web-1", 8080, ep{ip: "10.244.1.2"}, ep{ip: "10.244.2.2"}, ep{ip: "10.244.3.2"}))
	mustFull(t, s, w.states())

	w.add(web, makeSlice(web, "web-1", 8080, ep{ip: "10.244.1.2"}, ep{ip: "10.244.2.2", notReady: true}, ep{ip: "10.244.3.2"}))
	mustPartial(t, s, w.state(web))

	webChain := chainName(clusterChainPrefix, "ns", "web")
	requireLines(t, fake,
		prefix+webChain+" meta l4proto tcp dnat ip addr . port to numgen random mod 2 map @"+dnatMapName(webChain),
		element+dnatMapName(webChain)+" { 0 : 10.244.1.2 . 8080 }",
		element+dnatMapName(webChain)+" { 1 : 10.244.3.2 . 8080 }")
	forbidLines(t, fake, "10.244.2.2", "mod 3")

	// The change rewrote the Service's chain and map and deleted the endpoint's hairpin
	// element; no chain was added or deleted.
	tx := fake.LastTransaction.String()
	if strings.Contains(tx, "add chain") || strings.Contains(tx, "delete chain") || strings.Contains(tx, "add map") {
		t.Errorf("transaction adds or deletes chains or maps:\n%s", tx)
	}
	if !strings.Contains(tx, "delete element ip kubelab-proxy hairpin { 10.244.2.2 . 10.244.2.2 }") {
		t.Errorf("transaction does not delete the hairpin element of 10.244.2.2:\n%s", tx)
	}

	// Back to ready: the endpoint returns.
	w.add(web, makeSlice(web, "web-1", 8080, ep{ip: "10.244.1.2"}, ep{ip: "10.244.2.2"}, ep{ip: "10.244.3.2"}))
	mustPartial(t, s, w.state(web))
	requireLines(t, fake,
		prefix+webChain+" meta l4proto tcp dnat ip addr . port to numgen random mod 3 map @"+dnatMapName(webChain),
		element+dnatMapName(webChain)+" { 1 : 10.244.2.2 . 8080 }",
		element+"hairpin { 10.244.2.2 . 10.244.2.2 }")

	// None ready: the ClusterIP is rejected instead.
	w.add(web, makeSlice(web, "web-1", 8080, ep{ip: "10.244.1.2", notReady: true}))
	mustPartial(t, s, w.state(web))
	requireLines(t, fake, element+`no-endpoint-services { 10.96.0.10 . tcp . 80 comment "ns/web:http" : goto reject-chain }`)
	forbidLines(t, fake, "ns/web/", "service-ips { 10.96.0.10")
}

func TestPartialSyncTouchesOnlyTheChangedService(t *testing.T) {
	s, fake := fakeSyncer(t)
	w := world{}
	var svcs []*v1.Service
	for i, name := range []string{"a", "b", "c"} {
		svc := makeService("ns", name, "10.96.0."+string(rune('1'+i)), nodePort(int32(30001+i)), affinity(0))
		w.add(svc, makeSlice(svc, name+"-1", 8080, ep{ip: "10.244.1." + string(rune('1'+i))}, ep{ip: "10.244.2." + string(rune('1'+i))}))
		svcs = append(svcs, svc)
	}
	mustFull(t, s, w.states())
	before := fake.Dump()

	b := svcs[1]
	w.add(b, makeSlice(b, "b-1", 8080, ep{ip: "10.244.1.2"}, ep{ip: "10.244.2.2"}, ep{ip: "10.244.3.2"}))
	stats := mustPartial(t, s, w.state(b))
	if stats.services != 1 {
		t.Errorf("services written = %d, want 1", stats.services)
	}
	tx := fake.LastTransaction.String()
	for _, line := range strings.Split(strings.TrimSpace(tx), "\n") {
		if !strings.Contains(line, "ns/b/") && !strings.Contains(line, "hairpin { 10.244.3.2 . 10.244.3.2 }") {
			t.Errorf("transaction line not about ns/b: %s", line)
		}
	}
	// Nothing of a and c changed.
	after := fake.Dump()
	for _, l := range strings.Split(before, "\n") {
		if (strings.Contains(l, "ns/a/") || strings.Contains(l, "ns/c/")) && !strings.Contains(after, l) {
			t.Errorf("line of another Service lost: %s", l)
		}
	}
	requireLines(t, fake, prefix+chainName(clusterChainPrefix, "ns", "b")+" numgen random mod 3 vmap @lb-"+chainName(clusterChainPrefix, "ns", "b"))

	// The same state again writes nothing.
	last := fake.LastTransaction
	stats = mustPartial(t, s, w.state(b))
	if stats.operations != 0 || fake.LastTransaction != last {
		t.Errorf("unchanged Service ran a transaction of %d operations", stats.operations)
	}
}

func TestServiceDeleteRemovesItsObjects(t *testing.T) {
	s, fake := fakeSyncer(t)
	w := world{}
	gone := makeService("ns", "gone", "10.96.0.20", nodePort(30020), affinity(0), externalLocal)
	w.add(gone, makeSlice(gone, "gone-1", 8080, ep{ip: "10.244.1.20", node: testNode}, ep{ip: "10.244.2.20"}))
	stay := makeService("ns", "stay", "10.96.0.21")
	w.add(stay, makeSlice(stay, "stay-1", 8080, ep{ip: "10.244.1.21"}))
	mustFull(t, s, w.states())
	requireLines(t, fake, element+"cluster-ips { 10.96.0.20 }")

	mustPartial(t, s, map[types.NamespacedName]*ServiceState{nn(gone): nil})
	forbidLines(t, fake, "ns/gone/", "10.96.0.20", "30020", "10.244.1.20", "10.244.2.20")
	requireLines(t, fake,
		element+"cluster-ips { 10.96.0.21 }",
		element+dnatMapName(chainName(clusterChainPrefix, "ns", "stay"))+" { 0 : 10.244.1.21 . 8080 }",
		element+"hairpin { 10.244.1.21 . 10.244.1.21 }")
	if _, ok := s.applied[nn(gone)]; ok {
		t.Error("deleted Service still in the applied state")
	}
}

func TestFullSyncRemovesLeftovers(t *testing.T) {
	fake := knftables.NewFake(knftables.IPv4Family, table)
	// What an earlier run left: a Service that is gone since.
	old := newSyncer(fake, []string{"172.31.0.5"}, testCluster, testLogger(t))
	w := world{}
	gone := makeService("ns", "gone", "10.96.0.20", affinity(0))
	w.add(gone, makeSlice(gone, "gone-1", 8080, ep{ip: "10.244.1.20"}))
	stay := makeService("ns", "stay", "10.96.0.21")
	w.add(stay, makeSlice(stay, "stay-1", 8080, ep{ip: "10.244.1.21"}))
	mustFull(t, old, w.states())
	requireLines(t, fake, prefix+endpointChain("ns", "gone", "10.244.1.20:8080")+" meta l4proto tcp dnat to 10.244.1.20:8080")

	delete(w, nn(gone))
	s := newSyncer(fake, []string{"172.31.0.5"}, testCluster, testLogger(t))
	mustFull(t, s, w.states())
	forbidLines(t, fake, "ns/gone/", "10.96.0.20")
	requireLines(t, fake, element+dnatMapName(chainName(clusterChainPrefix, "ns", "stay"))+" { 0 : 10.244.1.21 . 8080 }")

	// Once known, a chain that exists is flushed rather than added again.
	mustFull(t, s, w.states())
	tx := fake.LastTransaction.String()
	stayChain := chainName(clusterChainPrefix, "ns", "stay")
	if !strings.Contains(tx, "flush chain ip kubelab-proxy "+stayChain+"\n") || strings.Contains(tx, "add chain ip kubelab-proxy "+stayChain+"\n") {
		t.Errorf("resync should flush the existing chain:\n%s", tx)
	}
}

// failingNFT fails the next Run when fail is set.
type failingNFT struct {
	*knftables.Fake
	fail bool
}

func (f *failingNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	if f.fail {
		f.fail = false
		return errors.New("injected failure")
	}
	return f.Fake.Run(ctx, tx)
}

func TestFailedSyncNeedsFullSync(t *testing.T) {
	fake := &failingNFT{Fake: knftables.NewFake(knftables.IPv4Family, table)}
	s := newSyncer(fake, []string{"172.31.0.5"}, testCluster, testLogger(t))
	w := world{}
	web := makeService("ns", "web", "10.96.0.10")
	w.add(web, makeSlice(web, "web-1", 8080, ep{ip: "10.244.1.2"}))
	mustFull(t, s, w.states())
	if s.needFull {
		t.Fatal("needFull after a successful full sync")
	}

	w.add(web, makeSlice(web, "web-1", 8080, ep{ip: "10.244.1.3"}))
	fake.fail = true
	if _, err := s.partialSync(context.Background(), w.state(web)); err == nil {
		t.Fatal("partial sync did not report the failure")
	}
	if !s.needFull {
		t.Fatal("a failed sync must make the next one full")
	}
	// The applied state still describes the table (the transaction did not happen).
	if got := s.applied[nn(web)]; got == nil || !strings.Contains(describe(got), "10.244.1.2") {
		t.Errorf("applied state changed by a failed sync:\n%s", describe(got))
	}
	mustFull(t, s, w.states())
	requireLines(t, fake.Fake, element+dnatMapName(chainName(clusterChainPrefix, "ns", "web"))+" { 0 : 10.244.1.3 . 8080 }")
	forbidLines(t, fake.Fake, "10.244.1.2")
}

func TestElementClaimedTwice(t *testing.T) {
	s, fake := fakeSyncer(t)
	w := world{}
	a := makeService("ns", "a", "10.96.0.10", nodePort(30080))
	w.add(a, makeSlice(a, "a-1", 8080, ep{ip: "10.244.1.2"}))
	b := makeService("ns", "b", "10.96.0.11", nodePort(30080))
	w.add(b, makeSlice(b, "b-1", 8080, ep{ip: "10.244.1.3"}))
	mustFull(t, s, w.states())
	requireLines(t, fake, element+"service-nodeports { tcp . 30080 : goto "+chainName(externalChainPrefix, "ns", "a")+" }")

	// a gives the NodePort up while b changes: b takes it in the same sync.
	w.add(a, makeSlice(a, "a-1", 8080, ep{ip: "10.244.1.2"}))
	w[nn(a)].svc.Spec.Ports[0].NodePort = 30090
	changes := w.state(a)
	w.add(b, makeSlice(b, "b-1", 8080, ep{ip: "10.244.1.4"}))
	changes[nn(b)] = w.state(b)[nn(b)]
	mustPartial(t, s, changes)
	requireLines(t, fake,
		element+"service-nodeports { tcp . 30090 : goto "+chainName(externalChainPrefix, "ns", "a")+" }",
		element+"service-nodeports { tcp . 30080 : goto "+chainName(externalChainPrefix, "ns", "b")+" }")
}

func TestSharedHairpinElement(t *testing.T) {
	s, fake := fakeSyncer(t)
	w := world{}
	// Two Services (one with affinity, so of the other form) and two ports share 10.244.1.2.
	a := makeService("ns", "a", "10.96.0.10", func(s *v1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53})
	})
	sliceA := makeSlice(a, "a-1", 8080, ep{ip: "10.244.1.2"})
	sliceA.Ports = append(sliceA.Ports, discovery.EndpointPort{Name: ptr.To("dns"), Protocol: ptr.To(v1.ProtocolUDP), Port: ptr.To[int32](53)})
	w.add(a, sliceA)
	b := makeService("ns", "b", "10.96.0.11", affinity(0))
	w.add(b, makeSlice(b, "b-1", 8080, ep{ip: "10.244.1.2"}, ep{ip: "10.244.1.3"}))
	mustFull(t, s, w.states())
	pair := element + "hairpin { 10.244.1.2 . 10.244.1.2 }"
	requireLines(t, fake, pair)
	if n := strings.Count(fake.LastTransaction.String(), "add element ip kubelab-proxy hairpin { 10.244.1.2 ."); n != 1 {
		t.Errorf("the shared element was added %d times", n)
	}

	// a goes: b still needs the element.
	mustPartial(t, s, map[types.NamespacedName]*ServiceState{nn(a): nil})
	requireLines(t, fake, pair)
	// a comes back while b drops the endpoint, in one sync: the element stays.
	w.add(b, makeSlice(b, "b-1", 8080, ep{ip: "10.244.1.3"}))
	changes := w.state(a)
	changes[nn(b)] = w.state(b)[nn(b)]
	mustPartial(t, s, changes)
	requireLines(t, fake, pair, element+"hairpin { 10.244.1.3 . 10.244.1.3 }")
	if strings.Contains(fake.LastTransaction.String(), "hairpin { 10.244.1.2 ") {
		t.Errorf("the sync touched the element that stays:\n%s", fake.LastTransaction)
	}
	// The last Service needing it goes: the element goes.
	mustPartial(t, s, map[types.NamespacedName]*ServiceState{nn(a): nil})
	forbidLines(t, fake, "10.244.1.2")
	requireLines(t, fake, element+"hairpin { 10.244.1.3 . 10.244.1.3 }")
}

func TestJoinedElements(t *testing.T) {
	s, _ := fakeSyncer(t)
	s.joinElements = true
	b := s.elements()
	b.add(&knftables.Element{Map: "dnat-x", Key: []string{"0"}, Value: []string{"10.244.1.2 . 8080"}})
	b.add(&knftables.Element{Set: "hairpin", Key: []string{"10.244.1.2", "10.244.1.2"}})
	b.add(&knftables.Element{Map: "dnat-x", Key: []string{"1"}, Value: []string{"10.244.1.3 . 8080"}})
	b.add(&knftables.Element{Set: "hairpin", Key: []string{"10.244.1.3", "10.244.1.3"}})
	b.add(&knftables.Element{Map: "no-endpoint-services", Key: []string{"10.96.0.1", "tcp", "80"}, Value: []string{"drop"}, Comment: ptr.To("ns/a:http")})
	tx := s.nft.NewTransaction()
	b.write(tx, (*knftables.Transaction).Add)
	want := "add element ip kubelab-proxy dnat-x { 0 : 10.244.1.2 . 8080, 1 : 10.244.1.3 . 8080 }\n" +
		"add element ip kubelab-proxy hairpin { 10.244.1.2 . 10.244.1.2, 10.244.1.3 . 10.244.1.3 }\n" +
		`add element ip kubelab-proxy no-endpoint-services { 10.96.0.1 . tcp . 80 comment "ns/a:http" : drop }` + "\n"
	if got := tx.String(); got != want {
		t.Errorf("transaction:\n%s\nwant:\n%s", got, want)
	}
	tx = s.nft.NewTransaction()
	b.add(&knftables.Element{Set: "hairpin", Key: []string{"10.244.1.2", "10.244.1.2"}})
	b.add(&knftables.Element{Set: "hairpin", Key: []string{"10.244.1.3", "10.244.1.3"}})
	b.write(tx, (*knftables.Transaction).Delete)
	if got, want := tx.String(), "delete element ip kubelab-proxy hairpin { 10.244.1.2 . 10.244.1.2, 10.244.1.3 . 10.244.1.3 }\n"; got != want {
		t.Errorf("transaction:\n%s\nwant:\n%s", got, want)
	}
}

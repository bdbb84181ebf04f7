package apiserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
)

// memReservations is the reservations store in memory, with etcd's revisions.
type memReservations struct {
	mu   sync.Mutex
	rev  int64
	keys map[string]reservation
}

func newMemReservations() *memReservations {
	return &memReservations{keys: map[string]reservation{}}
}

func (m *memReservations) reserve(_ context.Context, key, owner string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.keys[key]; ok {
		return false, nil
	}
	m.rev++
	m.keys[key] = reservation{key: key, owner: owner, revision: m.rev}
	return true, nil
}

func (m *memReservations) release(_ context.Context, key, owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.keys[key]; ok && r.owner == owner {
		delete(m.keys, key)
	}
	return nil
}

func (m *memReservations) releaseIfUnchanged(_ context.Context, key string, revision int64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r, ok := m.keys[key]; ok && r.revision == revision {
		delete(m.keys, key)
		return true, nil
	}
	return false, nil
}

func (m *memReservations) list(_ context.Context, prefix string) ([]reservation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []reservation
	for k, r := range m.keys {
		if strings.HasPrefix(k, prefix) {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out, nil
}

func (m *memReservations) has(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.keys[key]
	return ok
}

func testAllocator(t *testing.T, cidr string) (*serviceAllocator, *memReservations) {
	t.Helper()
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		t.Fatal(err)
	}
	store := newMemReservations()
	return newServiceAllocator(store, "/registry", n, slog.New(slog.NewTextHandler(io.Discard, nil))), store
}

func TestPickFillsTheWholeRange(t *testing.T) {
	a, _ := testAllocator(t, "10.96.0.0/28") // 16 addresses: 13 to pick (.2 … .14)
	ctx := context.Background()
	got := map[int64]bool{}
	for i := 0; i < 13; i++ {
		v, err := a.pick(ctx, a.ipPool(), "ns/s")
		if err != nil {
			t.Fatalf("pick %d: %v", i, err)
		}
		if got[v] {
			t.Fatalf("pick %d: %s handed out twice", i, uint32IP(uint32(v)))
		}
		got[v] = true
		if ip := uint32IP(uint32(v)); !a.ipAllowed(ip) || ip.Equal(a.firstIP()) {
			t.Fatalf("pick %d: %s is not a host of the range for Services", i, ip)
		}
	}
	if _, err := a.pick(ctx, a.ipPool(), "ns/s"); !errors.Is(err, errRangeFull) {
		t.Fatalf("pick in a full range: %v, want %v", err, errRangeFull)
	}
}

func TestPickFindsTheLastFreeValue(t *testing.T) {
	a, store := testAllocator(t, "10.96.0.0/24")
	ctx := context.Background()
	p := a.portPool()
	// Every port but one is taken: whatever the random start, the scan finds it.
	const free = 31000
	for port := p.first; port < p.first+p.size; port++ {
		if port != free {
			store.reserve(ctx, a.portKey(int32(port)), "ns/other")
		}
	}
	for i := 0; i < 5; i++ {
		v, err := a.pick(ctx, p, "ns/s")
		if err != nil || v != free {
			t.Fatalf("pick: %d, %v; want %d", v, err, free)
		}
		store.release(ctx, a.portKey(free), "ns/s")
	}
}

// BenchmarkPick picks a node port in a range a given share of which is taken: the few
// quick tries from a random start, then, when they all meet taken ports, the scan.
func BenchmarkPick(b *testing.B) {
	for _, full := range []int{0, 50, 90, 99} {
		b.Run(fmt.Sprintf("nodeport-%d%%-taken", full), func(b *testing.B) {
			_, n, _ := net.ParseCIDR("10.96.0.0/12")
			store := newMemReservations()
			a := newServiceAllocator(store, "/registry", n, slog.New(slog.NewTextHandler(io.Discard, nil)))
			ctx := context.Background()
			p := a.portPool()
			taken := p.size * int64(full) / 100
			for i := int64(0); i < taken; i++ {
				store.reserve(ctx, a.portKey(int32(p.first+(i*7919)%p.size)), "ns/other")
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				v, err := a.pick(ctx, p, "ns/s")
				if err != nil {
					b.Fatal(err)
				}
				store.release(ctx, a.portKey(int32(v)), "ns/s")
			}
		})
	}
}

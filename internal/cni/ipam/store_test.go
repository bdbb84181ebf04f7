package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"
)

func newStore(t *testing.T, subnet string) (*Store, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ipam")
	s, err := New(Config{Dir: dir, Subnet: netip.MustParsePrefix(subnet)})
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

func att(id string) Attachment { return Attachment{ContainerID: id, IfName: "eth0"} }

func TestNewValidates(t *testing.T) {
	if _, err := New(Config{Dir: "relative", Subnet: netip.MustParsePrefix("10.0.0.0/24")}); err == nil {
		t.Error("relative dir: no error")
	}
	if _, err := New(Config{Dir: t.TempDir(), Subnet: netip.MustParsePrefix("10.0.0.0/31")}); err == nil {
		t.Error("/31: no error")
	}
}

func TestAllocateFileAndIdempotence(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t, "10.244.1.0/24")
	a1, err := s.Allocate(ctx, att("c1"))
	if err != nil {
		t.Fatal(err)
	}
	if a1.String() != "10.244.1.2" {
		t.Fatalf("first address %s, want 10.244.1.2", a1)
	}
	b, err := os.ReadFile(filepath.Join(dir, "10.244.1.2"))
	if err != nil || string(b) != "c1\neth0\n" {
		t.Fatalf("allocation file %q, %v", b, err)
	}
	again, err := s.Allocate(ctx, att("c1"))
	if err != nil || again != a1 {
		t.Fatalf("retried allocate %s %v, want %s", again, err, a1)
	}
	other, err := s.Allocate(ctx, Attachment{ContainerID: "c1", IfName: "net1"})
	if err != nil || other == a1 {
		t.Fatalf("second interface of c1: %s %v, want an address other than %s", other, err, a1)
	}
	// A store opened later on the same directory (a restart) sees the allocations.
	s2, err := New(Config{Dir: dir, Subnet: netip.MustParsePrefix("10.244.1.0/24")})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s2.Lookup(ctx, att("c1")); err != nil || !ok || got != a1 {
		t.Fatalf("lookup after reopen: %s %v %v", got, ok, err)
	}
	if got, err := s2.Allocate(ctx, att("c2")); err != nil || got == a1 || got == other {
		t.Fatalf("allocate after reopen: %s %v", got, err)
	}
}

func TestReleaseAndRoundRobin(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t, "10.244.1.0/24")
	a1, _ := s.Allocate(ctx, att("c1"))
	freed, err := s.Release(ctx, att("c1"))
	if err != nil || len(freed) != 1 || freed[0] != a1 {
		t.Fatalf("release: %v %v", freed, err)
	}
	if _, err := os.Stat(filepath.Join(dir, a1.String())); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file of %s after release: %v", a1, err)
	}
	// Released again: nothing to do, no error.
	if freed, err := s.Release(ctx, att("c1")); err != nil || len(freed) != 0 {
		t.Fatalf("second release: %v %v", freed, err)
	}
	a2, err := s.Allocate(ctx, att("c2"))
	if err != nil || a2 == a1 || a2 != a1.Next() {
		t.Fatalf("after releasing %s got %s %v, want the next address", a1, a2, err)
	}
}

func TestExhaustion(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t, "10.9.0.8/29")
	var got []string
	for i := range 5 {
		a, err := s.Allocate(ctx, att(fmt.Sprint("c", i)))
		if err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
		got = append(got, a.String())
	}
	sort.Strings(got)
	want := []string{"10.9.0.10", "10.9.0.11", "10.9.0.12", "10.9.0.13", "10.9.0.14"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("addresses %v, want %v (never network, gateway or broadcast)", got, want)
	}
	_, err := s.Allocate(ctx, att("c5"))
	var ex *ExhaustedError
	if !errors.As(err, &ex) || err.Error() != "no free address in 10.9.0.8/29: all 5 in use" {
		t.Fatalf("sixth allocation: %v", err)
	}
	// Freeing one makes room again.
	if _, err := s.Release(ctx, att("c3")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Allocate(ctx, att("c5")); err != nil {
		t.Fatalf("after a release: %v", err)
	}
}

func TestGC(t *testing.T) {
	ctx := context.Background()
	s, dir := newStore(t, "10.244.1.0/24")
	for _, id := range []string{"a", "b", "c"} {
		if _, err := s.Allocate(ctx, att(id)); err != nil {
			t.Fatal(err)
		}
	}
	// A file left empty by a crash between creating and writing it.
	if err := os.WriteFile(filepath.Join(dir, "10.244.1.200"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	freed, err := s.GC(ctx, []Attachment{att("b")})
	if err != nil {
		t.Fatal(err)
	}
	if len(freed) != 3 {
		t.Fatalf("gc freed %v, want a, c and the empty file", freed)
	}
	left, err := s.List(ctx)
	if err != nil || len(left) != 1 || left[0].Attachment != att("b") {
		t.Fatalf("left %v %v, want only b", left, err)
	}
}

func TestConcurrentAllocate(t *testing.T) {
	ctx := context.Background()
	_, dir := newStore(t, "10.244.1.0/24")
	const n = 60
	var wg sync.WaitGroup
	addrs := make([]netip.Addr, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// One store per goroutine, as one per plugin process.
			s, err := New(Config{Dir: dir, Subnet: netip.MustParsePrefix("10.244.1.0/24")})
			if err == nil {
				addrs[i], err = s.Allocate(ctx, att(fmt.Sprint("c", i)))
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	seen := map[netip.Addr]int{}
	for i, a := range addrs {
		if errs[i] != nil {
			t.Fatalf("allocation %d: %v", i, errs[i])
		}
		if j, dup := seen[a]; dup {
			t.Fatalf("%s given to c%d and c%d", a, j, i)
		}
		seen[a] = i
	}
}

func TestLockBusy(t *testing.T) {
	s, dir := newStore(t, "10.244.1.0/24")
	unlock, err := lockDir(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = s.Allocate(ctx, att("c1"))
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("allocate while locked: %v, want ErrBusy", err)
	}
	unlock()
	if _, err := s.Allocate(context.Background(), att("c1")); err != nil {
		t.Fatalf("allocate after unlock: %v", err)
	}
}

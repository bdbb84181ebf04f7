package ipamd_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kubelab/kubelab/internal/ipamd"
	"github.com/kubelab/kubelab/internal/ipamd/ipamdtest"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/util/ipamdapi"
)

type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// manager is a running manager over fake with its API client.
type manager struct {
	*ipamd.Manager
	client *ipamdapi.Client
	stop   func()
}

func startManager(t *testing.T, fake *ipamdtest.EC2, dir string, targets ipamd.Targets, clk *clock) *manager {
	t.Helper()
	return startManagerLogging(t, fake, dir, targets, clk, testWriter{t})
}

// startManagerLogging is startManager logging to log.
func startManagerLogging(t *testing.T, fake *ipamdtest.EC2, dir string, targets ipamd.Targets, clk *clock, log io.Writer) *manager {
	t.Helper()
	cfg := ipamd.Config{NodeName: "node-a", InstanceID: fake.InstanceID, Dir: dir, VPCCIDR: netip.MustParsePrefix("172.31.0.0/16"),
		Targets: targets, IPCooldown: 30 * time.Second, PoolPeriod: 20 * time.Millisecond, AddTimeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(log, nil)), SkipNetwork: true}
	if clk != nil {
		cfg.Now = clk.Now
	}
	m, err := ipamd.New(cfg, fake)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}
	t.Cleanup(stop)
	testutil.Eventually(t, "manager started", testutil.Closed(m.Started()))
	return &manager{Manager: m, client: ipamdapi.NewClient(m.SocketPath(), 10*time.Second), stop: stop}
}

func (m *manager) add(t *testing.T, id string) ipamdapi.Assignment {
	t.Helper()
	a, err := m.client.Add(context.Background(), ipamdapi.AddRequest{Attachment: ipamdapi.Attachment{ContainerID: id, IfName: "eth0"},
		PodNamespace: "default", PodName: "pod-" + id})
	if err != nil {
		t.Fatalf("add %s: %v", id, err)
	}
	return *a
}

func (m *manager) del(t *testing.T, id string) ipamdapi.Release {
	t.Helper()
	r, err := m.client.Del(context.Background(), ipamdapi.Attachment{ContainerID: id, IfName: "eth0"})
	if err != nil {
		t.Fatalf("del %s: %v", id, err)
	}
	return *r
}

func TestWarmENIPoolAttachesAndStopsAtTheLimit(t *testing.T) {
	fake := ipamdtest.New(3, 4) // t3.small: 9 pod addresses
	m := startManager(t, fake, t.TempDir(), ipamd.Targets{}, nil)
	testutil.Eventually(t, "the primary ENI filled", func() error {
		if got := len(fake.Assigned()); got != 3 {
			return fmt.Errorf("%d addresses assigned, want 3", got)
		}
		return nil
	})
	first := m.add(t, "c0")
	if first.DeviceNumber != 0 || first.RouteTable != 254 || first.VPCCIDR != "172.31.0.0/16" {
		t.Errorf("first pod's assignment %+v, want the primary ENI's (table main)", first)
	}
	// One address used: fewer than an ENI's worth free, so a second ENI comes, full.
	testutil.Eventually(t, "a second ENI attached and filled", func() error {
		if got := len(fake.Assigned()); got != 6 {
			return fmt.Errorf("%d addresses assigned, want 6", got)
		}
		return nil
	})
	fake.Lock()
	eni := fake.ENIs[1]
	if eni.Device != 1 || eni.Tags[ipamd.TagInstanceID] != fake.InstanceID || eni.Description != "aws-K8S-"+fake.InstanceID || !eni.DeleteOnTermination {
		t.Errorf("second ENI %+v: want device 1, tagged with the instance, described aws-K8S-<instance>, deleted on termination", eni)
	}
	fake.Unlock()

	seen := map[string]bool{first.IP: true}
	for i := 1; i < 9; i++ {
		a := m.add(t, fmt.Sprintf("c%d", i))
		if seen[a.IP] {
			t.Fatalf("address %s given twice", a.IP)
		}
		seen[a.IP] = true
		if a.DeviceNumber > 0 && a.RouteTable != a.DeviceNumber+1 {
			t.Errorf("assignment %+v: want route table device+1", a)
		}
	}
	if got := fake.Count("CreateNetworkInterface"); got != 2 {
		t.Errorf("%d ENIs created, want 2 (three in all)", got)
	}
	_, err := m.client.Add(context.Background(), ipamdapi.AddRequest{Attachment: ipamdapi.Attachment{ContainerID: "c9", IfName: "eth0"}})
	if !ipamdapi.IsCode(err, ipamdapi.CodeNoAvailableIP) || !strings.Contains(err.Error(), "all 9 addresses") {
		t.Fatalf("tenth pod's add: %v, want %s naming all 9 addresses", err, ipamdapi.CodeNoAvailableIP)
	}
	// A retried ADD gets the same address; a DEL frees it for another pod after the cooldown.
	if again := m.add(t, "c0"); again.IP != first.IP {
		t.Errorf("retried add got %s, want %s", again.IP, first.IP)
	}
	if r := m.del(t, "c0"); !r.Found || r.IP != first.IP {
		t.Errorf("del = %+v, want %s released", r, first.IP)
	}
	if r := m.del(t, "c0"); r.Found {
		t.Errorf("second del = %+v, want nothing found", r)
	}
}

func TestWarmIPTargetGivesBackAfterTheCooldown(t *testing.T) {
	fake := ipamdtest.New(3, 4)
	clk := &clock{now: time.Unix(1_700_000_000, 0)}
	m := startManager(t, fake, t.TempDir(), ipamd.Targets{WarmIP: 1}, clk)
	testutil.Eventually(t, "one warm address", func() bool { return len(fake.Assigned()) == 1 })
	a := m.add(t, "a")
	b := m.add(t, "b")
	testutil.Eventually(t, "used + 1 addresses", func() bool { return len(fake.Assigned()) == 3 })
	m.del(t, "a")
	m.del(t, "b")
	// The never used one goes at once; a and b's are cooling down.
	testutil.Eventually(t, "the unused address given back", func() error {
		if got, want := fake.Assigned(), []netip.Addr{netip.MustParseAddr(a.IP), netip.MustParseAddr(b.IP)}; !slices.Equal(got, want) {
			return fmt.Errorf("assigned %v, want %v", got, want)
		}
		return nil
	})
	testutil.Consistently(t, 300*time.Millisecond, "released addresses kept through their cooldown", func() bool { return len(fake.Assigned()) == 2 })
	clk.Add(31 * time.Second)
	testutil.Eventually(t, "the surplus given back after the cooldown", func() bool { return len(fake.Assigned()) == 1 })
	if fake.Count("UnassignPrivateIpAddresses") != 2 {
		t.Errorf("%d UnassignPrivateIpAddresses calls, want 2", fake.Count("UnassignPrivateIpAddresses"))
	}
}

func TestRestartKeepsAddressesCheckedAgainstTheCloud(t *testing.T) {
	fake := ipamdtest.New(3, 4)
	dir := t.TempDir()
	m := startManager(t, fake, dir, ipamd.Targets{WarmIP: 1}, nil)
	testutil.Eventually(t, "one warm address", func() bool { return len(fake.Assigned()) == 1 })
	kept := m.add(t, "kept")
	lost := m.add(t, "lost")
	m.stop()

	b, err := os.ReadFile(filepath.Join(dir, ipamd.CheckpointFile))
	if err != nil || !strings.Contains(string(b), kept.IP) || !strings.Contains(string(b), lost.IP) {
		t.Fatalf("checkpoint %s (%v) lacks %s or %s", b, err, kept.IP, lost.IP)
	}
	// While it was down, another client of the API took one address off the instance.
	fake.Unassign(netip.MustParseAddr(lost.IP))

	m = startManager(t, fake, dir, ipamd.Targets{WarmIP: 1}, nil)
	if a, err := m.client.Lookup(context.Background(), ipamdapi.Attachment{ContainerID: "kept", IfName: "eth0"}); err != nil || a.IP != kept.IP {
		t.Errorf("after the restart kept holds %+v (%v), want %s", a, err, kept.IP)
	}
	if _, err := m.client.Lookup(context.Background(), ipamdapi.Attachment{ContainerID: "lost", IfName: "eth0"}); !ipamdapi.IsCode(err, ipamdapi.CodeNotFound) {
		t.Errorf("after the restart lost: %v, want %s (its address is not the instance's)", err, ipamdapi.CodeNotFound)
	}
	testutil.Consistently(t, 300*time.Millisecond, "the address in use stays assigned", func() bool {
		return slices.Contains(fake.Assigned(), netip.MustParseAddr(kept.IP))
	})
	if again := m.add(t, "kept"); again.IP != kept.IP {
		t.Errorf("retried add after restart got %s, want %s", again.IP, kept.IP)
	}
}

func TestGCReleasesWhatTheRuntimeNoLongerHas(t *testing.T) {
	fake := ipamdtest.New(3, 4)
	m := startManager(t, fake, t.TempDir(), ipamd.Targets{}, nil)
	a := m.add(t, "live")
	b := m.add(t, "gone")
	r, err := m.client.GC(context.Background(), []ipamdapi.Attachment{{ContainerID: "live", IfName: "eth0"}})
	if err != nil || !slices.Equal(r.Released, []string{b.IP}) {
		t.Fatalf("gc = %+v, %v; want %s released", r, err, b.IP)
	}
	if got, err := m.client.Lookup(context.Background(), ipamdapi.Attachment{ContainerID: "live", IfName: "eth0"}); err != nil || got.IP != a.IP {
		t.Errorf("live holds %+v (%v), want %s", got, err, a.IP)
	}
}

func TestEnvTargets(t *testing.T) {
	env := map[string]string{"WARM_IP_TARGET": "2", "MINIMUM_IP_TARGET": "5", "IP_COOLDOWN_PERIOD": "10"}
	tg, cd, err := ipamd.EnvTargets(func(k string) string { return env[k] })
	if err != nil || tg != (ipamd.Targets{WarmIP: 2, MinimumIP: 5}) || cd != 10*time.Second {
		t.Errorf("EnvTargets = %+v, %v, %v", tg, cd, err)
	}
	env = map[string]string{"WARM_ENI_TARGET": "-1"}
	if _, _, err := ipamd.EnvTargets(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), "WARM_ENI_TARGET") {
		t.Errorf("EnvTargets of a negative target: %v, want an error naming it", err)
	}
}

// BenchmarkAddDel measures the API's ADD and DEL over its unix socket, the checkpoint
// written each time (no network setup; the pool keeps enough addresses).
func BenchmarkAddDel(b *testing.B) {
	fake := ipamdtest.New(3, 10)
	cfg := ipamd.Config{NodeName: "node-a", InstanceID: fake.InstanceID, Dir: b.TempDir(), VPCCIDR: netip.MustParsePrefix("172.31.0.0/16"),
		Targets: ipamd.Targets{MinimumIP: 9}, IPCooldown: time.Nanosecond, Logger: slog.New(slog.DiscardHandler), SkipNetwork: true}
	m, err := ipamd.New(cfg, fake)
	if err != nil {
		b.Fatal(err)
	}
	testutil.Start(b, "ipamd", testutil.DefaultTimeout, m.Run, testutil.Closed(m.Started()))
	testutil.Eventually(b, "nine addresses", func() bool { return len(fake.Assigned()) == 9 })
	client := ipamdapi.NewClient(m.SocketPath(), 10*time.Second)
	ctx := context.Background()
	i := 0
	for b.Loop() {
		a := ipamdapi.Attachment{ContainerID: fmt.Sprintf("c%d", i), IfName: "eth0"}
		i++
		if _, err := client.Add(ctx, ipamdapi.AddRequest{Attachment: a}); err != nil {
			b.Fatal(err)
		}
		if _, err := client.Del(ctx, a); err != nil {
			b.Fatal(err)
		}
	}
}

func TestWarmENIPoolDeletesASurplusENI(t *testing.T) {
	fake := ipamdtest.New(3, 4)
	m := startManager(t, fake, t.TempDir(), ipamd.Targets{}, nil)
	testutil.Eventually(t, "the primary ENI filled", func() bool { return len(fake.Assigned()) == 3 })
	m.add(t, "a") // the primary ENI's
	testutil.Eventually(t, "a second ENI attached and filled", func() bool { return len(fake.Assigned()) == 6 })
	m.del(t, "a")
	// Two ENIs' worth free, one wanted: the second, none of whose addresses a pod used,
	// is detached and deleted (Decide keeps one whose addresses are cooling down).
	testutil.Eventually(t, "the surplus ENI detached and deleted", func() error {
		fake.Lock()
		defer fake.Unlock()
		if len(fake.ENIs) != 1 || fake.Calls["DetachNetworkInterface"] != 1 || fake.Calls["DeleteNetworkInterface"] != 1 {
			return fmt.Errorf("%d ENIs, calls %v", len(fake.ENIs), fake.Calls)
		}
		return nil
	})
	if got := len(fake.Assigned()); got != 3 {
		t.Errorf("%d addresses assigned after the surplus ENI went, want the primary's 3", got)
	}
	if a := m.add(t, "b"); a.DeviceNumber != 0 {
		t.Errorf("after the surplus ENI went a pod got %+v, want the primary ENI's", a)
	}
}

// syncBuffer is a buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// linesWith are the lines of log whose message is msg and that name attr.
func linesWith(log, msg, attr string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `msg="`+msg+`"`) && strings.Contains(l, attr) {
			out = append(out, l)
		}
	}
	return out
}

// TestLogSaysWhatTheTraceReads: the lines kubelab trace reads say how long each
// AssignPrivateIpAddresses took, and how long an ADD that found the pool empty waited;
// an ADD served from the pool says no wait.
func TestLogSaysWhatTheTraceReads(t *testing.T) {
	fake := ipamdtest.New(3, 4)
	var log syncBuffer
	m := startManagerLogging(t, fake, t.TempDir(), ipamd.Targets{WarmIP: 1}, nil, io.MultiWriter(&log, testWriter{t}))
	testutil.Eventually(t, "the warm address assigned", func() error {
		if got := len(fake.Assigned()); got != 1 {
			return fmt.Errorf("%d addresses assigned, want 1", got)
		}
		return nil
	})
	fake.Lock()
	fake.Fail["AssignPrivateIpAddresses"] = "RequestLimitExceeded" // the pool cannot grow for now
	fake.Unlock()
	warm := m.add(t, "warm")
	got := make(chan ipamdapi.Assignment, 1)
	go func() {
		a, err := m.client.Add(context.Background(), ipamdapi.AddRequest{Attachment: ipamdapi.Attachment{ContainerID: "late", IfName: "eth0"},
			PodNamespace: "default", PodName: "pod-late"})
		if err != nil {
			t.Errorf("add late: %v", err)
			close(got)
			return
		}
		got <- *a
	}()
	testutil.Eventually(t, "the pool failing to grow", func() bool { return strings.Contains(log.String(), "RequestLimitExceeded") })
	fake.Lock()
	delete(fake.Fail, "AssignPrivateIpAddresses")
	fake.Unlock()
	late, ok := <-got
	if !ok {
		return
	}
	if l := linesWith(log.String(), "assigned pod address", "ip="+warm.IP+" "); len(l) != 1 || strings.Contains(l[0], "waited=") {
		t.Errorf("the warm pod's line %q: want one, with no wait", l)
	}
	if l := linesWith(log.String(), "assigned pod address", "ip="+late.IP+" "); len(l) != 1 || !strings.Contains(l[0], "waited=") {
		t.Errorf("the late pod's line %q: want one, saying how long it waited", l)
	}
	calls := linesWith(log.String(), "assigned addresses", late.IP)
	if len(calls) != 1 || !strings.Contains(calls[0], "took=") || !strings.Contains(calls[0], "call=AssignPrivateIpAddresses") {
		t.Errorf("the call that got the late pod's address %q: want one, saying how long it took", calls)
	}
}

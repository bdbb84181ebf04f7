package apiserver

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/kubelab/kubelab/internal/testutil"
)

func TestDecideGC(t *testing.T) {
	env := func(vars ...string) func(string) (string, bool) {
		return func(k string) (string, bool) {
			for _, kv := range vars {
				if name, v, _ := strings.Cut(kv, "="); name == k {
					return v, true
				}
			}
			return "", false
		}
	}
	for _, tc := range []struct {
		name    string
		percent int
		limit   int64
		getenv  func(string) (string, bool)
		want    gcSettings
	}{
		{"default", 0, 0, env(), gcSettings{percent: DefaultGCPercent, setPercent: true, tune: true}},
		{"GOGC in the environment wins over the default", 0, 0, env("GOGC=150"), gcSettings{}},
		{"config wins over GOGC", 250, 0, env("GOGC=150"), gcSettings{percent: 250, setPercent: true}},
		{"-1 keeps the runtime's", -1, 0, env(), gcSettings{}},
		{"memory limit", 0, 1 << 30, env("GOMEMLIMIT=2GiB"), gcSettings{percent: DefaultGCPercent, setPercent: true, tune: true, limit: 1 << 30, setLimit: true}},
		{"GOMEMLIMIT kept without a configured limit", 0, 0, env("GOMEMLIMIT=2GiB"), gcSettings{percent: DefaultGCPercent, setPercent: true, tune: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideGC(tc.percent, tc.limit, tc.getenv); got != tc.want {
				t.Fatalf("decideGC(%d, %d) = %+v, want %+v", tc.percent, tc.limit, got, tc.want)
			}
		})
	}
}

func TestTunedGCPercent(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, DefaultGCPercent},
		{64 << 20, DefaultGCPercent},
		{128 << 20, DefaultGCPercent},
		{256 << 20, 200},
		{512 << 20, 100},
		{1 << 30, MinTunedGCPercent},
		{8 << 30, MinTunedGCPercent},
	} {
		if got := tunedGCPercent(tc.live); got != tc.want {
			t.Errorf("tunedGCPercent(%d MiB) = %d, want %d", tc.live>>20, got, tc.want)
		}
	}
}

// The tuner follows the live heap: with a large live heap the target falls below the
// default after a collection, and is back at the default once that heap is garbage.
func TestGCTunerFollowsTheLiveHeap(t *testing.T) {
	old := debug.SetGCPercent(DefaultGCPercent)
	t.Cleanup(func() { processTuner.enabled.Store(false); debug.SetGCPercent(old) })
	processTuner.enabled.Store(true)
	processTuner.start()
	live := make([]byte, 768<<20)
	live[len(live)-1] = 1
	testutil.Eventually(t, "the target falls for 768 MiB live", func() error {
		runtime.GC()
		if p := gcPercent(); p != tunedGCPercent(768<<20) && p != MinTunedGCPercent {
			return fmt.Errorf("GC percent %d", p)
		}
		return nil
	})
	runtime.KeepAlive(live)
	live = nil
	testutil.Eventually(t, "the default again once the heap is garbage", func() error {
		runtime.GC()
		if p := gcPercent(); p != DefaultGCPercent {
			return fmt.Errorf("GC percent %d", p)
		}
		return nil
	})
}

func TestConfigRefusesBadGCSettings(t *testing.T) {
	for _, tc := range []struct {
		percent int
		limit   int64
		want    string
	}{
		{-2, 0, "GC percent -2"},
		{0, -1, "memory limit -1"},
	} {
		c := Config{DataDir: "/tmp/x", EtcdServers: []string{"http://127.0.0.1:2379"}, GCPercent: tc.percent, MemoryLimit: tc.limit}
		c.setDefaults()
		err := c.validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("GCPercent %d, MemoryLimit %d: error %v, want one naming %q", tc.percent, tc.limit, err, tc.want)
		}
	}
	ok := Config{DataDir: "/tmp/x", EtcdServers: []string{"http://127.0.0.1:2379"}, GCPercent: -1, MemoryLimit: 1 << 30}
	ok.setDefaults()
	if err := ok.validate(); err != nil {
		t.Fatalf("valid GC settings refused: %v", err)
	}
}

package apiserver

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// DefaultGCPercent is the garbage collector's target while the live heap is small. The
// runtime's own 100 suits programs whose heap is mostly garbage-free; an API server
// allocates a few hundred kilobytes per request against a live heap of cached objects,
// and at 100 it spends about a tenth of its CPU marking. 400 lets the heap grow to five
// times the live objects between collections, trading memory for CPU.
const DefaultGCPercent = 400

// GCHeadroom is how much garbage the default collector lets accumulate beyond the live
// heap: the target is DefaultGCPercent while that is within GCHeadroom (a live heap up
// to 128 MiB), and falls as the live heap grows, to MinTunedGCPercent (at 1 GiB live
// and beyond). A small cluster keeps the CPU 400 saves; a large watch cache does not
// multiply into gigabytes of garbage.
const GCHeadroom = 512 << 20

// MinTunedGCPercent is the lowest target the default collector falls to: below it the
// marking of a large live heap would take a large share of the CPU.
const MinTunedGCPercent = 50

// gcSettings is what Run does to the process's garbage collector.
type gcSettings struct {
	// percent is passed to debug.SetGCPercent when setPercent.
	percent    int
	setPercent bool
	// tune has the target follow the live heap after every collection (tunedGCPercent).
	tune bool
	// limit is passed to debug.SetMemoryLimit when setLimit.
	limit    int64
	setLimit bool
}

// decideGC picks the garbage collector's settings: an explicit Config value wins, then
// the GOGC / GOMEMLIMIT environment variables (which the runtime has already applied),
// then the default, DefaultGCPercent tuned to the live heap, and no memory limit.
// GCPercent -1 keeps the runtime's setting.
func decideGC(gcPercent int, memoryLimit int64, getenv func(string) (string, bool)) gcSettings {
	var s gcSettings
	switch {
	case gcPercent > 0:
		s.percent, s.setPercent = gcPercent, true
	case gcPercent == 0:
		if _, ok := getenv("GOGC"); !ok {
			s.percent, s.setPercent, s.tune = DefaultGCPercent, true, true
		}
	}
	if memoryLimit > 0 {
		s.limit, s.setLimit = memoryLimit, true
	}
	return s
}

// tunedGCPercent is the default collector's target for a live heap of live bytes:
// GCHeadroom of garbage, as a percentage of live, between MinTunedGCPercent and
// DefaultGCPercent.
func tunedGCPercent(live uint64) int {
	if live == 0 {
		return DefaultGCPercent
	}
	p := uint64(GCHeadroom) * 100 / live
	return int(min(max(p, MinTunedGCPercent), DefaultGCPercent))
}

// applyGC sets the process's garbage collector as the config says. The setting is the
// process's: in `kubelab up` it applies to every component sharing the process.
func (s *Server) applyGC(ctx context.Context) {
	gc := decideGC(s.cfg.GCPercent, s.cfg.MemoryLimit, os.LookupEnv)
	processTuner.enabled.Store(gc.tune)
	if gc.setPercent {
		debug.SetGCPercent(gc.percent)
	}
	if gc.tune {
		processTuner.start()
	}
	if gc.setLimit {
		debug.SetMemoryLimit(gc.limit)
	}
	slog.InfoContext(ctx, "garbage collector", "gcPercent", gcPercent(), "tuned", gc.tune, "memoryLimit", debug.SetMemoryLimit(-1))
}

// gcPercent is the collector's target now.
func gcPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// processTuner follows the live heap for the process's default collector.
var processTuner gcTuner

// gcTuner sets the collector's target to tunedGCPercent of the live heap after every
// collection, while enabled. It is the process's: every API server in it shares it, and
// one that sets its own target disables it.
type gcTuner struct {
	enabled atomic.Bool
	once    sync.Once
	percent int // last set; only the cleanup goroutine touches it
}

// gcSentinel is garbage whose cleanup marks the end of a collection.
type gcSentinel struct{ _ *int }

func (t *gcTuner) start() { t.once.Do(t.arm) }

// arm makes a sentinel whose cleanup runs after the next collection, retunes, and arms
// again.
func (t *gcTuner) arm() {
	runtime.AddCleanup(&gcSentinel{}, func(t *gcTuner) {
		t.retune()
		t.arm()
	}, t)
}

func (t *gcTuner) retune() {
	if !t.enabled.Load() {
		return
	}
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	if live[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	if p := tunedGCPercent(live[0].Value.Uint64()); p != t.percent {
		t.percent = p
		debug.SetGCPercent(p)
	}
}

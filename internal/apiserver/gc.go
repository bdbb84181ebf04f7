package apiserver

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
)

// DefaultGCPercent is the garbage collector's target Run sets when neither Config nor
// the GOGC environment variable says otherwise. The runtime's own 100 suits programs
// whose heap is mostly garbage-free; an API server allocates a few hundred kilobytes
// per request against a live heap of cached objects, and at 100 it spends about a tenth
// of its CPU marking. 400 lets the heap grow to five times the live objects between
// collections (a 200 MB watch cache may use up to 1 GB), trading memory for CPU as
// servers do; set Config.MemoryLimit (or GOMEMLIMIT) to cap it.
const DefaultGCPercent = 400

// gcSettings is what Run does to the process's garbage collector.
type gcSettings struct {
	// percent is passed to debug.SetGCPercent when setPercent.
	percent    int
	setPercent bool
	// limit is passed to debug.SetMemoryLimit when setLimit.
	limit    int64
	setLimit bool
}

// decideGC picks the garbage collector's settings: an explicit Config value wins, then
// the GOGC / GOMEMLIMIT environment variables (which the runtime has already applied),
// then DefaultGCPercent and no memory limit. GCPercent -1 keeps the runtime's setting.
func decideGC(gcPercent int, memoryLimit int64, getenv func(string) (string, bool)) gcSettings {
	var s gcSettings
	switch {
	case gcPercent > 0:
		s.percent, s.setPercent = gcPercent, true
	case gcPercent == 0:
		if _, ok := getenv("GOGC"); !ok {
			s.percent, s.setPercent = DefaultGCPercent, true
		}
	}
	if memoryLimit > 0 {
		s.limit, s.setLimit = memoryLimit, true
	}
	return s
}

// applyGC sets the process's garbage collector as the config says. The setting is the
// process's: in `kubelab up` it applies to every component sharing the process.
func (s *Server) applyGC(ctx context.Context) {
	gc := decideGC(s.cfg.GCPercent, s.cfg.MemoryLimit, os.LookupEnv)
	if gc.setPercent {
		debug.SetGCPercent(gc.percent)
	}
	if gc.setLimit {
		debug.SetMemoryLimit(gc.limit)
	}
	// SetGCPercent has no getter: set the value back at once.
	percent := debug.SetGCPercent(100)
	debug.SetGCPercent(percent)
	slog.InfoContext(ctx, "garbage collector", "gcPercent", percent, "memoryLimit", debug.SetMemoryLimit(-1))
}

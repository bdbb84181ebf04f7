package benchtest

import (
	"slices"
	"testing"
	"time"
)

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of ds, which it sorts in
// place; 0 when ds is empty.
func Percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	rank := (p*len(ds) + 99) / 100
	return ds[max(rank, 1)-1]
}

// Millis is d in milliseconds, to the microsecond.
func Millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// ReportLatencies reports the p50 and p99 of ds in milliseconds as <name>-p50-ms and
// <name>-p99-ms, or p50-ms and p99-ms when name is empty; nothing when ds is empty.
func ReportLatencies(b *testing.B, name string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	if name != "" {
		name += "-"
	}
	b.ReportMetric(Millis(Percentile(ds, 50)), name+"p50-ms")
	b.ReportMetric(Millis(Percentile(ds, 99)), name+"p99-ms")
}

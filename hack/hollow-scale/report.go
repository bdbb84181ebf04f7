package main

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kubelab/kubelab/internal/benchtest"
)

// Goals of the run: CL2's pod startup SLO and kubelab's memory budget.
const (
	podStartupGoal = 5 * time.Second
	bytesPerNode   = 3_000_000
	bytesPerPod    = 10_000
)

type report struct {
	nodes, pods int
	rate        float64

	nodesReady, created, podsRunning time.Duration
	rssNodes, rssPods                int64 // kB
	peakHWM, peakRSS                 int64 // kB
	goroutines                       float64

	apiPods, apiRun         []apiLatency
	startupCL2, startupSent []time.Duration
}

func (r *report) String() string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("")
	p("== hollow scale: %d nodes, %d pods created at %.0f/s ==", r.nodes, r.pods, r.rate)
	p("all nodes Ready:        %s after kubelab up started", r.nodesReady.Round(100*time.Millisecond))
	p("pods created:           %s (%.1f/s)", r.created.Round(100*time.Millisecond), float64(r.pods)/r.created.Seconds())
	p("all pods Running:       %s after the first create", r.podsRunning.Round(100*time.Millisecond))
	budget := int64(r.nodes)*bytesPerNode + int64(r.pods)*bytesPerPod
	p("RSS nodes Ready:        %s (%.2f MB a node)", mb(r.rssNodes), float64(r.rssNodes)/1000/float64(r.nodes))
	p("RSS pods Running:       %s", mb(r.rssPods))
	p("peak RSS:               VmHWM %s, largest sample %s; goal %s (3 MB a node + 10 KB a pod): %s",
		mb(r.peakHWM), mb(r.peakRSS), mb(budget/1000), verdict(r.peakHWM*1000 <= budget))
	p("goroutines at the end:  %.0f", r.goroutines)
	p("")
	p("pod startup (CL2: creationTimestamp → watch saw Running), %d pods:", len(r.startupCL2))
	p("  %s; goal p99 ≤ %s: %s", percentiles(r.startupCL2), podStartupGoal, verdict(benchtest.Percentile(r.startupCL2, 99) <= podStartupGoal))
	p("pod startup (create sent → watch saw Running):")
	p("  %s", percentiles(r.startupSent))
	p("")
	p("API call latency p99 (%s), pod phase:", sliMetric)
	writeAPI(&b, r.apiPods)
	p("API call latency p99, whole run (kubelab up start to all pods Running):")
	writeAPI(&b, r.apiRun)
	return b.String()
}

func percentiles(ds []time.Duration) string {
	return fmt.Sprintf("p50 %s, p90 %s, p99 %s, max %s",
		benchtest.Percentile(ds, 50).Round(time.Millisecond), benchtest.Percentile(ds, 90).Round(time.Millisecond),
		benchtest.Percentile(ds, 99).Round(time.Millisecond), benchtest.Percentile(ds, 100).Round(time.Millisecond))
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// writeAPI writes each SLO class's worst call and count, then the calls over their SLO
// and the ten busiest.
func writeAPI(b *strings.Builder, ls []apiLatency) {
	worst := map[string]apiLatency{}
	calls := map[string]float64{}
	var order []string
	for _, l := range ls {
		cl := classOf(l.call)
		if _, ok := worst[cl]; !ok {
			worst[cl] = l
			order = append(order, cl)
		}
		calls[cl] += l.count
	}
	for _, cl := range order {
		l := worst[cl]
		fmt.Fprintf(b, "  %-15s worst p99 %7.3f s (%s), goal %g s: %s; %.0f calls\n", cl, l.p99, name(l.call), l.slo, verdict(l.p99 <= l.slo), calls[cl])
	}
	busiest := append([]apiLatency(nil), ls...)
	sortByCount(busiest)
	fmt.Fprintf(b, "  busiest:\n")
	for _, l := range busiest[:min(10, len(busiest))] {
		fmt.Fprintf(b, "    %-45s %8.0f calls  p99 %.3f s\n", name(l.call), l.count, l.p99)
	}
}

func sortByCount(ls []apiLatency) {
	sort.SliceStable(ls, func(i, j int) bool { return ls[i].count > ls[j].count })
}

func name(c call) string {
	r := c.resource
	if c.subresource != "" {
		r += "/" + c.subresource
	}
	return fmt.Sprintf("%s %s (%s)", c.verb, r, c.scope)
}

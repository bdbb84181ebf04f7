package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
)

// sliMetric is the API server's request latency histogram that CL2's
// APIResponsivenessPrometheus reads: it leaves out the time a request waits in the
// server's queues and the webhooks' time.
const sliMetric = "apiserver_request_sli_duration_seconds"

func everything() labels.Selector { return labels.Everything() }

func portFree(p int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// call names a kind of API call as CL2 groups them.
type call struct {
	resource, subresource, verb, scope string
}

// histogram is one call's cumulative buckets (upper bound → count) and count.
type histogram struct {
	buckets map[float64]float64
	count   float64
}

// metrics is one scrape of /metrics.
type metrics struct {
	raw    []byte
	hist   map[call]*histogram
	gauges map[string]float64
}

func scrape(ctx context.Context, client kubernetes.Interface) (*metrics, error) {
	raw, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("scrape /metrics: %w", err)
	}
	return parseMetrics(raw)
}

// parseMetrics reads the SLI histogram (summed over the other labels, such as group,
// version and component) and the unlabelled gauges from the text format.
func parseMetrics(raw []byte) (*metrics, error) {
	m := &metrics{raw: raw, hist: map[call]*histogram{}, gauges: map[string]float64{}}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, lbls, value, err := parseSample(line)
		if err != nil {
			return nil, err
		}
		switch name {
		case sliMetric + "_bucket", sliMetric + "_count":
			c := call{lbls["resource"], lbls["subresource"], lbls["verb"], lbls["scope"]}
			h := m.hist[c]
			if h == nil {
				h = &histogram{buckets: map[float64]float64{}}
				m.hist[c] = h
			}
			if name == sliMetric+"_count" {
				h.count += value
				continue
			}
			le, err := strconv.ParseFloat(lbls["le"], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: le %q: %w", name, lbls["le"], err)
			}
			h.buckets[le] += value
		default:
			if len(lbls) == 0 {
				m.gauges[name] = value
			}
		}
	}
	return m, sc.Err()
}

// parseSample splits `name{k="v",...} value` (no timestamps, which the API server does
// not write).
func parseSample(line string) (string, map[string]string, float64, error) {
	lbls := map[string]string{}
	name, rest := line, ""
	if i := strings.IndexAny(line, "{ "); i >= 0 {
		name, rest = line[:i], line[i:]
	}
	if strings.HasPrefix(rest, "{") {
		end := strings.LastIndex(rest, "}")
		if end < 0 {
			return "", nil, 0, fmt.Errorf("unterminated labels: %q", line)
		}
		body := rest[1:end]
		rest = rest[end+1:]
		for body != "" {
			eq := strings.Index(body, `="`)
			if eq < 0 {
				return "", nil, 0, fmt.Errorf("bad labels: %q", line)
			}
			k := strings.TrimPrefix(body[:eq], ",")
			body = body[eq+2:]
			var v strings.Builder
			i := 0
			for ; i < len(body) && body[i] != '"'; i++ {
				if body[i] == '\\' && i+1 < len(body) {
					i++
				}
				v.WriteByte(body[i])
			}
			lbls[k] = v.String()
			body = strings.TrimPrefix(body[min(i+1, len(body)):], ",")
		}
	}
	value, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
	if err != nil {
		return "", nil, 0, fmt.Errorf("value of %q: %w", line, err)
	}
	return name, lbls, value, nil
}

func (m *metrics) gauge(name string) float64 { return m.gauges[name] }

// minus is m's histograms less those of an earlier scrape: the calls made between them.
func (m *metrics) minus(earlier *metrics) *metrics {
	out := &metrics{hist: map[call]*histogram{}, gauges: m.gauges}
	for c, h := range m.hist {
		d := &histogram{buckets: map[float64]float64{}, count: h.count}
		for le, n := range h.buckets {
			d.buckets[le] = n
		}
		if e := earlier.hist[c]; e != nil {
			d.count -= e.count
			for le, n := range e.buckets {
				d.buckets[le] -= n
			}
		}
		if d.count > 0 {
			out.hist[c] = d
		}
	}
	return out
}

// quantile is Prometheus's histogram_quantile: linear within the bucket the rank falls
// in; the highest finite bound when it falls in +Inf.
func (h *histogram) quantile(q float64) float64 {
	bounds := make([]float64, 0, len(h.buckets))
	for le := range h.buckets {
		bounds = append(bounds, le)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 {
		return math.NaN()
	}
	total := h.buckets[bounds[len(bounds)-1]]
	if total == 0 {
		return math.NaN()
	}
	rank := q * total
	prevBound, prevCount := 0.0, 0.0
	for _, le := range bounds {
		n := h.buckets[le]
		if n >= rank {
			if math.IsInf(le, 1) {
				return prevBound
			}
			if n == prevCount {
				return le
			}
			return prevBound + (le-prevBound)*(rank-prevCount)/(n-prevCount)
		}
		prevBound, prevCount = le, n
	}
	return prevBound
}

// apiLatency is one call's count and p99 with its SLO.
type apiLatency struct {
	call
	count float64
	p99   float64
	slo   float64
}

// apiLatencies are the p99s of the calls CL2 judges (WATCH, WATCHLIST, CONNECT and PROXY
// left out), worst against its SLO first.
func apiLatencies(m *metrics) []apiLatency {
	var out []apiLatency
	for c, h := range m.hist {
		if slo := sloOf(c); slo > 0 {
			out = append(out, apiLatency{call: c, count: h.count, p99: h.quantile(0.99), slo: slo})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		ri, rj := out[i].p99/out[i].slo, out[j].p99/out[j].slo
		if ri != rj {
			return ri > rj
		}
		return out[i].count > out[j].count
	})
	return out
}

// sloOf is CL2's latency goal for a call in seconds, 0 for calls it does not judge: 1 s
// for a call on one object (scope resource) and for mutating calls, 5 s for a LIST in a
// namespace, 30 s for a LIST across the cluster.
func sloOf(c call) float64 {
	switch c.verb {
	case "WATCH", "WATCHLIST", "CONNECT", "PROXY", "":
		return 0
	case "LIST":
		if c.scope == "namespace" {
			return 5
		}
		return 30
	}
	return 1
}

// classOf is the SLO class CL2 reports a call under.
func classOf(c call) string {
	switch c.verb {
	case "GET":
		return "read"
	case "LIST":
		return "list/" + c.scope
	}
	return "mutating"
}

package main

import (
	"math"
	"strings"
	"testing"
)

const sample = `# HELP apiserver_request_sli_duration_seconds [STABLE] ...
# TYPE apiserver_request_sli_duration_seconds histogram
apiserver_request_sli_duration_seconds_bucket{component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="POST",version="v1",le="0.1"} 90
apiserver_request_sli_duration_seconds_bucket{component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="POST",version="v1",le="1"} 100
apiserver_request_sli_duration_seconds_bucket{component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="POST",version="v1",le="+Inf"} 100
apiserver_request_sli_duration_seconds_count{component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="POST",version="v1"} 100
apiserver_request_sli_duration_seconds_bucket{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1",le="+Inf"} 7
apiserver_request_sli_duration_seconds_count{component="apiserver",group="",resource="pods",scope="cluster",subresource="",verb="WATCH",version="v1"} 7
go_goroutines 1234
`

func TestParseMetricsAndQuantile(t *testing.T) {
	m, err := parseMetrics([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	if g := m.gauge("go_goroutines"); g != 1234 {
		t.Fatalf("go_goroutines %v, want 1234", g)
	}
	post := m.hist[call{"pods", "", "POST", "namespace"}]
	if post == nil || post.count != 100 {
		t.Fatalf("POST pods: %+v", post)
	}
	// Rank 99 of 100 falls in (0.1, 1] holding 10: 0.1 + 0.9*9/10.
	if q := post.quantile(0.99); math.Abs(q-0.91) > 1e-9 {
		t.Fatalf("p99 %v, want 0.91", q)
	}
	ls := apiLatencies(m)
	if len(ls) != 1 || ls[0].verb != "POST" || ls[0].slo != 1 {
		t.Fatalf("judged calls %+v: want POST pods alone (WATCH is not judged), SLO 1 s", ls)
	}
	// The calls between two scrapes.
	later, err := parseMetrics([]byte(strings.ReplaceAll(sample, "} 100", "} 200")))
	if err != nil {
		t.Fatal(err)
	}
	d := later.minus(m).hist[call{"pods", "", "POST", "namespace"}]
	if d == nil || d.count != 100 || d.buckets[0.1] != 0 || d.buckets[1] != 100 {
		t.Fatalf("difference %+v: want 100 calls, all in (0.1, 1]", d)
	}
}

func TestSLOOf(t *testing.T) {
	for _, tc := range []struct {
		c    call
		want float64
	}{
		{call{verb: "GET", scope: "resource"}, 1},
		{call{verb: "PATCH", scope: "resource"}, 1},
		{call{verb: "LIST", scope: "namespace"}, 5},
		{call{verb: "LIST", scope: "cluster"}, 30},
		{call{verb: "WATCH", scope: "cluster"}, 0},
		{call{verb: "CONNECT", scope: "resource"}, 0},
	} {
		if got := sloOf(tc.c); got != tc.want {
			t.Errorf("sloOf(%+v) = %v, want %v", tc.c, got, tc.want)
		}
	}
}

func TestParseStatus(t *testing.T) {
	hwm, rss, err := parseStatus(strings.NewReader("Name:\tkubelab\nVmPeak:\t 9 kB\nVmHWM:\t  774996 kB\nVmRSS:\t  700000 kB\nThreads:\t11\n"))
	if err != nil || hwm != 774996 || rss != 700000 {
		t.Fatalf("VmHWM %d, VmRSS %d, %v; want 774996, 700000", hwm, rss, err)
	}
}

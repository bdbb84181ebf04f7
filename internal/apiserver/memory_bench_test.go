package apiserver_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

// The memory benchmark's load, each settable by an environment variable.
const (
	memWatchersEnv = "KUBELAB_MEM_WATCHERS"   // watches of the ConfigMaps (20)
	memLiveEnv     = "KUBELAB_MEM_LIVE"       // ConfigMaps live at the end (10000)
	memSizeEnv     = "KUBELAB_MEM_SIZE_KB"    // payload of each ConfigMap in KiB (35)
	memChurnEnv    = "KUBELAB_MEM_CHURN"      // churn operations after the fill (= live)
	memGCEnv       = "KUBELAB_MEM_GC_PERCENT" // kubelab's fixed GC target (default: tuned)
)

// BenchmarkMemoryUnderChurn measures where the API server's memory goes under churn:
// for kubelab's server and, when KUBELAB_KUBE_APISERVER names a binary, for the
// upstream kube-apiserver on the same (embedded) etcd, it opens W watches of a
// namespace's ConfigMaps, reading every frame, then creates L ConfigMaps of the given
// size and churns them (three updates, then a delete and a re-create, per four
// operations), sampling resident memory every 250 ms.
//
// kubelab's server and etcd run in this process, so its figure is this process's
// peak VmRSS. kube-apiserver runs in its own process and keeps its data in this
// process's etcd, so its figure is its own peak VmRSS plus this process's growth
// during its phase (etcd's share, with the load generator's, which is small: it is in
// kubelab's figure too). Growth is the peak less the baseline taken, after a forced GC
// and return of free memory, just before the phase. Between the phases etcd is
// compacted and defragmented, so that neither carries the other's database pages.
// kube-apiserver's phase runs first:
// kubelab's idle server in this process watches none of its keys, while the other way
// round kubelab's watch cache would still hold its last 75 s of events. At the end of
// a phase its ConfigMaps are deleted; what etcd keeps of them in memory (the raft log
// of its recent entries) stays in kubelab's baseline. At the peak of each phase a heap
// profile of this process is written to the temporary directory (its path is logged),
// for `go tool pprof -top`.
//
// Run it once: go test -run '^$' -bench MemoryUnderChurn -benchtime 1x ./internal/apiserver
func BenchmarkMemoryUnderChurn(b *testing.B) {
	quietLogs(b)
	load := memoryLoad{
		watchers: envInt(b, memWatchersEnv, 20),
		live:     envInt(b, memLiveEnv, 10000),
		sizeKiB:  envInt(b, memSizeEnv, 35),
	}
	load.churn = envInt(b, memChurnEnv, load.live)
	b.Logf("load: %d watchers, %d live ConfigMaps of %d KiB, %d churn operations", load.watchers, load.live, load.sizeKiB, load.churn)

	s := apiservertest.Start(b, apiservertest.Options{GCPercent: envInt(b, memGCEnv, 0)})
	type server struct {
		name   string
		config rest.Config
		pid    int // of a server in a process of its own; 0 for this one
	}
	var servers []server
	if bin := kubeAPIServerBinary(); bin != "" {
		kas := startKubeAPIServer(b, bin, s)
		servers = append(servers, server{"kube-apiserver", benchClientConfig(*kas.config), kas.cmd.Process.Pid})
	} else {
		b.Logf("set %s to a kube-apiserver binary to compare with it", kubeAPIServerEnv)
	}
	servers = append(servers, server{"kubelab", benchClientConfig(*s.Config), 0})
	etcd := s.EtcdClient(b)
	for _, srv := range servers {
		b.Run(srv.name, func(b *testing.B) {
			for range b.N {
				load.run(b, srv.name, srv.config, srv.pid)
				forgetHistory(b, etcd)
			}
		})
	}
}

// forgetHistory compacts etcd to its current revision and defragments it: the
// database file shrinks to the live keys and is mapped anew, so that the pages of one
// phase's writes are not in the next phase's figure (the etcd of this process serves
// both servers).
func forgetHistory(b *testing.B, etcd *clientv3.Client) {
	ctx := context.Background()
	resp, err := etcd.Get(ctx, "/", clientv3.WithCountOnly())
	if err != nil {
		b.Fatalf("etcd revision: %v", err)
	}
	if _, err := etcd.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		b.Fatalf("compact etcd: %v", err)
	}
	for _, ep := range etcd.Endpoints() {
		if _, err := etcd.Defragment(ctx, ep); err != nil {
			b.Fatalf("defragment etcd at %s: %v", ep, err)
		}
	}
}

// memoryLoad is one phase of BenchmarkMemoryUnderChurn.
type memoryLoad struct {
	watchers, live, sizeKiB, churn int
}

func (l memoryLoad) run(b *testing.B, name string, config rest.Config, pid int) {
	ctx := context.Background()
	client := kubernetes.NewForConfigOrDie(&config)
	ns := fmt.Sprintf("bench-mem-%d", nextRun())
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	if _, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatalf("%s: %v", name, err)
	}
	cms := client.CoreV1().ConfigMaps(ns)

	runtime.GC()
	debug.FreeOSMemory()
	base, err := sampleMemory(pid)
	if err != nil {
		b.Fatal(err)
	}
	sampler := startMemorySampler(b, pid)

	// The watchers, each on a connection of its own, reading the frames from the
	// namespace's current resourceVersion on.
	first, err := cms.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	wctx, cancel := context.WithCancel(ctx)
	var watchers sync.WaitGroup
	var events, rewatches atomic.Int64
	failures := make(chan error, l.watchers)
	connect := ownConnections(config)
	for w := range l.watchers {
		rc := connect(b).CoreV1().RESTClient()
		watchers.Add(1)
		go func() {
			defer watchers.Done()
			err := watchFrames(wctx, rc, ns, "configmaps", first.ResourceVersion, func([]byte) { events.Add(1) }, func() { rewatches.Add(1) })
			if err != nil && wctx.Err() == nil {
				failures <- fmt.Errorf("watcher %d: %w", w, err)
			}
		}()
	}
	stopWatchers := func() { cancel(); watchers.Wait() }
	defer stopWatchers()

	payload := randomText(b, l.sizeKiB*1024)
	cm := func(i, version int) *corev1.ConfigMap {
		p := []byte(payload)
		copy(p, fmt.Sprintf("%08d", version)) // every write stores new bytes
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%06d", i)}, Data: map[string]string{"payload": string(p)}}
	}
	start := time.Now()
	var writes atomic.Int64
	err = forEach(l.live, func(i int) error {
		writes.Add(1)
		_, err := cms.Create(ctx, cm(i, 0), metav1.CreateOptions{})
		return err
	})
	if err == nil {
		err = forEach(l.churn, func(j int) error {
			i, version := j%l.live, j/l.live+1
			if j%4 != 3 {
				writes.Add(1)
				_, err := cms.Update(ctx, cm(i, version), metav1.UpdateOptions{})
				return err
			}
			writes.Add(2)
			if err := cms.Delete(ctx, cm(i, 0).Name, metav1.DeleteOptions{}); err != nil {
				return err
			}
			_, err := cms.Create(ctx, cm(i, version), metav1.CreateOptions{})
			return err
		})
	}
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	elapsed := time.Since(start)
	// All L objects are live and the watch caches' event windows are full: the peak.
	profile := filepath.Join(os.TempDir(), fmt.Sprintf("kubelab-memory-%s-%s.pprof", name, ns))
	writeHeapProfile(b, profile)
	peak := sampler.stop()
	select {
	case err := <-failures:
		b.Fatalf("%s: %v", name, err)
	default:
	}
	stopWatchers()
	if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		b.Fatalf("%s: delete the ConfigMaps: %v", name, err)
	}

	b.Logf("%s: %d writes in %v (%.0f/s), %d watch events, %d rewatches; heap profile at the peak: %s",
		name, writes.Load(), elapsed.Round(time.Second), float64(writes.Load())/elapsed.Seconds(), events.Load(), rewatches.Load(), profile)
	b.Logf("%s: this process: baseline %s; peak %s, Go heap objects %.0f MB at most", name, base.self, peak.self, mb(peak.heap))
	selfGrowth := mb(peak.self.rss) - mb(base.self.rss)
	total, growth := mb(peak.self.rss), selfGrowth
	if pid != 0 {
		b.Logf("%s: kube-apiserver process: baseline %s; peak %s", name, base.other, peak.other)
		total, growth = mb(peak.other.rss)+selfGrowth, mb(peak.other.rss)-mb(base.other.rss)+selfGrowth
		b.ReportMetric(mb(peak.other.rss), "server-peak-rss-MB")
		b.ReportMetric(selfGrowth, "etcd-growth-MB")
	}
	perK := float64(l.live) / 1000
	b.ReportMetric(total, "peak-rss-MB")
	b.ReportMetric(growth, "growth-MB")
	b.ReportMetric(growth/perK, "growth-MB/1k-live")
	b.ReportMetric(total/perK, "peak-MB/1k-live")
}

// forEach runs fn for i in [0, n) with benchConcurrency in flight and returns the
// first error.
func forEach(n int, fn func(i int) error) error {
	var next atomic.Int64
	var g errgroup.Group
	for range benchConcurrency {
		g.Go(func() error {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := fn(i); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// rss is a process's resident memory from /proc/<pid>/status: in all, anonymous (the
// heap, stacks) and file-backed (mapped files, such as etcd's bbolt database).
type rss struct{ rss, anon, file uint64 }

func (r rss) String() string {
	return fmt.Sprintf("RSS %.0f MB (anon %.0f, file %.0f)", mb(r.rss), mb(r.anon), mb(r.file))
}

// readRSS reads pid's resident memory; pid 0 is this process.
func readRSS(pid int) (rss, error) {
	path := "/proc/self/status"
	if pid != 0 {
		path = fmt.Sprintf("/proc/%d/status", pid)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return rss{}, err
	}
	var r rss
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var field *uint64
		switch key {
		case "VmRSS":
			field = &r.rss
		case "RssAnon":
			field = &r.anon
		case "RssFile":
			field = &r.file
		default:
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return rss{}, fmt.Errorf("%s: %s: %w", path, key, err)
		}
		*field = kb * 1024
	}
	return r, nil
}

// memorySample is this process's and another's resident memory, and this process's
// Go heap objects (live and not yet collected).
type memorySample struct {
	self, other rss
	heap        uint64
}

func sampleMemory(pid int) (memorySample, error) {
	var m memorySample
	var err error
	if m.self, err = readRSS(0); err != nil {
		return m, err
	}
	if pid != 0 {
		if m.other, err = readRSS(pid); err != nil {
			return m, err
		}
	}
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	m.heap = s[0].Value.Uint64()
	return m, nil
}

// memorySampler keeps the peak of each figure, sampled every 250 ms.
type memorySampler struct {
	stopc chan struct{}
	done  chan memorySample
}

func startMemorySampler(b *testing.B, pid int) *memorySampler {
	s := &memorySampler{stopc: make(chan struct{}), done: make(chan memorySample, 1)}
	go func() {
		var peak memorySample
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			m, err := sampleMemory(pid)
			if err != nil {
				b.Error(err)
			}
			if m.self.rss > peak.self.rss {
				peak.self = m.self
			}
			if m.other.rss > peak.other.rss {
				peak.other = m.other
			}
			peak.heap = max(peak.heap, m.heap)
			select {
			case <-s.stopc:
				s.done <- peak
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the peaks, the last sample included.
func (s *memorySampler) stop() memorySample {
	close(s.stopc)
	return <-s.done
}

func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

// randomText is n bytes of base64 text that no layer can compress much.
func randomText(b *testing.B, n int) string {
	raw := make([]byte, n*3/4+3)
	if _, err := rand.Read(raw); err != nil {
		b.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(raw)[:n]
}

// envInt is the positive integer in the environment variable name, or def.
func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func mb(n uint64) float64 { return float64(n) / 1e6 }

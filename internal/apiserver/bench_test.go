package apiserver_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/benchtest"
)

const (
	// benchConcurrency is how many requests the throughput benchmarks keep in flight,
	// through the API server and straight to etcd alike.
	benchConcurrency = 16
	// benchListPods is the size of the listed namespace.
	benchListPods = 10000
	// benchWatchers and benchWatchRate are the watch benchmark's load: that many
	// watches of one namespace while pods are created in it at that rate.
	benchWatchers  = 100
	benchWatchRate = 500
	// benchBurst is how many seconds' worth of events one watch operation writes.
	benchBurst = 3
	// benchRawPrefix holds the raw etcd puts, outside the API server's /registry.
	benchRawPrefix = "/kubelab-bench/"
)

// BenchmarkAPIServer measures the API server on its embedded etcd through client-go
// with protobuf, as typed clients talk to it, and, in the same run and on the same
// etcd, the bare clientv3 calls it is built on, so that its overhead reads as a ratio:
//
//   - create / etcd-put: pod creates, and raw puts of a value of the size the server
//     stored for such a pod, 16 in flight each; create-dryrun: the same creates with
//     dryRun=All, the server's request path without the etcd write and its watch event;
//   - get / etcd-get: reads of single pods, and raw gets of the same keys;
//   - list-10k, list-10k-limit500 / etcd-range-10k: a namespace of 10,000 pods listed
//     whole and in pages of 500 (as kubectl does), and a raw range read of its keys;
//   - watch-100, watch-100-shared: 100 watches of a namespace, each on its own
//     connection or all on one, while pods are created in it at 500/s (the goal's
//     load) and at 100/s; the latency runs from a create's return to each watcher
//     receiving the event, each watcher decoding every event as a reflector does;
//   - watch-100-frames, watch-100-shared-frames: the same at 500/s with watchers that
//     only read the stream's frames and find the pod's name in them, so that the
//     figures are the server's delivery without 100 clients' decoding on the same cores.
func BenchmarkAPIServer(b *testing.B) {
	quietLogs(b)
	s := apiservertest.Start(b, apiservertest.Options{})
	ctx := context.Background()
	cfg := benchClientConfig(*s.Config)
	client := kubernetes.NewForConfigOrDie(&cfg)
	etcd := benchEtcdClient(b, s)
	for _, ns := range []string{"bench-create", "bench-list", "bench-watch"} {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}

	// The raw value is the very bytes the server stores for a benchmark pod.
	if _, err := client.CoreV1().Pods("bench-create").Create(ctx, benchPod("sample"), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	got, err := etcd.Get(ctx, "/registry/pods/bench-create/sample")
	if err != nil {
		b.Fatal(err)
	}
	if len(got.Kvs) != 1 {
		b.Fatalf("the created pod is not at /registry/pods/bench-create/sample in etcd (%d keys)", len(got.Kvs))
	}
	stored := string(got.Kvs[0].Value)
	b.Logf("a stored pod is %d bytes", len(stored))

	var createRate, putRate, getRate, etcdGetRate float64
	b.Run("create", func(b *testing.B) {
		run := nextRun()
		inParallel(b, func(i int) error {
			_, err := client.CoreV1().Pods("bench-create").Create(ctx, benchPod(fmt.Sprintf("c%d-%07d", run, i)), metav1.CreateOptions{})
			return err
		})
		createRate = perSecond(b)
		b.ReportMetric(createRate, "creates/s")
	})
	// The request path without the write: a dry run is authenticated, decoded,
	// admitted, defaulted, validated, given managedFields and encoded as a create is, and
	// reads its key from etcd instead of writing it; no watch event follows. Its CPU is
	// what the API server spends on a create besides the etcd transaction and the watch
	// cache.
	b.Run("create-dryrun", func(b *testing.B) {
		run := nextRun()
		inParallel(b, func(i int) error {
			p, err := client.CoreV1().Pods("bench-create").Create(ctx, benchPod(fmt.Sprintf("d%d-%07d", run, i)), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if err == nil && len(p.ManagedFields) == 0 {
				err = fmt.Errorf("dry-run create of %s returned no managedFields", p.Name)
			}
			return err
		})
		b.ReportMetric(perSecond(b), "creates/s")
	})
	b.Run("etcd-put", func(b *testing.B) {
		run := nextRun()
		inParallel(b, func(i int) error {
			_, err := etcd.Put(ctx, fmt.Sprintf("%spods/bench-create/p%d-%07d", benchRawPrefix, run, i), stored)
			return err
		})
		putRate = perSecond(b)
		b.ReportMetric(putRate, "puts/s")
	})

	listed := false
	ensureListed := func(b *testing.B) {
		if listed {
			return
		}
		b.StopTimer()
		defer b.StartTimer()
		start := time.Now()
		var n atomic.Int64
		errs := make(chan error, benchConcurrency)
		var wg sync.WaitGroup
		for range benchConcurrency {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := int(n.Add(1)) - 1; i < benchListPods; i = int(n.Add(1)) - 1 {
					if _, err := client.CoreV1().Pods("bench-list").Create(ctx, benchPod(listPodName(i)), metav1.CreateOptions{}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
		listed = true
		b.Logf("created %d pods in bench-list in %v", benchListPods, time.Since(start).Round(time.Millisecond))
	}
	b.Run("get", func(b *testing.B) {
		ensureListed(b)
		inParallel(b, func(i int) error {
			p, err := client.CoreV1().Pods("bench-list").Get(ctx, listPodName(i%benchListPods), metav1.GetOptions{})
			if err == nil && p.Name != listPodName(i%benchListPods) {
				err = fmt.Errorf("got pod %q for %q", p.Name, listPodName(i%benchListPods))
			}
			return err
		})
		getRate = perSecond(b)
		b.ReportMetric(getRate, "gets/s")
	})
	b.Run("etcd-get", func(b *testing.B) {
		ensureListed(b)
		inParallel(b, func(i int) error {
			r, err := etcd.Get(ctx, "/registry/pods/bench-list/"+listPodName(i%benchListPods))
			if err == nil && len(r.Kvs) != 1 {
				err = fmt.Errorf("etcd has no %s", listPodName(i%benchListPods))
			}
			return err
		})
		etcdGetRate = perSecond(b)
		b.ReportMetric(etcdGetRate, "gets/s")
	})
	b.Run("list-10k", func(b *testing.B) {
		ensureListed(b)
		cpu := processCPU(b)
		for range b.N {
			l, err := client.CoreV1().Pods("bench-list").List(ctx, metav1.ListOptions{})
			if err != nil {
				b.Fatal(err)
			}
			if len(l.Items) != benchListPods {
				b.Fatalf("listed %d pods, want %d", len(l.Items), benchListPods)
			}
		}
		b.StopTimer()
		reportCPU(b, cpu)
		b.ReportMetric(ms(b.Elapsed())/float64(b.N), "ms/list")
	})
	b.Run("list-10k-limit500", func(b *testing.B) {
		ensureListed(b)
		cpu := processCPU(b)
		pages := 0
		for range b.N {
			n, cont := 0, ""
			for {
				l, err := client.CoreV1().Pods("bench-list").List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
				if err != nil {
					b.Fatal(err)
				}
				n, cont = n+len(l.Items), l.Continue
				pages++
				if cont == "" {
					break
				}
			}
			if n != benchListPods {
				b.Fatalf("listed %d pods in pages of 500, want %d", n, benchListPods)
			}
		}
		b.StopTimer()
		reportCPU(b, cpu)
		b.ReportMetric(ms(b.Elapsed())/float64(b.N), "ms/list")
		b.ReportMetric(float64(pages)/float64(b.N), "pages/list")
	})
	b.Run("etcd-range-10k", func(b *testing.B) {
		ensureListed(b)
		cpu := processCPU(b)
		for range b.N {
			r, err := etcd.Get(ctx, "/registry/pods/bench-list/", clientv3.WithPrefix())
			if err != nil {
				b.Fatal(err)
			}
			if len(r.Kvs) != benchListPods {
				b.Fatalf("etcd holds %d pods in bench-list, want %d", len(r.Kvs), benchListPods)
			}
		}
		b.StopTimer()
		reportCPU(b, cpu)
		b.ReportMetric(ms(b.Elapsed())/float64(b.N), "ms/list")
	})
	// Watchers on connections of their own, as 100 kubelets or controllers would be, and
	// all on one HTTP/2 connection, as the informers of one process are; at the goal's
	// 500 events/s and at 100/s.
	ownConnection := ownConnections(cfg)
	sharedConnection := func(*testing.B) kubernetes.Interface { return client }
	cpu := func() time.Duration { return processCPU(b) }
	for _, r := range []int{benchWatchRate, benchWatchRate / 5} {
		b.Run(fmt.Sprintf("watch-100/%d-per-s", r), func(b *testing.B) { benchWatch(b, client, ownConnection, cpu, r, decodeEvents) })
		b.Run(fmt.Sprintf("watch-100-shared/%d-per-s", r), func(b *testing.B) { benchWatch(b, client, sharedConnection, cpu, r, decodeEvents) })
	}
	// The server's delivery alone: watchers that read and frame the stream without
	// decoding the pods, so that the two cores are not also spent on 100 clients' decoding.
	b.Run(fmt.Sprintf("watch-100-frames/%d-per-s", benchWatchRate), func(b *testing.B) {
		benchWatch(b, client, ownConnection, cpu, benchWatchRate, readFrames)
	})
	b.Run(fmt.Sprintf("watch-100-shared-frames/%d-per-s", benchWatchRate), func(b *testing.B) {
		benchWatch(b, client, sharedConnection, cpu, benchWatchRate, readFrames)
	})

	if putRate > 0 && createRate > 0 {
		b.Logf("creates/s ÷ etcd puts/s at %d in flight: %.2f", benchConcurrency, createRate/putRate)
	}
	if etcdGetRate > 0 && getRate > 0 {
		b.Logf("gets/s ÷ etcd gets/s at %d in flight: %.2f", benchConcurrency, getRate/etcdGetRate)
	}
}

// quietLogs silences the server's logs for the benchmark: they would interleave with
// the figures.
func quietLogs(b *testing.B) {
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler))
	b.Cleanup(func() { slog.SetDefault(prev) })
}

// benchClientConfig is c as typed clients talk: protobuf, and no client-side rate
// limit, since the server is what is measured.
func benchClientConfig(c rest.Config) rest.Config {
	c.ContentType = runtime.ContentTypeProtobuf
	c.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	c.QPS, c.Burst = -1, 0
	return c
}

// benchEtcdClient is a bare clientv3 client of s's embedded etcd, closed when b ends.
func benchEtcdClient(b *testing.B, s *apiservertest.Server) *clientv3.Client {
	return s.EtcdClient(b)
}

// benchWatch opens 100 watches of bench-watch, each through a client from
// watcherClient; one operation is a burst of eventsPerSecond×benchBurst pod creates
// there at that rate (up to 16 in flight), and every watcher must see every pod. A
// watch the server ends (the watch cache closes watchers that fall behind) is resumed
// from the last pod's resourceVersion, as client-go's reflector does, and counted.
func benchWatch(b *testing.B, client kubernetes.Interface, watcherClient func(*testing.B) kubernetes.Interface, cpu func() time.Duration, eventsPerSecond int, mode watchMode) {
	ctx := context.Background()
	pods := client.CoreV1().Pods("bench-watch")
	run := nextRun()
	l, err := pods.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		b.Fatal(err)
	}
	type receipt struct {
		name string
		at   time.Time
	}
	receipts := make([][]receipt, benchWatchers)
	seen := make([]atomic.Int64, benchWatchers)
	var rewatches atomic.Int64
	failures := make(chan error, benchWatchers)
	wctx, cancel := context.WithCancel(ctx)
	var watchers sync.WaitGroup
	defer func() { cancel(); watchers.Wait() }()
	// In readFrames mode a watcher finds the pod's name in the frame by the run's prefixes.
	burstPrefix, warmName := []byte(fmt.Sprintf("w%d-", run)), []byte(fmt.Sprintf("warm%d", run))
	for w := range benchWatchers {
		wc := watcherClient(b)
		watched := wc.CoreV1().Pods("bench-watch")
		watchers.Add(1)
		if mode == readFrames {
			go func() {
				defer watchers.Done()
				err := watchFrames(wctx, wc.CoreV1().RESTClient(), "bench-watch", "pods", l.ResourceVersion, func(frame []byte) {
					at := time.Now()
					if i := bytes.Index(frame, burstPrefix); i >= 0 && i+len(burstPrefix)+7 <= len(frame) {
						receipts[w] = append(receipts[w], receipt{string(frame[i : i+len(burstPrefix)+7]), at})
						seen[w].Add(1)
					} else if bytes.Contains(frame, warmName) {
						seen[w].Add(1)
					}
				}, func() { rewatches.Add(1) })
				if err != nil && wctx.Err() == nil {
					failures <- fmt.Errorf("watcher %d: %w", w, err)
				}
			}()
			continue
		}
		go func() {
			defer watchers.Done()
			rv := l.ResourceVersion
			for {
				wi, err := watched.Watch(wctx, metav1.ListOptions{ResourceVersion: rv})
				if err != nil {
					if wctx.Err() == nil {
						failures <- fmt.Errorf("watcher %d: %w", w, err)
					}
					return
				}
				for ev := range wi.ResultChan() {
					at := time.Now()
					switch ev.Type {
					case watch.Added:
						p := ev.Object.(*corev1.Pod)
						receipts[w] = append(receipts[w], receipt{p.Name, at})
						rv = p.ResourceVersion
						seen[w].Add(1)
					case watch.Error:
						wi.Stop()
						failures <- fmt.Errorf("watcher %d: %v", w, ev.Object)
						return
					}
				}
				wi.Stop()
				if wctx.Err() != nil {
					return
				}
				rewatches.Add(1)
			}
		}()
	}
	waitSeen := func(want int64) {
		deadline := time.Now().Add(time.Minute)
		for w := range benchWatchers {
			for seen[w].Load() < want {
				select {
				case err := <-failures:
					b.Fatal(err)
				default:
				}
				if time.Now().After(deadline) {
					b.Fatalf("watcher %d saw %d of %d pods within a minute", w, seen[w].Load(), want)
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	// Every watcher has its stream once it has seen a first pod.
	if _, err := pods.Create(ctx, benchPod(fmt.Sprintf("warm%d", run)), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	waitSeen(1)

	burst := eventsPerSecond * benchBurst
	events := b.N * burst
	name := func(i int) string { return fmt.Sprintf("w%d-%07d", run, i) }
	index := make(map[string]int, events)
	for i := range events {
		index[name(i)] = i
	}
	issued := make([]time.Time, events)
	returned := make([]time.Time, events)
	limiter := rate.NewLimiter(rate.Limit(eventsPerSecond), 1)
	inFlight := make(chan struct{}, benchConcurrency)
	errs := make(chan error, events)
	var writing time.Duration
	b.ResetTimer()
	since := cpu()
	for n := range b.N {
		start := time.Now()
		for i := n * burst; i < (n+1)*burst; i++ {
			if err := limiter.Wait(ctx); err != nil {
				b.Fatal(err)
			}
			inFlight <- struct{}{}
			go func() {
				defer func() { <-inFlight }()
				issued[i] = time.Now()
				_, err := pods.Create(ctx, benchPod(name(i)), metav1.CreateOptions{})
				returned[i] = time.Now()
				if err != nil {
					errs <- err
				}
			}()
		}
		for range benchConcurrency {
			inFlight <- struct{}{}
		}
		writing += time.Since(start)
		for range benchConcurrency {
			<-inFlight
		}
		select {
		case err := <-errs:
			b.Fatal(err)
		default:
		}
		waitSeen(int64((n+1)*burst) + 1)
	}
	b.StopTimer()
	b.ReportMetric(float64(cpu()-since)/float64(time.Microsecond)/float64(events), "cpu-us/event")
	cancel()
	watchers.Wait()

	// lat runs from a create's return (0 when the event overtook the response), sinceIssue
	// from the moment the create was sent.
	var lat, sinceIssue, createLat []time.Duration
	early := 0
	for w := range benchWatchers {
		for _, r := range receipts[w] {
			i, ok := index[r.name]
			if !ok {
				continue
			}
			d := r.at.Sub(returned[i])
			if d < 0 {
				early++
				d = 0
			}
			lat = append(lat, d)
			sinceIssue = append(sinceIssue, r.at.Sub(issued[i]))
		}
	}
	if len(lat) != benchWatchers*events {
		b.Fatalf("%d watch receipts of the benchmark's pods, want %d", len(lat), benchWatchers*events)
	}
	for i := range events {
		createLat = append(createLat, returned[i].Sub(issued[i]))
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(events)/writing.Seconds(), "events/s")
	b.ReportMetric(ms(benchtest.Percentile(lat, 50)), "p50-ms")
	b.ReportMetric(ms(benchtest.Percentile(lat, 99)), "p99-ms")
	b.ReportMetric(ms(benchtest.Percentile(lat, 100)), "max-ms")
	b.ReportMetric(ms(benchtest.Percentile(sinceIssue, 99)), "issue-p99-ms")
	b.ReportMetric(ms(benchtest.Percentile(createLat, 99)), "create-p99-ms")
	b.ReportMetric(100*float64(early)/float64(len(lat)), "early-%")
	b.ReportMetric(float64(rewatches.Load())/float64(b.N), "rewatches/op")
}

// ownConnections makes clients of cfg that each have a connection of their own, as
// 100 kubelets or controllers would.
func ownConnections(cfg rest.Config) func(*testing.B) kubernetes.Interface {
	return func(b *testing.B) kubernetes.Interface {
		own := cfg
		own.Dial = (&net.Dialer{}).DialContext // client-go shares no transport that has its own Dial
		hc, err := rest.HTTPClientFor(&own)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(hc.CloseIdleConnections)
		c, err := kubernetes.NewForConfigAndClient(&own, hc)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
}

// watchMode is what a benchmark watcher does with the events it receives.
type watchMode int

const (
	// decodeEvents decodes every event into a Pod through client-go, as a reflector does.
	decodeEvents watchMode = iota
	// readFrames only reads the protobuf stream's length-delimited frames.
	readFrames
)

// watchFrames watches resource in namespace from rv over protobuf and calls frame with
// each frame of the stream, undecoded. When the server ends the stream it resumes from
// the last event's resourceVersion (the one frame it decodes) and calls rewatch.
func watchFrames(ctx context.Context, rc rest.Interface, namespace, resource, rv string, frame func([]byte), rewatch func()) error {
	var buf, last []byte
	for {
		body, err := rc.Get().Namespace(namespace).Resource(resource).
			Param("watch", "true").Param("resourceVersion", rv).
			SetHeader("Accept", runtime.ContentTypeProtobuf).Stream(ctx)
		if err != nil {
			return err
		}
		var size [4]byte
		for {
			if _, err = io.ReadFull(body, size[:]); err != nil {
				break
			}
			n := int(binary.BigEndian.Uint32(size[:]))
			if cap(buf) < n {
				buf = make([]byte, n)
			}
			buf = buf[:n]
			if _, err = io.ReadFull(body, buf); err != nil {
				break
			}
			frame(buf)
			buf, last = last, buf
		}
		body.Close()
		if ctx.Err() != nil {
			return nil
		}
		if len(last) == 0 {
			return fmt.Errorf("watch stream ended before its first event: %w", err)
		}
		if rv, err = frameResourceVersion(last); err != nil {
			return err
		}
		rewatch()
	}
}

// frameResourceVersion decodes one protobuf watch frame (a bare WatchEvent whose object
// is in the protobuf envelope) and returns the object's resourceVersion.
func frameResourceVersion(frame []byte) (string, error) {
	var ev metav1.WatchEvent
	if err := ev.Unmarshal(frame); err != nil {
		return "", fmt.Errorf("decode watch frame: %w", err)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(ev.Object.Raw, nil, nil)
	if err != nil {
		return "", fmt.Errorf("decode %s event's object: %w", ev.Type, err)
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return "", fmt.Errorf("%s event holds a %T, which has no metadata", ev.Type, obj)
	}
	return m.GetResourceVersion(), nil
}

// inParallel runs fn for i in [0, b.N) on benchConcurrency goroutines and fails b on
// the first error; it reports this process's CPU time per operation.
func inParallel(b *testing.B, fn func(i int) error) {
	b.Helper()
	inParallelCPU(b, func() time.Duration { return processCPU(b) }, fn)
}

// inParallelCPU is inParallel reporting the CPU time cpu counts per operation.
func inParallelCPU(b *testing.B, cpu func() time.Duration, fn func(i int) error) {
	b.Helper()
	var next atomic.Int64
	errs := make(chan error, benchConcurrency)
	var wg sync.WaitGroup
	b.ResetTimer()
	since := cpu()
	for range benchConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < b.N; i = int(next.Add(1)) - 1 {
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(cpu()-since)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// processCPU is the CPU time (user and system) this process has used so far: the API
// server, etcd and the clients all run in it.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process's CPU time per operation from since on; unlike the
// rates, it hardly depends on how much of the shared machine the benchmark got.
func reportCPU(b *testing.B, since time.Duration) {
	b.ReportMetric(float64(processCPU(b)-since)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
}

var benchRuns atomic.Int64

// nextRun numbers the calls of a benchmark function so their names never collide.
func nextRun() int64 { return benchRuns.Add(1) }

func perSecond(b *testing.B) float64 { return float64(b.N) / b.Elapsed().Seconds() }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// listPodName names the i-th pod of the listed namespace.
func listPodName(i int) string { return fmt.Sprintf("l-%05d", i) }

// benchPod is a plain one-container pod, as a Deployment would stamp out.
func benchPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench", "tier": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name:  "web",
			Image: "registry.k8s.io/pause:3.10",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("100m"),
				corev1.ResourceMemory: resource.MustParse("64Mi"),
			}},
		}}},
	}
}

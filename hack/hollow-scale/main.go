// Command hollow-scale runs `kubelab up --hollow --nodes N` in a fresh data dir, waits for
// every node Ready, creates PODS plain pods at RATE pods/s over namespaces of its own
// (the scheduler places them, the hollow kubelets run them), waits for every pod Running
// and prints what ClusterLoader2 measures of such a run:
//
//   - API call latency as APIResponsivenessPrometheus reads it: the 99th percentile of
//     the API server's apiserver_request_sli_duration_seconds histogram per resource,
//     subresource, verb and scope, WATCH, WATCHLIST, CONNECT and PROXY excluded, over the
//     pod phase (the difference of two scrapes) and over the whole run; the goals are
//     1 s for mutating calls and reads of one object, 5 s for lists in a namespace and
//     30 s for lists across the cluster;
//   - pod startup latency as PodStartupLatency reads it: from the pod's
//     creationTimestamp (whole seconds, as CL2 has it) to the moment this program's watch
//     saw it Running, p50/p90/p99, goal 5 s; and the same from the moment the create
//     was sent, which has no rounding;
//   - the time to every node Ready and to every pod Running;
//   - the kubelab process's peak RSS (VmHWM, and the largest VmRSS sampled each second),
//     against 3 MB a node and 10 KB a pod.
//
// It saves the API server's heap profile (nodes Ready, pods Running), a CPU profile of
// 30 s during the pod phase, the goroutine profile and the last /metrics into -out.
// hack/hollow-scale.sh builds kubelab and runs it.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
)

const podLabel = "kubelab.dev/hollow-scale"

type options struct {
	kubelab, out, dataDir string
	nodes, pods           int
	rate                  float64
	perNamespace          int
	upArgs                []string
	timeout               time.Duration
}

func main() {
	var o options
	var upArgs string
	flag.StringVar(&o.kubelab, "kubelab", "bin/kubelab", "the kubelab binary")
	flag.StringVar(&o.out, "out", "", "directory for profiles and metrics (default: the data dir)")
	flag.StringVar(&o.dataDir, "data-dir", "", "kubelab's data dir, which must not exist or be empty (default: a fresh mktemp dir)")
	flag.IntVar(&o.nodes, "nodes", 5000, "hollow nodes")
	flag.IntVar(&o.pods, "pods", 50000, "pods")
	flag.Float64Var(&o.rate, "rate", 100, "pods created a second")
	flag.IntVar(&o.perNamespace, "pods-per-namespace", 1000, "pods in each of the run's namespaces")
	flag.StringVar(&upArgs, "up-args", "", "more arguments of kubelab up, space-separated")
	flag.DurationVar(&o.timeout, "timeout", 90*time.Minute, "the whole run's limit")
	flag.Parse()
	o.upArgs = strings.Fields(upArgs)
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "hollow-scale:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	// An interrupt ends the run with kubelab up stopped.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if o.dataDir == "" {
		d, err := os.MkdirTemp("", "kubelab-hollow-scale-")
		if err != nil {
			return err
		}
		o.dataDir = d
		if o.out != "" {
			// The run's own data dir goes once kubelab up has stopped (deferred
			// before the stop, so run after it); the figures are in out.
			defer os.RemoveAll(d)
		}
	}
	if o.out == "" {
		o.out = o.dataDir
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	say := func(format string, a ...any) {
		fmt.Printf("%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, a...)...)
	}
	say("data dir %s, out %s", o.dataDir, o.out)

	args := append([]string{"up", "--hollow", "--nodes", strconv.Itoa(o.nodes), "--data-dir", o.dataDir,
		"--secure-port", "0", "--etcd-client-port", strconv.Itoa(freeishPort()), "--log-level", "error"}, o.upArgs...)
	upLog, err := os.Create(filepath.Join(o.out, "up.log"))
	if err != nil {
		return err
	}
	defer upLog.Close()
	cmd := exec.Command(o.kubelab, args...)
	cmd.Stdout, cmd.Stderr = upLog, upLog
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	say("kubelab %s (pid %d)", strings.Join(args, " "), cmd.Process.Pid)
	// Once kubelab up exits, ctx ends too, so that nothing waits on its API server.
	exited := &upExit{done: make(chan struct{})}
	ctx, cancelUp := context.WithCancel(ctx)
	defer cancelUp()
	go func() {
		exited.err = cmd.Wait()
		close(exited.done)
		cancelUp()
	}()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited.done:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			<-exited.done
		}
	}()
	rss := &rssSampler{pid: cmd.Process.Pid}
	go rss.run(ctx)

	kubeconfig := filepath.Join(o.dataDir, "kubeconfig")
	client, err := waitClient(ctx, kubeconfig, o.rate, exited)
	if err != nil {
		return err
	}
	r := &report{nodes: o.nodes, pods: o.pods, rate: o.rate}

	// Nodes.
	if err := waitNodesReady(ctx, client, o.nodes, exited); err != nil {
		return err
	}
	r.nodesReady = time.Since(start)
	r.rssNodes = rss.now()
	say("%d nodes Ready after %s, RSS %s", o.nodes, r.nodesReady.Round(100*time.Millisecond), mb(r.rssNodes))
	if err := saveRaw(ctx, client, "/debug/pprof/heap", filepath.Join(o.out, "heap-nodes.pb.gz")); err != nil {
		say("heap profile: %v", err)
	}
	before, err := scrape(ctx, client)
	if err != nil {
		return err
	}

	// Pods.
	watch, err := watchPods(ctx, client, o.pods)
	if err != nil {
		return err
	}
	podStart := time.Now()
	cpuDone := make(chan struct{})
	go func() {
		defer close(cpuDone)
		d := min(30*time.Second, time.Duration(float64(o.pods)/o.rate*float64(time.Second))/2)
		if d < 5*time.Second {
			return
		}
		select {
		case <-time.After(d / 2):
		case <-ctx.Done():
			return
		}
		if err := saveRaw(ctx, client, fmt.Sprintf("/debug/pprof/profile?seconds=%d", int(d.Seconds())), filepath.Join(o.out, "cpu-pods.pb.gz")); err != nil {
			say("cpu profile: %v", err)
		}
	}()
	if err := createPods(ctx, client, o, watch, say); err != nil {
		return err
	}
	r.created = time.Since(podStart)
	say("%d pods created in %s (%.1f/s)", o.pods, r.created.Round(100*time.Millisecond), float64(o.pods)/r.created.Seconds())
	if err := watch.wait(ctx, exited, say); err != nil {
		return err
	}
	r.podsRunning = time.Since(podStart)
	r.rssPods = rss.now()
	say("%d pods Running %s after the first create, RSS %s", o.pods, r.podsRunning.Round(100*time.Millisecond), mb(r.rssPods))
	<-cpuDone
	after, err := scrape(ctx, client)
	if err != nil {
		return err
	}
	r.apiPods = apiLatencies(after.minus(before))
	r.apiRun = apiLatencies(after)
	r.startupCL2, r.startupSent = watch.latencies()
	r.peakHWM, r.peakRSS = rss.peak()
	r.goroutines = after.gauge("go_goroutines")
	for name, path := range map[string]string{"heap-pods.pb.gz": "/debug/pprof/heap", "goroutine.pb.gz": "/debug/pprof/goroutine"} {
		if err := saveRaw(ctx, client, path, filepath.Join(o.out, name)); err != nil {
			say("%s: %v", name, err)
		}
	}
	if err := os.WriteFile(filepath.Join(o.out, "metrics.txt"), after.raw, 0o644); err != nil {
		return err
	}
	text := r.String()
	fmt.Print(text)
	return os.WriteFile(filepath.Join(o.out, "report.txt"), []byte(text), 0o644)
}

// upExit is closed when kubelab up has exited, with how.
type upExit struct {
	done chan struct{}
	err  error // set before done is closed
}

// ended is the error saying kubelab up exited, nil while it runs.
func (u *upExit) ended() error {
	select {
	case <-u.done:
		return fmt.Errorf("kubelab up exited: %v", u.err)
	default:
		return nil
	}
}

// freeishPort is a port for the embedded etcd's client (and the next for its peer) that
// nothing listens on now.
func freeishPort() int {
	for {
		p := 20000 + int(time.Now().UnixNano()%20000)
		if portFree(p) && portFree(p+1) {
			return p
		}
	}
}

func mb(kb int64) string { return fmt.Sprintf("%.0f MB", float64(kb)/1000) }

func waitClient(ctx context.Context, kubeconfig string, rate float64, exited *upExit) (kubernetes.Interface, error) {
	for {
		if _, err := os.Stat(kubeconfig); err == nil {
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err == nil {
				cfg.ContentType = "application/vnd.kubernetes.protobuf"
				cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(float32(max(rate*4, 200)), int(max(rate*4, 200)))
				cfg.Timeout = 2 * time.Minute
				c, err := kubernetes.NewForConfig(cfg)
				if err == nil {
					if _, err := c.Discovery().ServerVersion(); err == nil {
						return c, nil
					}
				}
			}
		}
		if err := exited.ended(); err != nil {
			return nil, fmt.Errorf("before its API server answered, %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(ctx.Err(), exited.ended())
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func waitNodesReady(ctx context.Context, client kubernetes.Interface, n int, exited *upExit) error {
	ctx, cancel := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactory(client, 0)
	defer f.Shutdown()
	defer cancel()
	inf := f.Core().V1().Nodes()
	lister := inf.Lister()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	for {
		nodes, _ := lister.List(everything())
		ready := 0
		for _, node := range nodes {
			if nodeReady(node) {
				ready++
			}
		}
		if ready >= n {
			return nil
		}
		if err := exited.ended(); err != nil {
			return fmt.Errorf("with %d of %d nodes Ready, %w", ready, n, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d nodes Ready: %w", ready, n, errors.Join(ctx.Err(), exited.ended()))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podWatch records when each of the run's pods was first seen Running.
type podWatch struct {
	mu      sync.Mutex
	sent    map[string]time.Time // namespace/name → when its create was sent
	created map[string]time.Time // → creationTimestamp
	running map[string]time.Time // → first seen Running
	want    int
	count   atomic.Int64
}

func watchPods(ctx context.Context, client kubernetes.Interface, want int) (*podWatch, error) {
	w := &podWatch{sent: map[string]time.Time{}, created: map[string]time.Time{}, running: map[string]time.Time{}, want: want}
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = podLabel
	}))
	seen := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Status.Phase != corev1.PodRunning {
			return
		}
		now := time.Now()
		key := p.Namespace + "/" + p.Name
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, ok := w.running[key]; !ok {
			w.running[key] = now
			w.created[key] = p.CreationTimestamp.Time
			w.count.Add(1)
		}
	}
	if _, err := f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) }}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	go func() { <-ctx.Done(); f.Shutdown() }()
	return w, nil
}

func (w *podWatch) wait(ctx context.Context, exited *upExit, say func(string, ...any)) error {
	last := time.Now()
	for w.count.Load() < int64(w.want) {
		if err := exited.ended(); err != nil {
			return fmt.Errorf("with %d of %d pods Running, %w", w.count.Load(), w.want, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d pods Running: %w", w.count.Load(), w.want, errors.Join(ctx.Err(), exited.ended()))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Since(last) > 30*time.Second {
			say("%d of %d pods Running", w.count.Load(), w.want)
			last = time.Now()
		}
	}
	return nil
}

// latencies are the pods' startup latencies: from creationTimestamp (CL2's) and from the
// create's sending.
func (w *podWatch) latencies() (cl2, sent []time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, at := range w.running {
		cl2 = append(cl2, at.Sub(w.created[key]))
		if s, ok := w.sent[key]; ok {
			sent = append(sent, at.Sub(s))
		}
	}
	return cl2, sent
}

// createPods creates o.pods pods at o.rate a second, o.perNamespace to a namespace.
func createPods(ctx context.Context, client kubernetes.Interface, o options, w *podWatch, say func(string, ...any)) error {
	namespaces := (o.pods + o.perNamespace - 1) / o.perNamespace
	for i := range namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("hollow-scale-%d", i)}}
		if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("namespace %s: %w", ns.Name, err)
		}
	}
	// The default ServiceAccount is made by the controller-manager; pods wait for it.
	for i := range namespaces {
		ns := fmt.Sprintf("hollow-scale-%d", i)
		for {
			if _, err := client.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{}); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	limiter := flowcontrol.NewTokenBucketRateLimiter(float32(o.rate), 1)
	var next atomic.Int64
	var failed atomic.Pointer[error]
	var wg sync.WaitGroup
	workers := max(8, int(o.rate/2))
	last := time.Now()
	var lastMu sync.Mutex
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= o.pods || failed.Load() != nil {
					return
				}
				if err := limiter.Wait(ctx); err != nil {
					failed.Store(&err)
					return
				}
				p := scalePod(fmt.Sprintf("hollow-scale-%d", i/o.perNamespace), fmt.Sprintf("pod-%06d", i))
				w.mu.Lock()
				w.sent[p.Namespace+"/"+p.Name] = time.Now()
				w.mu.Unlock()
				if _, err := client.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
					err = fmt.Errorf("create %s/%s: %w", p.Namespace, p.Name, err)
					failed.Store(&err)
					return
				}
				lastMu.Lock()
				if time.Since(last) > 30*time.Second {
					say("%d pods created, %d Running", i+1, w.count.Load())
					last = time.Now()
				}
				lastMu.Unlock()
			}
		})
	}
	wg.Wait()
	if err := failed.Load(); err != nil {
		return *err
	}
	return nil
}

// scalePod is one of the run's pods: one container that asks for little, as CL2's
// density test's pods do.
func scalePod(ns, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{podLabel: "true", "app": ns}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("1m"), corev1.ResourceMemory: resource.MustParse("1Mi")}}}}},
	}
}

// saveRaw saves what the API server serves at path into file.
func saveRaw(ctx context.Context, client kubernetes.Interface, path, file string) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	body, err := client.CoreV1().RESTClient().Get().AbsPath(strings.SplitN(path, "?", 2)[0]).
		Timeout(3*time.Minute).Param("seconds", queryValue(path, "seconds")).Stream(ctx)
	if err != nil {
		return err
	}
	defer body.Close()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, body)
	return err
}

func queryValue(path, key string) string {
	_, q, _ := strings.Cut(path, "?")
	for _, kv := range strings.Split(q, "&") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == key {
			return v
		}
	}
	return ""
}

// rssSampler reads the process's VmHWM and VmRSS each second.
type rssSampler struct {
	pid     int
	mu      sync.Mutex
	hwm     int64
	maxRSS  int64
	current int64
}

func (s *rssSampler) run(ctx context.Context) {
	for {
		if hwm, rss, err := readStatus(s.pid); err == nil {
			s.mu.Lock()
			s.hwm, s.current = hwm, rss
			s.maxRSS = max(s.maxRSS, rss)
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (s *rssSampler) now() int64 {
	if _, rss, err := readStatus(s.pid); err == nil {
		return rss
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.current
}

func (s *rssSampler) peak() (hwm, rss int64) {
	if h, _, err := readStatus(s.pid); err == nil {
		s.mu.Lock()
		s.hwm = max(s.hwm, h)
		s.mu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hwm, s.maxRSS
}

// readStatus reads VmHWM and VmRSS (kB) from /proc/<pid>/status.
func readStatus(pid int) (hwm, rss int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	return parseStatus(f)
}

func parseStatus(r io.Reader) (hwm, rss int64, err error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmHWM" && k != "VmRSS") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", k, err)
		}
		if k == "VmHWM" {
			hwm = n
		} else {
			rss = n
		}
	}
	if hwm == 0 || rss == 0 {
		return 0, 0, fmt.Errorf("no VmHWM or VmRSS")
	}
	return hwm, rss, sc.Err()
}

package scheduler

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

// kubeSchedulerEnv names the upstream kube-scheduler binary BenchmarkAgainstKubeScheduler
// runs beside kubelab's scheduler; `OUT=/tmp/kubelab-upstream hack/upstream.sh
// kube-scheduler` builds one.
const kubeSchedulerEnv = "KUBELAB_KUBE_SCHEDULER"

// Both schedulers' clients get these limits in the comparison, with protobuf.
// kube-scheduler's own defaults (clientConnection qps 50, burst 100) would cap both at
// 50 binds a second, well under what either decides; at 5000 neither is throttled.
const (
	compareQPS   = 5000
	compareBurst = 5000
)

// schedulerRun starts one scheduler's process against api and returns how to stop it
// (which returns the process's CPU time) and a channel that says when it ended by itself.
type schedulerRun func(b *testing.B, api *apiservertest.Server) (stop func() time.Duration, died <-chan error)

// placement is where and how fast one scheduler put a run's pods.
type placement struct {
	elapsed   time.Duration // from the scheduler's start (informers included) to the last bind
	steady    time.Duration // from the first bind to the last
	cpu       time.Duration // user+system CPU of this process and the scheduler's over elapsed
	schedCPU  time.Duration // the scheduler process's own
	zoneCount map[string]int
	zoneSkew  int // max − min pods over the zones
	nodeSkew  int // max − min pods over all nodes, empty ones included
	wrongZone int // PVC pods on a node outside their volume's zone
}

// BenchmarkAgainstKubeScheduler schedules, in the same run, the same pending pods onto
// the same Nodes with kubelab's scheduler and with the upstream kube-scheduler the
// KUBELAB_KUBE_SCHEDULER variable names, each against a fresh kubelab API server of its
// own (in this process) set up identically by setupBench: Nodes only, 3 zones; plain pods,
// or pods with a bound ebs.csi.aws.com claim whose PV is pinned to one zone. Each scheduler
// runs in a process of its own with its defaults: kubelab's as TestSchedulerProcess of this
// binary, kube-scheduler with a KubeSchedulerConfiguration (leader election off, no
// serving, its default profile). Both clients use protobuf, QPS compareQPS and burst
// compareBurst. Reported: pods/s of each (all pods over the time from the process's start,
// informers' sync included, to the last bind), the steady rate (first to last bind), the
// kubelab/kube-scheduler ratios, the CPU seconds of this process (API server, etcd, the
// watch counting binds) and the scheduler's together and of the scheduler's process
// alone, and the skew of each placement over zones and over nodes.
//
//	KUBELAB_KUBE_SCHEDULER=/tmp/kubelab-upstream/kube-scheduler go test ./internal/scheduler \
//	  -run '^$' -bench AgainstKubeScheduler -benchtime 1x -timeout 90m
//
// KUBELAB_BENCH_NODES picks one node count (default: 1,000 and 5,000), KUBELAB_BENCH_PODS
// the plain pods (10,000), KUBELAB_BENCH_PVC_PODS the pods with claims (2,000: kube-scheduler
// places them at a tenth of the rate of plain ones), KUBELAB_BENCH_CASES "plain", "pvc" or
// both (default).
func BenchmarkAgainstKubeScheduler(b *testing.B) {
	bin := os.Getenv(kubeSchedulerEnv)
	if bin == "" {
		b.Skipf("set %s to a kube-scheduler binary (OUT=/tmp/kubelab-upstream hack/upstream.sh kube-scheduler builds one) to compare with it", kubeSchedulerEnv)
	}
	nodeCounts := []int{1000, 5000}
	if n := envInt("KUBELAB_BENCH_NODES", 0); n > 0 {
		nodeCounts = []int{n}
	}
	plainPods, pvcPods := envInt("KUBELAB_BENCH_PODS", 10000), envInt("KUBELAB_BENCH_PVC_PODS", 2000)
	cases := []string{"plain", "pvc"}
	if c := os.Getenv("KUBELAB_BENCH_CASES"); c != "" {
		cases = strings.Split(c, ",")
	}
	for _, nodes := range nodeCounts {
		for _, name := range cases {
			withPVC, pods := name == "pvc", plainPods
			if withPVC {
				pods = pvcPods
			}
			b.Run(fmt.Sprintf("nodes=%d/%s", nodes, name), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					b.Logf("load average before: %s", loadAverage())
					kl := runPlacement(b, nodes, pods, withPVC, runKubelab)
					b.Logf("load average between: %s", loadAverage())
					up := runPlacement(b, nodes, pods, withPVC, runKubeScheduler(bin))
					b.Logf("load average after: %s", loadAverage())
					rate := func(p placement) float64 { return float64(pods) / p.elapsed.Seconds() }
					steady := func(p placement) float64 { return float64(pods-1) / p.steady.Seconds() }
					b.ReportMetric(rate(kl), "kubelab-pods/s")
					b.ReportMetric(rate(up), "kube-scheduler-pods/s")
					b.ReportMetric(rate(kl)/rate(up), "ratio")
					b.ReportMetric(steady(kl), "kubelab-steady-pods/s")
					b.ReportMetric(steady(up), "kube-scheduler-steady-pods/s")
					b.ReportMetric(steady(kl)/steady(up), "steady-ratio")
					b.ReportMetric(kl.cpu.Seconds(), "kubelab-cpu-s")
					b.ReportMetric(up.cpu.Seconds(), "kube-scheduler-cpu-s")
					b.ReportMetric(kl.schedCPU.Seconds(), "kubelab-process-cpu-s")
					b.ReportMetric(up.schedCPU.Seconds(), "kube-scheduler-process-cpu-s")
					b.ReportMetric(float64(kl.zoneSkew), "kubelab-zone-skew")
					b.ReportMetric(float64(up.zoneSkew), "kube-scheduler-zone-skew")
					b.ReportMetric(float64(kl.nodeSkew), "kubelab-node-skew")
					b.ReportMetric(float64(up.nodeSkew), "kube-scheduler-node-skew")
					b.Logf("pods per zone: kubelab %v, kube-scheduler %v", kl.zoneCount, up.zoneCount)
					if kl.wrongZone+up.wrongZone > 0 {
						b.Errorf("pods outside their volume's zone: kubelab %d, kube-scheduler %d", kl.wrongZone, up.wrongZone)
					}
				}
			})
		}
	}
}

// runPlacement sets up a fresh API server with the workload (untimed), starts the
// scheduler and waits for every pod to be bound.
func runPlacement(b *testing.B, nodes, pods int, withPVC bool, run schedulerRun) placement {
	b.StopTimer()
	api := apiservertest.Start(b, apiservertest.Options{})
	defer api.Stop()
	c := benchClient(b, api.Config)
	setupBench(b, c, nodes, pods, withPVC)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := watchBinds(b, c, ctx)
	cpu0 := cpuTime(syscall.RUSAGE_SELF)
	start := time.Now()
	b.StartTimer()
	stop, died := run(b, api)
	w.wait(b, pods, died)
	b.StopTimer()
	elapsed := time.Since(start)
	cpu := cpuTime(syscall.RUSAGE_SELF) - cpu0
	schedCPU := stop()
	w.mu.Lock()
	defer w.mu.Unlock()
	p := placement{elapsed: elapsed, steady: w.last.Sub(w.first), cpu: cpu + schedCPU, schedCPU: schedCPU}
	p.zoneCount, p.zoneSkew, p.nodeSkew, p.wrongZone = spread(w.nodeOf, nodes, pods, withPVC)
	return p
}

// spread counts the pods per zone and per node of setupBench's workload (node-%04d i is
// in benchZones[i%3], as is the volume of pod-%05d i) and returns the counts per zone,
// the max−min skews over zones and over nodes, and the PVC pods outside their volume's
// zone.
func spread(nodeOf map[string]string, nodes, pods int, withPVC bool) (zones map[string]int, zoneSkew, nodeSkew, wrongZone int) {
	perNode := make([]int, nodes)
	zones = map[string]int{}
	for _, z := range benchZones {
		zones[z] = 0
	}
	for i := 0; i < pods; i++ {
		node, ok := nodeOf[fmt.Sprintf("pod-%05d", i)]
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimPrefix(node, "node-"))
		if err != nil || n < 0 || n >= nodes {
			continue
		}
		perNode[n]++
		zone := benchZones[n%len(benchZones)]
		zones[zone]++
		if withPVC && zone != benchZones[i%len(benchZones)] {
			wrongZone++
		}
	}
	skew := func(counts []int) int {
		lo, hi := counts[0], counts[0]
		for _, c := range counts {
			lo, hi = min(lo, c), max(hi, c)
		}
		return hi - lo
	}
	perZone := make([]int, 0, len(zones))
	for _, z := range benchZones {
		perZone = append(perZone, zones[z])
	}
	return zones, skew(perZone), skew(perNode), wrongZone
}

// compareClient is a scheduler's client in the comparison: protobuf, compareQPS.
func compareClient(cfg *rest.Config) kubernetes.Interface {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = compareQPS, compareBurst
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.UserAgent = "kube-scheduler"
	return kubernetes.NewForConfigOrDie(cfg)
}

// schedulerProcessEnv hands TestSchedulerProcess the kubeconfig of the API server to
// schedule against.
const schedulerProcessEnv = "KUBELAB_SCHEDULER_PROCESS_KUBECONFIG"

// TestSchedulerProcess is kubelab's scheduler in a process of its own, with its defaults
// and compareClient, for BenchmarkAgainstKubeScheduler; it runs until SIGTERM.
func TestSchedulerProcess(t *testing.T) {
	kubeconfig := os.Getenv(schedulerProcessEnv)
	if kubeconfig == "" {
		t.Skip("run by BenchmarkAgainstKubeScheduler")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer cancel()
	c := compareClient(cfg)
	factory := informers.NewSharedInformerFactory(c, 0)
	s, err := New(Config{}, c, factory)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// runKubelab runs kubelab's scheduler in a process of its own (TestSchedulerProcess of
// this test binary), as kube-scheduler runs; KUBELAB_BENCH_CPUPROFILE names a CPU profile
// for it to write.
func runKubelab(b *testing.B, api *apiservertest.Server) (func() time.Duration, <-chan error) {
	args := []string{"-test.run=^TestSchedulerProcess$"}
	if p := os.Getenv("KUBELAB_BENCH_CPUPROFILE"); p != "" {
		args = append(args, "-test.cpuprofile="+p)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), schedulerProcessEnv+"="+api.Kubeconfig)
	return runProcess(b, "kubelab's scheduler", cmd)
}

// kubeSchedulerConfig is the KubeSchedulerConfiguration the comparison gives kube-scheduler.
func kubeSchedulerConfig(kubeconfig string) string {
	return fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %q
  contentType: application/vnd.kubernetes.protobuf
  qps: %d
  burst: %d
leaderElection:
  leaderElect: false
`, kubeconfig, compareQPS, compareBurst)
}

// runKubeScheduler runs the kube-scheduler binary bin against api.
func runKubeScheduler(bin string) schedulerRun {
	return func(b *testing.B, api *apiservertest.Server) (func() time.Duration, <-chan error) {
		config := filepath.Join(b.TempDir(), "config.yaml")
		if err := os.WriteFile(config, []byte(kubeSchedulerConfig(api.Kubeconfig)), 0o600); err != nil {
			b.Fatal(err)
		}
		return runProcess(b, "kube-scheduler", exec.Command(bin, "--config", config, "--secure-port=0"))
	}
}

// runProcess starts a scheduler's process, its output kept to show when it ends early;
// stopping it sends SIGTERM (SIGKILL 30 seconds later) and returns its CPU time.
func runProcess(b *testing.B, name string, cmd *exec.Cmd) (func() time.Duration, <-chan error) {
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	died := make(chan error, 1)
	stopping := make(chan struct{})
	go func() {
		select {
		case err := <-exited:
			died <- fmt.Errorf("%s exited (%v): %s", name, err, tail(log.String(), 2000))
		case <-stopping:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited: // kube-scheduler exits 1 on SIGTERM
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		}
		close(died)
	}()
	return func() time.Duration {
		close(stopping)
		<-died
		return cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}, died
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// cpuTime is the user+system CPU of who (syscall.RUSAGE_SELF or RUSAGE_CHILDREN).
func cpuTime(who int) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

package proxy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// BenchmarkAgainstKubeProxy runs kubelab's proxy (TestBenchProxyProcess) and upstream
// kube-proxy in nftables mode (the binary named by KUBELAB_KUBE_PROXY, built by
// `hack/upstream.sh kube-proxy`) one after the other against one kubelab API server, each
// as a process of its own in a network namespace of the benchmark's own, on the same
// Services (1,000 and 10,000 of 10 endpoints each, or the
// sizes in KUBELAB_PROXY_BENCH_SIZES) in namespaces of the benchmark's own. For each it
// reports:
//   - full-ms: the first full sync into an empty table, as each proxy measures its syncs
//     (kube-proxy's kubeproxy_sync_full_proxy_rules_duration_seconds; kubelab's the same
//     span, from reading the informers' caches to nft's end), median of the restarts
//     (the two take turns, so that both see the same load);
//   - full-nft-cpu-ms: the CPU time of the nft commands each ran until then (the
//     process's children), which the load of the machine does not inflate;
//   - change-ms: the wall time from the write of an EndpointSlice in which one endpoint's
//     address changed to the first nftables event of the proxy's namespace (the netlink
//     group `nft monitor` reads) that names the new address, median (and p90);
//
// and kubelab's figures over kube-proxy's. Both sync without rate limit (kube-proxy
// --iptables-min-sync-period=0s, kubelab MinSyncPeriod -1).
//
//	KUBELAB_KUBE_PROXY=/tmp/kubelab-upstream/kube-proxy \
//	  go test ./internal/proxy -run '^$' -bench AgainstKubeProxy -benchtime 1x -timeout 60m
func BenchmarkAgainstKubeProxy(b *testing.B) {
	bin := os.Getenv("KUBELAB_KUBE_PROXY")
	if bin == "" {
		b.Skip("KUBELAB_KUBE_PROXY is not set to an upstream kube-proxy (OUT=/tmp/kubelab-upstream hack/upstream.sh kube-proxy)")
	}
	testutil.RequireRoot(b, "nft", "nsenter")
	sizes := []int{1000, 10000}
	if s := os.Getenv("KUBELAB_PROXY_BENCH_SIZES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				b.Fatalf("KUBELAB_PROXY_BENCH_SIZES: %v", err)
			}
			sizes = append(sizes, n)
		}
	}

	labNS, upNS := benchNS(b), benchNS(b)
	// Each proxy reaches the API server through a listener in its own namespace.
	listen := func(n ns.NetNS) (ln net.Listener) {
		if err := n.Do(func(ns.NetNS) (err error) {
			ln, err = net.Listen("tcp", "127.0.0.1:0")
			return err
		}); err != nil {
			b.Fatal(err)
		}
		return ln
	}
	labLn, upLn := listen(labNS), listen(upNS)
	srv := apiservertest.Start(b, apiservertest.Options{ServiceCIDR: "10.96.0.0/16",
		Listeners: []net.Listener{labLn, upLn}, NoDefaultServiceAccounts: true})
	ctx := context.Background()
	labKubeconfig := proxyKubeconfig(b, srv.Kubeconfig, "kubelab", "https://"+labLn.Addr().String())
	upKubeconfig := proxyKubeconfig(b, srv.Kubeconfig, "kube-proxy", "https://"+upLn.Addr().String())
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("proxybench-%d", os.Getpid())},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: nodeIP}}}}
	if _, err := srv.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = srv.Client.CoreV1().Nodes().Delete(ctx, node.Name, metav1.DeleteOptions{}) })

	changeSeq := 0
	for _, n := range sizes {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			w := populate(b, srv.Client, n)
			restarts := 5
			if n > 1000 {
				restarts = 1
			}
			changes := 20
			nextChange := func() (*discovery.EndpointSlice, string) {
				changeSeq++
				i := (changeSeq * 7919) % n
				ip := fmt.Sprintf("10.250.%d.%d", changeSeq/250, 2+changeSeq%250)
				return w.slices[i], ip
			}
			lab := benchProxy{ns: labNS, start: func(b *testing.B) (func() (fullSync, error), func()) {
				return startKubelab(b, labKubeconfig, labNS, node.Name)
			}, clean: func() error { return Cleanup(ctx, labNS.Path(), DefaultTable) }}
			up := benchProxy{ns: upNS, start: func(b *testing.B) (func() (fullSync, error), func()) {
				return startKubeProxy(b, bin, upKubeconfig, upNS, node.Name)
			}, clean: func() error { return deleteTables(upNS, "ip kube-proxy", "ip6 kube-proxy") }}
			for b.Loop() {
				// Turn about, so that both see the same load of the machine.
				for range restarts - 1 {
					lab.run(b, srv.Client, w, 0, nextChange)
					up.run(b, srv.Client, w, 0, nextChange)
				}
				lab.run(b, srv.Client, w, changes, nextChange)
				up.run(b, srv.Client, w, changes, nextChange)
			}
			lab.summarize()
			up.summarize()
			report := func(name string, v float64) { b.ReportMetric(v, name) }
			report("kubelab-full-ms", ms(lab.full))
			report("kube-proxy-full-ms", ms(up.full))
			report("kubelab-full-nft-cpu-ms", ms(lab.fullNFTCPU))
			report("kube-proxy-full-nft-cpu-ms", ms(up.fullNFTCPU))
			report("kubelab-change-ms", ms(lab.change))
			report("kube-proxy-change-ms", ms(up.change))
			report("kubelab-change-p90-ms", ms(lab.changeP90))
			report("kube-proxy-change-p90-ms", ms(up.changeP90))
			report("full-ratio", float64(lab.full)/float64(up.full))
			report("change-ratio", float64(lab.change)/float64(up.change))
			b.Logf("services=%d nft CPU in full syncs: kubelab %v, kube-proxy %v", n, lab.nftCPU, up.nftCPU)
			b.Logf("services=%d kubelab full %v (all %v) change median %v p90 %v (all %v)", n, lab.full, lab.fulls, lab.change, lab.changeP90, lab.changes)
			b.Logf("services=%d kube-proxy full %v (all %v) change median %v p90 %v (all %v)", n, up.full, up.fulls, up.change, up.changeP90, up.changes)
			w.delete(b, srv.Client)
		})
	}
}

// benchProxy is one of the two proxies and what was measured of it.
type benchProxy struct {
	ns    ns.NetNS
	start func(*testing.B) (firstFull func() (fullSync, error), stop func())
	clean func() error

	fulls, nftCPU, changes              []time.Duration
	full, fullNFTCPU, change, changeP90 time.Duration
}

// fullSync is a proxy's first full sync: its duration as the proxy measures it, and the
// CPU time of the nft commands the proxy ran until it ended.
type fullSync struct{ elapsed, nftCPU time.Duration }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// run starts the proxy on an empty table, takes the duration of its first full sync, and
// times changes endpoint changes until the namespace's nftables events name the new
// address.
func (p *benchProxy) run(b *testing.B, client kubernetes.Interface, w *benchWorld, changes int,
	next func() (*discovery.EndpointSlice, string)) {
	b.Helper()
	if err := p.clean(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := p.clean(); err != nil {
			b.Error(err)
		}
	}()
	firstFull, stop := p.start(b)
	defer stop()
	f, err := firstFull()
	if err != nil {
		b.Fatal(err)
	}
	p.fulls, p.nftCPU = append(p.fulls, f.elapsed), append(p.nftCPU, f.nftCPU)
	if changes == 0 {
		return
	}
	mon := startMonitor(b, p.ns)
	defer mon.stop()
	for range changes {
		slice, ip := next()
		d, err := w.changeEndpoint(client, slice, ip, mon)
		if err != nil {
			b.Fatal(err)
		}
		p.changes = append(p.changes, d)
	}
}

func (p *benchProxy) summarize() {
	p.full, p.fullNFTCPU = quantile(p.fulls, 0.5), quantile(p.nftCPU, 0.5)
	p.change, p.changeP90 = quantile(p.changes, 0.5), quantile(p.changes, 0.9)
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1)+0.5)]
}

// benchNS is a network namespace with loopback up.
func benchNS(b *testing.B) ns.NetNS {
	n := newNetNS(b)
	if err := n.Do(func(ns.NetNS) error { return up("lo", "") }); err != nil {
		b.Fatal(err)
	}
	return n
}

// proxyKubeconfig is the API server's kubeconfig pointed at server, written for one of
// the proxies.
func proxyKubeconfig(b *testing.B, path, proxy, server string) string {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	out := filepath.Join(b.TempDir(), proxy+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, out); err != nil {
		b.Fatal(err)
	}
	return out
}

// benchWorld is n Services of 10 endpoints each (a tenth of them NodePorts) and their
// EndpointSlices, in 50 namespaces of the benchmark's own.
type benchWorld struct {
	namespaces []string
	mu         sync.Mutex
	slices     []*discovery.EndpointSlice
}

func populate(b *testing.B, client kubernetes.Interface, n int) *benchWorld {
	b.Helper()
	ctx := context.Background()
	w := &benchWorld{slices: make([]*discovery.EndpointSlice, n)}
	for k := range 50 {
		name := fmt.Sprintf("proxybench-%d-%d-%d", os.Getpid(), n, k)
		if _, err := client.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}},
			metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		w.namespaces = append(w.namespaces, name)
	}
	errs := make(chan error, n)
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				svc := makeService(w.namespaces[i%50], fmt.Sprintf("svc%d", i),
					fmt.Sprintf("10.96.%d.%d", (i+10)/256, (i+10)%256))
				if i%10 == 0 {
					nodePort(0)(svc)
				}
				var eps []ep
				for j := range 10 {
					k := i*10 + j
					eps = append(eps, ep{ip: fmt.Sprintf("10.%d.%d.%d", 200+k/62500, (k/250)%250, 2+k%250),
						node: fmt.Sprintf("node-%d", j%3)})
				}
				if _, err := client.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
					errs <- err
					continue
				}
				s, err := client.DiscoveryV1().EndpointSlices(svc.Namespace).Create(ctx,
					makeSlice(svc, svc.Name+"-1", 8080, eps...), metav1.CreateOptions{})
				if err != nil {
					errs <- err
					continue
				}
				w.slices[i] = s
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return w
}

func (w *benchWorld) delete(b *testing.B, client kubernetes.Interface) {
	ctx := context.Background()
	for _, name := range w.namespaces {
		if err := client.DiscoveryV1().EndpointSlices(name).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			b.Error(err)
		}
		svcs, err := client.CoreV1().Services(name).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Error(err)
			continue
		}
		for _, s := range svcs.Items {
			if err := client.CoreV1().Services(name).Delete(ctx, s.Name, metav1.DeleteOptions{}); err != nil {
				b.Error(err)
			}
		}
		_ = client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	}
}

// changeEndpoint gives the fourth endpoint of slice the address ip and times the write
// until mon shows ip.
func (w *benchWorld) changeEndpoint(client kubernetes.Interface, slice *discovery.EndpointSlice, ip string, mon *monitor) (time.Duration, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	idx := slices.Index(w.slices, slice)
	s := slice.DeepCopy()
	s.Endpoints[3].Addresses = []string{ip}
	mon.drain()
	start := time.Now()
	got, err := client.DiscoveryV1().EndpointSlices(s.Namespace).Update(context.Background(), s, metav1.UpdateOptions{})
	if err != nil {
		return 0, err
	}
	w.slices[idx] = got
	at, err := mon.waitFor(names(ip), 2*time.Minute)
	if err != nil {
		return 0, fmt.Errorf("endpoint %s of %s/%s: %w", ip, s.Namespace, s.Name, err)
	}
	return at.Sub(start), nil
}

// monitor follows the nftables events of a namespace (the netlink group nft monitor
// reads, without nft, whose reading of the whole ruleset first takes minutes at 10,000
// Services): each message as it comes, with its time.
type monitor struct {
	fd       int
	msgs     chan timedMsg
	done     chan struct{}
	stopping atomic.Bool
}

type timedMsg struct {
	at   time.Time
	data []byte
}

func startMonitor(b *testing.B, n ns.NetNS) *monitor {
	var fd int
	if err := n.Do(func(ns.NetNS) (err error) {
		if fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER); err != nil {
			return err
		}
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 16<<20)
		_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Usec: 200000})
		return unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK, Groups: 1 << (unix.NFNLGRP_NFTABLES - 1)})
	}); err != nil {
		b.Fatalf("nftables events: %v", err)
	}
	m := &monitor{fd: fd, msgs: make(chan timedMsg, 100000), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		buf := make([]byte, 1<<20)
		for !m.stopping.Load() {
			k, _, err := unix.Recvfrom(fd, buf, 0)
			switch {
			case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) || errors.Is(err, unix.ENOBUFS):
				continue
			case err != nil:
				return
			}
			m.msgs <- timedMsg{time.Now(), bytes.Clone(buf[:k])}
		}
	}()
	// The monitor is ready once it sees a table made and deleted for the purpose.
	probe := func(msg []byte) bool { return bytes.Contains(msg, []byte("proxybench-probe")) }
	for range 30 {
		if out, err := exec.Command("nsenter", "--net="+n.Path(), "nft",
			"add table ip proxybench-probe; delete table ip proxybench-probe").CombinedOutput(); err != nil {
			m.stop()
			b.Fatalf("probe the monitor: %v: %s", err, out)
		}
		if _, err := m.waitFor(probe, time.Second); err == nil {
			m.drain()
			return m
		}
	}
	m.stop()
	b.Fatal("no nftables event seen")
	return nil
}

// names is a matcher of messages naming ip: as text (in a chain's name) or as the four
// bytes of an address (in an element or a rule).
func names(ip string) func([]byte) bool {
	text := regexp.MustCompile(`(^|[^0-9.])` + regexp.QuoteMeta(ip) + `($|[^0-9])`)
	binary := net.ParseIP(ip).To4()
	return func(msg []byte) bool { return bytes.Contains(msg, binary) || text.Match(msg) }
}

func (m *monitor) drain() {
	for {
		select {
		case <-m.msgs:
		default:
			return
		}
	}
}

func (m *monitor) waitFor(match func([]byte) bool, timeout time.Duration) (time.Time, error) {
	deadline := time.After(timeout)
	for {
		select {
		case msg := <-m.msgs:
			if match(msg.data) {
				return msg.at, nil
			}
		case <-m.done:
			return time.Time{}, errors.New("nftables events ended")
		case <-deadline:
			return time.Time{}, fmt.Errorf("no nftables event within %v", timeout)
		}
	}
}

func (m *monitor) stop() {
	m.stopping.Store(true)
	<-m.done
	unix.Close(m.fd)
}

// Environment of TestBenchProxyProcess.
const (
	benchKubeconfigEnv = "KUBELAB_PROXYBENCH_KUBECONFIG"
	benchNodeEnv       = "KUBELAB_PROXYBENCH_NODE"
)

// TestBenchProxyProcess is kubelab's proxy as a process of its own for
// BenchmarkAgainstKubeProxy, which runs the test binary so, like kube-proxy, in the
// namespace it proxies for: it writes "full-sync <nanoseconds>" for each full sync, and
// runs until SIGTERM.
func TestBenchProxyProcess(t *testing.T) {
	kubeconfig := os.Getenv(benchKubeconfigEnv)
	if kubeconfig == "" {
		t.Skip("run by BenchmarkAgainstKubeProxy")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(Config{NodeName: os.Getenv(benchNodeEnv), NodeIPs: []string{nodeIP}, ClusterCIDR: testCluster,
		MinSyncPeriod: -1, Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}, kubernetes.NewForConfigOrDie(cfg))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	p.onSync = func(full bool, d time.Duration) {
		if full {
			mu.Lock()
			fmt.Printf("full-sync %d\n", d.Nanoseconds())
			mu.Unlock()
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := p.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// startKubelab runs kubelab's proxy in n, as a process of its own (TestBenchProxyProcess)
// that reaches the API server through kubeconfig.
func startKubelab(b *testing.B, kubeconfig string, n ns.NetNS, nodeName string) (func() (fullSync, error), func()) {
	proc := newProxyProcess(b, "kubelab proxy")
	cmd := exec.Command("nsenter", "--net="+n.Path(), os.Args[0], "-test.run=^TestBenchProxyProcess$", "-test.timeout=0")
	cmd.Env = append(os.Environ(), benchKubeconfigEnv+"="+kubeconfig, benchNodeEnv+"="+nodeName)
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = proc.log
	proc.start(b, cmd)
	fulls := make(chan time.Duration, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "full-sync "); ok {
				if d, err := strconv.ParseInt(v, 10, 64); err == nil {
					fulls <- time.Duration(d)
				}
			}
		}
		proc.exited <- cmd.Wait()
	}()
	first := func() (fullSync, error) {
		select {
		case d := <-fulls:
			cpu, err := waitedChildrenCPU(cmd.Process.Pid)
			return fullSync{d, cpu}, err
		case err := <-proc.exited:
			return fullSync{}, proc.fail(fmt.Errorf("exited: %v", err))
		case <-time.After(10 * time.Minute):
			return fullSync{}, proc.fail(errors.New("no full sync within 10m"))
		}
	}
	return first, proc.stop
}

// startKubeProxy runs upstream kube-proxy in nftables mode in n, where it reaches the API
// server through kubeconfig.
func startKubeProxy(b *testing.B, bin, kubeconfig string, n ns.NetNS, nodeName string) (func() (fullSync, error), func()) {
	proc := newProxyProcess(b, "kube-proxy")
	cmd := exec.Command("nsenter", "--net="+n.Path(), bin,
		"--kubeconfig="+kubeconfig, "--proxy-mode=nftables", "--hostname-override="+nodeName,
		// The iptables- flags set the sync periods of every mode but ipvs.
		"--cluster-cidr="+testCluster, "--iptables-min-sync-period=0s", "--iptables-sync-period=1h",
		"--conntrack-max-per-core=0", "--conntrack-min=0",
		"--conntrack-tcp-timeout-established=0s", "--conntrack-tcp-timeout-close-wait=0s",
		"--metrics-bind-address=127.0.0.1:10249", "--healthz-bind-address=127.0.0.1:10256", "--v=1")
	cmd.Stdout, cmd.Stderr = proc.log, proc.log
	proc.start(b, cmd)
	go func() { proc.exited <- cmd.Wait() }()
	first := func() (fullSync, error) {
		deadline := time.Now().Add(10 * time.Minute)
		for time.Now().Before(deadline) {
			select {
			case err := <-proc.exited:
				return fullSync{}, proc.fail(fmt.Errorf("exited: %v", err))
			case <-time.After(100 * time.Millisecond):
			}
			count, sum, err := fullSyncMetric(n)
			if err == nil && count >= 1 {
				cpu, err := waitedChildrenCPU(cmd.Process.Pid)
				return fullSync{time.Duration(sum * float64(time.Second)), cpu}, err
			}
		}
		return fullSync{}, proc.fail(errors.New("no full sync within 10m"))
	}
	return first, proc.stop
}

// proxyProcess is a proxy the benchmark runs as a process of its own, logging to a file
// of the benchmark's; the caller starts it and sends its Wait's result to exited.
type proxyProcess struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	log     *os.File
	exited  chan error
}

func newProxyProcess(b *testing.B, name string) *proxyProcess {
	p := &proxyProcess{name: name, logPath: filepath.Join(b.TempDir(), strings.ReplaceAll(name, " ", "-")+".log"), exited: make(chan error, 1)}
	f, err := os.Create(p.logPath)
	if err != nil {
		b.Fatal(err)
	}
	p.log = f
	return p
}

// start starts cmd, which dies with the benchmark's process.
func (p *proxyProcess) start(b *testing.B, cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.log.Close()
		b.Fatal(err)
	}
	p.cmd = cmd
}

// fail is err naming the proxy, with the end of its log.
func (p *proxyProcess) fail(err error) error {
	out, _ := os.ReadFile(p.logPath)
	if len(out) > 4000 {
		out = out[len(out)-4000:]
	}
	return fmt.Errorf("%s: %w; its log ends:\n%s", p.name, err, out)
}

// stop ends the proxy with SIGTERM, or SIGKILL after 30 s, and closes its log.
func (p *proxyProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	p.log.Close()
}

// waitedChildrenCPU is the user and system time of the children process pid waited for
// (cutime and cstime of /proc/<pid>/stat, in ticks of 10 ms).
func waitedChildrenCPU(pid int) (time.Duration, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name in parentheses, from the third (state) on.
	_, rest, _ := strings.Cut(string(stat), ") ")
	f := strings.Fields(rest)
	if len(f) < 15 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	cu, err1 := strconv.Atoi(f[13])
	cs, err2 := strconv.Atoi(f[14])
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(cu+cs) * 10 * time.Millisecond, nil
}

// fullSyncMetric reads kube-proxy's count and sum of full syncs of IPv4 rules.
func fullSyncMetric(n ns.NetNS) (count int, sum float64, err error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (conn net.Conn, err error) {
			err = n.Do(func(ns.NetNS) error {
				conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return conn, err
		}}}
	resp, err := c.Get("http://127.0.0.1:10249/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	found := 0
	for _, l := range strings.Split(string(body), "\n") {
		name, value, ok := strings.Cut(l, " ")
		if !ok || !strings.Contains(name, `ip_family="IPv4"`) {
			continue
		}
		switch {
		case strings.HasPrefix(name, "kubeproxy_sync_full_proxy_rules_duration_seconds_count"):
			count, err = strconv.Atoi(value)
			found++
		case strings.HasPrefix(name, "kubeproxy_sync_full_proxy_rules_duration_seconds_sum"):
			sum, err = strconv.ParseFloat(value, 64)
			found++
		}
		if err != nil {
			return 0, 0, err
		}
	}
	if found < 2 {
		return 0, 0, errors.New("no full sync metric yet")
	}
	return count, sum, nil
}

// deleteTables deletes the nft tables ("family name") in n that exist.
func deleteTables(n ns.NetNS, tables ...string) error {
	return n.Do(func(ns.NetNS) error {
		for _, t := range tables {
			out, err := exec.Command("nft", "delete", "table", t).CombinedOutput()
			if err != nil && !strings.Contains(string(out), "No such file or directory") {
				return fmt.Errorf("nft delete table %s: %w: %s", t, err, out)
			}
		}
		return nil
	})
}

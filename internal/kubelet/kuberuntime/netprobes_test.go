package kuberuntime

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubelab/kubelab/internal/kubelet"
)

// loopbackDial dials as the pod's dialer would, on this process's loopback, and counts
// the connections.
type loopbackDial struct {
	mu    sync.Mutex
	addrs []string
}

func (d *loopbackDial) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.mu.Lock()
	d.addrs = append(d.addrs, addr)
	d.mu.Unlock()
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

func hostPort(t *testing.T, rawURL string) (string, int) {
	t.Helper()
	h, p, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(rawURL, "http://"), "https://"))
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(p)
	return h, port
}

func TestHTTPProbe(t *testing.T) {
	var mu sync.Mutex
	var seen http.Header
	var seenHost string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen, seenHost = r.Header.Clone(), r.Host
		mu.Unlock()
		switch r.URL.Path {
		case "/ok":
			_, _ = w.Write([]byte("fine"))
		case "/moved":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/away":
			// Another host name for the same kind of server: not followed.
			http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/ok", http.StatusFound)
		case "/slow":
			time.Sleep(300 * time.Millisecond)
		default:
			http.Error(w, "sick", http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	host, port := hostPort(t, srv.URL)
	c := &corev1.Container{Name: "web", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}}
	ctx := context.Background()
	d := &loopbackDial{}
	for _, tc := range []struct {
		name   string
		get    corev1.HTTPGetAction
		want   kubelet.ProbeResult
		output string
	}{
		{"2xx passes, named port, pod IP as host", corev1.HTTPGetAction{Path: "/ok", Port: intstr.FromString("http")}, kubelet.ProbeSuccess, "fine"},
		{"redirect on the same host is followed", corev1.HTTPGetAction{Path: "/moved", Port: intstr.FromInt32(int32(port))}, kubelet.ProbeSuccess, "fine"},
		{"redirect elsewhere is a warning", corev1.HTTPGetAction{Path: "/away", Port: intstr.FromInt32(int32(port))}, kubelet.ProbeWarning, "Probe terminated redirects, Response body: "},
		{"5xx fails", corev1.HTTPGetAction{Path: "/sick", Port: intstr.FromInt32(int32(port))}, kubelet.ProbeFailure, "HTTP probe failed with statuscode: 503"},
		{"timeout fails", corev1.HTTPGetAction{Path: "/slow", Port: intstr.FromInt32(int32(port))}, kubelet.ProbeFailure, "Client.Timeout exceeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			timeout := time.Second
			if tc.get.Path == "/slow" {
				timeout = 100 * time.Millisecond
			}
			res, out, err := httpProbe(ctx, d.dial, &tc.get, c, host, timeout)
			if err != nil || res != tc.want || !strings.Contains(out, tc.output) {
				t.Errorf("httpProbe = %d %q %v, want %d with %q", res, out, err, tc.want, tc.output)
			}
		})
	}
	// Headers: the spec's (Host among them), User-Agent and Accept by default.
	get := corev1.HTTPGetAction{Path: "/ok", Port: intstr.FromInt32(int32(port)), Scheme: corev1.URISchemeHTTP,
		HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Probe", Value: "yes"}, {Name: "Host", Value: "example.test"}}}
	if res, _, err := httpProbe(ctx, d.dial, &get, c, host, time.Second); res != kubelet.ProbeSuccess || err != nil {
		t.Fatalf("probe with headers: %d %v", res, err)
	}
	mu.Lock()
	if seen.Get("X-Probe") != "yes" || seenHost != "example.test" || seen.Get("User-Agent") != "kube-probe/1.37" || seen.Get("Accept") != "*/*" {
		t.Errorf("request headers %v host %q", seen, seenHost)
	}
	mu.Unlock()
	// Nothing listening: a failure naming the refusal; a port the container does not
	// have: an error.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	_, closed := hostPort(t, "http://"+ln.Addr().String())
	ln.Close()
	get = corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(int32(closed))}
	if res, out, err := httpProbe(ctx, d.dial, &get, c, host, time.Second); res != kubelet.ProbeFailure || err != nil || !strings.Contains(out, "connection refused") {
		t.Errorf("closed port: %d %q %v", res, out, err)
	}
	get = corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("metrics")}
	if _, _, err := httpProbe(ctx, d.dial, &get, c, host, time.Second); err == nil {
		t.Error("unknown named port: no error")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, a := range d.addrs {
		if !strings.HasPrefix(a, "127.0.0.1:") && !strings.HasPrefix(a, "localhost:") {
			t.Errorf("dialed %s", a)
		}
	}
	if len(d.addrs) == 0 {
		t.Error("the probe did not use its dialer")
	}
}

func TestResolvePort(t *testing.T) {
	c := &corev1.Container{Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}
	for _, tc := range []struct {
		port intstr.IntOrString
		want int
		err  string
	}{
		{intstr.FromInt32(80), 80, ""},
		{intstr.FromString("http"), 8080, ""},
		{intstr.FromString("9090"), 9090, ""},
		{intstr.FromString("grpc"), -1, `strconv.Atoi: parsing "grpc": invalid syntax`},
		{intstr.FromInt32(0), 0, "invalid port number: 0"},
		{intstr.FromInt32(70000), 70000, "invalid port number: 70000"},
	} {
		got, err := resolvePort(tc.port, c)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("resolvePort(%v) = %d, %v; want %d, %q", tc.port.String(), got, err, tc.want, tc.err)
		}
	}
}

func TestTCPProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	host, port := hostPort(t, "http://"+ln.Addr().String())
	d := &loopbackDial{}
	if res, _, err := tcpProbe(context.Background(), d.dial, host, port, time.Second); res != kubelet.ProbeSuccess || err != nil {
		t.Errorf("open port: %d %v", res, err)
	}
	ln.Close()
	if res, out, err := tcpProbe(context.Background(), d.dial, host, port, time.Second); res != kubelet.ProbeFailure || err != nil ||
		!strings.Contains(out, "connection refused") {
		t.Errorf("closed port: %d %q %v", res, out, err)
	}
}

func TestGRPCProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := health.NewServer()
	hs.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(ln) }()
	defer srv.Stop()
	bare := grpc.NewServer() // no health service
	bln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = bare.Serve(bln) }()
	defer bare.Stop()

	host, port := hostPort(t, "http://"+ln.Addr().String())
	_, barePort := hostPort(t, "http://"+bln.Addr().String())
	d := &loopbackDial{}
	ctx := context.Background()
	for _, tc := range []struct {
		name, service string
		port          int
		want          kubelet.ProbeResult
		output        string
	}{
		{"serving", "", port, kubelet.ProbeSuccess, "service healthy"},
		{"not serving", "db", port, kubelet.ProbeFailure, `service unhealthy (responded with "NOT_SERVING")`},
		{"unknown service", "cache", port, kubelet.ProbeFailure, "error: health rpc probe failed"},
		{"no health service", "", barePort, kubelet.ProbeFailure, "does not implement the grpc health protocol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, out, err := grpcProbe(ctx, d.dial, host, tc.service, tc.port, time.Second)
			if err != nil || res != tc.want || !strings.Contains(out, tc.output) {
				t.Errorf("grpcProbe = %d %q %v, want %d with %q", res, out, err, tc.want, tc.output)
			}
		})
	}
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	_, closed := hostPort(t, "http://"+ln2.Addr().String())
	ln2.Close()
	if res, out, err := grpcProbe(ctx, d.dial, host, "", closed, time.Second); res != kubelet.ProbeFailure || err != nil ||
		!strings.Contains(out, "failed to connect service") {
		t.Errorf("closed port: %d %q %v", res, out, err)
	}
	if len(d.addrs) == 0 {
		t.Error("the probe did not use its dialer")
	}
}

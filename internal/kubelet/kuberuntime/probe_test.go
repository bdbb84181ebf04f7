package kuberuntime

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubelab/kubelab/internal/kubelet"
)

// runningPod syncs a one-container pod until its container runs and returns the
// container's status id.
func runningPod(t *testing.T, r *Runtime, pod *corev1.Pod) string {
	t.Helper()
	st, err := r.SyncPod(context.Background(), pod, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := stateOf(t, st, pod.Spec.Containers[0].Name)
	if s.Waiting || s.Terminated {
		t.Fatalf("container not running: %+v", s)
	}
	return s.ContainerID
}

// Exec probes run the command through ExecSync with the probe's timeout: exit 0 passes,
// another exit fails with the output, a command that outlives the timeout fails.
func TestExecProbe(t *testing.T) {
	r, env := newTestRuntime(t)
	pod := testPod(corev1.RestartPolicyAlways, nil, "app")
	id := runningPod(t, r, pod)
	c := &pod.Spec.Containers[0]
	env.cri.OnExec(func(_ context.Context, _ string, cmd []string, _ time.Duration) (string, string, int32, error) {
		switch cmd[0] {
		case "ok":
			return "all good\n", "", 0, nil
		case "sick":
			return "out ", "err\n", 2, nil
		case "hang":
			return "", "", 0, status.Error(codes.Unknown, "failed to exec in container: timeout 3s exceeded: context deadline exceeded")
		}
		return "", "", 0, status.Error(codes.Unknown, "no such command")
	})
	probe := func(cmd string) (kubelet.ProbeResult, string, error) {
		return r.Probe(context.Background(), pod, c, id, &corev1.Probe{TimeoutSeconds: 3,
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{cmd, "arg"}}}})
	}
	if res, out, err := probe("ok"); res != kubelet.ProbeSuccess || out != "all good\n" || err != nil {
		t.Errorf("ok: %d %q %v", res, out, err)
	}
	if res, out, err := probe("sick"); res != kubelet.ProbeFailure || out != "out err\n" || err != nil {
		t.Errorf("sick: %d %q %v", res, out, err)
	}
	if res, out, err := probe("hang"); res != kubelet.ProbeFailure || out != `command "hang arg" timed out after 3s` || err != nil {
		t.Errorf("hang: %d %q %v", res, out, err)
	}
	if _, _, err := probe("missing"); err == nil {
		t.Error("exec that could not run: no error")
	}
	execs := env.cri.Execs()
	if len(execs) != 4 || execs[0].ContainerID != runtimeID(id) || execs[0].Timeout != 3*time.Second ||
		strings.Join(execs[0].Cmd, " ") != "ok arg" {
		t.Errorf("execs = %+v", execs)
	}
}

// Network probes dial from the pod's network namespace, as the sandbox's verbose status
// names it, to the pod's address.
func TestNetworkProbeUsesPodNamespace(t *testing.T) {
	r, env := newTestRuntime(t)
	env.cri.SetNetNSPath("/var/run/netns/cni-test")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }))
	defer srv.Close()
	_, port := hostPort(t, srv.URL)
	var mu sync.Mutex
	var dials []string
	r.dialPod = func(ctx context.Context, nsPath, network, addr string) (net.Conn, error) {
		mu.Lock()
		dials = append(dials, nsPath+" "+addr)
		mu.Unlock()
		_, p, _ := net.SplitHostPort(addr)
		var d net.Dialer
		return d.DialContext(ctx, network, "127.0.0.1:"+p) // the fake's pod address is not routed here
	}
	pod := testPod(corev1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: int32(port)}}
	id := runningPod(t, r, pod)
	ip := env.cri.Sandboxes()[0].IP
	c := &pod.Spec.Containers[0]
	ctx := context.Background()
	for name, p := range map[string]corev1.ProbeHandler{
		"httpGet":   {HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}},
		"tcpSocket": {TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}},
	} {
		res, out, err := r.Probe(ctx, pod, c, id, &corev1.Probe{ProbeHandler: p, TimeoutSeconds: 1})
		if res != kubelet.ProbeSuccess || err != nil {
			t.Errorf("%s: %d %q %v", name, res, out, err)
		}
	}
	mu.Lock()
	want := fmt.Sprintf("/var/run/netns/cni-test %s:%d", ip, port)
	if len(dials) != 2 || dials[0] != want || dials[1] != want {
		t.Errorf("dials = %q, want twice %q", dials, want)
	}
	mu.Unlock()
	// A container the runtime does not know: the probe cannot run.
	if _, _, err := r.Probe(ctx, pod, c, "containerd://gone", &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}); err == nil {
		t.Error("probe of an unknown container: no error")
	}
}

package apiserver_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/client-go/util/exec"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver"
	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	kubeletserver "github.com/kubelab/kubelab/internal/kubelet/server"
	"github.com/kubelab/kubelab/internal/kubelet/server/servertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// addNode creates a Node reached at 127.0.0.1:port.
func addNode(t *testing.T, client kubernetes.Interface, name string, port int) {
	t.Helper()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	node, err := client.CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}, {Type: corev1.NodeHostName, Address: name}}
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(port)
	if _, err := client.CoreV1().Nodes().UpdateStatus(context.Background(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// addPod creates a pod on node with the containers, running with ids <pod>-<container>.
func addPod(t *testing.T, client kubernetes.Interface, name, node string, containers ...string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: node}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "busybox"})
	}
	p, err := client.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = corev1.PodRunning
	for _, c := range containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c, Ready: true,
			ContainerID: "containerd://" + name + "-" + c, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}})
	}
	p, err = client.CoreV1().Pods("default").UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fakeKubelet is an HTTPS server with a serving certificate of the cluster CA that
// records what it is asked and requires the API server's client certificate.
type fakeKubelet struct {
	srv *httptest.Server

	mu       sync.Mutex
	requests []string // "<client CN> <method> <path>?<query>"
}

func startFakeKubelet(t *testing.T, pki apiserver.PKI, handler http.HandlerFunc) *fakeKubelet {
	t.Helper()
	certFile, keyFile, err := pki.IssueKubeletServingCert(t.TempDir(), "node-a", []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(pki.CACert())
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	k := &fakeKubelet{}
	k.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.requests = append(k.requests, r.TLS.PeerCertificates[0].Subject.CommonName+" "+r.Method+" "+r.URL.RequestURI())
		k.mu.Unlock()
		handler(w, r)
	}))
	k.srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	k.srv.StartTLS()
	t.Cleanup(k.srv.Close)
	return k
}

func (k *fakeKubelet) port() int { return k.srv.Listener.Addr().(*net.TCPAddr).Port }

func (k *fakeKubelet) last() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.requests) == 0 {
		return ""
	}
	return k.requests[len(k.requests)-1]
}

// logsOf reads a pod's logs as kubectl does (a stream; errors decoded as Status).
func logsOf(client kubernetes.Interface, pod string, opts *corev1.PodLogOptions) (string, error) {
	rc, err := client.CoreV1().Pods("default").GetLogs(pod, opts).Stream(context.Background())
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	return string(b), err
}

// pods/log is proxied to the kubelet of the pod's node, with the API server's client
// certificate, and the kubelet's errors reach the client.
func TestPodLogsProxyToKubelet(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	pki := apiserver.PKI{Dir: filepath.Join(s.DataDir, "pki")}
	kubelet := startFakeKubelet(t, pki, func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/waiting") {
			http.Error(w, `container "waiting" in pod "multi" is waiting to start: ContainerCreating`, http.StatusBadRequest)
			return
		}
		fmt.Fprintf(w, "log of %s\n", r.URL.Path)
	})
	addNode(t, s.Client, "node-a", kubelet.port())
	addPod(t, s.Client, "single", "node-a", "app")
	addPod(t, s.Client, "multi", "node-a", "a", "b", "waiting")

	out, err := logsOf(s.Client, "single", &corev1.PodLogOptions{})
	if err != nil || out != "log of /containerLogs/default/single/app\n" {
		t.Errorf("logs of a one-container pod: %q %v", out, err)
	}
	if got := kubelet.last(); got != apiserver.KubeletClientUser+" GET /containerLogs/default/single/app" {
		t.Errorf("the kubelet got %q", got)
	}
	since := metav1.NewTime(time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC))
	out, err = logsOf(s.Client, "multi", &corev1.PodLogOptions{Container: "b", Follow: true, Previous: true, Timestamps: true,
		TailLines: ptr.To[int64](5), LimitBytes: ptr.To[int64](100), SinceTime: &since})
	if err != nil || out != "log of /containerLogs/default/multi/b\n" {
		t.Errorf("logs of container b: %q %v", out, err)
	}
	if got, want := kubelet.last(), apiserver.KubeletClientUser+" GET /containerLogs/default/multi/b?"+
		"follow=true&limitBytes=100&previous=true&sinceTime=2024-05-01T10%3A00%3A00Z&tailLines=5&timestamps=true"; got != want {
		t.Errorf("the kubelet got\n%q, want\n%q", got, want)
	}
	_, _ = logsOf(s.Client, "multi", &corev1.PodLogOptions{Container: "a", SinceSeconds: ptr.To[int64](30), Stream: ptr.To("Stderr")})
	if got := kubelet.last(); !strings.HasSuffix(got, "/containerLogs/default/multi/a?sinceSeconds=30&stream=Stderr") {
		t.Errorf("the kubelet got %q", got)
	}

	for _, tc := range []struct {
		pod  string
		opts corev1.PodLogOptions
		code int32
		msg  string
	}{
		{"multi", corev1.PodLogOptions{}, 400, "a container name must be specified for pod multi, choose one of: [a b waiting]"},
		{"multi", corev1.PodLogOptions{Container: "nope"}, 400, "container nope is not valid for pod multi"},
		{"multi", corev1.PodLogOptions{Container: "waiting"}, 400, `container "waiting" in pod "multi" is waiting to start: ContainerCreating`},
		{"multi", corev1.PodLogOptions{Container: "a", TailLines: ptr.To[int64](-1)}, 422, "tailLines"},
		{"nope", corev1.PodLogOptions{}, 404, `pods "nope" not found`},
	} {
		_, err := logsOf(s.Client, tc.pod, &tc.opts)
		var st apierrors.APIStatus
		if !errors.As(err, &st) || st.Status().Code != tc.code || !strings.Contains(st.Status().Message, tc.msg) {
			t.Errorf("logs of %s %+v: %v, want %d %q", tc.pod, tc.opts, err, tc.code, tc.msg)
		}
	}

	// No node yet: no logs, no error.
	pending, err := s.Client.CoreV1().Pods("default").Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pending"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := logsOf(s.Client, pending.Name, &corev1.PodLogOptions{}); err != nil || out != "" {
		t.Errorf("logs of a pod without a node: %q %v", out, err)
	}
	// A node the API server cannot reach the kubelet of.
	if _, err := s.Client.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "mute"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	addPod(t, s.Client, "on-mute", "mute", "app")
	if _, err := logsOf(s.Client, "on-mute", &corev1.PodLogOptions{}); !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), "node mute reports no address of the types [InternalIP Hostname]") {
		t.Errorf("logs on a node without addresses: %v", err)
	}
}

// The kubelet server with a fake runtime, as a node of the API server.
func startKubelet(t *testing.T, s *apiservertest.Server, node string) *servertest.Runtime {
	t.Helper()
	pki := apiserver.PKI{Dir: filepath.Join(s.DataDir, "pki")}
	certFile, keyFile, err := pki.IssueKubeletServingCert(t.TempDir(), node, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		t.Fatal(err)
	}
	rt := servertest.NewRuntime(t)
	srv, err := kubeletserver.New(kubeletserver.Config{Addr: "127.0.0.1:0", CertFile: certFile, KeyFile: keyFile,
		ClientCAFile: pki.CACert(), PodLogsDir: t.TempDir(), Runtime: rt,
		PodLookup: func(ns, name string) (*corev1.Pod, error) {
			return s.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		}})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Start(t, "the kubelet server", testutil.DefaultTimeout, srv.Run, testutil.Closed(srv.Ready()))
	_, port, _ := net.SplitHostPort(srv.Addr())
	p, _ := strconv.Atoi(port)
	addNode(t, s.Client, node, p)
	return rt
}

// runningPod adds a pod on node whose containers run in the fake runtime, each writing
// the given log.
func runningPod(t *testing.T, s *apiservertest.Server, rt *servertest.Runtime, name, node, log string, containers ...string) {
	t.Helper()
	p := addPod(t, s.Client, name, node, containers...)
	rt.AddSandbox(name+"-sandbox", string(p.UID))
	for _, c := range containers {
		path := filepath.Join(t.TempDir(), c+".log")
		if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
			t.Fatal(err)
		}
		rt.AddContainer(servertest.Container{ID: name + "-" + c, PodUID: string(p.UID), Name: c, Running: true, LogPath: path})
	}
}

func execURL(s *apiservertest.Server, pod string, opts *corev1.PodExecOptions) *rest.Request {
	return s.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name(pod).SubResource("exec").
		VersionedParams(opts, scheme.ParameterCodec)
}

// Exec, attach and port-forward reach the kubelet through the API server, over SPDY and
// over WebSockets (translated or tunnelled by the API server).
func TestPodStreamsReachKubelet(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	rt := startKubelet(t, s, "node-a")
	runningPod(t, s, rt, "web", "node-a", "", "app")

	opts := &corev1.PodExecOptions{Command: []string{"echo", "hello", "there"}, Stdout: true, Stderr: true}
	u := execURL(s, "web", opts).URL()
	spdyExec, err := remotecommand.NewSPDYExecutor(s.Config, "POST", u)
	if err != nil {
		t.Fatal(err)
	}
	wsExec, err := remotecommand.NewWebSocketExecutor(s.Config, "GET", u.String())
	if err != nil {
		t.Fatal(err)
	}
	for name, ex := range map[string]remotecommand.Executor{"spdy": spdyExec, "websocket": wsExec} {
		var stdout, stderr bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
		cancel()
		if err != nil || stdout.String() != "hello there\n" {
			t.Errorf("%s exec: %q %q %v", name, stdout.String(), stderr.String(), err)
		}
	}
	// Exit codes and stdin, over WebSockets.
	u = execURL(s, "web", &corev1.PodExecOptions{Command: []string{"fail", "7"}, Stdout: true, Stderr: true}).URL()
	wsExec, _ = remotecommand.NewWebSocketExecutor(s.Config, "GET", u.String())
	var stderr bytes.Buffer
	err = wsExec.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: io.Discard, Stderr: &stderr})
	var exitErr utilexec.CodeExitError
	if !errors.As(err, &exitErr) || exitErr.Code != 7 || stderr.String() != "failing\n" {
		t.Errorf("websocket exec fail 7: %v %q", err, stderr.String())
	}
	u = execURL(s, "web", &corev1.PodExecOptions{Command: []string{"cat"}, Stdin: true, Stdout: true}).URL()
	wsExec, _ = remotecommand.NewWebSocketExecutor(s.Config, "GET", u.String())
	var stdout bytes.Buffer
	if err := wsExec.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: strings.NewReader("piped"), Stdout: &stdout}); err != nil || stdout.String() != "piped" {
		t.Errorf("websocket exec cat: %q %v", stdout.String(), err)
	}
	// Attach.
	u = s.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("web").SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Stdin: true, Stdout: true}, scheme.ParameterCodec).URL()
	wsExec, _ = remotecommand.NewWebSocketExecutor(s.Config, "GET", u.String())
	stdout.Reset()
	if err := wsExec.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: strings.NewReader("typed"), Stdout: &stdout}); err != nil || stdout.String() != "attached to web-app\ntyped" {
		t.Errorf("websocket attach: %q %v", stdout.String(), err)
	}

	// Port-forward, SPDY and SPDY over WebSockets.
	pfURL := s.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace("default").Name("web").SubResource("portforward").URL()
	tr, upgrader, err := spdy.RoundTripperFor(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: tr}, "POST", pfURL)
	wsDialer, err := portforward.NewSPDYOverWebsocketDialer(pfURL, s.Config)
	if err != nil {
		t.Fatal(err)
	}
	forward(t, "spdy", spdyDialer)
	forward(t, "websocket", wsDialer)

	served := strings.Join(rt.Streams.Served(), ",")
	if served != "exec,exec,exec,exec,attach,portforward,portforward" {
		t.Errorf("the runtime's streaming server served %s", served)
	}

	// A refused exec reaches the client with the kubelet's reason.
	rt.SetRunning("web-app", false)
	for name, method := range map[string]string{"spdy": "POST", "websocket": "GET"} {
		u = execURL(s, "web", &corev1.PodExecOptions{Command: []string{"ls"}, Stdout: true}).URL()
		var ex remotecommand.Executor
		if method == "POST" {
			ex, _ = remotecommand.NewSPDYExecutor(s.Config, method, u)
		} else {
			ex, _ = remotecommand.NewWebSocketExecutor(s.Config, method, u.String())
		}
		err := ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: io.Discard})
		if err == nil || !strings.Contains(err.Error(), `container "app" in pod "web" is not running`) {
			t.Errorf("%s exec into a stopped container: %v", name, err)
		}
	}
}

// forward port-forwards a local port to the pod's port 8080 through dialer and checks the
// runtime's answer on two connections.
func forward(t *testing.T, name string, dialer httpstream.Dialer) {
	t.Helper()
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:8080"}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("%s port-forward ended: %v", name, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s port-forward not ready", name)
	}
	defer func() {
		close(stop)
		if err := <-done; err != nil {
			t.Errorf("%s port-forward: %v", name, err)
		}
	}()
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("ports %v %v", ports, err)
	}
	for i := 0; i < 2; i++ {
		conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Write([]byte("ping"))
		buf := make([]byte, 4)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "PING" {
			t.Errorf("%s port-forward: got %q %v, want PING", name, buf, err)
		}
		conn.Close()
	}
}

// kubectl logs, exec and port-forward through the API server to the kubelet server.
func TestKubectlPodStreams(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	rt := startKubelet(t, s, "node-a")
	log := "2024-05-01T10:00:00Z stdout F first line\n2024-05-01T10:00:01Z stderr F second line\n"
	runningPod(t, s, rt, "web", "node-a", log, "app", "sidecar")
	k := newKubectl(t, s.Kubeconfig)

	if out := k.run("logs", "web", "-c", "app"); out != "first line\nsecond line\n" {
		t.Errorf("kubectl logs -c app: %q", out)
	}
	if out := k.run("logs", "web", "-c", "sidecar", "--tail=1", "--timestamps"); out != "2024-05-01T10:00:01.000000000Z second line\n" {
		t.Errorf("kubectl logs --tail=1 --timestamps: %q", out)
	}
	// Without -c kubectl picks the first container and says so.
	if out := k.run("logs", "web"); !strings.Contains(out, "first line\nsecond line\n") || !strings.Contains(out, `Defaulted container "app"`) {
		t.Errorf("kubectl logs: %q", out)
	}
	if out := k.run("exec", "web", "-c", "app", "--", "echo", "hi", "from", "exec"); out != "hi from exec\n" {
		t.Errorf("kubectl exec: %q", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := k.cmd(ctx, "exec", "-i", "web", "-c", "app", "--", "cat")
	cmd.Stdin = strings.NewReader("stdin through kubectl")
	if out, err := cmd.Output(); err != nil || string(out) != "stdin through kubectl" {
		t.Errorf("kubectl exec -i cat: %q %v", out, err)
	}
	cmd = k.cmd(ctx, "exec", "web", "-c", "app", "--", "fail", "4")
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 4 || !strings.Contains(string(out), "failing") {
		t.Errorf("kubectl exec fail 4: %v %q", err, out)
	}

	// port-forward: kubectl prints the local port, then connections reach the pod.
	pfCtx, stopPF := context.WithCancel(ctx)
	pf := k.cmd(pfCtx, "port-forward", "pod/web", "--address=127.0.0.1", ":8080")
	stdout, _ := pf.StdoutPipe()
	var pfErr bytes.Buffer
	pf.Stderr = &pfErr
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stopPF(); _ = pf.Wait() }()
	lines := make(chan string, 10)
	go func() {
		b := make([]byte, 4096)
		var acc string
		for {
			n, err := stdout.Read(b)
			acc += string(b[:n])
			for {
				i := strings.IndexByte(acc, '\n')
				if i < 0 {
					break
				}
				lines <- acc[:i]
				acc = acc[i+1:]
			}
			if err != nil {
				close(lines)
				return
			}
		}
	}()
	var local string
	select {
	case line, ok := <-lines:
		// "Forwarding from 127.0.0.1:NNNNN -> 8080"
		if f := strings.Fields(line); ok && len(f) >= 3 && f[0] == "Forwarding" {
			local = f[2]
		} else {
			t.Fatalf("kubectl port-forward said %q (stderr %q)", line, pfErr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("kubectl port-forward did not start: %q", pfErr.String())
	}
	conn, err := net.Dial("tcp", local)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte("through kubectl"))
	buf := make([]byte, len("through kubectl"))
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "THROUGH KUBECTL" {
		t.Errorf("through kubectl port-forward: %q %v (stderr %q)", buf, err, pfErr.String())
	}
}

// Package servertest has fakes for tests of the kubelet server and of what talks to it: a
// CRI runtime that knows containers and sandboxes the test declares, and a streaming
// server standing in for the runtime's (containerd's), which speaks the SPDY exec,
// attach and port-forward protocols with scripted behaviour:
//
//   - exec "echo ARGS…" writes ARGS joined by spaces and a newline to stdout;
//     exec "cat" copies stdin to stdout; exec "fail N" writes "failing\n" to stderr and
//     exits with code N; any other command writes "unknown command\n" to stderr and
//     exits 127.
//   - attach writes "attached to <container id>\n" to stdout, then copies stdin to stdout.
//   - port-forward answers each connection with what it receives, upper-cased.
package servertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/httpstream/spdy"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Container is a container the fake runtime knows.
type Container struct {
	ID, PodUID, Name string
	Running          bool
	LogPath          string
	// CreatedAt orders instances (newest first); 0 takes the time of AddContainer.
	CreatedAt int64
}

// Runtime is a fake CRI runtime service: ListContainers, ContainerStatus, ListPodSandbox,
// Exec, Attach and PortForward work; other methods panic.
type Runtime struct {
	runtimeapi.RuntimeServiceClient
	Streams *StreamServer

	mu         sync.Mutex
	containers map[string]*Container
	sandboxes  map[string]sandbox
}

type sandbox struct {
	podUID  string
	ready   bool
	created int64
}

// NewRuntime returns a fake runtime whose streaming server runs until the test ends.
func NewRuntime(t testing.TB) *Runtime {
	return &Runtime{Streams: NewStreamServer(t), containers: map[string]*Container{}, sandboxes: map[string]sandbox{}}
}

// AddContainer adds (or replaces) a container.
func (r *Runtime) AddContainer(c Container) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c.CreatedAt == 0 {
		c.CreatedAt = time.Now().UnixNano()
	}
	r.containers[c.ID] = &c
}

// SetRunning changes whether a container runs.
func (r *Runtime) SetRunning(id string, running bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c := r.containers[id]; c != nil {
		c.Running = running
	}
}

// Forget forgets a container, as the runtime does once it removed it.
func (r *Runtime) Forget(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.containers, id)
}

// AddSandbox adds a ready sandbox of the pod.
func (r *Runtime) AddSandbox(id, podUID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sandboxes[id] = sandbox{podUID: podUID, ready: true, created: time.Now().UnixNano()}
}

// ListContainers implements runtimeapi.RuntimeServiceClient (filters: state, pod UID and
// container name labels).
func (r *Runtime) ListContainers(_ context.Context, in *runtimeapi.ListContainersRequest, _ ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := in.GetFilter()
	var out []*runtimeapi.Container
	for _, c := range r.containers {
		st := state(c)
		if f.GetState() != nil && f.GetState().GetState() != st {
			continue
		}
		if uid, ok := f.GetLabelSelector()["io.kubernetes.pod.uid"]; ok && uid != c.PodUID {
			continue
		}
		if name, ok := f.GetLabelSelector()["io.kubernetes.container.name"]; ok && name != c.Name {
			continue
		}
		out = append(out, &runtimeapi.Container{Id: c.ID, State: st, CreatedAt: c.CreatedAt,
			Labels: map[string]string{"io.kubernetes.pod.uid": c.PodUID, "io.kubernetes.container.name": c.Name}})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt < out[j].CreatedAt })
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}

func state(c *Container) runtimeapi.ContainerState {
	if c.Running {
		return runtimeapi.ContainerState_CONTAINER_RUNNING
	}
	return runtimeapi.ContainerState_CONTAINER_EXITED
}

// ContainerStatus implements runtimeapi.RuntimeServiceClient.
func (r *Runtime) ContainerStatus(_ context.Context, in *runtimeapi.ContainerStatusRequest, _ ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.containers[in.GetContainerId()]
	if c == nil {
		return nil, status.Errorf(codes.NotFound, "container %q not found", in.GetContainerId())
	}
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{Id: c.ID, State: state(c),
		CreatedAt: c.CreatedAt, LogPath: c.LogPath}}, nil
}

// ListPodSandbox implements runtimeapi.RuntimeServiceClient (filters: state, pod UID label).
func (r *Runtime) ListPodSandbox(_ context.Context, in *runtimeapi.ListPodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f := in.GetFilter()
	var out []*runtimeapi.PodSandbox
	for id, sb := range r.sandboxes {
		st := runtimeapi.PodSandboxState_SANDBOX_NOTREADY
		if sb.ready {
			st = runtimeapi.PodSandboxState_SANDBOX_READY
		}
		if f.GetState() != nil && f.GetState().GetState() != st {
			continue
		}
		if uid, ok := f.GetLabelSelector()["io.kubernetes.pod.uid"]; ok && uid != sb.podUID {
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{Id: id, State: st, CreatedAt: sb.created})
	}
	return &runtimeapi.ListPodSandboxResponse{Items: out}, nil
}

// Exec implements runtimeapi.RuntimeServiceClient: a URL on the streaming server.
func (r *Runtime) Exec(_ context.Context, in *runtimeapi.ExecRequest, _ ...grpc.CallOption) (*runtimeapi.ExecResponse, error) {
	if err := r.known(in.GetContainerId()); err != nil {
		return nil, err
	}
	return &runtimeapi.ExecResponse{Url: r.Streams.add("exec", session{exec: in})}, nil
}

// Attach implements runtimeapi.RuntimeServiceClient: a URL on the streaming server.
func (r *Runtime) Attach(_ context.Context, in *runtimeapi.AttachRequest, _ ...grpc.CallOption) (*runtimeapi.AttachResponse, error) {
	if err := r.known(in.GetContainerId()); err != nil {
		return nil, err
	}
	return &runtimeapi.AttachResponse{Url: r.Streams.add("attach", session{attach: in})}, nil
}

// PortForward implements runtimeapi.RuntimeServiceClient: a URL on the streaming server.
func (r *Runtime) PortForward(_ context.Context, in *runtimeapi.PortForwardRequest, _ ...grpc.CallOption) (*runtimeapi.PortForwardResponse, error) {
	r.mu.Lock()
	_, ok := r.sandboxes[in.GetPodSandboxId()]
	r.mu.Unlock()
	if !ok {
		return nil, status.Errorf(codes.NotFound, "sandbox %q not found", in.GetPodSandboxId())
	}
	return &runtimeapi.PortForwardResponse{Url: r.Streams.add("portforward", session{portForward: in})}, nil
}

func (r *Runtime) known(id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.containers[id] == nil {
		return status.Errorf(codes.NotFound, "container %q not found", id)
	}
	return nil
}

// StreamServer is a fake of the runtime's streaming server on 127.0.0.1.
type StreamServer struct {
	srv *httptest.Server

	mu       sync.Mutex
	sessions map[string]session
	served   []string
}

type session struct {
	exec        *runtimeapi.ExecRequest
	attach      *runtimeapi.AttachRequest
	portForward *runtimeapi.PortForwardRequest
}

// NewStreamServer starts a streaming server that stops when the test ends.
func NewStreamServer(t testing.TB) *StreamServer {
	s := &StreamServer{sessions: map[string]session{}}
	mux := http.NewServeMux()
	mux.HandleFunc("/exec/{token}", s.serveExec)
	mux.HandleFunc("/attach/{token}", s.serveExec)
	mux.HandleFunc("/portforward/{token}", s.servePortForward)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

// Served lists the sessions served so far ("exec", "attach", "portforward"), in order.
func (s *StreamServer) Served() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.served...)
}

func (s *StreamServer) add(kind string, sess session) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	token := hex.EncodeToString(b)
	s.mu.Lock()
	s.sessions[token] = sess
	s.mu.Unlock()
	return s.srv.URL + "/" + kind + "/" + token
}

// take returns a session once (tokens are one-shot).
func (s *StreamServer) take(token, kind string) (session, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.sessions[token]
	delete(s.sessions, token)
	if ok {
		s.served = append(s.served, kind)
	}
	return sess, ok
}

// streams waits for the streams a client opens until it has the wanted types.
func streams(conn httpstream.Connection, ch <-chan httpstream.Stream, want map[string]bool) (map[string]httpstream.Stream, error) {
	got := map[string]httpstream.Stream{}
	timeout := time.After(10 * time.Second)
	for len(got) < len(want) {
		select {
		case st := <-ch:
			typ := st.Headers().Get(corev1.StreamType)
			if !want[typ] {
				return nil, fmt.Errorf("unexpected stream type %q", typ)
			}
			got[typ] = st
		case <-conn.CloseChan():
			return nil, fmt.Errorf("connection closed")
		case <-timeout:
			return nil, fmt.Errorf("timed out waiting for streams (have %d of %d)", len(got), len(want))
		}
	}
	return got, nil
}

func (s *StreamServer) serveExec(w http.ResponseWriter, req *http.Request) {
	kind := strings.Split(strings.TrimPrefix(req.URL.Path, "/"), "/")[0]
	sess, ok := s.take(req.PathValue("token"), kind)
	if !ok || (kind == "exec") != (sess.exec != nil) {
		http.Error(w, "unknown token", http.StatusNotFound)
		return
	}
	var stdin, stdout, stderr, tty bool
	var cmd []string
	var id string
	if sess.exec != nil {
		e := sess.exec
		stdin, stdout, stderr, tty, cmd, id = e.GetStdin(), e.GetStdout(), e.GetStderr(), e.GetTty(), e.GetCmd(), e.GetContainerId()
	} else {
		a := sess.attach
		stdin, stdout, stderr, tty, id = a.GetStdin(), a.GetStdout(), a.GetStderr(), a.GetTty(), a.GetContainerId()
	}
	if _, err := httpstream.Handshake(req, w, []string{remotecommandconsts.StreamProtocolV4Name}); err != nil {
		return
	}
	ch := make(chan httpstream.Stream, 8)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, req, func(st httpstream.Stream, _ <-chan struct{}) error {
		ch <- st
		return nil
	})
	if conn == nil {
		return
	}
	defer conn.Close()
	want := map[string]bool{corev1.StreamTypeError: true}
	if stdin {
		want[corev1.StreamTypeStdin] = true
	}
	if stdout {
		want[corev1.StreamTypeStdout] = true
	}
	if stderr && !tty {
		want[corev1.StreamTypeStderr] = true
	}
	if tty {
		want[corev1.StreamTypeResize] = true
	}
	sts, err := streams(conn, ch, want)
	if err != nil {
		return
	}
	if rs := sts[corev1.StreamTypeResize]; rs != nil {
		go func() { _, _ = io.Copy(io.Discard, rs) }()
	}
	out, errOut := writerOf(sts[corev1.StreamTypeStdout]), writerOf(sts[corev1.StreamTypeStderr])
	if tty {
		errOut = out
	}
	var in io.Reader = bytes.NewReader(nil)
	if st := sts[corev1.StreamTypeStdin]; st != nil {
		in = st
	}
	code := 0
	switch {
	case sess.attach != nil:
		fmt.Fprintf(out, "attached to %s\n", id)
		_, _ = io.Copy(out, in)
	case len(cmd) > 0 && cmd[0] == "echo":
		fmt.Fprintln(out, strings.Join(cmd[1:], " "))
	case len(cmd) > 0 && cmd[0] == "cat":
		_, _ = io.Copy(out, in)
	case len(cmd) == 2 && cmd[0] == "fail":
		fmt.Fprintln(errOut, "failing")
		code, _ = strconv.Atoi(cmd[1])
	default:
		fmt.Fprintln(errOut, "unknown command")
		code = 127
	}
	for _, typ := range []string{corev1.StreamTypeStdout, corev1.StreamTypeStderr} {
		if st := sts[typ]; st != nil {
			st.Close()
		}
	}
	result := metav1.Status{Status: metav1.StatusSuccess}
	if code != 0 {
		result = metav1.Status{Status: metav1.StatusFailure, Reason: remotecommandconsts.NonZeroExitCodeReason,
			Message: fmt.Sprintf("command terminated with non-zero exit code: %d", code),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: remotecommandconsts.ExitCodeCauseType, Message: strconv.Itoa(code)}}}}
	}
	b, _ := json.Marshal(result)
	_, _ = sts[corev1.StreamTypeError].Write(b)
	sts[corev1.StreamTypeError].Close()
}

func writerOf(st httpstream.Stream) io.Writer {
	if st == nil {
		return io.Discard
	}
	return st
}

func (s *StreamServer) servePortForward(w http.ResponseWriter, req *http.Request) {
	if _, ok := s.take(req.PathValue("token"), "portforward"); !ok {
		http.Error(w, "unknown token", http.StatusNotFound)
		return
	}
	if _, err := httpstream.Handshake(req, w, []string{"portforward.k8s.io"}); err != nil {
		return
	}
	ch := make(chan httpstream.Stream, 8)
	conn := spdy.NewResponseUpgrader().UpgradeResponse(w, req, func(st httpstream.Stream, _ <-chan struct{}) error {
		ch <- st
		return nil
	})
	if conn == nil {
		return
	}
	defer conn.Close()
	for {
		select {
		case st := <-ch:
			switch st.Headers().Get(corev1.StreamType) {
			case corev1.StreamTypeError:
				// No error to report: closing the stream says so.
				st.Close()
			case corev1.StreamTypeData:
				go echoUpper(st)
			default:
				st.Reset()
			}
		case <-conn.CloseChan():
			return
		}
	}
}

// echoUpper answers a port-forward connection with what it receives, upper-cased.
func echoUpper(st httpstream.Stream) {
	defer st.Close()
	buf := make([]byte, 4096)
	for {
		n, err := st.Read(buf)
		if n > 0 {
			if _, werr := st.Write(bytes.ToUpper(buf[:n])); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/client-go/util/exec"
)

// stream runs an exec or attach against the kubelet server as the API server does (SPDY).
func (f *fixture) stream(path string, query url.Values, stdin io.Reader, tty bool) (string, string, error) {
	f.t.Helper()
	u, _ := url.Parse(f.base + path)
	u.RawQuery = query.Encode()
	ex, err := remotecommand.NewSPDYExecutor(f.restConfig, "POST", u)
	if err != nil {
		f.t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	opts := remotecommand.StreamOptions{Stdin: stdin, Stdout: &stdout, Tty: tty}
	if !tty {
		opts.Stderr = &stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = ex.StreamWithContext(ctx, opts)
	return stdout.String(), stderr.String(), err
}

func execQuery(stdin, tty bool, cmd ...string) url.Values {
	q := url.Values{"command": cmd, "output": {"1"}}
	if stdin {
		q.Set("input", "1")
	}
	if tty {
		q.Set("tty", "1")
	} else {
		q.Set("error", "1")
	}
	return q
}

func TestExecAndAttach(t *testing.T) {
	f := newFixture(t)
	pod := f.addPod("default", "web", "app", "idle")
	f.runContainer(pod, "app", "app-old", 0, false)
	f.runContainer(pod, "app", "app-1", 1, true)

	out, errOut, err := f.stream("/exec/default/web/app", execQuery(false, false, "echo", "hello", "world"), nil, false)
	if err != nil || out != "hello world\n" || errOut != "" {
		t.Errorf("exec echo: %q %q %v", out, errOut, err)
	}
	out, _, err = f.stream("/exec/default/web/uid-web/app", execQuery(true, false, "cat"), strings.NewReader("from stdin"), false)
	if err != nil || out != "from stdin" {
		t.Errorf("exec cat with the pod's uid: %q %v", out, err)
	}
	out, errOut, err = f.stream("/exec/default/web/app", execQuery(false, false, "fail", "3"), nil, false)
	var exitErr exec.CodeExitError
	if !errors.As(err, &exitErr) || exitErr.Code != 3 || errOut != "failing\n" || out != "" {
		t.Errorf("exec fail 3: %q %q %v, want exit code 3", out, errOut, err)
	}
	// With a tty, stderr is stdout.
	out, _, err = f.stream("/exec/default/web/app", execQuery(true, true, "fail", "1"), strings.NewReader(""), true)
	if !errors.As(err, &exitErr) || out != "failing\n" {
		t.Errorf("exec with tty: %q %v", out, err)
	}
	out, _, err = f.stream("/attach/default/web/app", url.Values{"input": {"1"}, "output": {"1"}}, strings.NewReader("typed"), false)
	if err != nil || out != "attached to app-1\ntyped" {
		t.Errorf("attach: %q %v", out, err)
	}
	if got := f.rt.Streams.Served(); strings.Join(got, ",") != "exec,exec,exec,exec,attach" {
		t.Errorf("streaming sessions: %v", got)
	}
}

// statusOf does a plain request and decodes the Status answer.
func (f *fixture) statusOf(method, path string) metav1.Status {
	f.t.Helper()
	req, _ := http.NewRequest(method, f.base+path, nil)
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	var st metav1.Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		f.t.Fatalf("%s %s: %d, body is not a Status: %v", method, path, resp.StatusCode, err)
	}
	if resp.Header.Get("Content-Type") != "application/json" || int(st.Code) != resp.StatusCode || st.Kind != "Status" {
		f.t.Errorf("%s %s: %d %s %+v", method, path, resp.StatusCode, resp.Header.Get("Content-Type"), st)
	}
	return st
}

func TestStreamErrors(t *testing.T) {
	f := newFixture(t)
	pod := f.addPod("default", "web", "app", "stopped")
	f.runContainer(pod, "app", "app-1", 0, true)
	f.runContainer(pod, "stopped", "stopped-1", 0, false)
	for _, tc := range []struct {
		method, path string
		code         int32
		reason       metav1.StatusReason
		msg          string
	}{
		{"POST", "/exec/default/nope/app?command=ls&output=1", 404, metav1.StatusReasonNotFound, `pods "nope" not found`},
		{"POST", "/exec/default/web/other-uid/app?command=ls&output=1", 404, metav1.StatusReasonNotFound, `pods "web" not found`},
		{"POST", "/exec/default/web/nope?command=ls&output=1", 404, metav1.StatusReasonNotFound, `containers "nope" not found`},
		{"POST", "/exec/default/web/stopped?command=ls&output=1", 400, metav1.StatusReasonBadRequest, `container "stopped" in pod "web" is not running`},
		{"POST", "/exec/default/web/app?output=1", 400, metav1.StatusReasonBadRequest, "a command is required"},
		{"POST", "/exec/default/web/app?command=ls", 400, metav1.StatusReasonBadRequest, "at least one of stdin, stdout, stderr"},
		{"GET", "/attach/default/web/app?tty=1&error=1", 400, metav1.StatusReasonBadRequest, "at least one of stdin, stdout, stderr"},
		// Right request, but not an upgrade.
		{"POST", "/exec/default/web/app?command=ls&output=1", 400, metav1.StatusReasonBadRequest, "Upgrade request required"},
		{"GET", "/portForward/default/web", 400, metav1.StatusReasonBadRequest, `pod "web" has no running sandbox`},
		{"GET", "/portForward/default/web?ports=0", 400, metav1.StatusReasonBadRequest, `invalid port "0"`},
		{"GET", "/portForward/default/nope", 404, metav1.StatusReasonNotFound, `pods "nope" not found`},
	} {
		st := f.statusOf(tc.method, tc.path)
		if st.Code != tc.code || st.Reason != tc.reason || !strings.Contains(st.Message, tc.msg) {
			t.Errorf("%s %s: %d %s %q, want %d %s %q", tc.method, tc.path, st.Code, st.Reason, st.Message, tc.code, tc.reason, tc.msg)
		}
	}
	// A refused exec reaches a client as the Status.
	_, _, err := f.stream("/exec/default/web/stopped", execQuery(false, false, "ls"), nil, false)
	if err == nil || !strings.Contains(err.Error(), `container "stopped" in pod "web" is not running`) {
		t.Errorf("exec into a stopped container: %v", err)
	}
}

func TestPortForward(t *testing.T) {
	f := newFixture(t)
	pod := f.addPod("default", "web", "app")
	f.rt.AddSandbox("sandbox-1", string(pod.UID))
	for _, path := range []string{"/portForward/default/web", "/portForward/default/web/uid-web"} {
		f.portForwardEcho(t, path, 8080)
	}
	if got := f.rt.Streams.Served(); strings.Join(got, ",") != "portforward,portforward" {
		t.Errorf("streaming sessions: %v", got)
	}
}

// portForwardEcho forwards a local port to the pod's port through the kubelet server at
// path and expects the pod to answer "ping" with "PING", on two connections.
func (f *fixture) portForwardEcho(t *testing.T, path string, port int) {
	t.Helper()
	u, _ := url.Parse(f.base + path)
	tr, upgrader, err := spdy.RoundTripperFor(f.restConfig)
	if err != nil {
		t.Fatal(err)
	}
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: tr}, "POST", u)
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(port)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("%s: port-forward ended: %v", path, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: port-forward not ready", path)
	}
	defer func() {
		close(stop)
		if err := <-done; err != nil {
			t.Errorf("%s: port-forward: %v", path, err)
		}
	}()
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("ports %v %v", ports, err)
	}
	for i := 0; i < 2; i++ { // two connections over one forward
		conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(int(ports[0].Local))))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Write([]byte("ping"))
		buf := make([]byte, 4)
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "PING" {
			t.Errorf("%s: got %q %v through the forward, want PING", path, buf, err)
		}
		conn.Close()
	}
}

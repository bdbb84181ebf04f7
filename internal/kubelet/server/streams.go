package server

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/proxy"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// streamOptions are the streams an exec or attach asks for.
type streamOptions struct {
	stdin, stdout, stderr, tty bool
}

// parseStreamOptions reads input, output, error and tty ("1" or "true"). With a tty,
// stderr is merged into stdout, so it is not asked for.
func parseStreamOptions(q url.Values) (streamOptions, error) {
	flag := func(k string) bool {
		v := q.Get(k)
		b, err := strconv.ParseBool(v)
		return err == nil && b
	}
	o := streamOptions{stdin: flag("input"), stdout: flag("output"), stderr: flag("error"), tty: flag("tty")}
	if o.tty {
		o.stderr = false
	}
	if !o.stdin && !o.stdout && !o.stderr {
		return o, apierrors.NewBadRequest("you must specify at least one of stdin, stdout, stderr")
	}
	return o, nil
}

// streamTarget resolves the pod and container of an exec or attach request.
func (s *Server) streamTarget(r *http.Request) (*corev1.Pod, string, error) {
	pod, err := s.pod(r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("uid"))
	if err != nil {
		return nil, "", err
	}
	name := r.PathValue("container")
	if !hasContainer(pod, name) {
		return nil, "", apierrors.NewNotFound(corev1.Resource("containers"), name)
	}
	id, err := s.runningContainer(r.Context(), pod, name)
	if err != nil {
		return nil, "", err
	}
	return pod, id, nil
}

// exec serves /exec/…: CRI Exec, then the upgraded connection goes to the runtime.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	opts, err := parseStreamOptions(q)
	if err != nil {
		writeStatus(w, err)
		return
	}
	cmd := q["command"]
	if len(cmd) == 0 {
		writeStatus(w, apierrors.NewBadRequest("a command is required"))
		return
	}
	pod, id, err := s.streamTarget(r)
	if err != nil {
		writeStatus(w, err)
		return
	}
	resp, err := s.cfg.Runtime.Exec(r.Context(), &runtimeapi.ExecRequest{ContainerId: id, Cmd: cmd,
		Tty: opts.tty, Stdin: opts.stdin, Stdout: opts.stdout, Stderr: opts.stderr})
	if err != nil {
		writeStatus(w, fmt.Errorf("exec in container %q of pod %q: %w", r.PathValue("container"), pod.Name, err))
		return
	}
	s.cfg.Logger.DebugContext(r.Context(), "exec", "pod", pod.Namespace+"/"+pod.Name, "container", r.PathValue("container"), "command", cmd)
	s.proxyStream(w, r, resp.GetUrl())
}

// attach serves /attach/…: CRI Attach, then the upgraded connection goes to the runtime.
func (s *Server) attach(w http.ResponseWriter, r *http.Request) {
	opts, err := parseStreamOptions(r.URL.Query())
	if err != nil {
		writeStatus(w, err)
		return
	}
	pod, id, err := s.streamTarget(r)
	if err != nil {
		writeStatus(w, err)
		return
	}
	resp, err := s.cfg.Runtime.Attach(r.Context(), &runtimeapi.AttachRequest{ContainerId: id,
		Tty: opts.tty, Stdin: opts.stdin, Stdout: opts.stdout, Stderr: opts.stderr})
	if err != nil {
		writeStatus(w, fmt.Errorf("attach to container %q of pod %q: %w", r.PathValue("container"), pod.Name, err))
		return
	}
	s.proxyStream(w, r, resp.GetUrl())
}

// portForward serves /portForward/…: CRI PortForward on the pod's sandbox, then the
// upgraded connection goes to the runtime. The ports travel in the stream headers (SPDY);
// a ports query (WebSocket clients) is passed on too.
func (s *Server) portForward(w http.ResponseWriter, r *http.Request) {
	var ports []int32
	for _, v := range r.URL.Query()["ports"] {
		for _, p := range strings.Split(v, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
			if err != nil || n == 0 {
				writeStatus(w, apierrors.NewBadRequest(fmt.Sprintf("invalid port %q", p)))
				return
			}
			ports = append(ports, int32(n))
		}
	}
	pod, err := s.pod(r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("uid"))
	if err != nil {
		writeStatus(w, err)
		return
	}
	sandbox, err := s.readySandbox(r.Context(), pod)
	if err != nil {
		writeStatus(w, err)
		return
	}
	resp, err := s.cfg.Runtime.PortForward(r.Context(), &runtimeapi.PortForwardRequest{PodSandboxId: sandbox, Port: ports})
	if err != nil {
		writeStatus(w, fmt.Errorf("port-forward to pod %q: %w", pod.Name, err))
		return
	}
	s.proxyStream(w, r, resp.GetUrl())
}

// proxyStream hands the client's upgrade request to the runtime's streaming server; a
// request that is not an upgrade is refused (400).
func (s *Server) proxyStream(w http.ResponseWriter, r *http.Request, rawURL string) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		writeStatus(w, fmt.Errorf("the container runtime returned a bad streaming URL %q", rawURL))
		return
	}
	var transport http.RoundTripper
	if s.cfg.DialStream != nil {
		transport = &http.Transport{DialContext: s.cfg.DialStream}
	}
	h := proxy.NewUpgradeAwareHandler(u, transport, false, true, errorResponder{})
	h.ServeHTTP(w, r)
}

package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// logOptions is the query of /containerLogs.
type logOptions struct {
	follow, previous, timestamps bool
	// since: records older are left out (zero: none).
	since time.Time
	// tail: only the last tail lines (negative: all).
	tail int64
	// limitBytes: stop after that many bytes (0: no limit).
	limitBytes int64
	// stdout, stderr: which streams to show.
	stdout, stderr bool
}

// queryBool reads a boolean parameter as the API does: present and neither "0" nor
// "false" (in any case) is true.
func queryBool(q url.Values, key string) bool {
	vs, ok := q[key]
	if !ok || len(vs) == 0 {
		return false
	}
	return vs[0] != "0" && !strings.EqualFold(vs[0], "false")
}

// parseLogOptions reads and checks the query.
func parseLogOptions(q url.Values, now time.Time) (logOptions, error) {
	o := logOptions{follow: queryBool(q, "follow"), previous: queryBool(q, "previous"),
		timestamps: queryBool(q, "timestamps"), tail: -1, stdout: true, stderr: true}
	intParam := func(key string, min int64) (int64, bool, error) {
		v := q.Get(key)
		if v == "" {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s %q is not an integer", key, v)
		}
		if n < min {
			return 0, false, fmt.Errorf("%s must be at least %d, got %d", key, min, n)
		}
		return n, true, nil
	}
	var errs []error
	if n, ok, err := intParam("sinceSeconds", 1); err != nil {
		errs = append(errs, err)
	} else if ok {
		o.since = now.Add(-time.Duration(n) * time.Second)
	}
	if v := q.Get("sinceTime"); v != "" {
		if !o.since.IsZero() {
			errs = append(errs, errors.New("at most one of sinceTime or sinceSeconds may be specified"))
		}
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			errs = append(errs, fmt.Errorf("sinceTime %q is not an RFC 3339 time", v))
		}
		o.since = t
	}
	if n, ok, err := intParam("tailLines", 0); err != nil {
		errs = append(errs, err)
	} else if ok {
		o.tail = n
	}
	if n, ok, err := intParam("limitBytes", 1); err != nil {
		errs = append(errs, err)
	} else if ok {
		o.limitBytes = n
	}
	switch v := q.Get("stream"); v {
	case "", "All":
	case "Stdout":
		o.stderr = false
	case "Stderr":
		o.stdout = false
	default:
		errs = append(errs, fmt.Errorf("stream %q must be All, Stdout or Stderr", v))
	}
	return o, errors.Join(errs...)
}

// containerLogs serves /containerLogs/{namespace}/{pod}/{container}.
func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	opts, err := parseLogOptions(r.URL.Query(), time.Now())
	if err != nil {
		writeText(w, http.StatusBadRequest, err)
		return
	}
	namespace, name, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	pod, err := s.pod(namespace, name, "")
	if err != nil {
		writeText(w, statusCode(err), fmt.Errorf("pod %q does not exist", name))
		return
	}
	if !hasContainer(pod, container) {
		writeText(w, http.StatusNotFound, fmt.Errorf("container %q not found in pod %q", container, name))
		return
	}
	id, err := logContainerID(pod, container, opts.previous)
	if err != nil {
		writeText(w, http.StatusBadRequest, err)
		return
	}
	path, err := s.logPath(ctx, pod, container, id, opts.previous)
	if err != nil {
		writeText(w, http.StatusBadRequest, err)
		return
	}
	f, err := os.Open(path)
	if err != nil {
		writeText(w, http.StatusBadRequest, fmt.Errorf("container %q in pod %q: open log: %w", container, name, err))
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	var running func(context.Context) bool
	if opts.follow {
		running = func(ctx context.Context) bool { return s.isRunning(ctx, id) }
	}
	lr := &logReader{file: f, opts: opts, out: newLogWriter(w, opts), running: running, recheck: s.cfg.followRecheck}
	if err := lr.copy(ctx); err != nil && !errors.Is(err, errLimitReached) && ctx.Err() == nil {
		s.cfg.Logger.WarnContext(ctx, "reading container log", "pod", namespace+"/"+name, "container", container, "err", err)
	}
}

// statusCode is the HTTP code of an API error (500 for others).
func statusCode(err error) int {
	var apiErr apierrors.APIStatus
	if errors.As(err, &apiErr) && apiErr.Status().Code != 0 {
		return int(apiErr.Status().Code)
	}
	return http.StatusInternalServerError
}

// logContainerID picks the container instance whose log to show from the pod's status:
// the running one, else the last terminated one; with previous, the one before.
func logContainerID(pod *corev1.Pod, name string, previous bool) (string, error) {
	st, ok := containerStatus(pod, name)
	if !ok {
		return "", fmt.Errorf("container %q in pod %q is not available", name, pod.Name)
	}
	last := st.LastTerminationState.Terminated
	switch {
	case previous:
		if last == nil || last.ContainerID == "" {
			return "", fmt.Errorf("previous terminated container %q in pod %q not found", name, pod.Name)
		}
		return runtimeID(last.ContainerID), nil
	case st.State.Running != nil && st.ContainerID != "":
		return runtimeID(st.ContainerID), nil
	case st.State.Terminated != nil:
		if id := st.State.Terminated.ContainerID; id != "" {
			return runtimeID(id), nil
		}
		if last != nil && last.ContainerID != "" {
			return runtimeID(last.ContainerID), nil
		}
		return "", fmt.Errorf("container %q in pod %q is terminated", name, pod.Name)
	case last != nil:
		if last.ContainerID == "" {
			return "", fmt.Errorf("container %q in pod %q is terminated", name, pod.Name)
		}
		return runtimeID(last.ContainerID), nil
	case st.State.Waiting != nil:
		switch reason := st.State.Waiting.Reason; reason {
		case "ErrImagePull":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: image can't be pulled", name, pod.Name)
		case "ImagePullBackOff":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: trying and failing to pull image", name, pod.Name)
		default:
			return "", fmt.Errorf("container %q in pod %q is waiting to start: %s", name, pod.Name, reason)
		}
	}
	return "", fmt.Errorf("container %q in pod %q is waiting to start - no logs yet", name, pod.Name)
}

// logPath is where the container instance's log is: the path the runtime reports, else
// (the runtime no longer knows the instance) the newest file of the container's log
// directory, or with previous the one before it.
func (s *Server) logPath(ctx context.Context, pod *corev1.Pod, name, id string, previous bool) (string, error) {
	resp, err := s.cfg.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err == nil && resp.GetStatus().GetLogPath() != "" {
		return resp.GetStatus().GetLogPath(), nil
	}
	if err != nil && status.Code(err) != codes.NotFound {
		return "", fmt.Errorf("container %q in pod %q: status of %s: %w", name, pod.Name, id, err)
	}
	dir := filepath.Join(s.cfg.PodLogsDir, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID), name)
	entries, _ := os.ReadDir(dir)
	var restarts []int
	for _, e := range entries {
		if n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".log")); err == nil && strings.HasSuffix(e.Name(), ".log") && e.Type().IsRegular() {
			restarts = append(restarts, n)
		}
	}
	sort.Sort(sort.Reverse(sort.IntSlice(restarts)))
	i := 0
	if previous {
		i = 1
	}
	if i >= len(restarts) {
		return "", fmt.Errorf("container %q in pod %q: the log of container %s is gone", name, pod.Name, id)
	}
	return filepath.Join(dir, fmt.Sprintf("%d.log", restarts[i])), nil
}

// isRunning says whether the runtime still runs the container.
func (s *Server) isRunning(ctx context.Context, id string) bool {
	resp, err := s.cfg.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		// Unknown (removed) containers write no more; other errors are passing ones.
		return status.Code(err) != codes.NotFound && ctx.Err() == nil
	}
	return resp.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING
}

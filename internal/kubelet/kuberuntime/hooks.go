package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Lifecycle hooks: postStart runs right after a container started (the start is not done
// until it returns; when it fails the container is killed and started again as the
// restartPolicy says), preStop before a running container is stopped, within its grace
// period (what it leaves of the grace period goes to SIGTERM, at least minStopGrace).

// Events of the hooks; their messages leave out the hook's output, which may hold secrets.
const (
	eventFailedPostStartHook = "FailedPostStartHook"
	eventFailedPreStopHook   = "FailedPreStopHook"
)

// ErrPostStartHook: a container's postStart hook failed; its text is the container's
// Waiting reason.
var ErrPostStartHook = errors.New("PostStartHookError")

// minStopGrace is the least time a container gets between SIGTERM and SIGKILL after its
// preStop hook ran.
const minStopGrace = 2 * time.Second

// runHook runs a lifecycle hook of container c (instance id) of pod and returns, when it
// failed, the message the container's status shows: exec runs the command in the
// container (a non-zero exit fails), httpGet GETs the URL from the pod's network namespace
// (only a failed request fails; an https hook that gets an http answer is tried again
// over http), sleep waits.
func (r *Runtime) runHook(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id string, h *corev1.LifecycleHandler) (string, error) {
	switch {
	case h.Exec != nil:
		out, code, err := r.execSync(ctx, id, h.Exec.Command, 0)
		if err == nil && code != 0 {
			err = fmt.Errorf("command '%s' exited with %d: %s", strings.Join(h.Exec.Command, " "), code, out)
		}
		if err != nil {
			return fmt.Sprintf("Exec lifecycle hook (%v) for Container %q in Pod %q failed - error: %v, message: %q",
				h.Exec.Command, c.Name, podFullName(pod), err, out), err
		}
		return "", nil
	case h.HTTPGet != nil:
		if err := r.httpHook(ctx, pod, c, id, h.HTTPGet); err != nil {
			return fmt.Sprintf("HTTP lifecycle hook (%s) for Container %q in Pod %q failed - error: %v",
				h.HTTPGet.Path, c.Name, podFullName(pod), err), err
		}
		return "", nil
	case h.Sleep != nil:
		t := time.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer t.Stop()
		select {
		case <-t.C:
			return "", nil
		case <-ctx.Done():
			return fmt.Sprintf("Sleep lifecycle hook (%d) for Container %q in Pod %q failed - error: %v",
				h.Sleep.Seconds, c.Name, podFullName(pod), ctx.Err()), ctx.Err()
		}
	}
	err := fmt.Errorf("invalid handler: %v", h)
	return fmt.Sprintf("Cannot run handler: %v", err), err
}

// httpHook GETs an httpGet hook's URL from the pod's network namespace.
func (r *Runtime) httpHook(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id string, get *corev1.HTTPGetAction) error {
	n, err := r.containerNetwork(ctx, id)
	if err != nil {
		return err
	}
	req, err := httpGetRequest(ctx, get, c, n.ip, "lifecycle")
	if err != nil {
		return err
	}
	client := httpClient(n.dial, 0)
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	var ue *url.Error
	if err != nil && errors.As(err, &ue) && strings.Contains(ue.Err.Error(), "server gave HTTP response to HTTPS client") {
		req = req.Clone(ctx)
		req.URL.Scheme = "http"
		req.Header.Del("Authorization")
		if resp, err = client.Do(req); err == nil {
			r.event(pod, c.Name, corev1.EventTypeWarning, "LifecycleHTTPFallback",
				"request to HTTPS lifecycle hook %s got HTTP response, retry with HTTP succeeded", req.URL.Host)
		}
	}
	if resp != nil {
		resp.Body.Close()
	}
	return err
}

// postStart runs c's postStart hook in its new instance id. When the hook fails the
// instance is killed (FailedPostStartHook) and the hook's message returned.
func (r *Runtime) postStart(ctx context.Context, pod *corev1.Pod, c *corev1.Container, id string, log *slog.Logger) (string, error) {
	if c.Lifecycle == nil || c.Lifecycle.PostStart == nil {
		return "", nil
	}
	msg, err := r.runHook(ctx, pod, c, id, c.Lifecycle.PostStart)
	if err == nil {
		return "", nil
	}
	log.Warn("postStart hook failed", "container", c.Name, "id", id, "err", err)
	r.event(pod, c.Name, corev1.EventTypeWarning, eventFailedPostStartHook, "PostStartHook failed")
	in := instance{id: id, name: c.Name, state: runtimeapi.ContainerState_CONTAINER_RUNNING}
	if kerr := r.stopContainer(ctx, pod, &in, podGracePeriod(pod), eventFailedPostStartHook); kerr != nil {
		log.Error("kill container after its postStart hook failed", "container", c.Name, "id", id, "err", kerr)
	}
	return msg, err
}

// preStop runs the preStop hook of the running instance in (when its spec has one and
// grace is positive) and waits for it at most grace; it returns how long that took and
// whether a hook ran.
func (r *Runtime) preStop(ctx context.Context, pod *corev1.Pod, in *instance, grace time.Duration) (time.Duration, bool) {
	c := containerSpec(pod, in.name)
	if c == nil || c.Lifecycle == nil || c.Lifecycle.PreStop == nil || grace <= 0 || in.state != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return 0, false
	}
	start := time.Now()
	hctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := r.runHook(hctx, pod, c, in.id, c.Lifecycle.PreStop); err != nil {
			r.log.Warn("preStop hook failed", "pod", pod.Namespace+"/"+pod.Name, "container", c.Name, "id", in.id, "err", err)
			r.event(pod, c.Name, corev1.EventTypeWarning, eventFailedPreStopHook, "PreStopHook failed")
		}
	}()
	select {
	case <-done:
	case <-hctx.Done():
	}
	return time.Since(start), true
}

// containerSpec is the pod's container (init or app) named name, nil when the pod has no
// such container (e.g. a pod that carries only its UID).
func containerSpec(pod *corev1.Pod, name string) *corev1.Container {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	return nil
}

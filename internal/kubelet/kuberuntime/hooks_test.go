package kuberuntime

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func execHook(cmd ...string) *corev1.LifecycleHandler {
	return &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: cmd}}
}

// A postStart hook runs in the new instance right after it started; when it fails the
// instance is killed (FailedPostStartHook, Killing) and the container waits with
// PostStartHookError, to be started again at the next sync.
func TestPostStartHook(t *testing.T) {
	r, env := newTestRuntime(t)
	ctx := context.Background()
	pod := testPod(corev1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PostStart: execHook("sh", "-c", "setup")}
	fail := true
	env.cri.OnExec(func(_ context.Context, _ string, cmd []string, timeout time.Duration) (string, string, int32, error) {
		if timeout != 0 {
			t.Errorf("hook exec with timeout %v", timeout)
		}
		if fail {
			return "", "no config", 1, nil
		}
		return "", "", 0, nil
	})
	st, err := r.SyncPod(ctx, pod, nil)
	if !errors.Is(err, ErrPostStartHook) {
		t.Fatalf("sync: %v, want ErrPostStartHook", err)
	}
	app := stateOf(t, st, "app")
	if !app.Waiting || app.Reason != "PostStartHookError" || app.LastTerminated == nil ||
		!strings.HasPrefix(app.Message, `Exec lifecycle hook ([sh -c setup]) for Container "app" in Pod "web_default(uid-1)" failed - error: command 'sh -c setup' exited with 1: no config`) {
		t.Errorf("app after a failed postStart: %+v", app)
	}
	if c := env.newest("app"); c.State != exited {
		t.Errorf("instance after a failed postStart: %s", c.State)
	}
	evs := env.events()
	for _, want := range []string{"Normal Started Started container app", "Warning FailedPostStartHook PostStartHook failed",
		"Normal Killing FailedPostStartHook"} {
		if !hasEvent(evs, want) {
			t.Errorf("no event %q in %q", want, evs)
		}
	}
	calls := strings.Join(env.cri.Calls(), " ")
	if !strings.Contains(calls, "StartContainer ExecSync StopContainer") {
		t.Errorf("CRI calls %s: want the hook right after the start, then the stop", calls)
	}

	fail = false
	st, err = r.SyncPod(ctx, pod, nil)
	if app := stateOf(t, st, "app"); err != nil || app.Waiting || app.Terminated || app.RestartCount != 1 {
		t.Errorf("after a passing postStart: %+v, %v", app, err)
	}
}

// On deletion a preStop hook runs before the container gets SIGTERM, within the grace
// period; the stop gets what is left of it (at least minStopGrace). A failing hook is an
// event and does not keep the container from stopping.
func TestPreStopHook(t *testing.T) {
	r, env := newTestRuntime(t)
	ctx := context.Background()
	pod := testPod(corev1.RestartPolicyAlways, nil, "app", "other")
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: execHook("drain")}
	pod.Spec.Containers[1].Lifecycle = &corev1.Lifecycle{PreStop: execHook("broken")}
	if _, err := r.SyncPod(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	stateAtHook := map[string]string{} // hook → its container's state when it ran
	env.cri.OnExec(func(_ context.Context, id string, cmd []string, _ time.Duration) (string, string, int32, error) {
		for _, c := range env.cri.Containers() {
			if c.ID == id {
				mu.Lock()
				stateAtHook[cmd[0]] = c.State.String()
				mu.Unlock()
			}
		}
		if cmd[0] == "broken" {
			return "", "", 0, status.Error(codes.Unknown, "exec failed")
		}
		return "", "", 0, nil
	})
	if _, err := r.KillPod(ctx, pod, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(stateAtHook) != 2 || stateAtHook["drain"] != "CONTAINER_RUNNING" || stateAtHook["broken"] != "CONTAINER_RUNNING" {
		t.Errorf("containers' states when their preStop hooks ran: %v, want both running", stateAtHook)
	}
	mu.Unlock()
	if n := len(env.cri.Execs()); n != 2 {
		t.Errorf("%d hook execs, want 2", n)
	}
	if len(env.cri.Containers()) != 0 {
		t.Errorf("containers left: %d", len(env.cri.Containers()))
	}
	if !hasEvent(env.events(), "Warning FailedPreStopHook PreStopHook failed") {
		t.Error("no FailedPreStopHook event")
	}
}

// The stop after a preStop hook gets the rest of the grace period, and the hook no more
// than the grace period.
func TestPreStopGrace(t *testing.T) {
	r, env := newTestRuntime(t)
	ctx := context.Background()
	pod := testPod(corev1.RestartPolicyAlways, nil, "app")
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](5)
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: execHook("drain")}
	id := runningPod(t, r, pod)
	hookDone := make(chan struct{})
	env.cri.OnExec(func(ctx context.Context, _ string, _ []string, _ time.Duration) (string, string, int32, error) {
		defer close(hookDone)
		select {
		case <-time.After(1100 * time.Millisecond):
		case <-ctx.Done():
		}
		return "", "", 0, nil
	})
	start := time.Now()
	if err := r.KillContainer(ctx, pod, id, 5*time.Second, "Container app failed liveness probe, will be restarted"); err != nil {
		t.Fatal(err)
	}
	<-hookDone
	if took := time.Since(start); took < time.Second {
		t.Errorf("stopped after %v: the hook was not waited for", took)
	}
	c := env.newest("app")
	if c.State != exited || c.StopTimeout != 4 {
		t.Errorf("instance %s stopped with timeout %d, want 4 (5 s grace less the hook's second)", c.State, c.StopTimeout)
	}
	if !hasEvent(env.events(), "Normal Killing Container app failed liveness probe, will be restarted") {
		t.Error("no Killing event with the probe's message")
	}
	// Killing an instance that is not running anymore is a no-op.
	calls := len(env.cri.Calls())
	if err := r.KillContainer(ctx, pod, id, 5*time.Second, "again"); err != nil {
		t.Fatal(err)
	}
	for _, c := range env.cri.Calls()[calls:] {
		if c == "StopContainer" || c == "ExecSync" {
			t.Errorf("second kill called %s", c)
		}
	}

	// A hook that outlives the grace period is given up on; the stop gets minStopGrace.
	pod2 := testPod(corev1.RestartPolicyAlways, nil, "app")
	pod2.UID = "uid-2"
	pod2.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: execHook("hang")}
	id2 := runningPod(t, r, pod2)
	env.cri.OnExec(func(ctx context.Context, _ string, _ []string, _ time.Duration) (string, string, int32, error) {
		<-ctx.Done()
		return "", "", 0, ctx.Err()
	})
	start = time.Now()
	if err := r.KillContainer(ctx, pod2, id2, time.Second, "stop"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("a hung hook held the stop for %v", took)
	}
	for _, c := range env.cri.Containers() {
		if c.ID == runtimeID(id2) && (c.State != exited || c.StopTimeout != 2) {
			t.Errorf("instance after a hung hook: %s, timeout %d, want exited with 2", c.State, c.StopTimeout)
		}
	}
}

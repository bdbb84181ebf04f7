package kuberuntime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func ephemeral(name, target string) corev1.EphemeralContainer {
	return corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: name, Image: "busybox:1.36",
		TerminationMessagePath: "/dev/termination-log"}, TargetContainerName: target}
}

// TestSyncPodStartsEphemeralContainers: ephemeral containers added to a running pod are
// started once, the one with a target in that container's process namespace; one that
// exits is not started again and the app keeps running.
func TestSyncPodStartsEphemeralContainers(t *testing.T) {
	r, env := newTestRuntime(t)
	ctx := context.Background()
	pod := testPod(corev1.RestartPolicyAlways, nil, "app")
	if _, err := r.SyncPod(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	app := env.newest("app")

	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{ephemeral("debugger", "app"), ephemeral("plain", "")}
	st, err := r.SyncPod(ctx, pod, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"debugger", "plain"} {
		if s := stateOf(t, st, name); s.Terminated || s.Waiting || s.StartedAt.IsZero() {
			t.Errorf("%s state = %+v, want running", name, s)
		}
	}
	if ns := env.newest("debugger").Config.GetLinux().GetSecurityContext().GetNamespaceOptions(); ns.GetPid() != runtimeapi.NamespaceMode_TARGET || ns.GetTargetId() != app.ID {
		t.Errorf("debugger's PID namespace: %v target %q, want TARGET %q", ns.GetPid(), ns.GetTargetId(), app.ID)
	}
	if ns := env.newest("plain").Config.GetLinux().GetSecurityContext().GetNamespaceOptions(); ns.GetPid() != runtimeapi.NamespaceMode_CONTAINER || ns.GetTargetId() != "" {
		t.Errorf("plain's PID namespace: %v target %q, want CONTAINER", ns.GetPid(), ns.GetTargetId())
	}
	if got := env.newest("debugger").Config.GetAnnotations()[annotationType]; got != string(typeEphemeral) {
		t.Errorf("debugger's type annotation %q, want %q", got, typeEphemeral)
	}

	env.clock.Step(time.Second)
	if err := env.cri.Exit(env.newest("plain").ID, 0); err != nil {
		t.Fatal(err)
	}
	n := len(env.cri.Containers())
	st, err = r.SyncPod(ctx, pod, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(env.cri.Containers()); got != n {
		t.Errorf("containers after an ephemeral container exited: %d, want %d (it is not restarted)", got, n)
	}
	if s := stateOf(t, st, "plain"); !s.Terminated || s.Reason != "Completed" || s.RestartCount != 0 {
		t.Errorf("plain state = %+v, want Terminated Completed", s)
	}
	if s := stateOf(t, st, "app"); s.Terminated || s.Waiting || env.newest("app").ID != app.ID {
		t.Errorf("app state = %+v, want the same instance running", s)
	}
}

// TestSyncPodEphemeralTargetNotRunning: an ephemeral container whose target does not
// run is not started; it waits with CreateContainerConfigError until its target runs.
func TestSyncPodEphemeralTargetNotRunning(t *testing.T) {
	r, env := newTestRuntime(t)
	ctx := context.Background()
	pod := testPod(corev1.RestartPolicyAlways, []string{"init"}, "app")
	if _, err := r.SyncPod(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	env.clock.Step(time.Second)
	if err := env.cri.Exit(env.newest("init").ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SyncPod(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{ephemeral("debugger", "init")}
	st, err := r.SyncPod(ctx, pod, nil)
	if !errors.Is(err, ErrCreateContainerConfig) {
		t.Errorf("sync: %v, want %v", err, ErrCreateContainerConfig)
	}
	s := stateOf(t, st, "debugger")
	if !s.Waiting || s.Reason != ErrCreateContainerConfig.Error() || !strings.Contains(s.Message, `unable to find target container init`) {
		t.Errorf("debugger state = %+v, want Waiting CreateContainerConfigError", s)
	}
	if env.newest("debugger").ID != "" {
		t.Errorf("debugger was created: %+v", env.newest("debugger"))
	}
}

package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kubelab/kubelab/internal/kubelet"
	"github.com/kubelab/kubelab/internal/kubelet/kuberuntime/fakecri"
)

type testEnv struct {
	cri      *fakecri.CRI
	clock    *clocktesting.FakeClock
	recorder *record.FakeRecorder
}

func newTestRuntime(t *testing.T) (*Runtime, *testEnv) {
	t.Helper()
	env := &testEnv{cri: fakecri.New(), clock: clocktesting.NewFakeClock(time.Unix(100000, 0)), recorder: record.NewFakeRecorder(1000)}
	env.cri.SetClock(env.clock.Now)
	env.cri.AddImage("busybox:1.36")
	root := filepath.Join(t.TempDir(), "kubelet")
	r, err := New(Config{NodeName: "node-1", RootDir: root, CgroupParent: "/kubelab-test", NodeIP: "192.168.1.10",
		Recorder: env.recorder, Clock: env.clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, env.cri, env.cri)
	if err != nil {
		t.Fatal(err)
	}
	return r, env
}

// events drains the recorded events ("<type> <reason> <message>").
func (e *testEnv) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.recorder.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func hasEvent(events []string, prefix string) bool {
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

func stateOf(t *testing.T, st kubelet.PodStatus, name string) kubelet.ContainerState {
	t.Helper()
	for _, c := range st.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no state for container %s in %+v", name, st.Containers)
	return kubelet.ContainerState{}
}

// containerIDOf is the fake's id of a container's newest instance.
func (e *testEnv) newest(name string) fakecri.Container {
	var out fakecri.Container
	for _, c := range e.cri.Containers() {
		if c.Config.GetMetadata().GetName() == name && (out.ID == "" || c.Config.GetMetadata().GetAttempt() >= out.Config.GetMetadata().GetAttempt()) {
			out = c
		}
	}
	return out
}

func TestSyncPodInitThenApp(t *testing.T) {
	r, env := newTestRuntime(t)
	ctx := context.Background()
	pod := testPod(corev1.RestartPolicyAlways, []string{"init"}, "app")
	vol := t.TempDir()
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	for i := range pod.Spec.InitContainers {
		pod.Spec.InitContainers[i].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	vols := kubelet.PodVolumes{"data": vol}

	st, err := r.SyncPod(ctx, pod, vols)
	if err != nil {
		t.Fatal(err)
	}
	if st.SandboxID == "" || len(env.cri.Sandboxes()) != 1 {
		t.Fatalf("sandbox: %+v, %v", st, env.cri.Sandboxes())
	}
	if fi, err := os.Stat(filepath.Join(r.cfg.PodLogsDir, "default_web_uid-1")); err != nil || !fi.IsDir() {
		t.Errorf("pod log dir: %v", err)
	}
	if s := stateOf(t, st, "init"); s.Terminated || s.Waiting || s.StartedAt.IsZero() {
		t.Errorf("init state = %+v, want running", s)
	}
	if len(st.Containers) != 1 {
		t.Errorf("app container must not exist yet: %+v", st.Containers)
	}
	// Nothing changes while the init container runs.
	if _, err := r.SyncPod(ctx, pod, vols); err != nil || len(env.cri.Containers()) != 1 {
		t.Fatalf("second sync: %v, containers %d", err, len(env.cri.Containers()))
	}
	env.clock.Step(time.Second)
	if err := env.cri.Exit(env.newest("init").ID, 0); err != nil {
		t.Fatal(err)
	}
	st, err = r.SyncPod(ctx, pod, vols)
	if err != nil {
		t.Fatal(err)
	}
	init, app := stateOf(t, st, "init"), stateOf(t, st, "app")
	if !init.Terminated || init.ExitCode != 0 || init.Reason != "Completed" || init.FinishedAt.IsZero() {
		t.Errorf("init state = %+v", init)
	}
	if app.Terminated || app.Waiting || app.RestartCount != 0 || !strings.HasPrefix(app.ContainerID, "containerd://") ||
		app.Image != "busybox:1.36" || !strings.Contains(app.ImageID, "@sha256:") {
		t.Errorf("app state = %+v", app)
	}
	c := env.newest("app")
	if c.Config.GetMounts()[0].GetHostPath() != vol || c.Config.GetLogPath() != "app/0.log" {
		t.Errorf("app config: mounts %v log %q", c.Config.GetMounts(), c.Config.GetLogPath())
	}
	evs := env.events()
	for _, want := range []string{
		`Normal Pulled Container image "busybox:1.36" already present on machine`,
		"Normal Created Created container: init", "Normal Started Started container init",
		"Normal Created Created container: app", "Normal Started Started container app",
	} {
		if !hasEvent(evs, want) {
			t.Errorf("missing event %q in %q", want, evs)
		}
	}
	// Relist sees the pod.
	fp, err := r.Relist(ctx)
	if err != nil || fp[pod.UID] == "" {
		t.Fatalf("relist = %v, %v", fp, err)
	}
	// A container exit changes the fingerprint.
	if err := env.cri.Exit(c.ID, 0); err != nil {
		t.Fatal(err)
	}
	fp2, _ := r.Relist(ctx)
	if fp2[pod.UID] == fp[pod.UID] {
		t.Error("the fingerprint did not change when a container exited")
	}
}

func TestSyncPodCrashLoop(t *testing.T) {
	r, env := newTestRuntime(t)
	ctx := context.Background()
	pod := testPod(corev1.RestartPolicyAlways, nil, "app")
	if _, err := r.SyncPod(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	crash := func() {
		t.Helper()
		env.clock.Step(time.Second)
		if err := env.cri.Exit(env.newest("app").ID, 1); err != nil {
			t.Fatal(err)
		}
	}
	crash()
	// The first crash restarts at once.
	st, err := r.SyncPod(ctx, pod, nil)
	if err != nil {
		t.Fatal(err)
	}
	app := stateOf(t, st, "app")
	if app.Waiting || app.Terminated || app.RestartCount != 1 || app.LastTerminated == nil || app.LastTerminated.ExitCode != 1 ||
		app.LastTerminated.Reason != "Error" {
		t.Fatalf("after the first crash: %+v (last %+v)", app, app.LastTerminated)
	}
	crash()
	env.events()
	st, err = r.SyncPod(ctx, pod, nil)
	if !errors.Is(err, ErrCrashLoopBackOff) {
		t.Fatalf("sync during back-off: err = %v", err)
	}
	app = stateOf(t, st, "app")
	want := "back-off 10s restarting failed container=app pod=web_default(uid-1)"
	if !app.Waiting || app.Reason != "CrashLoopBackOff" || app.Message != want || app.RestartCount != 1 ||
		app.LastTerminated == nil || app.LastTerminated.ExitCode != 1 {
		t.Fatalf("during back-off: %+v", app)
	}
	if evs := env.events(); !hasEvent(evs, "Warning BackOff Back-off restarting failed container app in pod web_default(uid-1)") {
		t.Errorf("events = %q", evs)
	}
	env.clock.Step(10 * time.Second)
	st, err = r.SyncPod(ctx, pod, nil)
	if err != nil {
		t.Fatal(err)
	}
	if app = stateOf(t, st, "app"); app.Waiting || app.RestartCount != 2 || app.LastTerminated == nil {
		t.Fatalf("after the back-off: %+v", app)
	}
	crash()
	env.clock.Step(11 * time.Second)
	if _, err := r.SyncPod(ctx, pod, nil); !errors.Is(err, ErrCrashLoopBackOff) {
		t.Fatalf("the back-off doubles to 20 s; err = %v", err)
	}
	// Old instances are removed: the newest and the previous run stay.
	if _, err := r.SyncPod(ctx, pod, nil); !errors.Is(err, ErrCrashLoopBackOff) {
		t.Fatal(err)
	}
	if n := len(env.cri.Containers()); n != 1 {
		t.Errorf("containers kept: %d, want 1 (the newest exited run)", n)
	}
	env.clock.Step(10 * time.Second)
	st, err = r.SyncPod(ctx, pod, nil)
	if err != nil {
		t.Fatal(err)
	}
	if app = stateOf(t, st, "app"); app.RestartCount != 3 || len(env.cri.Containers()) != 2 {
		t.Errorf("third restart: %+v, containers %d", app, len(env.cri.Containers()))
	}
}

func TestSyncPodImagePull(t *testing.T) {
	r, env := newTestRuntime(t)
	ctx := context.Background()
	pod := testPod(corev1.RestartPolicyAlways, nil, "app")
	const image = "registry.local/missing:v1"
	pod.Spec.Containers[0].Image = image
	env.cri.FailPull(image, status.Error(codes.NotFound, "failed to resolve reference: not found"))

	st, err := r.SyncPod(ctx, pod, nil)
	if !errors.Is(err, ErrImagePull) {
		t.Fatalf("err = %v", err)
	}
	app := stateOf(t, st, "app")
	pullErr := "rpc error: code = NotFound desc = failed to resolve reference: not found"
	if !app.Waiting || app.Reason != "ErrImagePull" || app.Message != pullErr {
		t.Fatalf("state = %+v", app)
	}
	evs := env.events()
	for _, want := range []string{`Normal Pulling Pulling image "` + image + `"`, `Warning Failed Failed to pull image "` + image + `": ` + pullErr,
		"Warning Failed Error: ErrImagePull"} {
		if !hasEvent(evs, want) {
			t.Errorf("missing event %q in %q", want, evs)
		}
	}
	env.clock.Step(5 * time.Second)
	st, err = r.SyncPod(ctx, pod, nil)
	if !errors.Is(err, ErrImagePullBackOff) {
		t.Fatalf("err = %v", err)
	}
	app = stateOf(t, st, "app")
	if want := `Back-off pulling image "` + image + `": ErrImagePull: ` + pullErr; !app.Waiting || app.Reason != "ImagePullBackOff" || app.Message != want {
		t.Fatalf("state = %+v", app)
	}
	evs = env.events()
	if !hasEvent(evs, `Normal BackOff Back-off pulling image "`+image+`"`) || !hasEvent(evs, "Warning Failed Error: ImagePullBackOff") {
		t.Errorf("events = %q", evs)
	}
	// After the back-off the pull is tried again, and succeeds.
	env.cri.FailPull(image, nil)
	env.clock.Step(5 * time.Second)
	st, err = r.SyncPod(ctx, pod, nil)
	if err != nil {
		t.Fatal(err)
	}
	if app = stateOf(t, st, "app"); app.Waiting || app.Terminated {
		t.Fatalf("state = %+v", app)
	}
	if evs := env.events(); !hasEvent(evs, `Normal Pulled Successfully pulled image "`+image+`" in `) {
		t.Errorf("events = %q", evs)
	}
}

func TestSyncPodImageErrors(t *testing.T) {
	tests := []struct {
		name, image string
		policy      corev1.PullPolicy
		err         error
		reason, msg string
	}{
		{name: "invalid name", image: "Bad Image", err: ErrInvalidImageName, reason: "InvalidImageName",
			msg: `Failed to apply default image tag "Bad Image": couldn't parse image reference "Bad Image": invalid reference format`},
		{name: "never pull", image: "absent:v1", policy: corev1.PullNever, err: ErrImageNeverPull, reason: "ErrImageNeverPull",
			msg: `Container image "absent:v1" is not present with pull policy of Never`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, _ := newTestRuntime(t)
			pod := testPod(corev1.RestartPolicyAlways, nil, "app")
			pod.Spec.Containers[0].Image, pod.Spec.Containers[0].ImagePullPolicy = tt.image, tt.policy
			st, err := r.SyncPod(context.Background(), pod, nil)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v", err)
			}
			if app := stateOf(t, st, "app"); !app.Waiting || app.Reason != tt.reason || !strings.HasPrefix(app.Message, tt.msg) {
				t.Errorf("state = %+v", app)
			}
		})
	}
}

func TestSyncPodAlwaysPulls(t *testing.T) {
	r, env := newTestRuntime(t)
	pod := testPod(corev1.RestartPolicyAlways, nil, "app")
	pod.Spec.Containers[0].ImagePullPolicy = corev1.PullAlways
	if _, err := r.SyncPod(context.Background(), pod, nil); err != nil {
		t.Fatal(err)
	}
	pulls := 0
	for _, c := range env.cri.Calls() {
		if c == "PullImage" {
			pulls++
		}
	}
	if pulls != 1 {
		t.Errorf("PullImage calls = %d, want 1 for a present image under Always", pulls)
	}
}

func TestSyncPodConfigErrors(t *testing.T) {
	r, env := newTestRuntime(t)
	ctx := context.Background()
	pod := testPod(corev1.RestartPolicyAlways, nil, "app", "token")
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "claim", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}},
		{Name: "sa", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
	}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "claim", MountPath: "/data"}}
	pod.Spec.Containers[1].VolumeMounts = []corev1.VolumeMount{{Name: "sa", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}}
	sa := t.TempDir()
	st, err := r.SyncPod(ctx, pod, kubelet.PodVolumes{"sa": sa})
	if !errors.Is(err, ErrCreateContainerConfig) {
		t.Fatalf("err = %v", err)
	}
	want := `cannot find volume "claim" to mount into container "app"`
	if app := stateOf(t, st, "app"); !app.Waiting || app.Reason != "CreateContainerConfigError" || app.Message != want {
		t.Errorf("app = %+v", app)
	}
	if tok := stateOf(t, st, "token"); tok.Waiting || tok.Terminated {
		t.Errorf("a container whose volumes are all there must run: %+v", tok)
	}
	if evs := env.events(); !hasEvent(evs, "Warning Failed Error: "+want) {
		t.Errorf("events = %q", evs)
	}
	// The volume shows up: the container starts and its reason is gone.
	st, err = r.SyncPod(ctx, pod, kubelet.PodVolumes{"claim": t.TempDir(), "sa": sa})
	if err != nil {
		t.Fatal(err)
	}
	if app := stateOf(t, st, "app"); app.Waiting {
		t.Errorf("app = %+v", app)
	}
}

func TestSyncPodSpecChange(t *testing.T) {
	r, env := newTestRuntime(t)
	ctx := context.Background()
	env.cri.AddImage("busybox:1.37")
	pod := testPod(corev1.RestartPolicyAlways, nil, "app")
	if _, err := r.SyncPod(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	old := env.newest("app")
	pod.Spec.Containers[0].Image = "busybox:1.37"
	env.events()
	st, err := r.SyncPod(ctx, pod, nil)
	if err != nil {
		t.Fatal(err)
	}
	app := stateOf(t, st, "app")
	if app.RestartCount != 1 || app.Image != "busybox:1.37" || app.ContainerID == "containerd://"+old.ID || app.Waiting {
		t.Errorf("app = %+v", app)
	}
	if n := env.newest("app"); n.Config.GetImage().GetUserSpecifiedImage() != "busybox:1.37" {
		t.Errorf("new instance image = %v", n.Config.GetImage())
	}
	if evs := env.events(); !hasEvent(evs, "Normal Killing Container app definition changed, will be restarted") {
		t.Errorf("events = %q", evs)
	}
	for _, c := range env.cri.Containers() {
		if c.ID == old.ID && c.StopTimeout != 30 {
			t.Errorf("old instance stopped with timeout %d, want the pod's 30 s", c.StopTimeout)
		}
	}
}

func TestSyncPodSandboxRecreated(t *testing.T) {
	r, env := newTestRuntime(t)
	ctx := context.Background()
	pod := testPod(corev1.RestartPolicyAlways, []string{"init"}, "app")
	sync := func() kubelet.PodStatus {
		t.Helper()
		st, err := r.SyncPod(ctx, pod, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	sync()
	if err := env.cri.Exit(env.newest("init").ID, 0); err != nil {
		t.Fatal(err)
	}
	first := sync()
	if err := env.cri.SandboxDied(first.SandboxID); err != nil {
		t.Fatal(err)
	}
	env.events()
	st := sync()
	if st.SandboxID == first.SandboxID || len(env.cri.Sandboxes()) != 2 {
		t.Fatalf("no new sandbox: %+v, %v", st, env.cri.Sandboxes())
	}
	for _, sb := range env.cri.Sandboxes() {
		if sb.ID == st.SandboxID && sb.Config.GetMetadata().GetAttempt() != 1 {
			t.Errorf("new sandbox attempt = %d, want 1", sb.Config.GetMetadata().GetAttempt())
		}
	}
	evs := env.events()
	if !hasEvent(evs, "Normal SandboxChanged Pod sandbox changed, it will be killed and re-created.") {
		t.Errorf("events = %q", evs)
	}
	// The init container runs again (from restart count 0) before the app container.
	init := stateOf(t, st, "init")
	if init.Terminated || init.RestartCount != 0 {
		t.Errorf("init = %+v", init)
	}
	if app := stateOf(t, st, "app"); !app.Terminated || app.ExitCode != 137 {
		t.Errorf("app = %+v, want its killed run", app)
	}
	if err := env.cri.Exit(env.newest("init").ID, 0); err != nil {
		t.Fatal(err)
	}
	st = sync()
	if app := stateOf(t, st, "app"); app.Waiting || app.Terminated || app.RestartCount != 1 {
		t.Errorf("app in the new sandbox = %+v", app)
	}
	if n := env.newest("app"); n.SandboxID != st.SandboxID {
		t.Errorf("app runs in sandbox %s, want %s", n.SandboxID, st.SandboxID)
	}
}

func TestSyncPodInitFailureNever(t *testing.T) {
	r, env := newTestRuntime(t)
	ctx := context.Background()
	pod := testPod(corev1.RestartPolicyNever, []string{"init"}, "app")
	if _, err := r.SyncPod(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	if err := env.cri.Exit(env.newest("init").ID, 3); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		st, err := r.SyncPod(ctx, pod, nil)
		if err != nil {
			t.Fatal(err)
		}
		if init := stateOf(t, st, "init"); !init.Terminated || init.ExitCode != 3 || init.Reason != "Error" {
			t.Errorf("init = %+v", init)
		}
		if len(st.Containers) != 1 {
			t.Errorf("nothing else may start: %+v", st.Containers)
		}
	}
	if sbs := env.cri.Sandboxes(); len(sbs) != 1 || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("the failed pod's sandbox must be stopped (and not recreated): %v", sbs)
	}
}

// A failing init container of a pod that restarts is started again after its back-off,
// as often as it fails; the next init container and the app containers never start.
func TestSyncPodInitFailureAlways(t *testing.T) {
	r, env := newTestRuntime(t)
	ctx := context.Background()
	pod := testPod(corev1.RestartPolicyAlways, []string{"init1", "init2"}, "app")
	if _, err := r.SyncPod(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	for attempt := int32(1); attempt <= 3; attempt++ {
		env.clock.Step(time.Second)
		if err := env.cri.Exit(env.newest("init1").ID, 1); err != nil {
			t.Fatal(err)
		}
		st, err := r.SyncPod(ctx, pod, nil)
		if attempt > 1 {
			// From the second failure on, the restart waits for the back-off.
			if !errors.Is(err, ErrCrashLoopBackOff) {
				t.Fatalf("failure %d: err = %v, want the back-off", attempt, err)
			}
			init1 := stateOf(t, st, "init1")
			if !init1.Waiting || init1.Reason != "CrashLoopBackOff" || init1.LastTerminated == nil || init1.LastTerminated.ExitCode != 1 {
				t.Fatalf("failure %d: init1 = %+v", attempt, init1)
			}
			env.clock.Step(time.Duration(10<<(attempt-2)) * time.Second)
			st, err = r.SyncPod(ctx, pod, nil)
		}
		if err != nil {
			t.Fatalf("failure %d: %v", attempt, err)
		}
		if init1 := stateOf(t, st, "init1"); init1.Waiting || init1.Terminated || init1.RestartCount != attempt {
			t.Fatalf("failure %d: init1 = %+v, want running with restartCount %d", attempt, init1, attempt)
		}
		if len(st.Containers) != 1 {
			t.Fatalf("failure %d: only init1 may exist: %+v", attempt, st.Containers)
		}
	}
	if sbs := env.cri.Sandboxes(); len(sbs) != 1 || sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Errorf("the pod keeps its one sandbox: %v", sbs)
	}
}

// A pod's sandbox runs with the handler of the RuntimeClass it names; a class that does
// not exist, or whose handler the runtime does not have, fails the sandbox with a
// FailedCreatePodSandBox event, and the pod gets none.
func TestSyncPodRuntimeClass(t *testing.T) {
	r, env := newTestRuntime(t)
	r.cfg.RuntimeClasses = fakeRuntimeClasses{"runc": "runc", "other": "other-handler"}
	ctx := context.Background()
	for i, tc := range []struct {
		class, handler, err string
	}{
		{class: "", handler: ""},
		{class: "runc", handler: "runc"},
		{class: "other", err: `no runtime for "other-handler" is configured`},
		{class: "missing", err: `runtimeclasses.node.k8s.io "missing" not found`},
	} {
		pod := testPod(corev1.RestartPolicyAlways, nil, "app")
		pod.Name, pod.UID = fmt.Sprintf("rc-%d", i), types.UID(fmt.Sprintf("uid-rc-%d", i))
		if tc.class != "" {
			pod.Spec.RuntimeClassName = &tc.class
		}
		env.events()
		st, err := r.SyncPod(ctx, pod, nil)
		if tc.err != "" {
			if !errors.Is(err, ErrCreatePodSandbox) || !strings.Contains(err.Error(), tc.err) || st.SandboxID != "" {
				t.Errorf("class %q: sandbox %q, err %v, want %q", tc.class, st.SandboxID, err, tc.err)
			}
			if evs := env.events(); !hasEvent(evs, "Warning FailedCreatePodSandBox Failed to create pod sandbox: ") || !strings.Contains(strings.Join(evs, "\n"), tc.err) {
				t.Errorf("class %q: events %q", tc.class, evs)
			}
			continue
		}
		if err != nil {
			t.Fatalf("class %q: %v", tc.class, err)
		}
		var handler string
		found := false
		for _, sb := range env.cri.Sandboxes() {
			if sb.ID == st.SandboxID {
				handler, found = sb.RuntimeHandler, true
			}
		}
		if !found || handler != tc.handler {
			t.Errorf("class %q: sandbox %q (found %v) runs with handler %q, want %q", tc.class, st.SandboxID, found, handler, tc.handler)
		}
	}
}

func TestSyncPodOnFailureDone(t *testing.T) {
	r, env := newTestRuntime(t)
	ctx := context.Background()
	pod := testPod(corev1.RestartPolicyOnFailure, nil, "app")
	pod.Spec.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageReadFile
	if _, err := r.SyncPod(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	c := env.newest("app")
	for _, m := range c.Config.GetMounts() {
		if m.GetContainerPath() == "/dev/termination-log" {
			if err := os.WriteFile(m.GetHostPath(), []byte("all done"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := env.cri.Exit(c.ID, 0); err != nil {
		t.Fatal(err)
	}
	st, err := r.SyncPod(ctx, pod, nil)
	if err != nil {
		t.Fatal(err)
	}
	if app := stateOf(t, st, "app"); !app.Terminated || app.Reason != "Completed" || app.Message != "all done" || app.RestartCount != 0 {
		t.Errorf("app = %+v", app)
	}
	if sbs := env.cri.Sandboxes(); sbs[0].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Errorf("sandbox of a finished pod = %v", sbs[0].State)
	}
	if _, err := r.SyncPod(ctx, pod, nil); err != nil || len(env.cri.Sandboxes()) != 1 {
		t.Errorf("a finished pod gets no new sandbox: %v, %v", err, env.cri.Sandboxes())
	}
}

func TestSyncPodSidecars(t *testing.T) {
	r, env := newTestRuntime(t)
	ctx := context.Background()
	pod := testPod(corev1.RestartPolicyAlways, []string{"sidecar", "setup"}, "app")
	sync := func() kubelet.PodStatus {
		t.Helper()
		st, err := r.SyncPod(ctx, pod, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	sync() // sidecar starts
	st := sync()
	if s := stateOf(t, st, "setup"); s.Terminated || s.Waiting {
		t.Fatalf("setup must start once the sidecar runs: %+v", st.Containers)
	}
	if err := env.cri.Exit(env.newest("setup").ID, 0); err != nil {
		t.Fatal(err)
	}
	st = sync()
	if a := stateOf(t, st, "app"); a.Waiting || a.Terminated {
		t.Fatalf("app = %+v", a)
	}
	if s := stateOf(t, st, "sidecar"); s.Terminated || s.Waiting {
		t.Fatalf("sidecar keeps running: %+v", s)
	}
	// A crashed sidecar is restarted; the app container is left alone.
	app := env.newest("app").ID
	if err := env.cri.Exit(env.newest("sidecar").ID, 0); err != nil {
		t.Fatal(err)
	}
	st = sync()
	if s := stateOf(t, st, "sidecar"); s.RestartCount != 1 || s.Terminated {
		t.Errorf("sidecar = %+v", s)
	}
	if env.newest("app").ID != app {
		t.Error("the app container was restarted")
	}
	// KillPod stops the app container before the sidecar.
	env.events()
	if _, err := r.KillPod(ctx, pod, time.Second); err != nil {
		t.Fatal(err)
	}
	var order []string
	for _, e := range env.events() {
		if name, ok := strings.CutPrefix(e, "Normal Killing Stopping container "); ok {
			order = append(order, name)
		}
	}
	if strings.Join(order, ",") != "app,sidecar" {
		t.Errorf("kill order = %v", order)
	}
}

func TestKillPod(t *testing.T) {
	r, env := newTestRuntime(t)
	ctx := context.Background()
	pod := testPod(corev1.RestartPolicyAlways, []string{"init"}, "a", "b")
	if _, err := r.SyncPod(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	if err := env.cri.Exit(env.newest("init").ID, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.SyncPod(ctx, pod, nil); err != nil {
		t.Fatal(err)
	}
	// A pod gone from the API: only its UID.
	st, err := r.KillPod(ctx, &corev1.Pod{}, 0)
	if err != nil || len(st.Containers) != 0 {
		t.Fatalf("kill of an unknown pod: %+v, %v", st, err)
	}
	gone := &corev1.Pod{}
	gone.UID = types.UID("uid-1")
	st, err = r.KillPod(ctx, gone, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(env.cri.Sandboxes()) != 0 || len(env.cri.Containers()) != 0 {
		t.Fatalf("left behind: %v %v", env.cri.Sandboxes(), env.cri.Containers())
	}
	if len(st.Containers) != 3 {
		t.Fatalf("final states = %+v", st.Containers)
	}
	for _, c := range st.Containers {
		if !c.Terminated || (c.Name != "init" && c.ExitCode != 137) || c.Image != "busybox:1.36" {
			t.Errorf("final state %+v", c)
		}
	}
	if evs := env.events(); hasEvent(evs, "Normal Killing") {
		t.Errorf("no events without the pod's spec: %q", evs)
	}
	// Idempotent.
	if st, err := r.KillPod(ctx, gone, 0); err != nil || len(st.Containers) != 0 {
		t.Errorf("second kill: %+v, %v", st, err)
	}
	fp, err := r.Relist(ctx)
	if err != nil || len(fp) != 0 {
		t.Errorf("relist after kill = %v, %v", fp, err)
	}
}

func TestReady(t *testing.T) {
	r, env := newTestRuntime(t)
	ctx := context.Background()
	if err := r.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	env.cri.SetCondition(runtimeapi.NetworkReady, false, "NetworkPluginNotReady", "cni plugin not initialized")
	err := r.Ready(ctx)
	if want := "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:cni plugin not initialized"; err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
	env.cri.SetCondition(runtimeapi.RuntimeReady, false, "Broken", "down")
	if err := r.Ready(ctx); err == nil || !strings.HasPrefix(err.Error(), "container runtime not ready: RuntimeReady=false") {
		t.Errorf("err = %v", err)
	}
}

// The runtime's version is its CRI Version answer's name and version, as the node
// reports it (containerd answers containerd and e.g. 1.6.20).
func TestVersion(t *testing.T) {
	r, _ := newTestRuntime(t)
	if v, err := r.Version(context.Background()); err != nil || v != "fakecri://0.0.0" {
		t.Errorf("Version = %q, %v; want fakecri://0.0.0", v, err)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, cfg := range []Config{
		{RootDir: "/var/lib/kubelet"},
		{NodeName: "n"},
		{NodeName: "n", RootDir: "relative"},
		{NodeName: "n", RootDir: "/r", CgroupParent: "kubelab"},
		{NodeName: "n", RootDir: "/r", RestartBackOff: time.Minute, MaxRestartBackOff: time.Second},
	} {
		if _, err := New(cfg, fakecri.New(), fakecri.New()); err == nil {
			t.Errorf("config %+v accepted", cfg)
		}
	}
	r, err := New(Config{NodeName: "n", RootDir: "/var/lib/kubelab/nodes/n/kubelet"}, fakecri.New(), fakecri.New())
	if err != nil {
		t.Fatal(err)
	}
	if r.cfg.PodLogsDir != "/var/lib/kubelab/nodes/n/pod-logs" || r.cfg.RestartBackOff != 10*time.Second || r.cfg.MaxImagePullBackOff != 300*time.Second {
		t.Errorf("defaults: %+v", r.cfg)
	}
}

package kuberuntime

import (
	"context"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"

	"github.com/kubelab/kubelab/internal/kubelet"
	"github.com/kubelab/kubelab/internal/testutil"
)

// Probes and hooks against containerd: exec probes through ExecSync (an exit code, a
// command that outlives its timeout), an httpGet probe dialled from the namespace
// containerd's verbose sandbox status names, a postStart hook, and a preStop hook that
// runs before the container is stopped.
func TestContainerdProbesAndHooks(t *testing.T) {
	testutil.RequireRoot(t, "containerd", "containerd-shim-runc-v2", "runc")
	layer, diffID := busyboxLayer(t)
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	host := strings.TrimPrefix(reg.URL, "http://")
	busybox := pushImage(t, host, "test/busybox", "v1", layer, diffID, nil, []string{"sh"})
	pause := pushImage(t, host, "test/pause", "v1", layer, diffID, []string{"/bin/sleep", "3600"}, nil)
	id := unique(t)
	cgroupParent := "/kubelab-test-" + id
	t.Cleanup(func() { removeCgroupTree(t, cgroupParent) })
	cd := startContainerd(t, pause)
	recorder := record.NewFakeRecorder(1000)
	r, err := New(Config{NodeName: "kp-" + id, RootDir: filepath.Join(cd.dir, "kubelet"), CgroupParent: cgroupParent,
		Recorder: recorder, Logger: slog.New(slog.NewTextHandler(tWriter{t}, nil))}, cd.rs, cd.is)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	// A host-network pod: its probes reach this process's servers on 127.0.0.1.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	data := filepath.Join(cd.dir, "data")
	if err := os.Mkdir(data, 0o777); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "hooks", Namespace: "default", UID: k8stypes.UID("hooks-" + id)},
		Spec: corev1.PodSpec{HostNetwork: true, RestartPolicy: corev1.RestartPolicyAlways, NodeName: "kp-" + id,
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{{Name: "app", Image: busybox, ImagePullPolicy: corev1.PullIfNotPresent,
				Command:      []string{"sh", "-c", "echo main >> /data/log; exec sleep 3600"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}},
				Lifecycle: &corev1.Lifecycle{
					PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "echo poststart >> /data/log"}}},
					PreStop:   &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "echo prestop >> /data/log"}}},
				}}}},
	}
	st := syncUntil(t, r, pod, kubelet.PodVolumes{"data": data}, "app running", func(st kubelet.PodStatus) bool {
		c, ok := find(st, "app")
		return ok && !c.Waiting && !c.Terminated
	})
	if b, _ := os.ReadFile(filepath.Join(data, "log")); !strings.Contains(string(b), "poststart\n") {
		t.Errorf("log once started: %q, want the postStart line", b)
	}
	app, _ := find(st, "app")
	c := &pod.Spec.Containers[0]
	probe := func(p corev1.ProbeHandler, timeout int32) (kubelet.ProbeResult, string, error) {
		return r.Probe(ctx, pod, c, app.ContainerID, &corev1.Probe{ProbeHandler: p, TimeoutSeconds: timeout})
	}
	exec := func(cmd ...string) corev1.ProbeHandler {
		return corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}
	}
	if res, out, err := probe(exec("cat", "/data/log"), 1); res != kubelet.ProbeSuccess || err != nil || !strings.Contains(out, "poststart\n") {
		t.Errorf("exec probe: %d %q %v", res, out, err)
	}
	if res, out, err := probe(exec("sh", "-c", "echo nope; exit 3"), 1); res != kubelet.ProbeFailure || err != nil || out != "nope\n" {
		t.Errorf("failing exec probe: %d %q %v", res, out, err)
	}
	start := time.Now()
	if res, out, err := probe(exec("sleep", "30"), 1); res != kubelet.ProbeFailure || err != nil || out != `command "sleep 30" timed out after 1s` {
		t.Errorf("exec probe past its timeout: %d %q %v", res, out, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("exec probe past its 1s timeout took %v", took)
	}
	get := func(path string) corev1.ProbeHandler {
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.Parse(port)}}
	}
	if res, out, err := probe(get("/healthz"), 1); res != kubelet.ProbeSuccess || err != nil {
		t.Errorf("httpGet probe: %d %q %v", res, out, err)
	}
	if res, out, err := probe(get("/missing"), 1); res != kubelet.ProbeFailure || err != nil || out != "HTTP probe failed with statuscode: 404" {
		t.Errorf("httpGet probe of a missing page: %d %q %v", res, out, err)
	}

	if err := r.KillContainer(ctx, pod, app.ContainerID, 2*time.Second, "Container app failed liveness probe, will be restarted"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(data, "log"))
	if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); len(lines) != 3 || lines[2] != "prestop" {
		t.Errorf("log after the kill: %q, want main, poststart, prestop", lines)
	}
	st = syncUntil(t, r, pod, kubelet.PodVolumes{"data": data}, "app restarted", func(st kubelet.PodStatus) bool {
		c, ok := find(st, "app")
		return ok && !c.Waiting && !c.Terminated && c.RestartCount == 1
	})
	if a, _ := find(st, "app"); a.LastTerminated == nil || a.LastTerminated.ExitCode != 137 {
		t.Errorf("restarted app: last state %+v, want killed", a.LastTerminated)
	}
	events := strings.Join(drain(recorder), "\n")
	if !strings.Contains(events, "Normal Killing Container app failed liveness probe, will be restarted") {
		t.Errorf("no Killing event in:\n%s", events)
	}
	if _, err := r.KillPod(ctx, pod, time.Second); err != nil {
		t.Fatal(err)
	}
}

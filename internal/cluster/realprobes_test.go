package cluster_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/trace"
)

func execAction(cmd ...string) corev1.ProbeHandler {
	return corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: cmd}}
}

// hasEventWith says whether an event about the pod has reason and a message starting
// with prefix.
func (tc *testCluster) hasEventWith(ns, name, reason, prefix string) bool {
	for _, ev := range controllertest.EventsAbout(tc.T, tc.Client, ns, name) {
		if ev.Reason == reason && strings.HasPrefix(ev.Message, prefix) {
			return true
		}
	}
	return false
}

// endpointReady is the ready condition of the pod's endpoint in the Service's
// EndpointSlices (nil while it has none).
func (tc *testCluster) endpointReady(ns, service, pod string) *bool {
	slices, err := tc.Client.DiscoveryV1().EndpointSlices(ns).List(context.Background(),
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	if err != nil {
		tc.T.Fatal(err)
	}
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			if ep.TargetRef != nil && ep.TargetRef.Name == pod {
				return ep.Conditions.Ready
			}
		}
	}
	return nil
}

// testProbes runs probes and lifecycle hooks on a real node: an exec readiness probe
// keeps a pod (and its endpoint) not ready until a file exists in the container; nginx
// passes a tcpSocket startup probe and an httpGet readiness probe made from inside the
// pod's network namespace; a failing exec liveness probe has its container killed and
// restarted with Unhealthy and Killing events; on deletion a preStop hook runs before
// the container gets SIGTERM, and a postStart hook ran before the pod was reported
// running.
func testProbes(t *testing.T, tc *testCluster) {
	ctx := context.Background()
	ns := tc.Namespace("real-probes")
	create := func(p *corev1.Pod) {
		t.Helper()
		if _, err := tc.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Readiness gated on a file, behind a Service.
	gated := busyboxPod(ns, "ready-file", corev1.RestartPolicyAlways, "sleep 3600")
	gated.Labels = map[string]string{"app": "ready-file"}
	gated.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: execAction("cat", "/ready"), PeriodSeconds: 1}
	create(gated)
	if _, err := tc.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "ready-file"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "ready-file"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// nginx: a startup probe on its TCP port, a readiness probe over HTTP on a named port.
	web := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nginx"},
		Spec: corev1.PodSpec{TerminationGracePeriodSeconds: new(int64), Containers: []corev1.Container{{
			Name: "nginx", Image: "nginx", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 80}},
			StartupProbe: &corev1.Probe{PeriodSeconds: 1, FailureThreshold: 30,
				ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}},
			ReadinessProbe: &corev1.Probe{PeriodSeconds: 1,
				ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}}},
		}}},
	}
	create(web)

	// A liveness probe that always fails.
	sick := busyboxPod(ns, "liveness", corev1.RestartPolicyAlways, "sleep 3600")
	sick.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: execAction("sh", "-c", "echo sick; exit 1"),
		PeriodSeconds: 1, FailureThreshold: 1}
	create(sick)

	// Hooks writing into a host directory that outlives the pod.
	out := t.TempDir()
	hooked := busyboxPod(ns, "hooks", corev1.RestartPolicyAlways,
		"trap 'echo term >> /out/log; exit 0' TERM; echo main >> /out/log; sleep 3600 & wait")
	hooked.Spec.TerminationGracePeriodSeconds = ptr.To[int64](20)
	hooked.Spec.Volumes = []corev1.Volume{{Name: "out", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: out}}}}
	hooked.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "out", MountPath: "/out"}}
	hooked.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{
		PostStart: &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "echo poststart >> /out/log"}}},
		PreStop:   &corev1.LifecycleHandler{Exec: &corev1.ExecAction{Command: []string{"sh", "-c", "echo prestop >> /out/log; sleep 1"}}},
	}
	create(hooked)

	// Readiness: running and started, not ready, its endpoint not ready; ready once the
	// file is there.
	p := tc.waitContainer(ns, "ready-file", "running, not ready", func(cs corev1.ContainerStatus) bool {
		return cs.State.Running != nil && cs.Started != nil && *cs.Started && !cs.Ready
	})
	if clustertest.PodRunning(p) || p.Status.Phase != corev1.PodRunning {
		t.Errorf("ready-file: phase %s, Ready %v; want Running and not Ready", p.Status.Phase, clustertest.PodRunning(p))
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "Unhealthy event of the readiness probe", func() (bool, error) {
		return tc.hasEventWith(ns, "ready-file", "Unhealthy", "Readiness probe failed: cat: can't open '/ready'"), nil
	})
	tc.expectWhy(ns, "ready-file", trace.StageProbe, "Readiness probe failed: cat: can't open '/ready'")
	testutil.EventuallyWithin(t, clustertest.Timeout, "endpoint of ready-file not ready", func() (bool, error) {
		r := tc.endpointReady(ns, "ready-file", "ready-file")
		return r != nil && !*r, nil
	})
	pid := tc.containerPID(p, "main")
	if err := os.WriteFile(filepath.Join("/proc", strconv.Itoa(pid), "root/ready"), []byte("yes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tc.WaitPodRunning(ns, "ready-file")
	testutil.EventuallyWithin(t, clustertest.Timeout, "endpoint of ready-file ready", func() (bool, error) {
		r := tc.endpointReady(ns, "ready-file", "ready-file")
		return r != nil && *r, nil
	})

	// nginx: started and ready through the pod's network namespace.
	p = tc.WaitPodRunning(ns, "nginx")
	if cs := p.Status.ContainerStatuses[0]; !cs.Ready || cs.Started == nil || !*cs.Started || cs.RestartCount != 0 {
		t.Errorf("nginx: %+v", cs)
	}

	// Liveness: killed and restarted.
	p = tc.waitContainer(ns, "liveness", "restarted after failing its liveness probe", func(cs corev1.ContainerStatus) bool {
		return cs.RestartCount >= 1 && cs.LastTerminationState.Terminated != nil
	})
	if last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; last.ExitCode != 137 {
		t.Errorf("liveness: last state %+v, want killed (137)", last)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "Unhealthy and Killing events of the liveness probe", func() (bool, error) {
		return tc.hasEventWith(ns, "liveness", "Unhealthy", "Liveness probe failed: sick") &&
			tc.hasEventWith(ns, "liveness", "Killing", "Container main failed liveness probe, will be restarted"), nil
	})

	// Hooks: postStart before Running; preStop before SIGTERM on deletion.
	tc.WaitPodRunning(ns, "hooks")
	b, err := os.ReadFile(filepath.Join(out, "log"))
	if err != nil || !strings.Contains(string(b), "poststart\n") {
		t.Errorf("log when the pod runs: %q (%v), want the postStart line", b, err)
	}
	start := time.Now()
	tc.deletePodAndWait(ns, "hooks")
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("deletion took %v: the container did not stop on SIGTERM", took)
	}
	b, err = os.ReadFile(filepath.Join(out, "log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	pre, term := lineIndex(lines, "prestop"), lineIndex(lines, "term")
	if err != nil || pre < 0 || term < 0 || pre > term {
		t.Errorf("log after deletion: %q (%v), want the preStop line before the TERM line", lines, err)
	}

	for _, name := range []string{"ready-file", "nginx", "liveness"} {
		tc.deletePodAndWait(ns, name)
	}
}

func lineIndex(lines []string, s string) int {
	for i, l := range lines {
		if l == s {
			return i
		}
	}
	return -1
}

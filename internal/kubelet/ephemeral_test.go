package kubelet

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestEphemeralContainerStatuses: each ephemeral container of the spec gets a status
// from the runtime's states (ContainerCreating while it has none), never ready; and
// they take no part in the pod's own status, whose phase stays the app's.
func TestEphemeralContainerStatuses(t *testing.T) {
	started := time.Unix(1000, 0)
	pod := &corev1.Pod{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyAlways,
		Containers: []corev1.Container{{Name: "app", Image: "busybox"}},
		EphemeralContainers: []corev1.EphemeralContainer{
			{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "busybox"}},
			{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "done", Image: "busybox"}},
			{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "new", Image: "busybox"}},
		}}}
	states := []ContainerState{
		{Name: "app", Image: "busybox", ContainerID: "containerd://a", StartedAt: started},
		{Name: "debugger", Image: "busybox", ContainerID: "containerd://d", StartedAt: started},
		{Name: "done", Image: "busybox", ContainerID: "containerd://e", StartedAt: started, Terminated: true, ExitCode: 1, Reason: "Error"},
	}
	now := metav1.NewTime(started)
	s := withEphemeralStatuses(pod, states, runtimeStatus(pod, withoutEphemeral(pod, states), "192.168.1.10", "10.244.0.5", true, now))
	if len(s.ContainerStatuses) != 1 || s.Phase != corev1.PodRunning {
		t.Fatalf("pod status: phase %s, %d container statuses; want Running and 1", s.Phase, len(s.ContainerStatuses))
	}
	if len(s.EphemeralContainerStatuses) != 3 {
		t.Fatalf("ephemeral statuses: %+v", s.EphemeralContainerStatuses)
	}
	d, e, n := s.EphemeralContainerStatuses[0], s.EphemeralContainerStatuses[1], s.EphemeralContainerStatuses[2]
	if d.Name != "debugger" || d.State.Running == nil || !d.State.Running.StartedAt.Time.Equal(started) || d.Ready || d.ContainerID != "containerd://d" {
		t.Errorf("debugger status = %+v, want running, not ready", d)
	}
	if e.Name != "done" || e.State.Terminated == nil || e.State.Terminated.ExitCode != 1 {
		t.Errorf("done status = %+v, want terminated with 1", e)
	}
	if n.Name != "new" || n.State.Waiting == nil || n.State.Waiting.Reason != "ContainerCreating" {
		t.Errorf("new status = %+v, want waiting ContainerCreating", n)
	}

	// A deleted pod's phase comes from its app containers alone.
	stopped := []ContainerState{
		{Name: "app", Terminated: true, ExitCode: 0, Reason: "Completed"},
		{Name: "debugger", Terminated: true, ExitCode: 137, Reason: "Error"},
	}
	if got := terminatedStatus(pod, withoutEphemeral(pod, stopped), now); got.Phase != corev1.PodSucceeded {
		t.Errorf("terminated pod phase %s, want Succeeded (the ephemeral container's exit code does not count)", got.Phase)
	}
}

// ephemeralRuntime runs every container of a pod, its ephemeral ones included.
type ephemeralRuntime struct{ probedRuntime }

func (r *ephemeralRuntime) SyncPod(ctx context.Context, pod *corev1.Pod, v PodVolumes) (PodStatus, error) {
	st, err := r.probedRuntime.SyncPod(ctx, pod, v)
	for _, ec := range pod.Spec.EphemeralContainers {
		st.Containers = append(st.Containers, ContainerState{Name: ec.Name, Image: ec.Image, ImageID: ec.Image + "@sha256:0",
			ContainerID: "fake://" + ec.Name, StartedAt: time.Now().Truncate(time.Second)})
	}
	return st, err
}

// TestKubeletReportsEphemeralContainers: an ephemeral container added to a running pod
// through pods/ephemeralcontainers is synced by the node's kubelet and reported running
// in status.ephemeralContainerStatuses, the pod still Running with its one app container.
func TestKubeletReportsEphemeralContainers(t *testing.T) {
	api := apiservertest.Start(t, apiservertest.Options{})
	c, ctx := api.Client, context.Background()
	factory := informers.NewSharedInformerFactory(c, 0)
	k, err := New(Config{NodeName: "ephemeral-a", Zone: "us-east-1a", InstanceID: "i-0e", RootDir: t.TempDir(),
		StatusUpdateInterval: time.Second, LeaseDuration: 4 * time.Second, LeaseRenewInterval: time.Second},
		c, factory, Deps{Runtime: &ephemeralRuntime{probedRuntime{restarts: map[string]int32{}}}, Mounter: newHollowMounter(nil)})
	if err != nil {
		t.Fatal(err)
	}
	startInformers(t, factory)
	testutil.Start(t, "the kubelet", 0, k.Run, testutil.NoWait)

	pod := testPod("debugged", "ephemeral-a")
	pod.Spec.AutomountServiceAccountToken = ptr.To(false)
	if _, err := c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, c, "debugged")
	// The kubelet may still be writing the pod's status (its Ready condition), so the
	// update goes on the latest version, as kubectl debug's would.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := c.CoreV1().Pods("default").Get(ctx, "debugged", metav1.GetOptions{})
		if err != nil {
			return err
		}
		p.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: "debugger", Image: "busybox:1.37", TerminationMessagePolicy: corev1.TerminationMessageReadFile}}}
		_, err = c.CoreV1().Pods("default").UpdateEphemeralContainers(ctx, "debugged", p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the ephemeral container reported running", func() (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(ctx, "debugged", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ecs := p.Status.EphemeralContainerStatuses
		return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && len(ecs) == 1 &&
			ecs[0].Name == "debugger" && ecs[0].State.Running != nil && ecs[0].ContainerID == "fake://debugger" && !ecs[0].Ready, nil
	})
}

package kubelet

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubelab/kubelab/internal/hollow"
)

// A hollow node's summary has each running container of its running pods use what the
// pod's hollow usage annotations say; pods and the node sum them; pods not running and
// containers not running are left out.
func TestHollowSummary(t *testing.T) {
	started := metav1.NewTime(time.Unix(1000, 0))
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}
	pod := func(name string, phase corev1.PodPhase, ann map[string]string, states ...corev1.ContainerState) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), Annotations: ann},
			Status: corev1.PodStatus{Phase: phase}}
		for i, st := range states {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: string(rune('a' + i)), State: st})
		}
		return p
	}
	busy := map[string]string{hollow.CPUUsageAnnotation: "250m", hollow.MemoryUsageAnnotation: "64Mi"}
	pods := []*corev1.Pod{
		pod("web", corev1.PodRunning, busy, running, running, corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{}}),
		pod("idle", corev1.PodRunning, nil, running),
		pod("done", corev1.PodSucceeded, busy, corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}),
	}
	now := time.Unix(2000, 0)
	s := hollowSummary("hollow-a", pods, now)
	if s.Node.NodeName != "hollow-a" || *s.Node.CPU.UsageNanoCores != 500_000_000 || *s.Node.Memory.WorkingSetBytes != 128<<20 {
		t.Errorf("node stats %+v cpu %d memory %d", s.Node, *s.Node.CPU.UsageNanoCores, *s.Node.Memory.WorkingSetBytes)
	}
	if len(s.Pods) != 2 || s.Pods[0].PodRef.Name != "web" || s.Pods[1].PodRef.Name != "idle" {
		t.Fatalf("pods %+v", s.Pods)
	}
	web := s.Pods[0]
	if web.PodRef.UID != "uid-web" || len(web.Containers) != 2 || *web.CPU.UsageNanoCores != 500_000_000 ||
		*web.Containers[0].CPU.UsageNanoCores != 250_000_000 || *web.Containers[1].Memory.WorkingSetBytes != 64<<20 ||
		!web.Containers[0].StartTime.Equal(&started) || !web.Containers[0].CPU.Time.Time.Equal(now) {
		t.Errorf("web %+v", web)
	}
	if idle := s.Pods[1]; len(idle.Containers) != 1 || *idle.CPU.UsageNanoCores != 0 || *idle.Containers[0].Memory.WorkingSetBytes != 0 {
		t.Errorf("idle %+v", idle)
	}
}

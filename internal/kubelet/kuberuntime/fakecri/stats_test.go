package fakecri

import (
	"context"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/hollow"
)

// startPod runs a sandbox with the annotations and a running container per name.
func startPod(t *testing.T, f *CRI, uid string, ann map[string]string, containers ...string) (string, []string) {
	t.Helper()
	ctx := context.Background()
	cfg := &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "p-" + uid, Namespace: "default", Uid: uid},
		Labels: map[string]string{"io.kubernetes.pod.uid": uid}, Annotations: ann}
	sb, err := f.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	f.AddImage("busybox")
	var ids []string
	for _, name := range containers {
		c, err := f.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.PodSandboxId, SandboxConfig: cfg,
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: "busybox"},
				Labels: map[string]string{"io.kubernetes.pod.uid": uid, "io.kubernetes.container.name": name}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ContainerId)
	}
	return sb.PodSandboxId, ids
}

func TestStatsFromAnnotations(t *testing.T) {
	f := New()
	now := time.Unix(1000, 0)
	f.SetClock(func() time.Time { return now })
	busy, busyIDs := startPod(t, f, "busy", map[string]string{hollow.CPUUsageAnnotation: "250m", hollow.MemoryUsageAnnotation: "64Mi"}, "a", "b")
	idle, idleIDs := startPod(t, f, "idle", map[string]string{hollow.CPUUsageAnnotation: "lots"}, "c")
	now = now.Add(10 * time.Second)

	resp, err := f.ListContainerStats(context.Background(), &runtimeapi.ListContainerStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*runtimeapi.ContainerStats{}
	for _, s := range resp.GetStats() {
		got[s.GetAttributes().GetId()] = s
	}
	if len(got) != 3 {
		t.Fatalf("stats of %d containers, want 3", len(got))
	}
	for _, id := range busyIDs {
		s := got[id]
		if s.GetCpu().GetUsageNanoCores().GetValue() != 250_000_000 || s.GetCpu().GetUsageCoreNanoSeconds().GetValue() != 2_500_000_000 ||
			s.GetMemory().GetWorkingSetBytes().GetValue() != 64<<20 || s.GetCpu().GetTimestamp() != now.UnixNano() {
			t.Errorf("busy container %s: %v", id, s)
		}
	}
	if s := got[idleIDs[0]]; s.GetCpu().GetUsageNanoCores().GetValue() != 0 || s.GetMemory().GetWorkingSetBytes().GetValue() != 0 {
		t.Errorf("a container without (valid) annotations uses something: %v", s)
	}

	// The filter; a container's own annotation wins over the pod's; exited containers
	// are not reported.
	f.mu.Lock()
	f.containers[busyIDs[1]].Config.Annotations = map[string]string{hollow.CPUUsageAnnotation: "1"}
	f.mu.Unlock()
	resp, err = f.ListContainerStats(context.Background(), &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{PodSandboxId: busy}})
	if err != nil || len(resp.GetStats()) != 2 || resp.GetStats()[1].GetCpu().GetUsageNanoCores().GetValue() != 1e9 {
		t.Fatalf("filtered by sandbox: %v %v", resp, err)
	}
	if err := f.Exit(idleIDs[0], 0); err != nil {
		t.Fatal(err)
	}
	resp, _ = f.ListContainerStats(context.Background(), &runtimeapi.ListContainerStatsRequest{Filter: &runtimeapi.ContainerStatsFilter{PodSandboxId: idle}})
	if len(resp.GetStats()) != 0 {
		t.Errorf("an exited container has stats: %v", resp)
	}

	sbResp, err := f.ListPodSandboxStats(context.Background(), &runtimeapi.ListPodSandboxStatsRequest{Filter: &runtimeapi.PodSandboxStatsFilter{Id: busy}})
	if err != nil || len(sbResp.GetStats()) != 1 {
		t.Fatalf("sandbox stats: %v %v", sbResp, err)
	}
	sb := sbResp.GetStats()[0]
	if sb.GetAttributes().GetMetadata().GetUid() != "busy" || sb.GetLinux().GetCpu().GetUsageNanoCores().GetValue() != 1_250_000_000 ||
		sb.GetLinux().GetMemory().GetWorkingSetBytes().GetValue() != 128<<20 || len(sb.GetLinux().GetContainers()) != 2 {
		t.Errorf("sandbox stats: %v", sb)
	}
	if err := f.SandboxDied(idle); err != nil {
		t.Fatal(err)
	}
	sbResp, _ = f.ListPodSandboxStats(context.Background(), &runtimeapi.ListPodSandboxStatsRequest{})
	if len(sbResp.GetStats()) != 1 {
		t.Errorf("a sandbox that is not ready has stats: %v", sbResp)
	}
}

package fakecri

import (
	"context"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/hollow"
)

// TestContainersExitAsAnnotated runs a pod whose annotations make its app container exit
// 5s after its start with code 3; its init container and an unannotated pod's container
// keep running.
func TestContainersExitAsAnnotated(t *testing.T) {
	ctx := context.Background()
	f := New()
	now := time.Unix(1000, 0)
	f.SetClock(func() time.Time { return now })
	f.AddImage("busybox:1.36")
	sandbox := func(uid string, ann map[string]string) string {
		t.Helper()
		sb, err := f.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: &runtimeapi.PodSandboxConfig{
			Metadata: &runtimeapi.PodSandboxMetadata{Name: "p-" + uid, Namespace: "ns", Uid: uid}, Annotations: ann}})
		if err != nil {
			t.Fatal(err)
		}
		return sb.PodSandboxId
	}
	start := func(sandbox, name, ctype string) string {
		t.Helper()
		c, err := f.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sandbox, Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"},
			Annotations: map[string]string{containerTypeAnnotation: ctype}}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
			t.Fatal(err)
		}
		return c.ContainerId
	}
	annotated := sandbox("a", map[string]string{hollow.RunSecondsAnnotation: "5", hollow.ExitCodeAnnotation: "3"})
	initC := start(annotated, "setup", "init")
	app := start(annotated, "main", "container")
	plain := start(sandbox("b", nil), "main", "container")
	status := func(id string) *runtimeapi.ContainerStatus {
		t.Helper()
		st, err := f.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err != nil {
			t.Fatal(err)
		}
		return st.Status
	}
	now = now.Add(4 * time.Second)
	if st := status(app); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("after 4s the container is %s, want running for 5s", st.State)
	}
	now = now.Add(2 * time.Second)
	st := status(app)
	if st.State != runtimeapi.ContainerState_CONTAINER_EXITED || st.ExitCode != 3 || st.Reason != "Error" ||
		st.FinishedAt != time.Unix(1005, 0).UnixNano() {
		t.Errorf("after 6s: state %s, exit code %d, reason %q, finished %v; want exited with 3 (Error) at 1005s",
			st.State, st.ExitCode, st.Reason, time.Unix(0, st.FinishedAt))
	}
	for _, id := range []string{initC, plain} {
		if st := status(id); st.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("container %s is %s, want running (init container, or no annotation)", id, st.State)
		}
	}
	list, err := f.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_EXITED}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Containers) != 1 || list.Containers[0].Id != app {
		t.Errorf("exited containers = %v, want only the annotated app container", list.Containers)
	}
}

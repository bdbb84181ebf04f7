package kubelet

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kubelab/kubelab/internal/csi/calllog"
	"github.com/kubelab/kubelab/internal/hollow"
)

// ContainerState is what the runtime reports about one container (an init container or an
// app container: their names are unique within a pod).
type ContainerState struct {
	Name, Image, ImageID, ContainerID string
	StartedAt                         time.Time
	// Terminated containers carry their exit code, reason (Completed, Error, OOMKilled) and
	// message.
	Terminated bool
	ExitCode   int32
	FinishedAt time.Time
	// Waiting containers are neither running nor terminated; Reason says why
	// (ContainerCreating, PodInitializing, ErrImagePull, ImagePullBackOff,
	// CrashLoopBackOff, CreateContainerError, …) and Message how.
	Waiting         bool
	Reason, Message string
	// RestartCount is how often the runtime restarted the container; LastTerminated is the
	// previous instance's end (the status' lastState), when there was one.
	RestartCount   int32
	LastTerminated *ContainerState
	// Started and Ready are what the kubelet's probes say of a running container: its
	// startup probe passed, and then its readiness probe passed. Nil for a container
	// without probes, which counts as both while it runs.
	Started, Ready *bool
	// Resources are a running container's cgroup settings as quantities: as the runtime
	// reports them (CRI ContainerStatus.resources) or, when it does not, as they were last
	// applied. Nil when not known (hollow nodes).
	Resources *ContainerResources
	// Actuated are the resources of the container's spec last applied to this instance
	// (when it was created or resized in place); nil when not known.
	Actuated *corev1.ResourceRequirements
}

// ContainerResources are a container's cgroup settings as quantities, as upstream's
// kubelet reads them back: the cpu request from the cpu shares, the cpu limit from the
// CFS quota and period, the memory limit. A nil field is not set (or not reported).
type ContainerResources struct {
	CPURequest, CPULimit, MemoryLimit *resource.Quantity
}

// ResizeError is the Runtime's error (wrapped in SyncPod's) when it could not apply a
// running container's new resources in place; Message is the runtime's reason.
type ResizeError struct {
	Container, Message string
}

func (e *ResizeError) Error() string {
	return fmt.Sprintf("resize container %s in place: %s", e.Container, e.Message)
}

// PodStatus is what the runtime reports about one pod.
type PodStatus struct {
	// SandboxID is the pod sandbox's id ("" before it exists).
	SandboxID string
	// IP is the sandbox's address from CNI ("" in hollow mode, where the kubelet assigns
	// one from the node's podCIDR, and for host-network pods).
	IP string
	// Containers are the states of the init and app containers the runtime knows.
	Containers []ContainerState
}

// PodVolumes maps a pod's volume names to the host paths its containers bind-mount.
type PodVolumes map[string]string

// Runtime runs pods' sandboxes and containers (CRI in real mode, a fake in hollow mode).
type Runtime interface {
	// SyncPod brings the pod's sandbox and containers to the spec: it creates the sandbox
	// (which gets its address through CNI), pulls images, runs the init containers one by
	// one, starts the app containers and restarts exited ones as restartPolicy says, with
	// back-off, and gives running containers the spec's resources (in place, or by a
	// restart when their resizePolicy says RestartContainer; a failure is a ResizeError).
	// pod carries the resources the kubelet allocated. It is idempotent and returns what
	// it sees; an error means the sync could not go on (the status still names the cause,
	// e.g. a Waiting ErrImagePull).
	SyncPod(ctx context.Context, pod *corev1.Pod, volumes PodVolumes) (PodStatus, error)
	// KillPod stops the containers within grace (SIGTERM, then SIGKILL) and stops and
	// removes the sandbox. pod may carry only its UID (a pod gone from the API). Idempotent.
	KillPod(ctx context.Context, pod *corev1.Pod, grace time.Duration) (PodStatus, error)
	// Relist returns every pod the runtime holds, by UID, with a fingerprint of its
	// containers' states that changes when any of them changes (the PLEG's input, and
	// what a restarted kubelet adopts).
	Relist(ctx context.Context) (map[types.UID]string, error)
	// Ready says whether the runtime can run pods; its error is the reason when it cannot.
	Ready(ctx context.Context) error
	// Version is the runtime's name and version as the node reports them in
	// status.nodeInfo.containerRuntimeVersion: "<name>://<version>" (containerd's CRI
	// Version answer gives e.g. "containerd://1.6.20").
	Version(ctx context.Context) (string, error)
}

// Volume is a CSI volume as the kubelet hands it to the mounter.
type Volume struct {
	// PodVolume is the name of the pod's volume that mounts it.
	PodVolume string
	// UniqueName is "kubernetes.io/csi/<driver>^<volumeHandle>", as in node.status.volumesInUse.
	UniqueName string
	PVName     string
	// Claim is the namespace/name of the PersistentVolumeClaim the pod mounts it through.
	Claim          string
	Driver, Handle string
	FSType         string
	ReadOnly       bool
	AccessMode     corev1.PersistentVolumeAccessMode
	VolumeContext  map[string]string
	// PublishContext is the VolumeAttachment's status.attachmentMetadata (devicePath, …).
	PublishContext map[string]string
}

// Mounter stages and publishes CSI volumes (NodeStage/NodePublish over the driver's socket in
// real mode; a fake in hollow mode). All calls are idempotent.
type Mounter interface {
	Stage(ctx context.Context, v *Volume, stagingPath string) error
	Publish(ctx context.Context, v *Volume, stagingPath, targetPath string) error
	Unpublish(ctx context.Context, v *Volume, targetPath string) error
	Unstage(ctx context.Context, v *Volume, stagingPath string) error
	// Expand grows the filesystem of a published volume to size (NodeExpandVolume).
	Expand(ctx context.Context, v *Volume, stagingPath, targetPath string, size resource.Quantity) error
}

// hollowRuntime "runs" containers: they start after a delay and stop when killed.
type hollowRuntime struct {
	delay time.Duration
	mu    sync.Mutex
	pods  map[types.UID][]ContainerState
}

func newHollowRuntime(delay time.Duration) *hollowRuntime {
	return &hollowRuntime{delay: delay, pods: map[types.UID][]ContainerState{}}
}

func fakeDigest(s string) string { return fmt.Sprintf("%x", sha256.Sum256([]byte(s))) }

func (r *hollowRuntime) SyncPod(ctx context.Context, pod *corev1.Pod, _ PodVolumes) (PodStatus, error) {
	r.mu.Lock()
	if st, ok := r.pods[pod.UID]; ok {
		r.mu.Unlock()
		return PodStatus{Containers: st}, nil
	}
	r.mu.Unlock()
	if r.delay > 0 {
		select {
		case <-ctx.Done():
			return PodStatus{}, ctx.Err()
		case <-time.After(r.delay):
		}
	}
	now := time.Now().Truncate(time.Second)
	var states []ContainerState
	mk := func(c corev1.Container) ContainerState {
		return ContainerState{Name: c.Name, Image: c.Image, ImageID: c.Image + "@sha256:" + fakeDigest(c.Image),
			ContainerID: hollow.ContainerIDPrefix + fakeDigest(string(pod.UID) + "/" + c.Name)[:32], StartedAt: now}
	}
	for _, c := range pod.Spec.InitContainers {
		s := mk(c)
		s.Terminated, s.Reason, s.FinishedAt = true, "Completed", now
		states = append(states, s)
	}
	for _, c := range pod.Spec.Containers {
		states = append(states, mk(c))
	}
	r.mu.Lock()
	r.pods[pod.UID] = states
	r.mu.Unlock()
	return PodStatus{Containers: states}, nil
}

func (r *hollowRuntime) KillPod(_ context.Context, pod *corev1.Pod, _ time.Duration) (PodStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	states := r.pods[pod.UID]
	delete(r.pods, pod.UID)
	now := time.Now().Truncate(time.Second)
	out := make([]ContainerState, 0, len(states))
	for _, s := range states {
		if !s.Terminated {
			s.Terminated, s.ExitCode, s.Reason, s.FinishedAt = true, 0, "Completed", now
		}
		out = append(out, s)
	}
	return PodStatus{Containers: out}, nil
}

// Relist lists the hollow pods; their containers never change on their own.
func (r *hollowRuntime) Relist(context.Context) (map[types.UID]string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[types.UID]string, len(r.pods))
	for uid := range r.pods {
		out[uid] = "hollow"
	}
	return out, nil
}

func (r *hollowRuntime) Ready(context.Context) error { return nil }

// Version is the hollow runtime's name and kubelab's version ("hollow://<version>").
func (r *hollowRuntime) Version(context.Context) (string, error) { return hollow.RuntimeVersion(), nil }

// hollowExits ends the app containers of a hollow pod whose run time has passed: the pod
// asks for it with the annotations kubelab.dev/hollow-run-seconds (seconds after the
// container started) and kubelab.dev/hollow-exit-code (default 0), as the fake CRI
// honours them. Exited containers are not restarted. It returns the states and how long
// until the next container is due to exit (0: none is).
func hollowExits(pod *corev1.Pod, states []ContainerState, now time.Time) ([]ContainerState, time.Duration) {
	run, code, ok := hollow.Exit(pod.Annotations)
	if !ok {
		return states, 0
	}
	app := make(map[string]bool, len(pod.Spec.Containers))
	for _, c := range pod.Spec.Containers {
		app[c.Name] = true
	}
	out := append([]ContainerState(nil), states...)
	var next time.Duration
	for i := range out {
		s := &out[i]
		if !app[s.Name] || s.Terminated || s.Waiting || s.StartedAt.IsZero() {
			continue
		}
		at := s.StartedAt.Add(run)
		if wait := at.Sub(now); wait > 0 {
			if next == 0 || wait < next {
				next = wait
			}
			continue
		}
		s.Terminated, s.ExitCode, s.FinishedAt, s.Reason = true, code, at, "Completed"
		if code != 0 {
			s.Reason = "Error"
		}
	}
	return out, next
}

// hollowMounter records stage, publish and expand calls; nothing touches the filesystem.
type hollowMounter struct {
	log       *slog.Logger
	mu        sync.Mutex
	staged    map[string]string            // staging path → unique name
	published map[string]string            // target path → unique name
	sizes     map[string]resource.Quantity // unique name → size it was expanded to
}

func newHollowMounter(log *slog.Logger) *hollowMounter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &hollowMounter{log: log, staged: map[string]string{}, published: map[string]string{}, sizes: map[string]resource.Quantity{}}
}

// call runs f as the CSI method of the node plugin the hollow mounter stands in for, and
// logs it as the plugin logs its calls.
func (m *hollowMounter) call(method string, v *Volume, f func() error) error {
	start := time.Now()
	calllog.LogCalled(m.log, method, "method", method, "volume", v.Handle)
	err := f()
	if err != nil {
		calllog.LogFailed(m.log, method, time.Since(start), err, "method", method, "volume", v.Handle)
		return err
	}
	calllog.LogDone(m.log, method, time.Since(start), "method", method, "volume", v.Handle)
	return nil
}

func (m *hollowMounter) Expand(_ context.Context, v *Volume, _, target string, size resource.Quantity) error {
	return m.call("NodeExpandVolume", v, func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if m.published[target] != v.UniqueName {
			return fmt.Errorf("expand %s: %s is not published", v.UniqueName, target)
		}
		m.sizes[v.UniqueName] = size
		return nil
	})
}

func (m *hollowMounter) Stage(_ context.Context, v *Volume, staging string) error {
	return m.call("NodeStageVolume", v, func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.staged[staging] = v.UniqueName
		return nil
	})
}

func (m *hollowMounter) Publish(_ context.Context, v *Volume, staging, target string) error {
	return m.call("NodePublishVolume", v, func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		if _, ok := m.staged[staging]; !ok {
			return fmt.Errorf("publish %s: staging path %s is not staged", v.UniqueName, staging)
		}
		m.published[target] = v.UniqueName
		return nil
	})
}

func (m *hollowMounter) Unpublish(_ context.Context, v *Volume, target string) error {
	return m.call("NodeUnpublishVolume", v, func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.published, target)
		return nil
	})
}

func (m *hollowMounter) Unstage(_ context.Context, v *Volume, staging string) error {
	return m.call("NodeUnstageVolume", v, func() error {
		m.mu.Lock()
		defer m.mu.Unlock()
		for t, name := range m.published {
			if name == v.UniqueName {
				return fmt.Errorf("unstage %s: still published at %s", v.UniqueName, t)
			}
		}
		delete(m.staged, staging)
		return nil
	})
}

// Mounts lists the published target paths (for tests and status).
func (m *hollowMounter) Mounts() map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string]string, len(m.published))
	for k, v := range m.published {
		out[k] = v
	}
	return out
}

package fakecri

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Sandbox is a pod sandbox the fake holds.
type Sandbox struct {
	ID        string
	Config    *runtimeapi.PodSandboxConfig
	State     runtimeapi.PodSandboxState
	CreatedAt time.Time
	// IP is the sandbox's address ("" on the node's network).
	IP string
	// RuntimeHandler is the handler it runs with ("" for the default one).
	RuntimeHandler string
}

// Container is a container the fake holds.
type Container struct {
	ID, SandboxID string
	Config        *runtimeapi.ContainerConfig
	State         runtimeapi.ContainerState
	CreatedAt     time.Time
	StartedAt     time.Time
	FinishedAt    time.Time
	ExitCode      int32
	Reason        string
	Message       string
	// ImageID is the image the container was created from.
	ImageID string
	// StopTimeout is the timeout of the last StopContainer call.
	StopTimeout int64
	logDir      string
	// exits, runFor and exitCode: the container exits runFor after it started with
	// exitCode (kubelab.dev/hollow-run-seconds, kubelab.dev/hollow-exit-code).
	exits    bool
	runFor   time.Duration
	exitCode int32
}

type image struct {
	id, name string
	size     uint64
}

// CRI is the fake runtime and image service; its zero value is not usable (use New).
type CRI struct {
	runtimeapi.RuntimeServiceClient
	runtimeapi.ImageServiceClient

	mu         sync.Mutex
	now        func() time.Time
	seq        int
	sandboxes  map[string]*Sandbox
	containers map[string]*Container
	images     map[string]*image // by name and by id
	pullErrs   map[string]error
	pullAuth   map[string]*runtimeapi.AuthConfig // images only these credentials pull
	pullAuths  []*runtimeapi.AuthConfig          // what each PullImage carried (nil: none)
	startHook  func(*Container)
	conditions map[string]*runtimeapi.RuntimeCondition
	calls      []string
	execFn     ExecFunc
	execs      []Exec
	netNSPath  string
	// hideResources: ContainerStatus reports no resources; updateErr fails
	// UpdateContainerResources.
	hideResources bool
	updateErr     error
}

// runtimeHandlers are the runtime handlers the fake runs sandboxes with: the default one
// and runc, as a kubelab node's containerd.
var runtimeHandlers = map[string]bool{"": true, "runc": true}

// New returns an empty fake whose runtime and network are ready.
func New() *CRI {
	f := &CRI{now: time.Now, sandboxes: map[string]*Sandbox{}, containers: map[string]*Container{},
		images: map[string]*image{}, pullErrs: map[string]error{}, pullAuth: map[string]*runtimeapi.AuthConfig{}, conditions: map[string]*runtimeapi.RuntimeCondition{}}
	f.SetCondition(runtimeapi.RuntimeReady, true, "", "")
	f.SetCondition(runtimeapi.NetworkReady, true, "", "")
	return f
}

var (
	_ runtimeapi.RuntimeServiceClient = (*CRI)(nil)
	_ runtimeapi.ImageServiceClient   = (*CRI)(nil)
)

// SetClock makes the fake stamp times with now.
func (f *CRI) SetClock(now func() time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = now
}

// AddImage makes an image present under name (as the runtime asks for it, e.g.
// "busybox:1.36").
func (f *CRI) AddImage(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.addImageLocked(name)
}

func (f *CRI) addImageLocked(name string) *image {
	if im, ok := f.images[name]; ok {
		return im
	}
	sum := sha256.Sum256([]byte(name))
	im := &image{id: "sha256:" + hex.EncodeToString(sum[:]), name: name, size: 1 << 20}
	f.images[name], f.images[im.id] = im, im
	return im
}

// FailPull makes pulls of name fail with err (nil: succeed again).
func (f *CRI) FailPull(name string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.pullErrs, name)
		return
	}
	f.pullErrs[name] = err
}

// HideResources makes ContainerStatus report no resources, as a runtime that does not
// report them.
func (f *CRI) HideResources(hide bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hideResources = hide
}

// FailUpdates makes UpdateContainerResources fail with err (nil: succeed again).
func (f *CRI) FailUpdates(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.updateErr = err
}

// UpdateContainerResources implements runtimeapi.RuntimeServiceClient: a created or
// running container gets the Linux resources given (the fields set in them), as
// containerd updates the container's spec and cgroup.
func (f *CRI) UpdateContainerResources(_ context.Context, in *runtimeapi.UpdateContainerResourcesRequest, _ ...grpc.CallOption) (*runtimeapi.UpdateContainerResourcesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "UpdateContainerResources")
	f.exitDueLocked()
	c, ok := f.containers[in.GetContainerId()]
	if !ok {
		return nil, notFound("container", in.GetContainerId())
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_CREATED && c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, status.Errorf(codes.Unknown, "container %q is in %s state", c.ID, c.State)
	}
	if f.updateErr != nil {
		return nil, f.updateErr
	}
	if c.Config.Linux == nil {
		c.Config.Linux = &runtimeapi.LinuxContainerConfig{}
	}
	c.Config.Linux.Resources = proto.Clone(in.GetLinux()).(*runtimeapi.LinuxContainerResources)
	return &runtimeapi.UpdateContainerResourcesResponse{}, nil
}

// RequireAuth makes pulls of name fail unless they carry username and password, as a
// private registry's do.
func (f *CRI) RequireAuth(name, username, password string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pullAuth[name] = &runtimeapi.AuthConfig{Username: username, Password: password}
}

// PullAuths is the credentials each PullImage carried, in order (nil for none).
func (f *CRI) PullAuths() []*runtimeapi.AuthConfig {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*runtimeapi.AuthConfig(nil), f.pullAuths...)
}

// OnStart sets a function called (with the fake locked) when a container starts: it may
// change the container, e.g. make it exit at once.
func (f *CRI) OnStart(hook func(*Container)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.startHook = hook
}

// ExecFunc answers an ExecSync call: the command's output and exit code, or an error.
type ExecFunc func(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr string, exitCode int32, err error)

// Exec is an ExecSync call the fake answered.
type Exec struct {
	ContainerID string
	Cmd         []string
	Timeout     time.Duration
}

// OnExec sets how ExecSync calls in running containers are answered (by default: no
// output, exit code 0). fn is called without the fake locked and may block.
func (f *CRI) OnExec(fn ExecFunc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execFn = fn
}

// Execs are the ExecSync calls so far, in order.
func (f *CRI) Execs() []Exec {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Exec(nil), f.execs...)
}

// SetNetNSPath makes the verbose status of sandboxes with a network of their own name
// path as their network namespace (host-network sandboxes name the process's own).
func (f *CRI) SetNetNSPath(path string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.netNSPath = path
}

// SetCondition sets a runtime condition (RuntimeReady, NetworkReady).
func (f *CRI) SetCondition(typ string, ok bool, reason, message string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.conditions[typ] = &runtimeapi.RuntimeCondition{Type: typ, Status: ok, Reason: reason, Message: message}
}

// Exit ends a running container with the exit code.
func (f *CRI) Exit(id string, code int32) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exitDueLocked()
	c, ok := f.containers[id]
	if !ok || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return fmt.Errorf("container %s is not running", id)
	}
	c.exit(f.now(), code)
	return nil
}

func (c *Container) exit(now time.Time, code int32) {
	c.State, c.ExitCode, c.FinishedAt = runtimeapi.ContainerState_CONTAINER_EXITED, code, now
	c.Reason = "Completed"
	if code != 0 {
		c.Reason = "Error"
	}
}

// SandboxDied makes a sandbox not ready, as when its pause process dies.
func (f *CRI) SandboxDied(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.sandboxes[id]
	if !ok {
		return fmt.Errorf("sandbox %s not found", id)
	}
	s.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	return nil
}

// Sandboxes are copies of the sandboxes, oldest first.
func (f *CRI) Sandboxes() []Sandbox {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Sandbox, 0, len(f.sandboxes))
	for _, s := range f.sandboxes {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Containers are copies of the containers, oldest first.
func (f *CRI) Containers() []Container {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exitDueLocked()
	out := make([]Container, 0, len(f.containers))
	for _, c := range f.containers {
		out = append(out, *c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Calls are the names of the CRI methods called so far, in order.
func (f *CRI) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// newID is a containerd-like id (64 hex digits) that sorts by creation.
func (f *CRI) newID() string {
	f.seq++
	sum := sha256.Sum256([]byte(strconv.Itoa(f.seq)))
	return fmt.Sprintf("%08d", f.seq) + hex.EncodeToString(sum[:])[8:]
}

func notFound(what, id string) error {
	return status.Errorf(codes.NotFound, "%s %q: not found", what, id)
}

func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// Version implements runtimeapi.RuntimeServiceClient.
func (f *CRI) Version(_ context.Context, _ *runtimeapi.VersionRequest, _ ...grpc.CallOption) (*runtimeapi.VersionResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "Version")
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fakecri", RuntimeVersion: "0.0.0", RuntimeApiVersion: "v1"}, nil
}

// Status implements runtimeapi.RuntimeServiceClient.
func (f *CRI) Status(_ context.Context, _ *runtimeapi.StatusRequest, _ ...grpc.CallOption) (*runtimeapi.StatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "Status")
	st := &runtimeapi.RuntimeStatus{}
	for _, typ := range []string{runtimeapi.RuntimeReady, runtimeapi.NetworkReady} {
		if c, ok := f.conditions[typ]; ok {
			st.Conditions = append(st.Conditions, proto.Clone(c).(*runtimeapi.RuntimeCondition))
		}
	}
	return &runtimeapi.StatusResponse{Status: st}, nil
}

// RunPodSandbox implements runtimeapi.RuntimeServiceClient.
func (f *CRI) RunPodSandbox(_ context.Context, in *runtimeapi.RunPodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.RunPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "RunPodSandbox")
	cfg := in.GetConfig()
	if cfg.GetMetadata().GetName() == "" || cfg.GetMetadata().GetUid() == "" {
		return nil, status.Error(codes.InvalidArgument, "sandbox config must have metadata name and uid")
	}
	for _, s := range f.sandboxes {
		m := s.Config.GetMetadata()
		if m.GetUid() == cfg.GetMetadata().GetUid() && m.GetAttempt() == cfg.GetMetadata().GetAttempt() {
			return nil, status.Errorf(codes.Unknown, "failed to reserve sandbox name %s_%s_%s_%d: name is reserved",
				m.GetName(), m.GetNamespace(), m.GetUid(), m.GetAttempt())
		}
	}
	if h := in.GetRuntimeHandler(); !runtimeHandlers[h] {
		// As containerd answers for a handler its config does not name.
		return nil, status.Errorf(codes.Unknown, "failed to get sandbox runtime: no runtime for %q is configured", h)
	}
	s := &Sandbox{ID: f.newID(), Config: proto.Clone(cfg).(*runtimeapi.PodSandboxConfig),
		State: runtimeapi.PodSandboxState_SANDBOX_READY, CreatedAt: f.now(), RuntimeHandler: in.GetRuntimeHandler()}
	if cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork() != runtimeapi.NamespaceMode_NODE {
		s.IP = fmt.Sprintf("10.88.%d.%d", f.seq/250, f.seq%250+2)
	}
	f.sandboxes[s.ID] = s
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: s.ID}, nil
}

// StopPodSandbox implements runtimeapi.RuntimeServiceClient: the sandbox's containers are
// killed (exit 137).
func (f *CRI) StopPodSandbox(_ context.Context, in *runtimeapi.StopPodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.StopPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "StopPodSandbox")
	f.exitDueLocked()
	s, ok := f.sandboxes[in.GetPodSandboxId()]
	if !ok {
		return nil, notFound("sandbox", in.GetPodSandboxId())
	}
	for _, c := range f.containers {
		if c.SandboxID == s.ID && c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			c.exit(f.now(), 137)
		}
	}
	s.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

// RemovePodSandbox implements runtimeapi.RuntimeServiceClient: the sandbox and its
// containers are removed; an unknown sandbox is not an error.
func (f *CRI) RemovePodSandbox(_ context.Context, in *runtimeapi.RemovePodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.RemovePodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "RemovePodSandbox")
	id := in.GetPodSandboxId()
	for cid, c := range f.containers {
		if c.SandboxID == id {
			delete(f.containers, cid)
		}
	}
	delete(f.sandboxes, id)
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

// PodSandboxStatus implements runtimeapi.RuntimeServiceClient.
func (f *CRI) PodSandboxStatus(_ context.Context, in *runtimeapi.PodSandboxStatusRequest, _ ...grpc.CallOption) (*runtimeapi.PodSandboxStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "PodSandboxStatus")
	s, ok := f.sandboxes[in.GetPodSandboxId()]
	if !ok {
		return nil, notFound("sandbox", in.GetPodSandboxId())
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{
		Id: s.ID, Metadata: s.Config.GetMetadata(), State: s.State, CreatedAt: s.CreatedAt.UnixNano(),
		Network: &runtimeapi.PodSandboxNetworkStatus{Ip: s.IP}, Labels: s.Config.GetLabels(), Annotations: s.Config.GetAnnotations(),
	}}
	if in.GetVerbose() {
		// As containerd: the pause process and the runtime spec's namespaces.
		info := map[string]any{"pid": 1}
		if s.IP != "" {
			info["runtimeSpec"] = map[string]any{"linux": map[string]any{"namespaces": []map[string]string{
				{"type": "pid"}, {"type": "network", "path": f.netNSPath}}}}
		} else {
			info["pid"] = os.Getpid()
		}
		b, err := json.Marshal(info)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		resp.Info = map[string]string{"info": string(b)}
	}
	return resp, nil
}

// ExecSync implements runtimeapi.RuntimeServiceClient: the command is answered by the
// function set with OnExec; a container that is not running refuses it.
func (f *CRI) ExecSync(ctx context.Context, in *runtimeapi.ExecSyncRequest, _ ...grpc.CallOption) (*runtimeapi.ExecSyncResponse, error) {
	f.mu.Lock()
	f.calls = append(f.calls, "ExecSync")
	f.exitDueLocked()
	c, ok := f.containers[in.GetContainerId()]
	if !ok || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		f.mu.Unlock()
		return nil, status.Errorf(codes.NotFound, "container %q is not created or running", in.GetContainerId())
	}
	timeout := time.Duration(in.GetTimeout()) * time.Second
	f.execs = append(f.execs, Exec{ContainerID: c.ID, Cmd: append([]string(nil), in.GetCmd()...), Timeout: timeout})
	fn := f.execFn
	f.mu.Unlock()
	if fn == nil {
		return &runtimeapi.ExecSyncResponse{}, nil
	}
	stdout, stderr, code, err := fn(ctx, in.GetContainerId(), in.GetCmd(), timeout)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ExecSyncResponse{Stdout: []byte(stdout), Stderr: []byte(stderr), ExitCode: code}, nil
}

// ListPodSandbox implements runtimeapi.RuntimeServiceClient.
func (f *CRI) ListPodSandbox(_ context.Context, in *runtimeapi.ListPodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "ListPodSandbox")
	flt := in.GetFilter()
	var out []*runtimeapi.PodSandbox
	for _, s := range f.sandboxes {
		if (flt.GetId() != "" && flt.GetId() != s.ID) || (flt.GetState() != nil && flt.GetState().GetState() != s.State) ||
			!matches(s.Config.GetLabels(), flt.GetLabelSelector()) {
			continue
		}
		out = append(out, &runtimeapi.PodSandbox{Id: s.ID, Metadata: s.Config.GetMetadata(), State: s.State,
			CreatedAt: s.CreatedAt.UnixNano(), Labels: s.Config.GetLabels(), Annotations: s.Config.GetAnnotations()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Id < out[j].Id })
	return &runtimeapi.ListPodSandboxResponse{Items: out}, nil
}

// CreateContainer implements runtimeapi.RuntimeServiceClient.
func (f *CRI) CreateContainer(_ context.Context, in *runtimeapi.CreateContainerRequest, _ ...grpc.CallOption) (*runtimeapi.CreateContainerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "CreateContainer")
	s, ok := f.sandboxes[in.GetPodSandboxId()]
	if !ok {
		return nil, notFound("sandbox", in.GetPodSandboxId())
	}
	if s.State != runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Errorf(codes.Unknown, "sandbox container %q is not running", s.ID)
	}
	cfg := in.GetConfig()
	im, ok := f.images[cfg.GetImage().GetImage()]
	if !ok {
		return nil, status.Errorf(codes.Unknown, "failed to get image %q: not found", cfg.GetImage().GetImage())
	}
	uid := s.Config.GetMetadata().GetUid()
	for _, c := range f.containers {
		other := f.sandboxes[c.SandboxID]
		if other != nil && other.Config.GetMetadata().GetUid() == uid && c.Config.GetMetadata().GetName() == cfg.GetMetadata().GetName() &&
			c.Config.GetMetadata().GetAttempt() == cfg.GetMetadata().GetAttempt() {
			return nil, status.Errorf(codes.Unknown, "failed to reserve container name %s_%d: name is reserved",
				cfg.GetMetadata().GetName(), cfg.GetMetadata().GetAttempt())
		}
	}
	c := &Container{ID: f.newID(), SandboxID: s.ID, Config: proto.Clone(cfg).(*runtimeapi.ContainerConfig),
		State: runtimeapi.ContainerState_CONTAINER_CREATED, CreatedAt: f.now(), ImageID: im.id,
		logDir: in.GetSandboxConfig().GetLogDirectory()}
	c.runFor, c.exitCode, c.exits = hollowExitOf(s, cfg)
	f.containers[c.ID] = c
	return &runtimeapi.CreateContainerResponse{ContainerId: c.ID}, nil
}

// StartContainer implements runtimeapi.RuntimeServiceClient.
func (f *CRI) StartContainer(_ context.Context, in *runtimeapi.StartContainerRequest, _ ...grpc.CallOption) (*runtimeapi.StartContainerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "StartContainer")
	c, ok := f.containers[in.GetContainerId()]
	if !ok {
		return nil, notFound("container", in.GetContainerId())
	}
	if c.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		return nil, status.Errorf(codes.Unknown, "container %q is in %s state", c.ID, c.State)
	}
	c.State, c.StartedAt = runtimeapi.ContainerState_CONTAINER_RUNNING, f.now()
	if f.startHook != nil {
		f.startHook(c)
	}
	return &runtimeapi.StartContainerResponse{}, nil
}

// StopContainer implements runtimeapi.RuntimeServiceClient: a running container exits 137.
func (f *CRI) StopContainer(_ context.Context, in *runtimeapi.StopContainerRequest, _ ...grpc.CallOption) (*runtimeapi.StopContainerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "StopContainer")
	f.exitDueLocked()
	c, ok := f.containers[in.GetContainerId()]
	if !ok {
		return nil, notFound("container", in.GetContainerId())
	}
	c.StopTimeout = in.GetTimeout()
	if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		c.exit(f.now(), 137)
	}
	return &runtimeapi.StopContainerResponse{}, nil
}

// RemoveContainer implements runtimeapi.RuntimeServiceClient; an unknown container is not
// an error, a running one is.
func (f *CRI) RemoveContainer(_ context.Context, in *runtimeapi.RemoveContainerRequest, _ ...grpc.CallOption) (*runtimeapi.RemoveContainerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "RemoveContainer")
	f.exitDueLocked()
	c, ok := f.containers[in.GetContainerId()]
	if !ok {
		return &runtimeapi.RemoveContainerResponse{}, nil
	}
	if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
		return nil, status.Errorf(codes.Unknown, "container %q is still running, to stop first", c.ID)
	}
	delete(f.containers, c.ID)
	return &runtimeapi.RemoveContainerResponse{}, nil
}

// ListContainers implements runtimeapi.RuntimeServiceClient.
func (f *CRI) ListContainers(_ context.Context, in *runtimeapi.ListContainersRequest, _ ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "ListContainers")
	f.exitDueLocked()
	flt := in.GetFilter()
	var out []*runtimeapi.Container
	for _, c := range f.containers {
		if (flt.GetId() != "" && flt.GetId() != c.ID) || (flt.GetPodSandboxId() != "" && flt.GetPodSandboxId() != c.SandboxID) ||
			(flt.GetState() != nil && flt.GetState().GetState() != c.State) || !matches(c.Config.GetLabels(), flt.GetLabelSelector()) {
			continue
		}
		out = append(out, &runtimeapi.Container{Id: c.ID, PodSandboxId: c.SandboxID, Metadata: c.Config.GetMetadata(),
			Image: &runtimeapi.ImageSpec{Image: f.imageName(c)}, ImageRef: f.imageRef(c), State: c.State,
			CreatedAt: c.CreatedAt.UnixNano(), Labels: c.Config.GetLabels(), Annotations: c.Config.GetAnnotations()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Id < out[j].Id })
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}

func (f *CRI) imageName(c *Container) string {
	if im, ok := f.images[c.ImageID]; ok {
		return im.name
	}
	return c.Config.GetImage().GetImage()
}

func (f *CRI) imageRef(c *Container) string {
	if im, ok := f.images[c.ImageID]; ok {
		return im.name + "@" + im.id
	}
	return c.ImageID
}

// ContainerStatus implements runtimeapi.RuntimeServiceClient.
func (f *CRI) ContainerStatus(_ context.Context, in *runtimeapi.ContainerStatusRequest, _ ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "ContainerStatus")
	f.exitDueLocked()
	c, ok := f.containers[in.GetContainerId()]
	if !ok {
		return nil, notFound("container", in.GetContainerId())
	}
	st := &runtimeapi.ContainerStatus{Id: c.ID, Metadata: c.Config.GetMetadata(), State: c.State, CreatedAt: c.CreatedAt.UnixNano(),
		ExitCode: c.ExitCode, Image: &runtimeapi.ImageSpec{Image: f.imageName(c)}, ImageRef: f.imageRef(c), Reason: c.Reason,
		Message: c.Message, Labels: c.Config.GetLabels(), Annotations: c.Config.GetAnnotations(), Mounts: c.Config.GetMounts()}
	if c.Config.GetLogPath() != "" {
		st.LogPath = filepath.Join(c.logDir, c.Config.GetLogPath())
	}
	if !c.StartedAt.IsZero() {
		st.StartedAt = c.StartedAt.UnixNano()
	}
	if !c.FinishedAt.IsZero() {
		st.FinishedAt = c.FinishedAt.UnixNano()
	}
	if r := c.Config.GetLinux().GetResources(); r != nil && !f.hideResources {
		st.Resources = &runtimeapi.ContainerResources{Linux: proto.Clone(r).(*runtimeapi.LinuxContainerResources)}
	}
	return &runtimeapi.ContainerStatusResponse{Status: st}, nil
}

// ImageStatus implements runtimeapi.ImageServiceClient: a missing image has no Image.
func (f *CRI) ImageStatus(_ context.Context, in *runtimeapi.ImageStatusRequest, _ ...grpc.CallOption) (*runtimeapi.ImageStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "ImageStatus")
	im, ok := f.images[in.GetImage().GetImage()]
	if !ok {
		return &runtimeapi.ImageStatusResponse{}, nil
	}
	return &runtimeapi.ImageStatusResponse{Image: &runtimeapi.Image{Id: im.id, RepoTags: []string{im.name},
		RepoDigests: []string{im.name + "@" + im.id}, Size: im.size}}, nil
}

// PullImage implements runtimeapi.ImageServiceClient.
func (f *CRI) PullImage(_ context.Context, in *runtimeapi.PullImageRequest, _ ...grpc.CallOption) (*runtimeapi.PullImageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "PullImage")
	name := in.GetImage().GetImage()
	f.pullAuths = append(f.pullAuths, in.GetAuth())
	if err, ok := f.pullErrs[name]; ok {
		return nil, err
	}
	if want, ok := f.pullAuth[name]; ok && (in.GetAuth().GetUsername() != want.Username || in.GetAuth().GetPassword() != want.Password) {
		return nil, status.Errorf(codes.Unknown, "failed to pull and unpack image %q: pull access denied, repository does not exist or may require authorization", name)
	}
	return &runtimeapi.PullImageResponse{ImageRef: f.addImageLocked(name).id}, nil
}

package kuberuntime

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// instance is one container the runtime holds for a pod: a run (or an attempt to run) of
// one of the pod's containers.
type instance struct {
	id, sandboxID, name string
	// attempt is the container's restart count when the instance was created.
	attempt     uint32
	state       runtimeapi.ContainerState
	hash        string
	ctype       containerType
	createdAt   time.Time
	startedAt   time.Time
	finishedAt  time.Time
	exitCode    int32
	reason, msg string
	image       string // the image the runtime reports (a tag)
	imageRef    string // the image's digest reference
	// terminationMessagePath and Policy come from the instance's annotations;
	// terminationFile is the host file mounted there.
	terminationMessagePath, terminationMessagePolicy, terminationFile string
	logPath                                                           string
	// resources are the cgroup settings the runtime reports for the instance (else those
	// the runtime applied, when it knows them); actuated are the resources of the spec it
	// applied (nil: not known, as after a restart of the kubelet).
	resources *runtimeapi.LinuxContainerResources
	actuated  *corev1.ResourceRequirements
}

func (i *instance) exited() bool { return i.state == runtimeapi.ContainerState_CONTAINER_EXITED }

// sandbox is one of a pod's sandboxes.
type sandbox struct {
	id        string
	attempt   uint32
	ready     bool
	createdAt time.Time
	// ip is the pod's address (the newest ready sandbox's only; "" on the host network).
	ip string
}

// podView is what the runtime holds for a pod: sandboxes newest first, and per container
// name its instances newest first.
type podView struct {
	sandboxes  []sandbox
	containers map[string][]instance
}

// latest is the newest instance of a container, nil when there is none.
func (v *podView) latest(name string) *instance {
	if is := v.containers[name]; len(is) > 0 {
		return &is[0]
	}
	return nil
}

// readySandbox is the newest sandbox when it is ready, else nil.
func (v *podView) readySandbox() *sandbox {
	for i := range v.sandboxes {
		if v.sandboxes[i].ready {
			return &v.sandboxes[i]
		}
	}
	return nil
}

func (v *podView) hasContainers() bool {
	for _, is := range v.containers {
		if len(is) > 0 {
			return true
		}
	}
	return false
}

// lastExited is the newest exited instance after the newest one (the previous run of a
// container that runs again), nil when there is none.
func (v *podView) lastExited(name string) *instance {
	is := v.containers[name]
	for i := 1; i < len(is); i++ {
		if is[i].exited() {
			return &is[i]
		}
	}
	return nil
}

func sortView(v *podView) {
	sort.SliceStable(v.sandboxes, func(i, j int) bool {
		a, b := v.sandboxes[i], v.sandboxes[j]
		if a.attempt != b.attempt {
			return a.attempt > b.attempt
		}
		return a.createdAt.After(b.createdAt)
	})
	for _, is := range v.containers {
		sort.SliceStable(is, func(i, j int) bool {
			if is[i].attempt != is[j].attempt {
				return is[i].attempt > is[j].attempt
			}
			return is[i].createdAt.After(is[j].createdAt)
		})
	}
}

func isNotFound(err error) bool { return status.Code(err) == codes.NotFound }

// observe lists the pod's sandboxes and containers (with each container's status) and
// the newest ready sandbox's address.
func (r *Runtime) observe(ctx context.Context, uid types.UID) (*podView, error) {
	sel := map[string]string{labelPodUID: string(uid)}
	sbs, err := r.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: sel}})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes of pod %s: %w", uid, err)
	}
	cs, err := r.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: sel}})
	if err != nil {
		return nil, fmt.Errorf("list containers of pod %s: %w", uid, err)
	}
	v := &podView{containers: map[string][]instance{}}
	for _, s := range sbs.GetItems() {
		v.sandboxes = append(v.sandboxes, sandbox{id: s.GetId(), attempt: s.GetMetadata().GetAttempt(),
			ready: s.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY, createdAt: time.Unix(0, s.GetCreatedAt())})
	}
	for _, c := range cs.GetContainers() {
		st, err := r.rs.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.GetId()})
		if isNotFound(err) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("status of container %s of pod %s: %w", c.GetId(), uid, err)
		}
		in := toInstance(c, st.GetStatus())
		v.containers[in.name] = append(v.containers[in.name], in)
	}
	sortView(v)
	r.withActuated(uid, v)
	if sb := v.readySandbox(); sb != nil {
		st, err := r.rs.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: sb.id})
		switch {
		case isNotFound(err):
			sb.ready = false
		case err != nil:
			return nil, fmt.Errorf("status of sandbox %s of pod %s: %w", sb.id, uid, err)
		default:
			sb.ip = st.GetStatus().GetNetwork().GetIp()
			sb.ready = st.GetStatus().GetState() == runtimeapi.PodSandboxState_SANDBOX_READY
		}
	}
	return v, nil
}

func toInstance(c *runtimeapi.Container, st *runtimeapi.ContainerStatus) instance {
	ann := c.GetAnnotations()
	if st != nil && len(st.GetAnnotations()) > 0 {
		ann = st.GetAnnotations()
	}
	name := c.GetLabels()[labelContainerName]
	if name == "" {
		name = c.GetMetadata().GetName()
	}
	in := instance{
		id: c.GetId(), sandboxID: c.GetPodSandboxId(), name: name, attempt: c.GetMetadata().GetAttempt(),
		state: c.GetState(), hash: ann[annotationHash], ctype: containerType(ann[annotationType]),
		createdAt: time.Unix(0, c.GetCreatedAt()), image: c.GetImage().GetImage(), imageRef: c.GetImageRef(),
		terminationMessagePath: ann[annotationTerminationMessagePath], terminationMessagePolicy: ann[annotationTerminationMessagePolicy],
	}
	if rc, err := strconv.ParseUint(ann[annotationRestartCount], 10, 32); err == nil && uint32(rc) > in.attempt {
		in.attempt = uint32(rc)
	}
	if in.ctype == "" {
		in.ctype = typeApp
	}
	if st == nil {
		return in
	}
	in.state = st.GetState()
	if t := st.GetStartedAt(); t != 0 {
		in.startedAt = time.Unix(0, t)
	}
	if t := st.GetFinishedAt(); t != 0 {
		in.finishedAt = time.Unix(0, t)
	}
	in.exitCode, in.reason, in.msg, in.logPath = st.GetExitCode(), st.GetReason(), st.GetMessage(), st.GetLogPath()
	in.resources = st.GetResources().GetLinux()
	if img := st.GetImage().GetImage(); img != "" {
		in.image = img
	}
	if st.GetImageRef() != "" {
		in.imageRef = st.GetImageRef()
	}
	for _, m := range st.GetMounts() {
		if in.terminationMessagePath != "" && m.GetContainerPath() == in.terminationMessagePath {
			in.terminationFile = m.GetHostPath()
		}
	}
	return in
}

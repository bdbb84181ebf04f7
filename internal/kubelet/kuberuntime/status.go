package kuberuntime

import (
	"bytes"
	"io"
	"os"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/kubelet"
)

// waitReason is why a container is waiting, from the last attempt to start it.
type waitReason struct{ reason, message string }

const (
	// maxTerminationMessage is how much of a termination-message file the status carries.
	maxTerminationMessage = 4096
	// fallbackLogBytes and fallbackLogLines bound the log tail that replaces an empty
	// termination message under FallbackToLogsOnError.
	fallbackLogBytes = 2048
	fallbackLogLines = 80
)

// terminated fills st with the instance's end: exit code, times, reason and message.
func terminated(st *kubelet.ContainerState, in *instance) {
	st.Terminated, st.ExitCode = true, in.exitCode
	st.StartedAt, st.FinishedAt = in.startedAt, in.finishedAt
	st.Reason, st.Message = in.reason, in.msg
	if in.state == runtimeapi.ContainerState_CONTAINER_UNKNOWN {
		st.ExitCode, st.Reason = 137, "ContainerStatusUnknown"
		st.Message = "The container could not be located when the pod was terminated"
		return
	}
	if st.Reason == "" {
		st.Reason = "Completed"
		if st.ExitCode != 0 {
			st.Reason = "Error"
		}
	}
	if m := terminationMessage(in); m != "" {
		st.Message = m
	}
}

// terminationMessage is what the container wrote to its termination-message file or,
// under FallbackToLogsOnError when it wrote nothing and failed, the tail of its log.
func terminationMessage(in *instance) string {
	var msg string
	if in.terminationFile != "" {
		if f, err := os.Open(in.terminationFile); err == nil {
			b, _ := io.ReadAll(io.LimitReader(f, maxTerminationMessage))
			f.Close()
			msg = string(b)
		}
	}
	if msg == "" && in.exitCode != 0 && in.terminationMessagePolicy == string(corev1.TerminationMessageFallbackToLogsOnError) {
		msg = logTail(in.logPath)
	}
	return msg
}

// logTail is the text of the last lines of a CRI log file (<time> <stream> <tag> <text>).
func logTail(path string) string {
	if path == "" {
		return ""
	}
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const window = 64 * 1024
	if fi, err := f.Stat(); err == nil && fi.Size() > window {
		_, _ = f.Seek(fi.Size()-window, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > fallbackLogLines {
		lines = lines[len(lines)-fallbackLogLines:]
	}
	var out strings.Builder
	for _, l := range lines {
		parts := bytes.SplitN(l, []byte(" "), 4)
		if len(parts) < 4 {
			continue
		}
		out.Write(parts[3])
		if string(parts[2]) != string(runtimeapi.LogTagPartial) {
			out.WriteByte('\n')
		}
	}
	s := out.String()
	if len(s) > fallbackLogBytes {
		s = s[len(s)-fallbackLogBytes:]
	}
	return s
}

// containerState is what the status shows for a container: the newest instance, the
// previous run as LastTerminated, and while it waits to be started again the reason of the
// last attempt (CrashLoopBackOff, ErrImagePull, …). ok is false for a container the runtime
// knows nothing about.
func (r *Runtime) containerState(pod *corev1.Pod, c *corev1.Container, t containerType, v *podView, reason *waitReason) (kubelet.ContainerState, bool) {
	latest := v.latest(c.Name)
	st := kubelet.ContainerState{Name: c.Name, Image: c.Image}
	if latest == nil {
		if reason == nil {
			return st, false
		}
		st.Waiting, st.Reason, st.Message = true, reason.reason, reason.message
		return st, true
	}
	st.ImageID, st.ContainerID, st.RestartCount = latest.imageRef, r.containerID(latest.id), int32(latest.attempt)
	lastRun := func() *kubelet.ContainerState {
		if prev := v.lastExited(c.Name); prev != nil {
			lt := kubelet.ContainerState{Name: c.Name, Image: c.Image, ImageID: prev.imageRef, ContainerID: r.containerID(prev.id)}
			terminated(&lt, prev)
			return &lt
		}
		return nil
	}
	switch latest.state {
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		st.StartedAt = latest.startedAt
		st.LastTerminated = lastRun()
		st.Resources, st.Actuated = containerResources(latest.resources), latest.actuated
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		st.Waiting, st.Reason = true, "ContainerCreating"
		if reason != nil {
			st.Reason, st.Message = reason.reason, reason.message
		}
		st.LastTerminated = lastRun()
	default:
		if reason != nil && shouldRestart(pod, t, latest) {
			last := kubelet.ContainerState{Name: c.Name, Image: c.Image, ImageID: latest.imageRef, ContainerID: st.ContainerID}
			terminated(&last, latest)
			st.Waiting, st.Reason, st.Message, st.LastTerminated = true, reason.reason, reason.message, &last
			return st, true
		}
		terminated(&st, latest)
		st.LastTerminated = lastRun()
	}
	return st, true
}

func (r *Runtime) containerID(id string) string { return r.cfg.RuntimeName + "://" + id }

// podStatus is the pod's status from the view: the newest sandbox, the address of the
// ready one, and the states of the init and app containers in spec order.
func (r *Runtime) podStatus(pod *corev1.Pod, v *podView) kubelet.PodStatus {
	var ps kubelet.PodStatus
	if len(v.sandboxes) > 0 {
		ps.SandboxID = v.sandboxes[0].id
	}
	if sb := v.readySandbox(); sb != nil {
		ps.IP = sb.ip
	}
	reasons := r.reasons(pod.UID)
	add := func(c *corev1.Container, t containerType) {
		var reason *waitReason
		if w, ok := reasons[c.Name]; ok {
			reason = &w
		}
		if st, ok := r.containerState(pod, c, t, v, reason); ok {
			ps.Containers = append(ps.Containers, st)
		}
	}
	for i := range pod.Spec.InitContainers {
		add(&pod.Spec.InitContainers[i], initType(&pod.Spec.InitContainers[i]))
	}
	for i := range pod.Spec.Containers {
		add(&pod.Spec.Containers[i], typeApp)
	}
	ps.Containers = append(ps.Containers, r.ephemeralStates(pod, v)...)
	return ps
}

// killedStatus is the final status of a pod whose containers were stopped: every
// container's newest instance as Terminated. Without a spec the containers are named by
// their instances, sorted by name.
func (r *Runtime) killedStatus(pod *corev1.Pod, v *podView) kubelet.PodStatus {
	var ps kubelet.PodStatus
	if len(v.sandboxes) > 0 {
		ps.SandboxID = v.sandboxes[0].id
	}
	seen := map[string]bool{}
	add := func(name, image string) {
		latest := v.latest(name)
		if latest == nil || seen[name] {
			return
		}
		seen[name] = true
		if image == "" {
			image = latest.image
		}
		st := kubelet.ContainerState{Name: name, Image: image, ImageID: latest.imageRef,
			ContainerID: r.containerID(latest.id), RestartCount: int32(latest.attempt)}
		prev := v.lastExited(name)
		if latest.state == runtimeapi.ContainerState_CONTAINER_CREATED {
			// The newest instance never started: the previous run is the container's end.
			if prev == nil {
				return
			}
			st.ImageID, st.ContainerID = prev.imageRef, r.containerID(prev.id)
			terminated(&st, prev)
			ps.Containers = append(ps.Containers, st)
			return
		}
		terminated(&st, latest)
		if prev != nil {
			lt := kubelet.ContainerState{Name: name, Image: image, ImageID: prev.imageRef, ContainerID: r.containerID(prev.id)}
			terminated(&lt, prev)
			st.LastTerminated = &lt
		}
		ps.Containers = append(ps.Containers, st)
	}
	for _, c := range pod.Spec.InitContainers {
		add(c.Name, c.Image)
	}
	for _, c := range pod.Spec.Containers {
		add(c.Name, c.Image)
	}
	names := make([]string, 0, len(v.containers))
	for name := range v.containers {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		add(name, "")
	}
	return ps
}

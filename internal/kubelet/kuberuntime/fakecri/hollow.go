package fakecri

import (
	"math"
	"strconv"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The run time of a hollow container, set as pod annotations (the kubelet copies a pod's
// annotations onto its sandbox; an annotation on the container's own config wins). They
// apply to every app container of the pod, not to init containers and sidecars. Without
// them a hollow container runs until it is stopped.
const (
	// HollowRunSecondsAnnotation makes a container exit that many seconds (a decimal
	// number, e.g. "5" or "0.5") after it started.
	HollowRunSecondsAnnotation = "kubelab.dev/hollow-run-seconds"
	// HollowExitCodeAnnotation is the exit code it exits with (0 when absent).
	HollowExitCodeAnnotation = "kubelab.dev/hollow-exit-code"
)

// HollowExit reads the run time and exit code the annotations ask for; ok is false when
// kubelab.dev/hollow-run-seconds is absent or not a number >= 0. An exit code that does
// not parse as a 32-bit integer is 0.
func HollowExit(annotations map[string]string) (run time.Duration, code int32, ok bool) {
	v, found := annotations[HollowRunSecondsAnnotation]
	if !found {
		return 0, 0, false
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || secs < 0 || math.IsNaN(secs) || math.IsInf(secs, 0) || secs > math.MaxInt64/float64(time.Second) {
		return 0, 0, false
	}
	if c, err := strconv.ParseInt(annotations[HollowExitCodeAnnotation], 10, 32); err == nil {
		code = int32(c)
	}
	return time.Duration(secs * float64(time.Second)), code, true
}

// containerTypeAnnotation is where kubelab's kubelet runtime says whether a container is
// an init container, a sidecar or an app container.
const containerTypeAnnotation = "kubelab.io/container-type"

// hollowExitOf is the exit a container created in sandbox s with cfg is to make (init
// containers and sidecars make none).
func hollowExitOf(s *Sandbox, cfg *runtimeapi.ContainerConfig) (time.Duration, int32, bool) {
	if t, ok := cfg.GetAnnotations()[containerTypeAnnotation]; ok && t != "container" {
		return 0, 0, false
	}
	annotations := map[string]string{}
	for k, v := range s.Config.GetAnnotations() {
		annotations[k] = v
	}
	for k, v := range cfg.GetAnnotations() {
		annotations[k] = v
	}
	return HollowExit(annotations)
}

// exitDueLocked ends the running containers whose run time has passed, at the time it
// passed.
func (f *CRI) exitDueLocked() {
	now := f.now()
	for _, c := range f.containers {
		if c.State != runtimeapi.ContainerState_CONTAINER_RUNNING || !c.exits {
			continue
		}
		if at := c.StartedAt.Add(c.runFor); !now.Before(at) {
			c.exit(at, c.exitCode)
		}
	}
}

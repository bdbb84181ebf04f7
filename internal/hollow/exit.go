package hollow

import (
	"math"
	"strconv"
	"time"
)

// The run time of a hollow container, set as pod annotations (the kubelet copies a pod's
// annotations onto its sandbox; an annotation on the container's own config wins). They
// apply to every app container of the pod, not to init containers and sidecars. Without
// them a hollow container runs until it is stopped.
const (
	// RunSecondsAnnotation makes a container exit that many seconds (a decimal
	// number, e.g. "5" or "0.5") after it started.
	RunSecondsAnnotation = "kubelab.dev/hollow-run-seconds"
	// ExitCodeAnnotation is the exit code it exits with (0 when absent).
	ExitCodeAnnotation = "kubelab.dev/hollow-exit-code"
)

// Exit reads the run time and exit code the annotations ask for; ok is false when
// kubelab.dev/hollow-run-seconds is absent or not a number >= 0. An exit code that does
// not parse as a 32-bit integer is 0.
func Exit(annotations map[string]string) (run time.Duration, code int32, ok bool) {
	v, found := annotations[RunSecondsAnnotation]
	if !found {
		return 0, 0, false
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || secs < 0 || math.IsNaN(secs) || math.IsInf(secs, 0) || secs > math.MaxInt64/float64(time.Second) {
		return 0, 0, false
	}
	if c, err := strconv.ParseInt(annotations[ExitCodeAnnotation], 10, 32); err == nil {
		code = int32(c)
	}
	return time.Duration(secs * float64(time.Second)), code, true
}

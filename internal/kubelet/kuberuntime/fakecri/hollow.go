package fakecri

import (
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/hollow"
)

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
	return hollow.Exit(annotations)
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

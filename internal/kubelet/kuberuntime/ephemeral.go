package kuberuntime

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/kubelet"
)

// typeEphemeral marks the instances of a pod's ephemeral containers: containers added
// to a running pod (pods/ephemeralcontainers), for debugging, started once and never
// restarted; they stop with the app containers.
const typeEphemeral containerType = "ephemeral"

// ephemeralStarts are the pod's ephemeral containers to start: those that have no
// instance yet. One whose targetContainerName is set shares the process namespace of
// that container's running instance (targetID; "" when it does not run).
func ephemeralStarts(pod *corev1.Pod, v *podView) []startAction {
	var out []startAction
	for i := range pod.Spec.EphemeralContainers {
		ec := &pod.Spec.EphemeralContainers[i]
		if v.latest(ec.Name) != nil {
			continue
		}
		s := startAction{container: (*corev1.Container)(&ec.EphemeralContainerCommon), ctype: typeEphemeral, target: ec.TargetContainerName}
		if t := v.latest(ec.TargetContainerName); s.target != "" && t != nil && t.state == runtimeapi.ContainerState_CONTAINER_RUNNING {
			s.targetID = t.id
		}
		out = append(out, s)
	}
	return out
}

// errTargetNotRunning is why an ephemeral container whose target does not run is not
// started (its CreateContainerConfigError message).
func errTargetNotRunning(target string) error {
	return fmt.Errorf("unable to find target container %v", target)
}

// sharePIDNamespace has a container join the process namespace of the running
// container targetID, unless the pod's containers share the pod's (or the node's).
func sharePIDNamespace(cfg *runtimeapi.ContainerConfig, targetID string) {
	ns := cfg.GetLinux().GetSecurityContext().GetNamespaceOptions()
	if targetID == "" || ns == nil || ns.Pid != runtimeapi.NamespaceMode_CONTAINER {
		return
	}
	ns.Pid, ns.TargetId = runtimeapi.NamespaceMode_TARGET, targetID
}

// ephemeralStates are the states of the pod's ephemeral containers the runtime knows,
// in spec order. A container that never started shows why (the reason of the last
// attempt); one that ran shows its end and is not started again.
func (r *Runtime) ephemeralStates(pod *corev1.Pod, v *podView) []kubelet.ContainerState {
	reasons := r.reasons(pod.UID)
	var out []kubelet.ContainerState
	for i := range pod.Spec.EphemeralContainers {
		c := (*corev1.Container)(&pod.Spec.EphemeralContainers[i].EphemeralContainerCommon)
		var reason *waitReason
		if w, ok := reasons[c.Name]; ok && v.latest(c.Name) == nil {
			reason = &w
		}
		if st, ok := r.containerState(pod, c, typeEphemeral, v, reason); ok {
			out = append(out, st)
		}
	}
	return out
}

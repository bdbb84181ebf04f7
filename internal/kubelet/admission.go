package kubelet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubelab/kubelab/internal/util/hostport"
	"github.com/kubelab/kubelab/internal/util/podutil"
)

// Upstream's words for a pod refused because another pod of the node holds one of its
// hostPorts.
const (
	reasonNodePorts  = "NodePorts"
	messageNodePorts = "Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
)

// admitHostPorts is the kubelet's admission of a pod, as upstream's NodePorts predicate
// decides it: the pod is refused (ok false, with the reason and message of its Failed
// status) when one of its hostPorts conflicts with one used by the pods already admitted.
func admitHostPorts(want, used []hostport.Port) (ok bool, reason, message string) {
	if len(hostport.Taken(want, used)) > 0 {
		return false, reasonNodePorts, messageNodePorts
	}
	return true, "", ""
}

// ranHere says whether the pod's status shows it ran already (on this node, before this
// kubelet started): such a pod was admitted then.
func ranHere(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodRunning {
		return true
	}
	for _, cs := range append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		if cs.ContainerID != "" {
			return true
		}
	}
	return false
}

func isTerminal(phase corev1.PodPhase) bool {
	return phase == corev1.PodSucceeded || phase == corev1.PodFailed
}

// admit decides, once per pod, whether the node takes it: it does unless one of its
// hostPorts is held by a pod admitted before that has not finished. Decisions are made
// one at a time, so that of two conflicting pods only the first is admitted.
func (k *Kubelet) admit(key string, pod *corev1.Pod, st *podState) (ok bool, reason, message string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if st.admitted {
		return true, "", ""
	}
	want := hostport.OfPod(pod)
	if len(want) > 0 && !ranHere(pod) {
		ok, reason, message = admitHostPorts(want, k.usedHostPorts(key))
		if !ok {
			return ok, reason, message
		}
	}
	st.admitted, st.hostPorts = true, want
	return true, "", ""
}

// usedHostPorts are the hostPorts of the admitted pods but the one of key that have not
// finished; k.mu is held.
func (k *Kubelet) usedHostPorts(key string) []hostport.Port {
	var used []hostport.Port
	for other, o := range k.pods {
		if other == key || !o.admitted || len(o.hostPorts) == 0 {
			continue
		}
		if o.written != nil && isTerminal(o.written.Phase) {
			continue
		}
		if ns, name, err := cache.SplitMetaNamespaceKey(other); err == nil {
			if p, err := k.podLister.Pods(ns).Get(name); err == nil && p.UID == o.uid && isTerminal(p.Status.Phase) {
				continue
			}
		}
		used = append(used, o.hostPorts...)
	}
	return used
}

// reject fails a pod the node does not admit, as upstream's kubelet does: a Warning event
// and the status phase Failed with the reason and "Pod was rejected: <message>".
func (k *Kubelet) reject(ctx context.Context, pod *corev1.Pod, reason, message string) error {
	k.recorder.Event(pod, corev1.EventTypeWarning, reason, message)
	s := *pod.Status.DeepCopy()
	s.Phase, s.Reason, s.Message = corev1.PodFailed, reason, "Pod was rejected: "+message
	s.QOSClass = podutil.ComputeQOSClass(pod)
	if err := k.writeStatus(ctx, pod, s); err != nil {
		return fmt.Errorf("reject pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

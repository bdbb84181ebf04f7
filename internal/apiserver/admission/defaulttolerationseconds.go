package admission

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/admission"
)

// defaultTolerationSeconds is how long a pod stays bound to a node that is not ready or
// unreachable before it is evicted, unless it says otherwise.
const defaultTolerationSeconds = int64(300)

// defaultTolerations is the admission step upstream calls DefaultTolerationSeconds: a
// pod that does not tolerate the NoExecute taints node.kubernetes.io/not-ready and
// node.kubernetes.io/unreachable is given tolerations of both for
// defaultTolerationSeconds, so that the node lifecycle controller evicts it from a lost
// node after five minutes rather than at once.
type defaultTolerations struct {
	*admission.Handler
}

var _ admission.MutationInterface = (*defaultTolerations)(nil)

func newDefaultTolerationSeconds() *defaultTolerations {
	return &defaultTolerations{Handler: admission.NewHandler(admission.Create, admission.Update)}
}

func (p *defaultTolerations) Admit(_ context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != corev1.Resource("pods") || a.GetSubresource() != "" {
		return nil
	}
	pod, ok := a.GetObject().(*corev1.Pod)
	if !ok {
		return apierrors.NewBadRequest("resource was marked with kind Pod but was unable to be converted")
	}
	addDefaultTolerations(pod)
	return nil
}

// addDefaultTolerations adds the not-ready and unreachable tolerations pod lacks; a
// toleration with an empty key or effect already covers them.
func addDefaultTolerations(pod *corev1.Pod) {
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		covered := false
		for _, t := range pod.Spec.Tolerations {
			if (t.Key == key || t.Key == "") && (t.Effect == corev1.TaintEffectNoExecute || t.Effect == "") {
				covered = true
				break
			}
		}
		if !covered {
			secs := defaultTolerationSeconds
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{
				Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs,
			})
		}
	}
}

package admission

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	nodelisters "k8s.io/client-go/listers/node/v1"
)

// runtimeClass is the admission step upstream calls RuntimeClass, for pods being created.
//
// Mutating: a pod that names a RuntimeClass (spec.runtimeClassName) gets the class's
// overhead.podFixed as its spec.overhead (a pod stating another overhead is refused:
// "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead") and the
// class's scheduling: its nodeSelector merged into the pod's (a key the pod sets to
// another value is refused, "conflict: runtimeClass.scheduling.nodeSelector[k] = a;
// pod.spec.nodeSelector[k] = b") and its tolerations added to the pod's, a toleration
// another one covers being dropped. A class that does not exist refuses the pod ("pod
// rejected: RuntimeClass "x" not found").
//
// Validating: the pod's overhead is its class's (a pod whose class defines none, or that
// names no class, may not state one: "pod rejected: Pod Overhead set without
// corresponding RuntimeClass defined Overhead").
//
// Classes are read from the shared informer's cache, and from the API server when the
// cache does not know the name (yet).
type runtimeClass struct {
	*admission.Handler
	classes nodelisters.RuntimeClassLister
	client  kubernetes.Interface
}

var (
	_ admission.MutationInterface   = (*runtimeClass)(nil)
	_ admission.ValidationInterface = (*runtimeClass)(nil)
)

func newRuntimeClass(factory informers.SharedInformerFactory, client kubernetes.Interface) *runtimeClass {
	inf := factory.Node().V1().RuntimeClasses()
	p := &runtimeClass{Handler: admission.NewHandler(admission.Create), classes: inf.Lister(), client: client}
	p.SetReadyFunc(inf.Informer().HasSynced)
	return p
}

func (p *runtimeClass) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	pod, class, err := p.podAndClass(ctx, a)
	if pod == nil || err != nil {
		return err
	}
	if err := applyRuntimeClass(pod, class); err != nil {
		return admission.NewForbidden(a, err)
	}
	return nil
}

func (p *runtimeClass) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	pod, class, err := p.podAndClass(ctx, a)
	if pod == nil || err != nil {
		return err
	}
	if err := checkOverhead(pod, class); err != nil {
		return admission.NewForbidden(a, err)
	}
	return nil
}

// podAndClass is the pod a request creates and the RuntimeClass it names (nil when it
// names none); pod is nil for requests the plugin leaves alone.
func (p *runtimeClass) podAndClass(ctx context.Context, a admission.Attributes) (*corev1.Pod, *nodev1.RuntimeClass, error) {
	if a.GetResource().GroupResource() != corev1.Resource("pods") || a.GetSubresource() != "" || a.GetOperation() != admission.Create {
		return nil, nil, nil
	}
	pod, ok := a.GetObject().(*corev1.Pod)
	if !ok {
		return nil, nil, apierrors.NewBadRequest("resource was marked with kind Pod but was unable to be converted")
	}
	if pod.Spec.RuntimeClassName == nil {
		return pod, nil, nil
	}
	name := *pod.Spec.RuntimeClassName
	if !p.WaitForReady() {
		return nil, nil, admission.NewForbidden(a, errors.New("not yet ready to handle request"))
	}
	class, err := p.classes.Get(name)
	if apierrors.IsNotFound(err) {
		class, err = p.client.NodeV1().RuntimeClasses().Get(ctx, name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, nil, admission.NewForbidden(a, fmt.Errorf("pod rejected: RuntimeClass %q not found", name))
	}
	if err != nil {
		return nil, nil, fmt.Errorf("get RuntimeClass %s: %w", name, err)
	}
	return pod, class, nil
}

var errOverheadMismatch = errors.New("pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead")

// applyRuntimeClass gives pod its class's overhead and scheduling constraints.
func applyRuntimeClass(pod *corev1.Pod, class *nodev1.RuntimeClass) error {
	if class == nil {
		return nil
	}
	if class.Overhead != nil {
		if len(pod.Spec.Overhead) > 0 && !apiequality.Semantic.DeepEqual(pod.Spec.Overhead, class.Overhead.PodFixed) {
			return errOverheadMismatch
		}
		pod.Spec.Overhead = class.Overhead.PodFixed.DeepCopy()
	}
	if s := class.Scheduling; s != nil {
		if len(s.NodeSelector) > 0 && pod.Spec.NodeSelector == nil {
			pod.Spec.NodeSelector = map[string]string{}
		}
		for k, v := range s.NodeSelector {
			if pv, ok := pod.Spec.NodeSelector[k]; ok && pv != v {
				return fmt.Errorf("conflict: runtimeClass.scheduling.nodeSelector[%s] = %s; pod.spec.nodeSelector[%s] = %s", k, v, k, pv)
			}
			pod.Spec.NodeSelector[k] = v
		}
		pod.Spec.Tolerations = mergeTolerations(pod.Spec.Tolerations, s.Tolerations)
	}
	return nil
}

// checkOverhead says whether pod's overhead is the one its class defines.
func checkOverhead(pod *corev1.Pod, class *nodev1.RuntimeClass) error {
	if class != nil && class.Overhead != nil {
		if !apiequality.Semantic.DeepEqual(pod.Spec.Overhead, class.Overhead.PodFixed) {
			return errOverheadMismatch
		}
		return nil
	}
	if pod.Spec.Overhead != nil {
		return errors.New("pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead")
	}
	return nil
}

// mergeTolerations is the pod's tolerations and then the class's, without those another
// one of the list already tolerates everything of (of two equal ones the first stays).
func mergeTolerations(pod, class []corev1.Toleration) []corev1.Toleration {
	all := append(append([]corev1.Toleration(nil), pod...), class...)
	var out []corev1.Toleration
	for i, t := range all {
		redundant := false
		for _, kept := range out {
			if covers(kept, t) {
				redundant = true
			}
		}
		for _, later := range all[i+1:] {
			if !apiequality.Semantic.DeepEqual(t, later) && covers(later, t) {
				redundant = true
			}
		}
		if !redundant {
			out = append(out, t)
		}
	}
	return out
}

// covers says whether toleration a tolerates every taint that b does.
func covers(a, b corev1.Toleration) bool {
	if apiequality.Semantic.DeepEqual(a, b) {
		return true
	}
	anyKey := a.Key == "" && a.Operator == corev1.TolerationOpExists
	switch {
	case a.Key != b.Key && !anyKey:
		return false
	case a.Effect != "" && a.Effect != b.Effect:
		return false
	case a.Effect == corev1.TaintEffectNoExecute && a.TolerationSeconds != nil &&
		(b.TolerationSeconds == nil || *b.TolerationSeconds > *a.TolerationSeconds):
		return false // a keeps the pod for less long than b
	}
	switch a.Operator {
	case corev1.TolerationOpExists:
		return true
	case corev1.TolerationOpEqual, "":
		return b.Operator == corev1.TolerationOpEqual && b.Value == a.Value
	}
	return false
}

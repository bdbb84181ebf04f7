package daemonset

import (
	"fmt"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"k8s.io/kubectl/pkg/util/podutils"
)

// Upstream label names of DaemonSet pods and revisions.
const (
	RevisionHashLabel       = appsv1.ControllerRevisionHashLabelKey
	TemplateGenerationLabel = "pod-template-generation"
)

// daemonTolerations are the tolerations every DaemonSet pod gets.
func daemonTolerations(hostNetwork bool) []corev1.Toleration {
	t := []corev1.Toleration{
		{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeDiskPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeMemoryPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodePIDPressure, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
	if hostNetwork {
		t = append(t, corev1.Toleration{Key: corev1.TaintNodeNetworkUnavailable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
	}
	return t
}

// withTolerations adds the daemon tolerations the list lacks.
func withTolerations(list []corev1.Toleration, hostNetwork bool) []corev1.Toleration {
	out := append([]corev1.Toleration(nil), list...)
	for _, d := range daemonTolerations(hostNetwork) {
		found := false
		for i := range out {
			if out[i].MatchToleration(&d) {
				found = true
			}
		}
		if !found {
			out = append(out, d)
		}
	}
	return out
}

// shouldRun says whether a pod of ds belongs on node.
func shouldRun(ds *appsv1.DaemonSet, node *corev1.Node) bool {
	spec := &ds.Spec.Template.Spec
	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeSelector: spec.NodeSelector, Affinity: spec.Affinity}}
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(pod).Match(node); !ok {
		return false
	}
	tolerations := withTolerations(spec.Tolerations, spec.HostNetwork)
	for i := range node.Spec.Taints {
		taint := &node.Spec.Taints[i]
		if taint.Effect != corev1.TaintEffectNoSchedule && taint.Effect != corev1.TaintEffectNoExecute {
			continue
		}
		tolerated := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(klog.Background(), taint, false) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return false
		}
	}
	return true
}

// nodeAffinityFor replaces the required node affinity of a template with one term
// naming node (the node already matched the rest), keeping preferred terms.
func nodeAffinityFor(a *corev1.Affinity, node string) *corev1.Affinity {
	out := a.DeepCopy()
	if out == nil {
		out = &corev1.Affinity{}
	}
	if out.NodeAffinity == nil {
		out.NodeAffinity = &corev1.NodeAffinity{}
	}
	out.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}}
	return out
}

// targetNode is the node a pod of the DaemonSet is for: its nodeName, or before it is
// bound the node its affinity names.
func targetNode(p *corev1.Pod) string {
	if p.Spec.NodeName != "" {
		return p.Spec.NodeName
	}
	if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, t := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range t.MatchFields {
				if f.Key == metav1.ObjectNameField && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
					return f.Values[0]
				}
			}
		}
	}
	return ""
}

// newPod is the pod of ds for node, of the revision named hash and, when gen is set, of
// template generation gen.
func newPod(ds *appsv1.DaemonSet, node, hash string, gen *int64) *corev1.Pod {
	t := ds.Spec.Template.DeepCopy()
	p := &corev1.Pod{ObjectMeta: t.ObjectMeta, Spec: t.Spec}
	p.Name, p.GenerateName, p.Namespace = "", ds.Name+"-", ds.Namespace
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[RevisionHashLabel] = hash
	if gen != nil {
		p.Labels[TemplateGenerationLabel] = strconv.FormatInt(*gen, 10)
	}
	p.OwnerReferences = []metav1.OwnerReference{controllerRef(ds)}
	p.Spec.Affinity = nodeAffinityFor(p.Spec.Affinity, node)
	p.Spec.Tolerations = withTolerations(p.Spec.Tolerations, p.Spec.HostNetwork)
	return p
}

// nodePods is what a node has of the DaemonSet.
type nodePods struct {
	want bool
	pods []*corev1.Pod // active pods targeting the node, oldest first
}

// actions are what a sync does.
type actions struct {
	create []string      // nodes
	delete []*corev1.Pod // pods
}

// decide plans creations and deletions from what each node wants and has; updated says
// whether a pod runs the current template and maxUnavailable is the rolling-update
// budget (-1: OnDelete).
func decide(nodes map[string]nodePods, updated func(*corev1.Pod) bool, maxUnavailable int) actions {
	var a actions
	unavailable := 0
	var oldReady []*corev1.Pod
	names := sortedKeys(nodes)
	for _, n := range names {
		np := nodes[n]
		var running []*corev1.Pod
		for _, p := range np.pods {
			if p.Status.Phase == corev1.PodFailed {
				a.delete = append(a.delete, p)
				continue
			}
			running = append(running, p)
		}
		if !np.want {
			a.delete = append(a.delete, running...)
			continue
		}
		if len(running) == 0 {
			a.create = append(a.create, n)
			unavailable++
			continue
		}
		a.delete = append(a.delete, running[1:]...) // keep the oldest
		p := running[0]
		if !podutils.IsPodReady(p) {
			unavailable++
			if maxUnavailable >= 0 && !updated(p) {
				a.delete = append(a.delete, p) // not serving anyway
			}
			continue
		}
		if maxUnavailable >= 0 && !updated(p) {
			oldReady = append(oldReady, p)
		}
	}
	for _, p := range oldReady {
		if unavailable >= maxUnavailable {
			break
		}
		a.delete = append(a.delete, p)
		unavailable++
	}
	return a
}

func sortedKeys(m map[string]nodePods) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func maxUnavailableOf(ds *appsv1.DaemonSet, desired int) (int, error) {
	if ds.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
		return -1, nil
	}
	ru := ds.Spec.UpdateStrategy.RollingUpdate
	if ru == nil || ru.MaxUnavailable == nil {
		return 1, nil
	}
	n, err := intstrScaled(ru.MaxUnavailable, desired)
	if err != nil {
		return 0, fmt.Errorf("maxUnavailable: %w", err)
	}
	return max(n, 1), nil
}

package scheduler

import (
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"github.com/kubelab/kubelab/internal/util/hostport"
)

// Defaults the scheduler assumes for scoring a container that requests nothing (upstream's).
const (
	defaultMilliCPURequest int64 = 100
	defaultMemoryRequest   int64 = 200 * 1024 * 1024
)

// Resource is a compact set of quantities.
type Resource struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	Scalar           map[corev1.ResourceName]int64
}

// resourceFromList converts a ResourceList.
func resourceFromList(rl corev1.ResourceList) Resource {
	var r Resource
	for name, q := range rl {
		switch name {
		case corev1.ResourceCPU:
			r.MilliCPU = q.MilliValue()
		case corev1.ResourceMemory:
			r.Memory = q.Value()
		case corev1.ResourceEphemeralStorage:
			r.EphemeralStorage = q.Value()
		case corev1.ResourcePods:
		default:
			if r.Scalar == nil {
				r.Scalar = map[corev1.ResourceName]int64{}
			}
			r.Scalar[name] = q.Value()
		}
	}
	return r
}

func (r *Resource) add(o Resource, sign int64) {
	r.MilliCPU += sign * o.MilliCPU
	r.Memory += sign * o.Memory
	r.EphemeralStorage += sign * o.EphemeralStorage
	for k, v := range o.Scalar {
		if r.Scalar == nil {
			r.Scalar = map[corev1.ResourceName]int64{}
		}
		r.Scalar[k] += sign * v
	}
}

func (r Resource) clone() Resource {
	c := r
	if r.Scalar != nil {
		c.Scalar = make(map[corev1.ResourceName]int64, len(r.Scalar))
		for k, v := range r.Scalar {
			c.Scalar[k] = v
		}
	}
	return c
}

// AffinityTerm is a parsed pod (anti-)affinity term.
type AffinityTerm struct {
	Namespaces        sets.Set[string]
	Selector          labels.Selector
	TopologyKey       string
	NamespaceSelector labels.Selector // nil: only Namespaces
	Weight            int32           // for preferred terms
}

// matches says whether pod (in a namespace labelled nsLabels) is selected by the term.
func (t *AffinityTerm) matches(pod *corev1.Pod, nsLabels labels.Set) bool {
	if t.Namespaces.Has(pod.Namespace) || (t.NamespaceSelector != nil && t.NamespaceSelector.Matches(nsLabels)) {
		return t.Selector.Matches(labels.Set(pod.Labels))
	}
	return false
}

// PodInfo is a pod with what the scheduler derives from it, computed once.
type PodInfo struct {
	Pod      *corev1.Pod
	Requests Resource
	// NonZero uses upstream's defaults for containers without requests (scoring only).
	NonZero                    Resource
	Priority                   int32
	RequiredAffinityTerms      []AffinityTerm
	RequiredAntiAffinityTerms  []AffinityTerm
	PreferredAffinityTerms     []AffinityTerm
	PreferredAntiAffinityTerms []AffinityTerm
	// Claims are "namespace/name" of the PVCs the pod uses (incl. generic ephemeral ones).
	Claims []string
	// HostPorts are the hostPorts the pod holds on its node.
	HostPorts []hostport.Port
	// parseErr is set when a selector in the pod's spec does not parse.
	parseErr error
	// csiVolumes caches NodeVolumeLimits' driver → volume ids once the claims are bound.
	csiVolumes atomic.Pointer[map[string]sets.Set[string]]
}

// requestsOf is what pod holds on its node: its requests, or for a pod being resized in
// place the larger of what its spec asks and what its node's kubelet allocated and
// reports in its status, as upstream's scheduler counts it.
func requestsOf(pod *corev1.Pod) Resource {
	return resourceFromList(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{UseStatusResources: true}))
}

// NewPodInfo derives a PodInfo.
func NewPodInfo(pod *corev1.Pod) *PodInfo {
	pi := &PodInfo{Pod: pod, Priority: corev1helpers.PodPriority(pod), HostPorts: hostport.OfPod(pod)}
	pi.Requests = requestsOf(pod)
	pi.NonZero = resourceFromList(resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{
		UseStatusResources: true,
		NonMissingContainerRequests: corev1.ResourceList{
			corev1.ResourceCPU:    *resourceQuantityMilli(defaultMilliCPURequest),
			corev1.ResourceMemory: *resourceQuantity(defaultMemoryRequest),
		},
	}))
	if a := pod.Spec.Affinity; a != nil {
		if pa := a.PodAffinity; pa != nil {
			pi.RequiredAffinityTerms = pi.parseTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, 0)
			for _, w := range pa.PreferredDuringSchedulingIgnoredDuringExecution {
				pi.PreferredAffinityTerms = append(pi.PreferredAffinityTerms, pi.parseTerms([]corev1.PodAffinityTerm{w.PodAffinityTerm}, w.Weight)...)
			}
		}
		if pa := a.PodAntiAffinity; pa != nil {
			pi.RequiredAntiAffinityTerms = pi.parseTerms(pa.RequiredDuringSchedulingIgnoredDuringExecution, 0)
			for _, w := range pa.PreferredDuringSchedulingIgnoredDuringExecution {
				pi.PreferredAntiAffinityTerms = append(pi.PreferredAntiAffinityTerms, pi.parseTerms([]corev1.PodAffinityTerm{w.PodAffinityTerm}, w.Weight)...)
			}
		}
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			pi.Claims = append(pi.Claims, pod.Namespace+"/"+v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			pi.Claims = append(pi.Claims, pod.Namespace+"/"+pod.Name+"-"+v.Name)
		}
	}
	return pi
}

func (pi *PodInfo) parseTerms(terms []corev1.PodAffinityTerm, weight int32) []AffinityTerm {
	out := make([]AffinityTerm, 0, len(terms))
	for _, t := range terms {
		sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
		if err != nil {
			pi.parseErr = err
			continue
		}
		// matchLabelKeys/mismatchLabelKeys take their values from the pod's own labels.
		for _, k := range t.MatchLabelKeys {
			if v, ok := pi.Pod.Labels[k]; ok {
				r, err := labels.NewRequirement(k, "in", []string{v})
				if err == nil {
					sel = sel.Add(*r)
				}
			}
		}
		for _, k := range t.MismatchLabelKeys {
			if v, ok := pi.Pod.Labels[k]; ok {
				r, err := labels.NewRequirement(k, "notin", []string{v})
				if err == nil {
					sel = sel.Add(*r)
				}
			}
		}
		term := AffinityTerm{Selector: sel, TopologyKey: t.TopologyKey, Weight: weight, Namespaces: sets.New(t.Namespaces...)}
		if t.NamespaceSelector != nil {
			ns, err := metav1.LabelSelectorAsSelector(t.NamespaceSelector)
			if err != nil {
				pi.parseErr = err
				continue
			}
			term.NamespaceSelector = ns
		}
		if len(t.Namespaces) == 0 && t.NamespaceSelector == nil {
			term.Namespaces.Insert(pi.Pod.Namespace)
		}
		out = append(out, term)
	}
	return out
}

func (pi *PodInfo) hasAffinity() bool {
	return len(pi.RequiredAffinityTerms)+len(pi.RequiredAntiAffinityTerms)+
		len(pi.PreferredAffinityTerms)+len(pi.PreferredAntiAffinityTerms) > 0
}

// NodeInfo is a node with the pods the scheduler believes it runs (bound and assumed).
type NodeInfo struct {
	Node        *corev1.Node
	Pods        []*PodInfo
	Allocatable Resource
	AllowedPods int
	Requested   Resource
	NonZero     Resource
	// PodsWithAffinity / PodsWithRequiredAntiAffinity are subsets of Pods.
	PodsWithAffinity             []*PodInfo
	PodsWithRequiredAntiAffinity []*PodInfo
	// csiVolumes caches NodeVolumeLimits' view of the node; reset when pods change.
	csiVolumes atomic.Pointer[map[string]sets.Set[string]]
}

func newNodeInfo(node *corev1.Node) *NodeInfo {
	ni := &NodeInfo{}
	ni.setNode(node)
	return ni
}

func (ni *NodeInfo) setNode(node *corev1.Node) {
	ni.Node = node
	if node == nil {
		return
	}
	ni.Allocatable = resourceFromList(node.Status.Allocatable)
	ni.AllowedPods = int(node.Status.Allocatable.Pods().Value())
}

// Name of the node ("" while only pods are known).
func (ni *NodeInfo) Name() string {
	if ni.Node == nil {
		return ""
	}
	return ni.Node.Name
}

// AddPod accounts for pi.
func (ni *NodeInfo) AddPod(pi *PodInfo) {
	ni.Pods = append(ni.Pods, pi)
	ni.csiVolumes.Store(nil)
	ni.Requested.add(pi.Requests, 1)
	ni.NonZero.add(pi.NonZero, 1)
	if pi.hasAffinity() {
		ni.PodsWithAffinity = append(ni.PodsWithAffinity, pi)
	}
	if len(pi.RequiredAntiAffinityTerms) > 0 {
		ni.PodsWithRequiredAntiAffinity = append(ni.PodsWithRequiredAntiAffinity, pi)
	}
}

// RemovePod forgets the pod with uid; false if it was not there.
func (ni *NodeInfo) RemovePod(pod *corev1.Pod) bool {
	for i, pi := range ni.Pods {
		if pi.Pod.UID != pod.UID {
			continue
		}
		ni.Pods[i] = ni.Pods[len(ni.Pods)-1]
		ni.Pods = ni.Pods[:len(ni.Pods)-1]
		ni.csiVolumes.Store(nil)
		ni.Requested.add(pi.Requests, -1)
		ni.NonZero.add(pi.NonZero, -1)
		ni.PodsWithAffinity = removePodInfo(ni.PodsWithAffinity, pod)
		ni.PodsWithRequiredAntiAffinity = removePodInfo(ni.PodsWithRequiredAntiAffinity, pod)
		return true
	}
	return false
}

func removePodInfo(list []*PodInfo, pod *corev1.Pod) []*PodInfo {
	for i, pi := range list {
		if pi.Pod.UID == pod.UID {
			list[i] = list[len(list)-1]
			return list[:len(list)-1]
		}
	}
	return list
}

// Clone copies the node's accounting (pods are shared, read-only).
func (ni *NodeInfo) Clone() *NodeInfo {
	return &NodeInfo{
		Node: ni.Node, Allocatable: ni.Allocatable, AllowedPods: ni.AllowedPods,
		Pods:                         append([]*PodInfo(nil), ni.Pods...),
		Requested:                    ni.Requested.clone(),
		NonZero:                      ni.NonZero.clone(),
		PodsWithAffinity:             append([]*PodInfo(nil), ni.PodsWithAffinity...),
		PodsWithRequiredAntiAffinity: append([]*PodInfo(nil), ni.PodsWithRequiredAntiAffinity...),
	}
}

func resourceQuantityMilli(v int64) *resource.Quantity {
	return resource.NewMilliQuantity(v, resource.DecimalSI)
}
func resourceQuantity(v int64) *resource.Quantity { return resource.NewQuantity(v, resource.BinarySI) }

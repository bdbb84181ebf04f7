package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/util/retry"
	volumehelpers "k8s.io/component-helpers/storage/volume"

	"github.com/kubelab/kubelab/internal/resourceversion"
)

// Reasons of the VolumeBinding plugin, worded as upstream's.
const (
	reasonVolumeNodeConflict    = "node(s) had volume node affinity conflict"
	reasonVolumeBindConflict    = "node(s) didn't find available persistent volumes to bind"
	reasonPVNotExist            = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
	reasonUnboundImmediateClaim = "pod has unbound immediate PersistentVolumeClaims"
)

// storageView reads the storage objects the volume plugins need.
type storageView struct {
	pvcs       corelisters.PersistentVolumeClaimLister
	pvs        corelisters.PersistentVolumeLister
	classes    storagelisters.StorageClassLister
	csiNodes   storagelisters.CSINodeLister
	csiDrivers storagelisters.CSIDriverLister
}

func splitKey(key string) (string, string) {
	ns, name, _ := strings.Cut(key, "/")
	return ns, name
}

// podClaims resolves the pod's claims; a missing or deleting claim rejects the pod.
func (v *storageView) podClaims(pod *PodInfo) ([]*corev1.PersistentVolumeClaim, *Status) {
	out := make([]*corev1.PersistentVolumeClaim, 0, len(pod.Claims))
	for _, key := range pod.Claims {
		ns, name := splitKey(key)
		pvc, err := v.pvcs.PersistentVolumeClaims(ns).Get(name)
		if apierrors.IsNotFound(err) {
			if isEphemeralClaim(pod.Pod, name) {
				return nil, NewStatus(UnschedulableAndUnresolvable, fmt.Sprintf("waiting for ephemeral volume controller to create the persistentvolumeclaim %q", name))
			}
			return nil, NewStatus(UnschedulableAndUnresolvable, fmt.Sprintf("persistentvolumeclaim %q not found", name))
		}
		if err != nil {
			return nil, AsStatus(err)
		}
		if pvc.DeletionTimestamp != nil {
			return nil, NewStatus(UnschedulableAndUnresolvable, fmt.Sprintf("persistentvolumeclaim %q is being deleted", name))
		}
		out = append(out, pvc)
	}
	return out, nil
}

func isEphemeralClaim(pod *corev1.Pod, claim string) bool {
	for _, v := range pod.Spec.Volumes {
		if v.Ephemeral != nil && pod.Name+"-"+v.Name == claim {
			return true
		}
	}
	return false
}

// volumeBinding places pods whose claims are bound (honouring the PV's node affinity) or
// wait for their first consumer (a matching static PV on the node, or a class that can
// provision for the node), then in PreBind writes the choice (PV claimRef, or the PVC's
// volume.kubernetes.io/selected-node) and waits until every claim is bound.
type volumeBinding struct {
	view        *storageView
	client      kubernetes.Interface
	bindTimeout time.Duration
	waiter      *claimWaiter

	mu sync.Mutex
	// assumedPVs are static PVs chosen by pods still in their binding cycle.
	assumedPVs map[string]string // pv name → claim key
}

func newVolumeBinding(view *storageView, client kubernetes.Interface, bindTimeout time.Duration) *volumeBinding {
	return &volumeBinding{view: view, client: client, bindTimeout: bindTimeout, waiter: newClaimWaiter(), assumedPVs: map[string]string{}}
}

// selectedNode is the volume.kubernetes.io/selected-node of one of the pod's unbound
// claims, if any: provisioning may already be under way there.
func (b *volumeBinding) selectedNode(pod *PodInfo) string {
	for _, key := range pod.Claims {
		ns, name := splitKey(key)
		pvc, err := b.view.pvcs.PersistentVolumeClaims(ns).Get(name)
		if err == nil && pvc.Spec.VolumeName == "" {
			if n := pvc.Annotations[volumehelpers.AnnSelectedNode]; n != "" {
				return n
			}
		}
	}
	return ""
}

// staticBinding is a PV the scheduler chose for a WaitForFirstConsumer claim.
type staticBinding struct {
	pv    *corev1.PersistentVolume
	claim *corev1.PersistentVolumeClaim
}

// podVolumes is what the pod's unbound claims need on one node.
type podVolumes struct {
	node       *corev1.Node
	static     []staticBinding
	provisions []*corev1.PersistentVolumeClaim
	// selected are the resourceVersions of the provisioned claims that carry this
	// node's selected-node annotation, as PreBind wrote or found them (claim key → rv).
	selected map[string]string
}

type volumeBindingState struct {
	bound []*corev1.PersistentVolumeClaim
	// boundAffinity are the bound PVs' node affinities, parsed once per pod; missingPV is
	// set when a bound claim's PV does not exist.
	boundAffinity []*labelNodeSelector
	missingPV     bool
	toBind        []*corev1.PersistentVolumeClaim
	candidates    map[string][]*corev1.PersistentVolume // claim key → PVs that could match
	classes       map[string]*storagev1.StorageClass

	mu     sync.Mutex
	byNode map[string]*podVolumes
}

func (s *volumeBindingState) Clone() StateData { return s }

func (*volumeBinding) Name() string { return VolumeBindingName }

func claimKey(pvc *corev1.PersistentVolumeClaim) string { return pvc.Namespace + "/" + pvc.Name }

func (b *volumeBinding) PreFilter(_ context.Context, state *CycleState, pod *PodInfo, _ *Snapshot) *Status {
	if len(pod.Claims) == 0 {
		return NewStatus(Skip)
	}
	claims, st := b.view.podClaims(pod)
	if st != nil {
		return st
	}
	s := &volumeBindingState{byNode: map[string]*podVolumes{}, candidates: map[string][]*corev1.PersistentVolume{}, classes: map[string]*storagev1.StorageClass{}}
	immediateUnbound := false
	for _, pvc := range claims {
		if pvc.Spec.VolumeName != "" {
			s.bound = append(s.bound, pvc)
			continue
		}
		className := volumehelpers.GetPersistentVolumeClaimClass(pvc)
		if className == "" {
			immediateUnbound = true
			continue
		}
		class, err := b.view.classes.Get(className)
		if apierrors.IsNotFound(err) {
			return NewStatus(UnschedulableAndUnresolvable, fmt.Sprintf("storageclass.storage.k8s.io %q not found", className))
		}
		if err != nil {
			return AsStatus(err)
		}
		if class.VolumeBindingMode == nil || *class.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
			immediateUnbound = true
			continue
		}
		s.toBind = append(s.toBind, pvc)
		s.classes[className] = class
	}
	if immediateUnbound {
		return NewStatus(UnschedulableAndUnresolvable, reasonUnboundImmediateClaim)
	}
	for _, pvc := range s.bound {
		pv, err := b.view.pvs.Get(pvc.Spec.VolumeName)
		if apierrors.IsNotFound(err) {
			s.missingPV = true
			continue
		}
		if err != nil {
			return AsStatus(err)
		}
		if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
			continue
		}
		sel, err := newLabelNodeSelector(pv.Spec.NodeAffinity.Required)
		if err != nil {
			return NewStatus(UnschedulableAndUnresolvable, fmt.Sprintf("persistentvolume %q: invalid node affinity: %v", pv.Name, err))
		}
		s.boundAffinity = append(s.boundAffinity, sel)
	}
	if len(s.toBind) > 0 {
		pvs, err := b.view.pvs.List(labels.Everything())
		if err != nil {
			return AsStatus(err)
		}
		b.mu.Lock()
		for _, pvc := range s.toBind {
			class := volumehelpers.GetPersistentVolumeClaimClass(pvc)
			var cands []*corev1.PersistentVolume
			for _, pv := range pvs {
				if volumehelpers.GetPersistentVolumeClass(pv) != class || pv.DeletionTimestamp != nil {
					continue
				}
				if owner, ok := b.assumedPVs[pv.Name]; ok && owner != claimKey(pvc) {
					continue
				}
				if pv.Spec.ClaimRef != nil && !volumehelpers.IsVolumeBoundToClaim(pv, pvc) {
					continue
				}
				cands = append(cands, pv)
			}
			s.candidates[claimKey(pvc)] = cands
		}
		b.mu.Unlock()
	}
	state.Write(VolumeBindingName, s)
	return nil
}

func (b *volumeBinding) Filter(_ context.Context, state *CycleState, _ *PodInfo, node *NodeInfo) *Status {
	s, _ := state.Read(VolumeBindingName).(*volumeBindingState)
	if s == nil {
		return nil
	}
	pv, reasons, err := b.findPodVolumes(s, node.Node)
	if err != nil {
		return AsStatus(err)
	}
	if len(reasons) > 0 {
		return NewStatus(UnschedulableAndUnresolvable, reasons...)
	}
	if len(s.toBind) == 0 {
		return nil // nothing for Reserve and PreBind to do
	}
	s.mu.Lock()
	s.byNode[node.Name()] = pv
	s.mu.Unlock()
	return nil
}

// findPodVolumes decides, for one node, whether the bound claims' PVs can be used there
// and how each unbound claim would be satisfied.
func (b *volumeBinding) findPodVolumes(s *volumeBindingState, node *corev1.Node) (*podVolumes, []string, error) {
	var reasons []string
	if s.missingPV {
		reasons = append(reasons, reasonPVNotExist)
	}
	for _, sel := range s.boundAffinity {
		if !sel.match(node) {
			reasons = append(reasons, reasonVolumeNodeConflict)
			break
		}
	}
	out := &podVolumes{node: node}
	if len(s.toBind) == 0 {
		return out, reasons, nil
	}
	chosen := map[string]*corev1.PersistentVolume{}
	provisionOK := true
	for _, pvc := range s.toBind {
		pv, err := volumehelpers.FindMatchingVolume(pvc, s.candidates[claimKey(pvc)], node, chosen, true, true)
		if err != nil {
			return nil, nil, err
		}
		if pv != nil {
			chosen[pv.Name] = pv
			out.static = append(out.static, staticBinding{pv: pv, claim: pvc})
			continue
		}
		class := s.classes[volumehelpers.GetPersistentVolumeClaimClass(pvc)]
		if !b.canProvision(class, node) {
			provisionOK = false
			break
		}
		out.provisions = append(out.provisions, pvc)
	}
	if !provisionOK {
		reasons = append(reasons, reasonVolumeBindConflict)
	}
	return out, reasons, nil
}

// canProvision says whether class can make a volume reachable from node: a provisioner, the
// class's allowedTopologies, and (for a CSI driver the cluster knows) the driver's
// registration in the node's CSINode.
func (b *volumeBinding) canProvision(class *storagev1.StorageClass, node *corev1.Node) bool {
	if class == nil || class.Provisioner == volumehelpers.NotSupportedProvisioner {
		return false
	}
	if !matchTopologySelectorTerms(class.AllowedTopologies, node.Labels) {
		return false
	}
	if b.view.csiDrivers != nil {
		if _, err := b.view.csiDrivers.Get(class.Provisioner); err == nil {
			csiNode, err := b.view.csiNodes.Get(node.Name)
			if err != nil || csiNodeDriver(csiNode, class.Provisioner) == nil {
				return false
			}
		}
	}
	return true
}

// matchTopologySelectorTerms: no terms match everything; otherwise one term must match all
// of its label expressions.
func matchTopologySelectorTerms(terms []corev1.TopologySelectorTerm, nodeLabels map[string]string) bool {
	if len(terms) == 0 {
		return true
	}
	for _, term := range terms {
		ok := true
		for _, e := range term.MatchLabelExpressions {
			v, has := nodeLabels[e.Key]
			if !has || !contains(e.Values, v) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
	}
	return false
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func csiNodeDriver(n *storagev1.CSINode, driver string) *storagev1.CSINodeDriver {
	if n == nil {
		return nil
	}
	for i := range n.Spec.Drivers {
		if n.Spec.Drivers[i].Name == driver {
			return &n.Spec.Drivers[i]
		}
	}
	return nil
}

// labelNodeSelector is a node selector parsed once: per term, a label selector from its
// matchExpressions and the names its metadata.name matchFields allow.
type labelNodeSelector struct{ terms []labelNodeTerm }

type labelNodeTerm struct {
	labels labels.Selector
	names  []string // metadata.name In values; nil: any name
	notIn  []string // metadata.name NotIn values
}

func newLabelNodeSelector(ns *corev1.NodeSelector) (*labelNodeSelector, error) {
	out := &labelNodeSelector{}
	for _, t := range ns.NodeSelectorTerms {
		if len(t.MatchExpressions) == 0 && len(t.MatchFields) == 0 {
			continue // an empty term matches nothing
		}
		term := labelNodeTerm{labels: labels.Everything()}
		for _, e := range t.MatchExpressions {
			var op selection.Operator
			switch e.Operator {
			case corev1.NodeSelectorOpIn:
				op = selection.In
			case corev1.NodeSelectorOpNotIn:
				op = selection.NotIn
			case corev1.NodeSelectorOpExists:
				op = selection.Exists
			case corev1.NodeSelectorOpDoesNotExist:
				op = selection.DoesNotExist
			case corev1.NodeSelectorOpGt:
				op = selection.GreaterThan
			case corev1.NodeSelectorOpLt:
				op = selection.LessThan
			default:
				return nil, fmt.Errorf("%q is not a valid node selector operator", e.Operator)
			}
			r, err := labels.NewRequirement(e.Key, op, e.Values)
			if err != nil {
				return nil, err
			}
			term.labels = term.labels.Add(*r)
		}
		for _, f := range t.MatchFields {
			if f.Key != "metadata.name" {
				return nil, fmt.Errorf("%q is not a valid node field selector key", f.Key)
			}
			switch f.Operator {
			case corev1.NodeSelectorOpIn:
				term.names = append(term.names, f.Values...)
				if term.names == nil {
					term.names = []string{}
				}
			case corev1.NodeSelectorOpNotIn:
				term.notIn = append(term.notIn, f.Values...)
			default:
				return nil, fmt.Errorf("%q is not a valid node field selector operator", f.Operator)
			}
		}
		out.terms = append(out.terms, term)
	}
	return out, nil
}

// match: one term matches (terms are ORed, requirements within a term ANDed).
func (s *labelNodeSelector) match(node *corev1.Node) bool {
	for _, t := range s.terms {
		if t.names != nil && !contains(t.names, node.Name) {
			continue
		}
		if contains(t.notIn, node.Name) {
			continue
		}
		if t.labels.Matches(labels.Set(node.Labels)) {
			return true
		}
	}
	return false
}

func (b *volumeBinding) Reserve(_ context.Context, state *CycleState, _ *PodInfo, node string) *Status {
	s, _ := state.Read(VolumeBindingName).(*volumeBindingState)
	if s == nil || len(s.toBind) == 0 {
		return nil
	}
	s.mu.Lock()
	pv := s.byNode[node]
	s.mu.Unlock()
	if pv == nil {
		return AsStatus(fmt.Errorf("no volume decisions for node %s", node))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, sb := range pv.static {
		if owner, ok := b.assumedPVs[sb.pv.Name]; ok && owner != claimKey(sb.claim) {
			return NewStatus(Unschedulable, reasonVolumeBindConflict)
		}
	}
	for _, sb := range pv.static {
		b.assumedPVs[sb.pv.Name] = claimKey(sb.claim)
	}
	return nil
}

func (b *volumeBinding) Unreserve(_ context.Context, state *CycleState, _ *PodInfo, node string) {
	s, _ := state.Read(VolumeBindingName).(*volumeBindingState)
	if s == nil {
		return
	}
	s.mu.Lock()
	pv := s.byNode[node]
	s.mu.Unlock()
	if pv != nil {
		b.forget(pv)
	}
}

func (b *volumeBinding) forget(pv *podVolumes) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, sb := range pv.static {
		if b.assumedPVs[sb.pv.Name] == claimKey(sb.claim) {
			delete(b.assumedPVs, sb.pv.Name)
		}
	}
}

// PreBind writes the decisions and waits until the claims are bound.
func (b *volumeBinding) PreBind(ctx context.Context, state *CycleState, _ *PodInfo, node string) *Status {
	s, _ := state.Read(VolumeBindingName).(*volumeBindingState)
	if s == nil || len(s.toBind) == 0 {
		return nil
	}
	s.mu.Lock()
	pv := s.byNode[node]
	s.mu.Unlock()
	if pv == nil {
		return AsStatus(fmt.Errorf("no volume decisions for node %s", node))
	}
	defer b.forget(pv)
	if err := b.writeDecisions(ctx, pv, node); err != nil {
		return AsStatus(fmt.Errorf("binding volumes: %w", err))
	}
	if err := b.waitBound(ctx, pv); err != nil {
		return AsStatus(fmt.Errorf("binding volumes: %w", err))
	}
	return nil
}

// writeDecisions sets claimRef on chosen static PVs and selected-node on claims to provision.
func (b *volumeBinding) writeDecisions(ctx context.Context, pv *podVolumes, node string) error {
	for _, sb := range pv.static {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := b.client.CoreV1().PersistentVolumes().Get(ctx, sb.pv.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cur.Spec.ClaimRef != nil && !volumehelpers.IsVolumeBoundToClaim(cur, sb.claim) {
				return fmt.Errorf("pv %q was bound to another claim", cur.Name)
			}
			updated, dirty, err := volumehelpers.GetBindVolumeToClaim(cur, sb.claim)
			if err != nil || !dirty {
				return err
			}
			_, err = b.client.CoreV1().PersistentVolumes().Update(ctx, updated, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("bind pv %s to claim %s: %w", sb.pv.Name, claimKey(sb.claim), err)
		}
	}
	pv.selected = make(map[string]string, len(pv.provisions))
	for _, claim := range pv.provisions {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := b.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cur.UID != claim.UID {
				return fmt.Errorf("claim %s was recreated", claimKey(claim))
			}
			if cur.Spec.VolumeName != "" || cur.Annotations[volumehelpers.AnnSelectedNode] == node {
				pv.selected[claimKey(claim)] = cur.ResourceVersion
				return nil
			}
			cur = cur.DeepCopy()
			metav1.SetMetaDataAnnotation(&cur.ObjectMeta, volumehelpers.AnnSelectedNode, node)
			updated, err := b.client.CoreV1().PersistentVolumeClaims(cur.Namespace).Update(ctx, cur, metav1.UpdateOptions{})
			if err == nil {
				pv.selected[claimKey(claim)] = updated.ResourceVersion
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("select node %s for claim %s: %w", node, claimKey(claim), err)
		}
	}
	return nil
}

// errNotYet says a claim is still being bound.
var errNotYet = errors.New("not bound yet")

// waitBound waits until checkBound reports every claim bound, or fails or times out.
func (b *volumeBinding) waitBound(ctx context.Context, pv *podVolumes) error {
	keys := make([]string, 0, len(pv.static)+len(pv.provisions))
	for _, sb := range pv.static {
		keys = append(keys, claimKey(sb.claim))
	}
	for _, c := range pv.provisions {
		keys = append(keys, claimKey(c))
	}
	ch, done := b.waiter.register(keys)
	defer done()
	timeout := time.NewTimer(b.bindTimeout)
	defer timeout.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		err := b.checkBound(pv)
		if err == nil {
			return nil
		}
		if !errors.Is(err, errNotYet) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout.C:
			return fmt.Errorf("timed out after %v waiting for %v", b.bindTimeout, err)
		case <-ch:
		case <-tick.C:
		}
	}
}

// checkBound reads the claims and PVs: nil when all are bound, errNotYet while binding goes
// on, another error when binding can no longer succeed for this node.
func (b *volumeBinding) checkBound(pv *podVolumes) error {
	check := func(claim *corev1.PersistentVolumeClaim, provisioned bool) error {
		cur, err := b.view.pvcs.PersistentVolumeClaims(claim.Namespace).Get(claim.Name)
		if err != nil {
			return fmt.Errorf("claim %s: %w", claimKey(claim), err)
		}
		if cur.UID != claim.UID {
			return fmt.Errorf("claim %s was recreated", claimKey(claim))
		}
		if provisioned && cur.Spec.VolumeName == "" && cur.Annotations[volumehelpers.AnnSelectedNode] != pv.node.Name {
			// The informer may not have seen the write yet; only a newer claim without
			// the annotation is the provisioner handing the claim back for rescheduling.
			if resourceversion.Older(cur.ResourceVersion, pv.selected[claimKey(claim)]) {
				return fmt.Errorf("%w: claim %s (selected node not seen yet)", errNotYet, claimKey(claim))
			}
			return fmt.Errorf("selectedNode annotation reset for PVC %q", cur.Name)
		}
		if cur.Spec.VolumeName == "" || !metav1.HasAnnotation(cur.ObjectMeta, volumehelpers.AnnBindCompleted) {
			return fmt.Errorf("%w: claim %s", errNotYet, claimKey(claim))
		}
		vol, err := b.view.pvs.Get(cur.Spec.VolumeName)
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: pv %s of claim %s", errNotYet, cur.Spec.VolumeName, claimKey(claim))
		}
		if err != nil {
			return err
		}
		if err := volumehelpers.CheckNodeAffinity(vol, pv.node.Labels); err != nil {
			return fmt.Errorf("pv %q node affinity doesn't match node %q: %w", vol.Name, pv.node.Name, err)
		}
		return nil
	}
	for _, sb := range pv.static {
		vol, err := b.view.pvs.Get(sb.pv.Name)
		if err == nil && vol.Spec.ClaimRef != nil && !volumehelpers.IsVolumeBoundToClaim(vol, sb.claim) {
			return fmt.Errorf("pv %q was bound to another claim", vol.Name)
		}
		if err := check(sb.claim, false); err != nil {
			return err
		}
	}
	for _, c := range pv.provisions {
		if err := check(c, true); err != nil {
			return err
		}
	}
	return nil
}

// claimWaiter wakes binding cycles waiting on particular claims.
type claimWaiter struct {
	mu      sync.Mutex
	waiters map[string]map[chan struct{}]bool
}

func newClaimWaiter() *claimWaiter { return &claimWaiter{waiters: map[string]map[chan struct{}]bool{}} }

func (w *claimWaiter) register(keys []string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	for _, k := range keys {
		if w.waiters[k] == nil {
			w.waiters[k] = map[chan struct{}]bool{}
		}
		w.waiters[k][ch] = true
	}
	w.mu.Unlock()
	return ch, func() {
		w.mu.Lock()
		for _, k := range keys {
			delete(w.waiters[k], ch)
			if len(w.waiters[k]) == 0 {
				delete(w.waiters, k)
			}
		}
		w.mu.Unlock()
	}
}

func (w *claimWaiter) notify(key string) {
	w.mu.Lock()
	for ch := range w.waiters[key] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	w.mu.Unlock()
}

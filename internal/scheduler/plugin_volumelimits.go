package scheduler

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	volumehelpers "k8s.io/component-helpers/storage/volume"
)

const (
	reasonVolumeZoneConflict = "node(s) had no available volume zone"
	reasonMaxVolumeCount     = "node(s) exceed max volume count"
)

// zoneLabels are the PV labels VolumeZone compares with the node's.
var zoneLabels = []string{
	corev1.LabelTopologyZone, corev1.LabelTopologyRegion,
	corev1.LabelFailureDomainBetaZone, corev1.LabelFailureDomainBetaRegion,
}

// volumeZone keeps pods off nodes outside the zone/region labels of their bound PVs.
type volumeZone struct{ view *storageView }

type volumeZoneState struct{ constraints map[string]sets.Set[string] }

func (s *volumeZoneState) Clone() StateData { return s }

func (*volumeZone) Name() string { return VolumeZoneName }

func (z *volumeZone) PreFilter(_ context.Context, state *CycleState, pod *PodInfo, _ *Snapshot) *Status {
	if len(pod.Claims) == 0 {
		return NewStatus(Skip)
	}
	claims, st := z.view.podClaims(pod)
	if st != nil {
		return st
	}
	s := &volumeZoneState{constraints: map[string]sets.Set[string]{}}
	for _, pvc := range claims {
		if pvc.Spec.VolumeName == "" {
			continue // WaitForFirstConsumer, or VolumeBinding's rejection
		}
		pv, err := z.view.pvs.Get(pvc.Spec.VolumeName)
		if apierrors.IsNotFound(err) {
			continue // VolumeBinding rejects it
		}
		if err != nil {
			return AsStatus(err)
		}
		for _, k := range zoneLabels {
			v, ok := pv.Labels[k]
			if !ok {
				continue
			}
			vals := sets.New(strings.Split(v, "__")...)
			if cur, ok := s.constraints[k]; ok {
				vals = cur.Intersection(vals)
			}
			s.constraints[k] = vals
		}
	}
	if len(s.constraints) == 0 {
		return NewStatus(Skip)
	}
	state.Write(VolumeZoneName, s)
	return nil
}

func (z *volumeZone) Filter(_ context.Context, state *CycleState, _ *PodInfo, node *NodeInfo) *Status {
	s, _ := state.Read(VolumeZoneName).(*volumeZoneState)
	if s == nil {
		return nil
	}
	if !fitsVolumeZones(s.constraints, node.Node.Labels) {
		return NewStatus(UnschedulableAndUnresolvable, reasonVolumeZoneConflict)
	}
	return nil
}

// fitsVolumeZones: a node without any zone/region label passes (as upstream); otherwise
// each constrained label must carry one of the volume's values.
func fitsVolumeZones(constraints map[string]sets.Set[string], nodeLabels map[string]string) bool {
	hasAny := false
	for _, k := range zoneLabels {
		if _, ok := nodeLabels[k]; ok {
			hasAny = true
			break
		}
	}
	if !hasAny {
		return true
	}
	for k, vals := range constraints {
		v, ok := nodeLabels[k]
		if !ok || !vals.Has(v) {
			return false
		}
	}
	return true
}

// nodeVolumeLimits keeps the count of a CSI driver's volumes on a node within the
// allocatable count its CSINode reports.
type nodeVolumeLimits struct{ view *storageView }

func (*nodeVolumeLimits) Name() string { return NodeVolumeLimitsName }

type volumeLimitsState struct{ volumes map[string]sets.Set[string] } // driver → unique volumes

func (s *volumeLimitsState) Clone() StateData { return s }

func (l *nodeVolumeLimits) PreFilter(_ context.Context, state *CycleState, pod *PodInfo, _ *Snapshot) *Status {
	if len(pod.Claims) == 0 {
		return NewStatus(Skip)
	}
	vols, _ := l.csiVolumes(pod.Claims)
	if len(vols) == 0 {
		return NewStatus(Skip)
	}
	state.Write(NodeVolumeLimitsName, &volumeLimitsState{volumes: vols})
	return nil
}

// csiVolumes maps the claims to driver → unique volume ids (the PV's volume handle, or a
// placeholder naming the claim while it waits to be provisioned). complete is false when
// a claim is not bound yet (the answer may change).
func (l *nodeVolumeLimits) csiVolumes(claims []string) (out map[string]sets.Set[string], complete bool) {
	out, complete = map[string]sets.Set[string]{}, true
	add := func(driver, id string) {
		if out[driver] == nil {
			out[driver] = sets.New[string]()
		}
		out[driver].Insert(id)
	}
	for _, key := range claims {
		ns, name := splitKey(key)
		pvc, err := l.view.pvcs.PersistentVolumeClaims(ns).Get(name)
		if err != nil {
			complete = false
			continue
		}
		if pvc.Spec.VolumeName != "" {
			pv, err := l.view.pvs.Get(pvc.Spec.VolumeName)
			if err != nil {
				complete = false
				continue
			}
			if pv.Spec.CSI != nil {
				add(pv.Spec.CSI.Driver, pv.Spec.CSI.VolumeHandle)
			}
			continue
		}
		complete = false
		class, err := l.view.classes.Get(volumehelpers.GetPersistentVolumeClaimClass(pvc))
		if err == nil && class.Provisioner != volumehelpers.NotSupportedProvisioner {
			add(class.Provisioner, "claim:"+string(pvc.UID))
		}
	}
	return out, complete
}

// nodeCSIVolumes are the CSI volumes of the node's pods, cached on the NodeInfo (until a
// pod comes or goes) once every claim there is bound.
func (l *nodeVolumeLimits) nodeCSIVolumes(ni *NodeInfo) map[string]sets.Set[string] {
	if v := ni.csiVolumes.Load(); v != nil {
		return *v
	}
	out, complete := map[string]sets.Set[string]{}, true
	for _, p := range ni.Pods {
		if len(p.Claims) == 0 {
			continue
		}
		vols := p.csiVolumes.Load()
		if vols == nil {
			v, c := l.csiVolumes(p.Claims)
			if c {
				p.csiVolumes.Store(&v)
			}
			complete = complete && c
			vols = &v
		}
		for d, ids := range *vols {
			if out[d] == nil {
				out[d] = sets.New[string]()
			}
			out[d] = out[d].Union(ids)
		}
	}
	if complete {
		ni.csiVolumes.Store(&out)
	}
	return out
}

func (l *nodeVolumeLimits) Filter(_ context.Context, state *CycleState, _ *PodInfo, node *NodeInfo) *Status {
	s, _ := state.Read(NodeVolumeLimitsName).(*volumeLimitsState)
	if s == nil {
		return nil
	}
	csiNode, err := l.view.csiNodes.Get(node.Name())
	if err != nil {
		return nil // no CSINode, no known limit
	}
	var attached map[string]sets.Set[string]
	for driver, vols := range s.volumes {
		d := csiNodeDriver(csiNode, driver)
		if d == nil || d.Allocatable == nil || d.Allocatable.Count == nil {
			continue
		}
		if attached == nil {
			attached = l.nodeCSIVolumes(node)
		}
		if exceedsVolumeLimit(vols, attached[driver], int(*d.Allocatable.Count)) {
			return NewStatus(Unschedulable, reasonMaxVolumeCount)
		}
	}
	return nil
}

// exceedsVolumeLimit: the pod brings new volumes and, with those already on the node,
// they pass the limit.
func exceedsVolumeLimit(podVols, nodeVols sets.Set[string], limit int) bool {
	added := 0
	for v := range podVols {
		if !nodeVols.Has(v) {
			added++
		}
	}
	return added > 0 && nodeVols.Len()+added > limit
}

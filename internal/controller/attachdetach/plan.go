package attachdetach

import (
	"regexp"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"

	"github.com/kubelab/kubelab/internal/util/volumeutil"
)

// Names read and written, as upstream.
const (
	// AnnControllerManaged on a Node says whether this controller attaches its volumes.
	AnnControllerManaged = "volumes.kubernetes.io/controller-managed-attach-detach"
	// TaintOutOfService lets volumes of a node that is out of service go at once.
	TaintOutOfService = "node.kubernetes.io/out-of-service"
	// Event reasons.
	ReasonSuccessfulAttach = "SuccessfulAttachVolume"
	ReasonFailedAttach     = "FailedAttachVolume"
)

// podTerminated says whether a pod no longer needs its volumes attached: it ended,
// or it is being deleted and none of its containers runs.
func podTerminated(pod *corev1.Pod) bool {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return true
	}
	if pod.DeletionTimestamp == nil {
		return false
	}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, s := range list {
			if s.State.Running != nil {
				return false
			}
		}
	}
	return true
}

// nodeManaged says whether the controller attaches the node's volumes.
func nodeManaged(node *corev1.Node) bool {
	v, ok := node.Annotations[AnnControllerManaged]
	return !ok || v == "true"
}

// nodeHealthy is false for a node whose Ready condition is not True.
func nodeHealthy(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func outOfService(node *corev1.Node) bool {
	for _, t := range node.Spec.Taints {
		if t.Key == TaintOutOfService {
			return true
		}
	}
	return false
}

// singleNode says whether the volume may be attached to one node only.
func singleNode(pv *corev1.PersistentVolume) bool {
	for _, m := range pv.Spec.AccessModes {
		if m == corev1.ReadWriteMany || m == corev1.ReadOnlyMany {
			return false
		}
	}
	return true
}

// wanted is one volume a node's pods need.
type wanted struct {
	name   string // VolumeAttachment name
	pv     *corev1.PersistentVolume
	driver string
	pods   []*corev1.Pod
}

func (w wanted) unique() corev1.UniqueVolumeName {
	return volumeutil.UniqueVolumeName(w.driver, w.pv.Spec.CSI.VolumeHandle)
}

// nodeState is everything the plan of one node depends on.
type nodeState struct {
	name string
	node *corev1.Node // nil when the node is gone
	// desired are the volumes the node's pods need, by attachment name.
	desired map[string]wanted
	// actual are the VolumeAttachments to this node.
	actual []*storagev1.VolumeAttachment
	// volumes are the PVs of the actual attachments, by name (missing when gone).
	volumes map[string]*corev1.PersistentVolume
	// elsewhere lists, per PV name, the other nodes that have an attachment of it.
	elsewhere map[string][]string
	// unneededSince is when each attachment was first seen unneeded but in use.
	unneededSince map[string]time.Time
	now           time.Time
	maxWait       time.Duration
}

// plan is what sync does for one node.
type plan struct {
	create      []wanted // attachments to create
	multiAttach []wanted // refused: attached elsewhere and single-node
	detach      []string // attachments to delete now
	force       []string // of which deleted despite being in use (unhealthy node)
	waiting     []string // unneeded but still in use by the node
	attached    []corev1.AttachedVolume
}

// planNode decides the attachments of one node.
func planNode(s nodeState) plan {
	var p plan
	actual := map[string]*storagev1.VolumeAttachment{}
	for _, va := range s.actual {
		actual[va.Name] = va
	}
	names := make([]string, 0, len(s.desired))
	for n := range s.desired {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		w := s.desired[n]
		if _, ok := actual[n]; ok {
			continue // exists (or is still being detached: it is re-created once gone)
		}
		if singleNode(w.pv) && len(s.elsewhere[w.pv.Name]) > 0 {
			p.multiAttach = append(p.multiAttach, w)
			continue
		}
		p.create = append(p.create, w)
	}
	inUse := map[corev1.UniqueVolumeName]bool{}
	if s.node != nil {
		for _, u := range s.node.Status.VolumesInUse {
			inUse[u] = true
		}
	}
	for _, va := range s.actual {
		pv := (*corev1.PersistentVolume)(nil)
		if va.Spec.Source.PersistentVolumeName != nil {
			pv = s.volumes[*va.Spec.Source.PersistentVolumeName]
		}
		if !controllerAttachment(va, pv) {
			continue // someone else's: neither detached nor reported
		}
		if va.Status.Attached && pv != nil && pv.Spec.CSI != nil {
			p.attached = append(p.attached, corev1.AttachedVolume{Name: volumeutil.UniqueVolumeName(va.Spec.Attacher, pv.Spec.CSI.VolumeHandle)})
		}
		if _, needed := s.desired[va.Name]; needed || va.DeletionTimestamp != nil {
			continue
		}
		switch {
		case s.node == nil, pv == nil || pv.Spec.CSI == nil:
			p.detach = append(p.detach, va.Name)
		case !inUse[volumeutil.UniqueVolumeName(va.Spec.Attacher, pv.Spec.CSI.VolumeHandle)]:
			p.detach = append(p.detach, va.Name)
		case outOfService(s.node):
			p.detach = append(p.detach, va.Name)
			p.force = append(p.force, va.Name)
		case !nodeHealthy(s.node) && !s.unneededSince[va.Name].IsZero() && s.now.Sub(s.unneededSince[va.Name]) >= s.maxWait:
			p.detach = append(p.detach, va.Name)
			p.force = append(p.force, va.Name)
		default:
			p.waiting = append(p.waiting, va.Name)
		}
	}
	sort.Slice(p.attached, func(i, j int) bool { return p.attached[i].Name < p.attached[j].Name })
	return p
}

// attachmentName matches the names the controller gives VolumeAttachments
// (volumeutil.AttachmentName).
var attachmentName = regexp.MustCompile(`^csi-[0-9a-f]{64}$`)

// controllerAttachment says whether va is one the controller made (or would make): named
// volumeutil.AttachmentName of its volume's handle, driver and node, or, its volume being
// gone, a name of that form. VolumeAttachments that others write under other names (a
// client testing the API, say) are theirs: the controller leaves them alone.
func controllerAttachment(va *storagev1.VolumeAttachment, pv *corev1.PersistentVolume) bool {
	if pv != nil && pv.Spec.CSI != nil {
		return va.Name == volumeutil.AttachmentName(pv.Spec.CSI.VolumeHandle, va.Spec.Attacher, va.Spec.NodeName)
	}
	return attachmentName.MatchString(va.Name)
}

// sameAttached compares two volumesAttached lists as sets of names.
func sameAttached(a, b []corev1.AttachedVolume) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[corev1.UniqueVolumeName]string{}
	for _, v := range a {
		seen[v.Name] = v.DevicePath
	}
	for _, v := range b {
		if d, ok := seen[v.Name]; !ok || d != v.DevicePath {
			return false
		}
	}
	return true
}

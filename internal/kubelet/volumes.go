package kubelet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	storagelisters "k8s.io/client-go/listers/storage/v1"

	"github.com/kubelab/kubelab/internal/util/volumeutil"
)

// errVolumesNotReady means a pod's volumes cannot be set up yet (claim unbound, not yet
// reported in use, not yet attached); the pod is retried soon, or when that changes.
var errVolumesNotReady = errors.New("volumes not ready")

// mountError is a failed NodeStage (MountVolume.MountDevice) or NodePublish
// (MountVolume.SetUp) of a pod's volume; its text is the FailedMount event's message.
type mountError struct {
	op, volume string
	err        error
}

func (e *mountError) Error() string {
	return fmt.Sprintf("%s failed for volume %q : %v", e.op, e.volume, e.err)
}

func (e *mountError) Unwrap() error { return e.err }

// stagingPath and targetPath are where a CSI volume is staged and published under the
// kubelet's root dir: plugins/kubernetes.io/csi/pv/<pv>/globalmount (NodeStageVolume, one
// per node) and pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount (NodePublishVolume, one
// per pod).
func stagingPath(root, pv string) string {
	return filepath.Join(root, "plugins", "kubernetes.io", "csi", "pv", pv, "globalmount")
}

func targetPath(root string, pod types.UID, pv string) string {
	return filepath.Join(root, "pods", string(pod), "volumes", "kubernetes.io~csi", pv, "mount")
}

// volumeManager brings the CSI volumes of the node's pods up (in use → attached → staged →
// published) and down (unpublished → unstaged → no longer in use). A kubelet may read a
// PersistentVolumeClaim, PersistentVolume or VolumeAttachment only by name, and only one
// its pods use (the Node authorizer): the manager gets them from the API server when it
// needs them, and a pod waiting for one is retried.
type volumeManager struct {
	node, root string
	client     kubernetes.Interface
	drivers    storagelisters.CSIDriverLister
	mounter    Mounter
	// config writes configMap, secret, downwardAPI and projected volumes (real mode only).
	config *configVolumes
	// local: the node is real, its pods' emptyDirs are made on the machine (and torn
	// down); nodeMemory is its allocatable memory, the default size of Memory emptyDirs.
	local      bool
	nodeMemory int64
	// requeue asks the pod workers to look at pods again.
	requeue func(keys ...string)
	// changed signals that the set of volumes in use changed.
	changed chan struct{}

	mu       sync.Mutex
	users    map[corev1.UniqueVolumeName]sets.Set[types.UID] // volume → pods that need it
	reported sets.Set[corev1.UniqueVolumeName]
	staged   sets.Set[corev1.UniqueVolumeName]
	mounted  map[types.UID][]*Volume // published volumes per pod
	waiting  map[string]sets.Set[string]
	podKeys  map[types.UID]string
}

func newVolumeManager(node, root string, client kubernetes.Interface, drivers storagelisters.CSIDriverLister, mounter Mounter) *volumeManager {
	return &volumeManager{node: node, root: root, client: client, drivers: drivers, mounter: mounter,
		requeue: func(...string) {}, changed: make(chan struct{}, 1),
		users: map[corev1.UniqueVolumeName]sets.Set[types.UID]{}, reported: sets.New[corev1.UniqueVolumeName](),
		staged: sets.New[corev1.UniqueVolumeName](), mounted: map[types.UID][]*Volume{},
		waiting: map[string]sets.Set[string]{}, podKeys: map[types.UID]string{}}
}

// podVolumes resolves the pod's claims to CSI volumes; other volume types need nothing
// from the node in hollow mode.
func (m *volumeManager) podVolumes(ctx context.Context, pod *corev1.Pod) ([]*Volume, error) {
	var out []*Volume
	for _, v := range pod.Spec.Volumes {
		claim := ""
		switch {
		case v.PersistentVolumeClaim != nil:
			claim = v.PersistentVolumeClaim.ClaimName
		case v.Ephemeral != nil:
			claim = pod.Name + "-" + v.Name
		default:
			continue
		}
		pvc, err := m.claim(ctx, pod.Namespace, claim)
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: persistentvolumeclaim %q not found", errVolumesNotReady, claim)
		}
		if apierrors.IsForbidden(err) {
			// The authorizer has not seen the pod on this node yet.
			return nil, fmt.Errorf("%w: persistentvolumeclaim %q: %w", errVolumesNotReady, claim, err)
		}
		if err != nil {
			return nil, err
		}
		if pvc.Spec.VolumeName == "" || pvc.Status.Phase != corev1.ClaimBound {
			return nil, fmt.Errorf("%w: persistentvolumeclaim %q is not bound", errVolumesNotReady, claim)
		}
		pv, err := m.volume(ctx, pvc.Spec.VolumeName)
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: persistentvolume %q not found", errVolumesNotReady, pvc.Spec.VolumeName)
		}
		if apierrors.IsForbidden(err) {
			// The authorizer has not seen the claim bound yet.
			return nil, fmt.Errorf("%w: persistentvolume %q: %w", errVolumesNotReady, pvc.Spec.VolumeName, err)
		}
		if err != nil {
			return nil, err
		}
		csi := pv.Spec.CSI
		if csi == nil {
			continue
		}
		vol := &Volume{PodVolume: v.Name, UniqueName: string(volumeutil.UniqueVolumeName(csi.Driver, csi.VolumeHandle)), PVName: pv.Name, Claim: pvc.Namespace + "/" + pvc.Name,
			Driver: csi.Driver, Handle: csi.VolumeHandle, FSType: csi.FSType, VolumeContext: csi.VolumeAttributes,
			ReadOnly: csi.ReadOnly || v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ReadOnly}
		if len(pv.Spec.AccessModes) > 0 {
			vol.AccessMode = pv.Spec.AccessModes[0]
		}
		out = append(out, vol)
	}
	return out, nil
}

// attachRequired: a driver without a CSIDriver object, or with attachRequired unset or
// true, needs a VolumeAttachment (upstream's rule).
func (m *volumeManager) attachRequired(driver string) bool {
	d, err := m.drivers.Get(driver)
	if err != nil {
		return true
	}
	return d.Spec.AttachRequired == nil || *d.Spec.AttachRequired
}

// claim and volume get a PersistentVolumeClaim and a PersistentVolume from the API server.
func (m *volumeManager) claim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error) {
	return m.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (m *volumeManager) volume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	return m.client.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}

// attachment returns the VolumeAttachment of v on this node, and whether it is attached.
func (m *volumeManager) attachment(ctx context.Context, v *Volume) (*storagev1.VolumeAttachment, bool) {
	va, err := m.client.StorageV1().VolumeAttachments().Get(ctx, volumeutil.AttachmentName(v.Handle, v.Driver, m.node), metav1.GetOptions{})
	if err != nil || va.Spec.NodeName != m.node || va.Spec.Source.PersistentVolumeName == nil ||
		*va.Spec.Source.PersistentVolumeName != v.PVName {
		return nil, false
	}
	return va, va.Status.Attached && va.DeletionTimestamp == nil
}

// setUp makes the pod's volumes ready: configMap, secret, downwardAPI and projected
// volumes written (real mode), CSI volumes in use, attached, staged, published. It
// returns an error wrapping errVolumesNotReady while waiting for others (the pod is
// requeued then).
func (m *volumeManager) setUp(ctx context.Context, pod *corev1.Pod, key string) error {
	var configErr error
	if m.config != nil {
		configErr = m.config.setUp(ctx, pod)
	}
	if err := m.setUpCSI(ctx, pod, key); err != nil {
		return err
	}
	return configErr
}

// setUpCSI makes the pod's CSI volumes ready: in use, attached, staged, published.
func (m *volumeManager) setUpCSI(ctx context.Context, pod *corev1.Pod, key string) error {
	vols, err := m.podVolumes(ctx, pod)
	if err != nil {
		return err
	}
	if len(vols) == 0 {
		return nil
	}
	m.mu.Lock()
	m.podKeys[pod.UID] = key
	added := false
	for _, v := range vols {
		name := corev1.UniqueVolumeName(v.UniqueName)
		if m.users[name] == nil {
			m.users[name] = sets.New[types.UID]()
			added = true
		}
		m.users[name].Insert(pod.UID)
	}
	m.mu.Unlock()
	if added {
		m.signal()
	}
	var waitingFor []string
	for _, v := range vols {
		m.mu.Lock()
		reported := m.reported.Has(corev1.UniqueVolumeName(v.UniqueName))
		m.mu.Unlock()
		if !reported {
			m.wait(key, "reported")
			waitingFor = append(waitingFor, v.PVName+" (in use)")
			continue
		}
		if m.attachRequired(v.Driver) {
			va, ok := m.attachment(ctx, v)
			if !ok {
				waitingFor = append(waitingFor, v.PVName+" (attach)")
				continue
			}
			v.PublishContext = va.Status.AttachmentMetadata
		}
	}
	if len(waitingFor) > 0 {
		return fmt.Errorf("%w: waiting for %v", errVolumesNotReady, waitingFor)
	}
	m.mu.Lock()
	published := sets.New[string]()
	for _, v := range m.mounted[pod.UID] {
		published.Insert(v.UniqueName)
	}
	m.mu.Unlock()
	for _, v := range vols {
		if published.Has(v.UniqueName) {
			// Set up once: later syncs of the pod do not publish it again.
			continue
		}
		name := corev1.UniqueVolumeName(v.UniqueName)
		staging := stagingPath(m.root, v.PVName)
		m.mu.Lock()
		staged := m.staged.Has(name)
		m.mu.Unlock()
		if !staged {
			if err := m.mounter.Stage(ctx, v, staging); err != nil {
				return &mountError{op: "MountVolume.MountDevice", volume: v.PVName, err: err}
			}
			m.mu.Lock()
			m.staged.Insert(name)
			m.mu.Unlock()
		}
		if err := m.mounter.Publish(ctx, v, staging, targetPath(m.root, pod.UID, v.PVName)); err != nil {
			return &mountError{op: "MountVolume.SetUp", volume: v.PVName, err: err}
		}
	}
	m.mu.Lock()
	m.mounted[pod.UID] = vols
	m.mu.Unlock()
	return nil
}

// tearDown unpublishes the pod's volumes, unstages those no other pod uses and takes them
// out of the volumes in use.
func (m *volumeManager) tearDown(ctx context.Context, uid types.UID) error {
	m.reconstruct(uid)
	if m.config != nil {
		if err := m.config.tearDown(uid); err != nil {
			return err
		}
	}
	if m.local {
		if err := tearDownEmptyDirs(m.root, uid); err != nil {
			return err
		}
	}
	m.mu.Lock()
	vols := m.mounted[uid]
	m.mu.Unlock()
	for _, v := range vols {
		if err := m.mounter.Unpublish(ctx, v, targetPath(m.root, uid, v.PVName)); err != nil {
			return fmt.Errorf("unpublish %s: %w", v.PVName, err)
		}
	}
	m.mu.Lock()
	delete(m.mounted, uid)
	delete(m.podKeys, uid)
	var unused []corev1.UniqueVolumeName
	for name, pods := range m.users {
		pods.Delete(uid)
		if pods.Len() == 0 {
			unused = append(unused, name)
		}
	}
	m.mu.Unlock()
	byName := map[string]*Volume{}
	for _, v := range vols {
		byName[v.UniqueName] = v
	}
	for _, name := range unused {
		m.mu.Lock()
		staged := m.staged.Has(name)
		m.mu.Unlock()
		if v := byName[string(name)]; staged && v != nil {
			if err := m.mounter.Unstage(ctx, v, stagingPath(m.root, v.PVName)); err != nil {
				return fmt.Errorf("unstage %s: %w", v.PVName, err)
			}
		}
		m.mu.Lock()
		if m.users[name] != nil && m.users[name].Len() == 0 {
			delete(m.users, name)
			m.staged.Delete(name)
		}
		m.mu.Unlock()
	}
	if len(unused) > 0 {
		m.signal()
	}
	return nil
}

// inUse lists the volumes the node's pods need, sorted (node.status.volumesInUse).
func (m *volumeManager) inUse() []corev1.UniqueVolumeName {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]corev1.UniqueVolumeName, 0, len(m.users))
	for name := range m.users {
		out = append(out, name)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// markReported records what the node status now reports and wakes the pods waiting for it.
func (m *volumeManager) markReported(names []corev1.UniqueVolumeName) {
	m.mu.Lock()
	m.reported = sets.New(names...)
	keys := m.takeWaiting("reported")
	m.mu.Unlock()
	m.requeue(keys...)
}

func (m *volumeManager) wait(key, what string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.waiting[what] == nil {
		m.waiting[what] = sets.New[string]()
	}
	m.waiting[what].Insert(key)
}

func (m *volumeManager) takeWaiting(what string) []string {
	keys := m.waiting[what].UnsortedList()
	delete(m.waiting, what)
	return keys
}

func (m *volumeManager) signal() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// staleUsers drops pods that are gone without a tear down (they never mounted anything).
func (m *volumeManager) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	changed := false
	for name, pods := range m.users {
		if pods.Has(uid) {
			pods.Delete(uid)
			if pods.Len() == 0 && !m.staged.Has(name) {
				delete(m.users, name)
				changed = true
			}
		}
	}
	if changed {
		m.signal()
	}
}

// reconstruct takes back the CSI volumes an earlier run of this kubelet published for
// pod uid, from the vol_data.json beside each target path, when this run has not set
// them up itself: a pod deleted while its kubelet was down is then unpublished and
// unstaged like any other (an unstage is skipped while another pod uses the volume).
func (m *volumeManager) reconstruct(uid types.UID) {
	m.mu.Lock()
	_, known := m.mounted[uid]
	m.mu.Unlock()
	if known {
		return
	}
	files, _ := filepath.Glob(filepath.Join(m.root, "pods", string(uid), "volumes", "kubernetes.io~csi", "*", "vol_data.json"))
	var vols []*Volume
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var d struct {
			VolumeHandle string `json:"volumeHandle"`
			DriverName   string `json:"driverName"`
		}
		if json.Unmarshal(b, &d) != nil || d.VolumeHandle == "" || d.DriverName == "" {
			continue
		}
		vols = append(vols, &Volume{PVName: filepath.Base(filepath.Dir(f)), Driver: d.DriverName, Handle: d.VolumeHandle,
			UniqueName: string(volumeutil.UniqueVolumeName(d.DriverName, d.VolumeHandle))})
	}
	if len(vols) == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mounted[uid] = vols
	for _, v := range vols {
		name := corev1.UniqueVolumeName(v.UniqueName)
		if m.users[name] == nil {
			m.users[name] = sets.New[types.UID]()
		}
		m.users[name].Insert(uid)
		m.staged.Insert(name)
	}
}

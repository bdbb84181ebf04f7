package kubelet

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"runtime"
	"sort"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/version"
)

// Upstream names on the Node and CSINode.
const (
	annCSINodeID               = "csi.volume.kubernetes.io/nodeid"
	annControllerManagedAttach = "volumes.kubernetes.io/controller-managed-attach-detach"
	labelEBSZone               = "topology.ebs.csi.aws.com/zone"
	kubeletPort                = 10250 // the kubelet server's port unless told

)

// nodeLabels are the labels the kubelet owns on its Node.
func nodeLabels(cfg *Config) map[string]string {
	l := map[string]string{
		corev1.LabelHostname:   cfg.NodeName,
		corev1.LabelOSStable:   "linux",
		corev1.LabelArchStable: runtime.GOARCH,
		labelEBSZone:           cfg.Zone,
	}
	if !cfg.ExternalCloudProvider {
		l[corev1.LabelTopologyZone] = cfg.Zone
		l[corev1.LabelTopologyRegion] = cfg.Region
		l[corev1.LabelInstanceTypeStable] = cfg.InstanceType
	}
	maps.Copy(l, cfg.Labels)
	return l
}

// The taint and annotation of a kubelet of an external cloud.
const (
	taintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"
	annProvidedNodeIP  = "alpha.kubernetes.io/provided-node-ip"
)

// desiredNode is the Node the kubelet registers (metadata and spec). A hollow node
// declares its CSI driver's node id itself; a real node's plugin manager writes it when
// the driver registers.
func desiredNode(cfg *Config) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        cfg.NodeName,
			Labels:      nodeLabels(cfg),
			Annotations: map[string]string{annControllerManagedAttach: "true"},
		},
		Spec: corev1.NodeSpec{ProviderID: fmt.Sprintf("aws:///%s/%s", cfg.Zone, cfg.InstanceID)},
	}
	if cfg.ExternalCloudProvider {
		n.Spec.ProviderID = ""
		n.Spec.Taints = []corev1.Taint{{Key: taintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		if cfg.NodeIP != "" {
			n.Annotations[annProvidedNodeIP] = cfg.NodeIP
		}
	}
	if cfg.Hollow {
		ids, _ := json.Marshal(map[string]string{cfg.CSIDriverName: cfg.InstanceID})
		n.Annotations[annCSINodeID] = string(ids)
	}
	return n
}

// mergeNodeMeta puts the kubelet's labels, annotations and providerID on an existing node;
// it reports whether anything changed.
func mergeNodeMeta(node, want *corev1.Node) bool {
	changed := false
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	for k, v := range want.Labels {
		if node.Labels[k] != v {
			node.Labels[k], changed = v, true
		}
	}
	for k, v := range want.Annotations {
		if node.Annotations[k] != v {
			node.Annotations[k], changed = v, true
		}
	}
	if node.Spec.ProviderID == "" && want.Spec.ProviderID != "" {
		node.Spec.ProviderID, changed = want.Spec.ProviderID, true
	}
	return changed
}

// nodeConditions are the node's conditions, keeping transition times that did not change.
// runtimeErr, when set, is why the container runtime cannot run pods: the node is then
// NotReady with upstream's reason and the error as message.
func nodeConditions(prev []corev1.NodeCondition, runtimeErr error, now metav1.Time) []corev1.NodeCondition {
	ready := corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"}
	if runtimeErr != nil {
		ready = corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionFalse, Reason: "KubeletNotReady",
			Message: "container runtime is down: " + runtimeErr.Error()}
	}
	want := []corev1.NodeCondition{
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", Message: "kubelet has sufficient memory available"},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", Message: "kubelet has no disk pressure"},
		{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", Message: "kubelet has sufficient PID available"},
		ready,
	}
	for i := range want {
		want[i].LastHeartbeatTime, want[i].LastTransitionTime = now, now
		for _, p := range prev {
			if p.Type == want[i].Type && p.Status == want[i].Status {
				want[i].LastTransitionTime = p.LastTransitionTime
			}
		}
	}
	return want
}

// nodeCapacity is a node's capacity: the resources the kubelet manages (managed), over
// those the node's status already advertises (extended resources an operator or a device
// manager patched in stay, as upstream's kubelet keeps them); its allocatable is the same,
// since the kubelet reserves nothing.
func nodeCapacity(prev, managed corev1.ResourceList) (capacity, allocatable corev1.ResourceList) {
	capacity = prev.DeepCopy()
	if capacity == nil {
		capacity = corev1.ResourceList{}
	}
	for name, q := range managed {
		capacity[name] = q.DeepCopy()
	}
	return capacity, capacity.DeepCopy()
}

// applyNodeStatus sets what the kubelet reports in node.status; changed ignores heartbeats.
// runtimeVersion is the runtime's answer to Version; "" (the runtime did not answer)
// keeps the version the node reports.
func applyNodeStatus(node *corev1.Node, cfg *Config, inUse []corev1.UniqueVolumeName, runtimeVersion string, runtimeErr error, now metav1.Time) (changed bool) {
	old := node.Status.DeepCopy()
	s := &node.Status
	s.Capacity, s.Allocatable = nodeCapacity(old.Capacity, cfg.Capacity)
	s.Conditions = nodeConditions(old.Conditions, runtimeErr, now)
	s.Addresses = nodeAddresses(cfg, old.Addresses)
	s.DaemonEndpoints = corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: cfg.ServerPort}}
	if runtimeVersion == "" {
		runtimeVersion = old.NodeInfo.ContainerRuntimeVersion
	}
	kernel, osImage := "hollow", "kubelab hollow node"
	if !cfg.Hollow {
		kernel, osImage = hostKernel(), hostOSImage()
	}
	s.NodeInfo = corev1.NodeSystemInfo{
		MachineID: cfg.InstanceID, SystemUUID: cfg.InstanceID, BootID: cfg.InstanceID,
		KernelVersion: kernel, OSImage: osImage, ContainerRuntimeVersion: runtimeVersion,
		KubeletVersion: version.Info().GitVersion, OperatingSystem: "linux", Architecture: runtime.GOARCH,
	}
	if len(inUse) == 0 {
		s.VolumesInUse = nil
	} else {
		s.VolumesInUse = append([]corev1.UniqueVolumeName(nil), inUse...)
	}
	// Compare without heartbeats.
	cmpOld, cmpNew := old.DeepCopy(), s.DeepCopy()
	for _, st := range []*corev1.NodeStatus{cmpOld, cmpNew} {
		for i := range st.Conditions {
			st.Conditions[i].LastHeartbeatTime = metav1.Time{}
		}
	}
	return !apiequality.Semantic.DeepEqual(cmpOld, cmpNew)
}

// nodeAddresses are the addresses the kubelet reports: its NodeIP, its name and
// cfg.Addresses; with an external cloud provider, the node's current ones (prev) once it
// has some, which are the cloud-controller-manager's to keep.
func nodeAddresses(cfg *Config, prev []corev1.NodeAddress) []corev1.NodeAddress {
	if cfg.ExternalCloudProvider && len(prev) > 0 {
		return prev
	}
	out := []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: cfg.NodeName}}
	if cfg.NodeIP != "" {
		out = append([]corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: cfg.NodeIP}}, out...)
	}
	return append(out, cfg.Addresses...)
}

// conditionEvents are the reasons of the events the kubelet records when it reports a
// node condition in a new status, as upstream's kubelet does.
var conditionEvents = map[corev1.NodeConditionType]map[corev1.ConditionStatus]string{
	corev1.NodeMemoryPressure: {corev1.ConditionFalse: "NodeHasSufficientMemory", corev1.ConditionTrue: "NodeHasInsufficientMemory"},
	corev1.NodeDiskPressure:   {corev1.ConditionFalse: "NodeHasNoDiskPressure", corev1.ConditionTrue: "NodeHasDiskPressure"},
	corev1.NodePIDPressure:    {corev1.ConditionFalse: "NodeHasSufficientPID", corev1.ConditionTrue: "NodeHasInsufficientPID"},
	corev1.NodeReady:          {corev1.ConditionTrue: "NodeReady", corev1.ConditionFalse: "NodeNotReady"},
}

// nodeStatusEvents are the reasons of the events a status write from prev to cur
// records: one per condition of cur whose status differs from prev's (or that prev
// lacks), in cur's order.
func nodeStatusEvents(prev, cur []corev1.NodeCondition) []string {
	var out []string
	for _, c := range cur {
		reason, ok := conditionEvents[c.Type][c.Status]
		if !ok {
			continue
		}
		changed := true
		for _, p := range prev {
			if p.Type == c.Type {
				changed = p.Status != c.Status
			}
		}
		if changed {
			out = append(out, reason)
		}
	}
	return out
}

// nodeRef is what the kubelet's Node events are about; as upstream's kubelet, it uses
// the node's name as its uid.
func (k *Kubelet) nodeRef() *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", Name: k.cfg.NodeName, UID: types.UID(k.cfg.NodeName)}
}

// registerNode creates the Node, or takes over an existing one. The first registration
// of this kubelet records the Starting event.
func (k *Kubelet) registerNode(ctx context.Context) error {
	want := desiredNode(&k.cfg)
	node, err := k.client.CoreV1().Nodes().Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			cur, err := k.client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			node = cur
			if !mergeNodeMeta(cur, want) {
				return nil
			}
			node, err = k.client.CoreV1().Nodes().Update(ctx, cur, metav1.UpdateOptions{})
			return err
		})
	}
	if err != nil {
		return fmt.Errorf("register node %s: %w", k.cfg.NodeName, err)
	}
	if k.nodeUID.Swap(&node.UID) == nil {
		k.recorder.Eventf(k.nodeRef(), corev1.EventTypeNormal, "Starting", "Starting kubelet.")
	}
	return nil
}

// syncNodeStatus writes the node's status when it changed or force is set, and records
// an event for each condition the write changes (NodeReady: "Node <name> status is now:
// NodeReady").
func (k *Kubelet) syncNodeStatus(ctx context.Context, force bool) error {
	inUse := k.volumes.inUse()
	runtimeErr := k.runtime.Ready(ctx)
	// A runtime that does not answer is reported by Ready; the node keeps the version
	// it last reported.
	runtimeVersion, _ := k.runtime.Version(ctx)
	wrote := false
	var events []string
	try := 0
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		events = nil
		try++
		node, err := k.client.CoreV1().Nodes().Get(ctx, k.cfg.NodeName, nodeStatusGet(try))
		if err != nil {
			return err
		}
		if node.Spec.PodCIDR != "" {
			k.ipam.setCIDR(node.Spec.PodCIDR)
		}
		prev := node.Status.Conditions
		if !applyNodeStatus(node, &k.cfg, inUse, runtimeVersion, runtimeErr, metav1.Now()) && !force {
			return nil
		}
		_, err = k.client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
		wrote = err == nil
		if wrote {
			events = nodeStatusEvents(prev, node.Status.Conditions)
		}
		return err
	})
	for _, reason := range events {
		k.recorder.Eventf(k.nodeRef(), corev1.EventTypeNormal, reason, "Node %s status is now: %s", k.cfg.NodeName, reason)
	}
	if err != nil {
		return fmt.Errorf("update node %s status: %w", k.cfg.NodeName, err)
	}
	if wrote || !force {
		k.volumes.markReported(inUse)
	}
	return nil
}

// nodeStatusGet are the options of the node status's read of the Node on try n (from 1):
// the first is served from the API server's cache (resourceVersion 0), as upstream's
// kubelet reads it, rather than from etcd; thousands of nodes read every 10 s. A stale
// Node makes the write conflict, and the next tries read from etcd.
func nodeStatusGet(n int) metav1.GetOptions {
	if n == 1 {
		return metav1.GetOptions{ResourceVersion: "0"}
	}
	return metav1.GetOptions{}
}

// runNodeStatus keeps the node status current until ctx ends.
func (k *Kubelet) runNodeStatus(ctx context.Context) {
	tick := time.NewTicker(k.cfg.StatusUpdateInterval)
	defer tick.Stop()
	lastReport := time.Now()
	for {
		force := false
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			force = time.Since(lastReport) >= k.cfg.StatusReportInterval
		case <-k.volumes.changed:
		}
		if err := k.syncNodeStatus(ctx, force); err != nil {
			if ctx.Err() == nil {
				k.log.Warn("node status", "err", err)
			}
			continue
		}
		if force {
			lastReport = time.Now()
		}
	}
}

// leasePostProcess makes the Node own its Lease, as upstream's kubelet does.
func (k *Kubelet) leasePostProcess(l *coordinationv1.Lease) error {
	uid := k.nodeUID.Load()
	if uid == nil {
		return fmt.Errorf("node %s not registered yet", k.cfg.NodeName)
	}
	l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: k.cfg.NodeName, UID: *uid}}
	return nil
}

// desiredCSIDriver is the CSINode entry of the node's CSI driver: its node id (the instance
// id), the topology keys its NodeGetInfo reports and the allocatable volume count.
func desiredCSIDriver(cfg *Config) storagev1.CSINodeDriver {
	keys := []string{corev1.LabelOSStable, labelEBSZone, corev1.LabelTopologyZone}
	sort.Strings(keys)
	return storagev1.CSINodeDriver{Name: cfg.CSIDriverName, NodeID: cfg.InstanceID, TopologyKeys: keys,
		Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To(cfg.MaxVolumes)}}
}

// mergeCSIDriver replaces or adds d in drivers; it reports whether anything changed.
func mergeCSIDriver(drivers []storagev1.CSINodeDriver, d storagev1.CSINodeDriver) ([]storagev1.CSINodeDriver, bool) {
	for i := range drivers {
		if drivers[i].Name == d.Name {
			if apiequality.Semantic.DeepEqual(drivers[i], d) {
				return drivers, false
			}
			out := append([]storagev1.CSINodeDriver(nil), drivers...)
			out[i] = d
			return out, true
		}
	}
	return append(append([]storagev1.CSINodeDriver(nil), drivers...), d), true
}

// registerCSIDriver records the driver in the node's CSINode: a hollow node takes its
// driver as registered at start (a real node's plugin manager does it when the driver's
// registration socket appears).
func (k *Kubelet) registerCSIDriver(ctx context.Context) error {
	d := desiredCSIDriver(&k.cfg)
	uid := k.nodeUID.Load()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := k.client.StorageV1().CSINodes().Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			n := &storagev1.CSINode{
				ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName,
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: k.cfg.NodeName, UID: *uid}}},
				Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{d}},
			}
			_, err = k.client.StorageV1().CSINodes().Create(ctx, n, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(storagev1.Resource("csinodes"), k.cfg.NodeName, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		drivers, changed := mergeCSIDriver(cur.Spec.Drivers, d)
		if !changed {
			return nil
		}
		cur.Spec.Drivers = drivers
		_, err = k.client.StorageV1().CSINodes().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("register %s in CSINode %s: %w", k.cfg.CSIDriverName, k.cfg.NodeName, err)
	}
	return nil
}

// hostKernel is the machine's kernel release (a real node runs on it).
func hostKernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// hostOSImage is the machine's PRETTY_NAME from /etc/os-release.
func hostOSImage() string {
	b, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return "unknown"
}

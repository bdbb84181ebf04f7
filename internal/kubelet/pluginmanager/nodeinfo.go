package pluginmanager

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// AnnotationNodeID is the Node annotation that maps each registered CSI driver to its
// node id (a JSON object).
const AnnotationNodeID = "csi.volume.kubernetes.io/nodeid"

// installDriver records a registered driver in the API: its node id in the Node's
// annotation, its topology as Node labels and its entry in the CSINode.
func (m *Manager) installDriver(ctx context.Context, name, nodeID string, maxVolumes int64, topology map[string]string) error {
	node, err := m.updateNode(ctx, func(n *corev1.Node) (bool, error) {
		changed, err := setNodeID(n, name, nodeID)
		if err != nil {
			return false, err
		}
		labelled, err := setTopologyLabels(n, topology)
		return changed || labelled, err
	})
	if err != nil {
		return err
	}
	return m.updateCSINode(ctx, node.UID, csiNodeDriver(name, nodeID, maxVolumes, topology))
}

// uninstallDriver removes a driver's CSINode entry and nodeid annotation key; the topology
// labels stay, as other drivers or the node itself may use them.
func (m *Manager) uninstallDriver(ctx context.Context, name string) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := m.client.StorageV1().CSINodes().Get(ctx, m.cfg.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		drivers, removed := removeCSINodeDriver(cur.Spec.Drivers, name)
		if !removed {
			return nil
		}
		cur.Spec.Drivers = drivers
		_, err = m.client.StorageV1().CSINodes().Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("remove %s from CSINode %s: %w", name, m.cfg.NodeName, err)
	}
	_, err = m.updateNode(ctx, func(n *corev1.Node) (bool, error) { return removeNodeID(n, name) })
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// updateNode applies change to the current Node and writes it when it changed, retrying
// on conflicts; it returns the Node as last read or written.
func (m *Manager) updateNode(ctx context.Context, change func(*corev1.Node) (bool, error)) (*corev1.Node, error) {
	var out *corev1.Node
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := m.client.CoreV1().Nodes().Get(ctx, m.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		changed, err := change(node)
		if err != nil || !changed {
			out = node
			return err
		}
		out, err = m.client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("update node %s: %w", m.cfg.NodeName, err)
	}
	return out, nil
}

// updateCSINode puts d into the node's CSINode, creating the CSINode (owned by the Node
// with uid nodeUID) when it is missing.
func (m *Manager) updateCSINode(ctx context.Context, nodeUID types.UID, d storagev1.CSINodeDriver) error {
	csiNodes := m.client.StorageV1().CSINodes()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cur, err := csiNodes.Get(ctx, m.cfg.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			n := &storagev1.CSINode{
				ObjectMeta: metav1.ObjectMeta{Name: m.cfg.NodeName, OwnerReferences: []metav1.OwnerReference{
					{APIVersion: "v1", Kind: "Node", Name: m.cfg.NodeName, UID: nodeUID}}},
				Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{d}},
			}
			_, err = csiNodes.Create(ctx, n, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(storagev1.Resource("csinodes"), m.cfg.NodeName, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		drivers, changed := putCSINodeDriver(cur.Spec.Drivers, d)
		if !changed {
			return nil
		}
		cur.Spec.Drivers = drivers
		_, err = csiNodes.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("record driver in CSINode %s: %w", m.cfg.NodeName, err)
	}
	return nil
}

// csiNodeDriver is a driver's CSINode entry: its node id, the sorted keys of its topology
// and, when the driver reports one, its volume limit.
func csiNodeDriver(name, nodeID string, maxVolumes int64, topology map[string]string) storagev1.CSINodeDriver {
	d := storagev1.CSINodeDriver{Name: name, NodeID: nodeID}
	if len(topology) > 0 {
		d.TopologyKeys = slices.Sorted(maps.Keys(topology))
	}
	if maxVolumes > 0 {
		d.Allocatable = &storagev1.VolumeNodeResources{Count: ptr.To(int32(min(maxVolumes, math.MaxInt32)))}
	}
	return d
}

// putCSINodeDriver replaces the entry named d.Name (in place) or appends d; it reports
// whether anything changed.
func putCSINodeDriver(drivers []storagev1.CSINodeDriver, d storagev1.CSINodeDriver) ([]storagev1.CSINodeDriver, bool) {
	for i := range drivers {
		if drivers[i].Name != d.Name {
			continue
		}
		if apiequality.Semantic.DeepEqual(drivers[i], d) {
			return drivers, false
		}
		out := slices.Clone(drivers)
		out[i] = d
		return out, true
	}
	return append(slices.Clone(drivers), d), true
}

// removeCSINodeDriver drops the entry named name; it reports whether there was one.
func removeCSINodeDriver(drivers []storagev1.CSINodeDriver, name string) ([]storagev1.CSINodeDriver, bool) {
	out := slices.DeleteFunc(slices.Clone(drivers), func(d storagev1.CSINodeDriver) bool { return d.Name == name })
	return out, len(out) != len(drivers)
}

// nodeIDs parses the node's nodeid annotation (an empty map when it is absent).
func nodeIDs(n *corev1.Node) (map[string]string, error) {
	ids := map[string]string{}
	v := n.Annotations[AnnotationNodeID]
	if v == "" {
		return ids, nil
	}
	if err := json.Unmarshal([]byte(v), &ids); err != nil {
		return nil, fmt.Errorf("parse annotation %s=%q of node %s: %w", AnnotationNodeID, v, n.Name, err)
	}
	if ids == nil {
		ids = map[string]string{}
	}
	return ids, nil
}

// setNodeID puts driver → nodeID into the node's nodeid annotation, keeping the other
// drivers' entries; it reports whether the node changed.
func setNodeID(n *corev1.Node, driver, nodeID string) (bool, error) {
	ids, err := nodeIDs(n)
	if err != nil {
		return false, err
	}
	if cur, ok := ids[driver]; ok && cur == nodeID {
		return false, nil
	}
	ids[driver] = nodeID
	b, err := json.Marshal(ids)
	if err != nil {
		return false, fmt.Errorf("encode annotation %s: %w", AnnotationNodeID, err)
	}
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[AnnotationNodeID] = string(b)
	return true, nil
}

// removeNodeID drops driver from the node's nodeid annotation, and the annotation when no
// driver is left; it reports whether the node changed.
func removeNodeID(n *corev1.Node, driver string) (bool, error) {
	if n.Annotations[AnnotationNodeID] == "" {
		return false, nil
	}
	ids, err := nodeIDs(n)
	if err != nil {
		return false, err
	}
	if _, ok := ids[driver]; !ok {
		return false, nil
	}
	delete(ids, driver)
	if len(ids) == 0 {
		delete(n.Annotations, AnnotationNodeID)
		return true, nil
	}
	b, err := json.Marshal(ids)
	if err != nil {
		return false, fmt.Errorf("encode annotation %s: %w", AnnotationNodeID, err)
	}
	n.Annotations[AnnotationNodeID] = string(b)
	return true, nil
}

// setTopologyLabels puts the driver's topology segments on the node as labels. A label
// the node already has with another value is a collision: the driver and the node
// disagree on where the node is, and nothing is changed.
func setTopologyLabels(n *corev1.Node, topology map[string]string) (bool, error) {
	changed := false
	for k, v := range topology {
		cur, ok := n.Labels[k]
		if ok && cur != v {
			return false, fmt.Errorf("topology label collision on node %s: the driver reports %s=%q, the node has %q", n.Name, k, v, cur)
		}
		if !ok {
			changed = true
		}
	}
	if !changed {
		return false, nil
	}
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	maps.Copy(n.Labels, topology)
	return true, nil
}

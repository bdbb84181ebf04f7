package provisioner

import (
	"context"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
	storagehelpers "k8s.io/component-helpers/storage/volume"

	csiclient "github.com/kubelab/kubelab/internal/csi/client"
)

// Event reasons of the provisioner, as upstream.
const (
	ReasonProvisioning          = "Provisioning"
	ReasonProvisioningSucceeded = "ProvisioningSucceeded"
	ReasonProvisioningFailed    = "ProvisioningFailed"
	ReasonVolumeFailedDelete    = "VolumeFailedDelete"
)

// syncClaim provisions a volume for one claim (namespace/name) when it is this
// driver's to provision and has no PV yet.
func (c *Controller) syncClaim(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	claim, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var class *storagev1.StorageClass
	if className := storagehelpers.GetPersistentVolumeClaimClass(claim); className != "" {
		class, err = c.classes.Get(className)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	if ok, why := shouldProvision(claim, class, c.driver); !ok {
		c.log.DebugContext(ctx, "not provisioning", "claim", key, "reason", why)
		return nil
	}
	pvName := volumeName(c.cfg.VolumeNamePrefix, claim, c.cfg.VolumeNameUUIDLength)
	if _, err := c.volumes.Get(pvName); err == nil {
		return nil // provisioned already; the PV controller binds it
	}
	var selected *corev1.Node
	if nodeName := claim.Annotations[storagehelpers.AnnSelectedNode]; nodeName != "" {
		selected, err = c.nodes.Get(nodeName)
		if apierrors.IsNotFound(err) {
			// The node went away: let the scheduler choose again.
			c.recorder.Eventf(claim, corev1.EventTypeWarning, ReasonProvisioningFailed,
				"failed to get target node: node %q not found", nodeName)
			return c.reschedule(ctx, claim)
		}
		if err != nil {
			return err
		}
	}
	req, fsType, err := c.request(ctx, claim, class, pvName, selected)
	if err != nil {
		c.recorder.Eventf(claim, corev1.EventTypeWarning, ReasonProvisioningFailed,
			"failed to provision volume with StorageClass %q: %v", class.Name, err)
		return err
	}
	c.recorder.Eventf(claim, corev1.EventTypeNormal, ReasonProvisioning,
		"External provisioner is provisioning volume for claim %q", key)
	callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	resp, err := c.csi.CreateVolume(callCtx, req)
	cancel()
	if err != nil {
		c.recorder.Eventf(claim, corev1.EventTypeWarning, ReasonProvisioningFailed,
			"failed to provision volume with StorageClass %q: %v", class.Name, err)
		if selected != nil && csiclient.Code(err) == codes.ResourceExhausted {
			if rerr := c.reschedule(ctx, claim); rerr != nil {
				return rerr
			}
		}
		return fmt.Errorf("CreateVolume %s for claim %s: %w", pvName, key, err)
	}
	pv := buildPV(pvInput{name: pvName, claim: claim, class: class, driver: c.driver, identity: c.identity, fsType: fsType, volume: resp.GetVolume()})
	if err := c.savePV(ctx, pv); err != nil {
		return c.abandon(ctx, claim, resp.GetVolume().GetVolumeId(), pvName, err)
	}
	c.log.InfoContext(ctx, "provisioned", "claim", key, "pv", pvName, "volume", resp.GetVolume().GetVolumeId())
	c.recorder.Eventf(claim, corev1.EventTypeNormal, ReasonProvisioningSucceeded, "Successfully provisioned volume %s", pvName)
	return nil
}

// request builds the CreateVolume request: topology from the selected node (or the
// cluster's nodes), parameters from the class, the content source from the claim's
// dataSource.
func (c *Controller) request(ctx context.Context, claim *corev1.PersistentVolumeClaim, class *storagev1.StorageClass, pvName string, selected *corev1.Node) (*csi.CreateVolumeRequest, string, error) {
	var topo *csi.TopologyRequirement
	if c.info.Topology {
		csiNodes, err := c.csiNodes.List(labels.Everything())
		if err != nil {
			return nil, "", err
		}
		nodeList, err := c.nodes.List(labels.Everything())
		if err != nil {
			return nil, "", err
		}
		nodes := make(map[string]*corev1.Node, len(nodeList))
		for _, n := range nodeList {
			nodes[n.Name] = n
		}
		topo, err = accessibilityRequirements(topologyInput{
			driver: c.driver, allowed: class.AllowedTopologies, selected: selected, nodes: nodes,
			csiNodes: csiNodes, strict: c.cfg.StrictTopology, pvName: pvName,
		})
		if err != nil {
			return nil, "", err
		}
	}
	source, err := c.contentSource(ctx, claim)
	if err != nil {
		return nil, "", err
	}
	return createRequest(createInput{
		name: pvName, claim: claim, class: class, defaultFSType: c.cfg.DefaultFSType,
		extraCreateMetadata: c.cfg.ExtraCreateMetadata, topology: topo, source: source,
	})
}

// contentSource resolves the claim's dataSource: a bound claim of the same driver
// (a clone) or a ready VolumeSnapshot (a restore).
func (c *Controller) contentSource(ctx context.Context, claim *corev1.PersistentVolumeClaim) (*csi.VolumeContentSource, error) {
	ds := claim.Spec.DataSource
	if ds == nil {
		return nil, nil
	}
	group := ""
	if ds.APIGroup != nil {
		group = *ds.APIGroup
	}
	switch {
	case group == "" && ds.Kind == "PersistentVolumeClaim":
		if !c.info.Has(csi.ControllerServiceCapability_RPC_CLONE_VOLUME) {
			return nil, fmt.Errorf("driver %s cannot clone volumes", c.driver)
		}
		src, err := c.claims.PersistentVolumeClaims(claim.Namespace).Get(ds.Name)
		if err != nil {
			return nil, fmt.Errorf("clone source claim %s/%s: %w", claim.Namespace, ds.Name, err)
		}
		if src.Status.Phase != corev1.ClaimBound || src.Spec.VolumeName == "" {
			return nil, fmt.Errorf("clone source claim %s/%s is not bound", claim.Namespace, ds.Name)
		}
		pv, err := c.volumes.Get(src.Spec.VolumeName)
		if err != nil {
			return nil, fmt.Errorf("clone source volume %s: %w", src.Spec.VolumeName, err)
		}
		if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != c.driver {
			return nil, fmt.Errorf("clone source claim %s/%s is not a %s volume", claim.Namespace, ds.Name, c.driver)
		}
		return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
			Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: pv.Spec.CSI.VolumeHandle}}}, nil
	case group == "snapshot.storage.k8s.io" && ds.Kind == "VolumeSnapshot":
		if c.snapshots == nil {
			return nil, fmt.Errorf("restoring from VolumeSnapshot %s is not enabled in this provisioner", ds.Name)
		}
		vs, err := c.snapshots.SnapshotV1().VolumeSnapshots(claim.Namespace).Get(ctx, ds.Name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("snapshot %s/%s: %w", claim.Namespace, ds.Name, err)
		}
		if vs.Status == nil || vs.Status.ReadyToUse == nil || !*vs.Status.ReadyToUse || vs.Status.BoundVolumeSnapshotContentName == nil {
			return nil, fmt.Errorf("snapshot %s/%s is not ready to use", claim.Namespace, ds.Name)
		}
		content, err := c.snapshots.SnapshotV1().VolumeSnapshotContents().Get(ctx, *vs.Status.BoundVolumeSnapshotContentName, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("snapshot content %s: %w", *vs.Status.BoundVolumeSnapshotContentName, err)
		}
		if content.Spec.Driver != c.driver || content.Status == nil || content.Status.SnapshotHandle == nil {
			return nil, fmt.Errorf("snapshot content %s has no %s snapshot handle", content.Name, c.driver)
		}
		if content.Status.RestoreSize != nil {
			q := claim.Spec.Resources.Requests[corev1.ResourceStorage]
			if q.Value() < *content.Status.RestoreSize {
				return nil, fmt.Errorf("requested volume size %d is less than the size %d of the snapshot %s/%s",
					q.Value(), *content.Status.RestoreSize, claim.Namespace, ds.Name)
			}
		}
		return &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: *content.Status.SnapshotHandle}}}, nil
	}
	return nil, fmt.Errorf("unsupported dataSource %s %s/%s", group, ds.Kind, ds.Name)
}

// savePV creates the PV, retrying transient errors a few times; an existing PV of
// the same claim counts as saved.
func (c *Controller) savePV(ctx context.Context, pv *corev1.PersistentVolume) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		_, err = c.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
		if err == nil {
			return nil
		}
		if apierrors.IsAlreadyExists(err) {
			old, gerr := c.client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
			if gerr == nil && old.Spec.ClaimRef != nil && old.Spec.ClaimRef.UID == pv.Spec.ClaimRef.UID {
				return nil
			}
			return fmt.Errorf("create persistentvolume %s: exists for another claim: %w", pv.Name, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 100 * time.Millisecond):
		}
	}
	return fmt.Errorf("create persistentvolume %s: %w", pv.Name, err)
}

// abandon handles a volume created for a claim whose PV could not be saved: if the
// claim is gone the volume is deleted (nothing will ever use it); otherwise the
// claim is retried, and CreateVolume, idempotent by name, returns the same volume.
func (c *Controller) abandon(ctx context.Context, claim *corev1.PersistentVolumeClaim, volumeID, pvName string, saveErr error) error {
	cur, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Get(ctx, claim.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) || (err == nil && cur.UID != claim.UID) {
		callCtx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
		defer cancel()
		if _, derr := c.csi.DeleteVolume(callCtx, &csi.DeleteVolumeRequest{VolumeId: volumeID}); derr != nil {
			return fmt.Errorf("claim gone and volume %s not deleted: %w (saving %s: %w)", volumeID, derr, pvName, saveErr)
		}
		return nil
	}
	return saveErr
}

// reschedule removes volume.kubernetes.io/selected-node so that the scheduler picks
// another node, as upstream does when the chosen one cannot get the volume (an update of
// the claim read: the provisioner's role allows update of claims, not patch).
func (c *Controller) reschedule(ctx context.Context, claim *corev1.PersistentVolumeClaim) error {
	out := claim.DeepCopy()
	delete(out.Annotations, storagehelpers.AnnSelectedNode)
	_, err := c.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Update(ctx, out, metav1.UpdateOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove selected node from claim %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	c.log.InfoContext(ctx, "provisioning rescheduled", "claim", claim.Namespace+"/"+claim.Name)
	return nil
}

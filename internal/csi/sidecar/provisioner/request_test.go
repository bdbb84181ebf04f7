package provisioner

import (
	"reflect"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
)

const drv = "ebs.csi.aws.com"

const (
	keyZone = "topology.ebs.csi.aws.com/zone"
	keyWK   = "topology.kubernetes.io/zone"
)

func testClaim(mut ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "my-app-pvc", Namespace: "default", UID: types.UID("0b1e5c8a-1111-2222-3333-444455556666"), ResourceVersion: "7",
			Annotations: map[string]string{storagehelpers.AnnStorageProvisioner: drv}},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			StorageClassName: ptr.To("gp2"),
		},
	}
	for _, m := range mut {
		m(c)
	}
	return c
}

func testClass(mode storagev1.VolumeBindingMode, mut ...func(*storagev1.StorageClass)) *storagev1.StorageClass {
	c := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "gp2"}, Provisioner: drv, VolumeBindingMode: &mode,
		Parameters: map[string]string{"type": "gp2"}}
	for _, m := range mut {
		m(c)
	}
	return c
}

func TestShouldProvision(t *testing.T) {
	wffc := testClass(storagev1.VolumeBindingWaitForFirstConsumer)
	imm := testClass(storagev1.VolumeBindingImmediate)
	now := metav1.Now()
	selected := func(c *corev1.PersistentVolumeClaim) { c.Annotations[storagehelpers.AnnSelectedNode] = "node-b" }
	cases := []struct {
		name  string
		claim *corev1.PersistentVolumeClaim
		class *storagev1.StorageClass
		want  bool
	}{
		{"immediate", testClaim(), imm, true},
		{"WFFC without node waits", testClaim(), wffc, false},
		{"WFFC with node", testClaim(selected), wffc, true},
		{"beta annotation only", testClaim(func(c *corev1.PersistentVolumeClaim) {
			c.Annotations = map[string]string{storagehelpers.AnnBetaStorageProvisioner: drv}
		}), imm, true},
		{"other provisioner", testClaim(func(c *corev1.PersistentVolumeClaim) { c.Annotations[storagehelpers.AnnStorageProvisioner] = "other" }), imm, false},
		{"not yet annotated by the PV controller", testClaim(func(c *corev1.PersistentVolumeClaim) { c.Annotations = nil }), imm, false},
		{"bound", testClaim(func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv" }), imm, false},
		{"being deleted", testClaim(func(c *corev1.PersistentVolumeClaim) { c.DeletionTimestamp = &now }), imm, false},
		{"no class", testClaim(), nil, false},
		{"class of another provisioner", testClaim(), testClass(storagev1.VolumeBindingImmediate, func(c *storagev1.StorageClass) { c.Provisioner = "x" }), false},
	}
	for _, tc := range cases {
		if got, why := shouldProvision(tc.claim, tc.class, drv); got != tc.want {
			t.Errorf("%s: got %v (%s), want %v", tc.name, got, why, tc.want)
		}
	}
}

func TestVolumeName(t *testing.T) {
	c := testClaim()
	if got := volumeName("pvc", c, 0); got != "pvc-0b1e5c8a-1111-2222-3333-444455556666" {
		t.Errorf("got %s", got)
	}
	if got := volumeName("kl", c, 8); got != "kl-0b1e5c8a" {
		t.Errorf("got %s", got)
	}
}

func TestCreateRequest(t *testing.T) {
	block := corev1.PersistentVolumeBlock
	topo := &csi.TopologyRequirement{Preferred: []*csi.Topology{{Segments: map[string]string{keyZone: "us-east-1b"}}}}
	cases := []struct {
		name      string
		in        createInput
		wantErr   string
		params    map[string]string
		fsType    string
		block     bool
		modes     []csi.VolumeCapability_AccessMode_Mode
		mountOpts []string
	}{
		{name: "defaults: ext4, extra metadata, prefixed keys stripped",
			in: createInput{name: "pvc-1", claim: testClaim(), defaultFSType: "ext4", extraCreateMetadata: true, topology: topo,
				class: testClass(storagev1.VolumeBindingImmediate, func(c *storagev1.StorageClass) {
					c.Parameters["csi.storage.k8s.io/provisioner-secret-name"] = "s"
					c.MountOptions = []string{"noatime"}
				})},
			params: map[string]string{"type": "gp2", ParamPVCName: "my-app-pvc", ParamPVCNamespace: "default", ParamPVName: "pvc-1"},
			fsType: "ext4", modes: []csi.VolumeCapability_AccessMode_Mode{csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}, mountOpts: []string{"noatime"}},
		{name: "class fstype wins",
			in: createInput{name: "pvc-1", claim: testClaim(), defaultFSType: "ext4",
				class: testClass(storagev1.VolumeBindingImmediate, func(c *storagev1.StorageClass) { c.Parameters[ParamFSType] = "xfs" })},
			params: map[string]string{"type": "gp2"}, fsType: "xfs", modes: []csi.VolumeCapability_AccessMode_Mode{csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}},
		{name: "block volume has no fstype",
			in: createInput{name: "pvc-1", defaultFSType: "ext4", class: testClass(storagev1.VolumeBindingImmediate),
				claim: testClaim(func(c *corev1.PersistentVolumeClaim) {
					c.Spec.VolumeMode = &block
					c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce, corev1.ReadOnlyMany}
				})},
			params: map[string]string{"type": "gp2"}, block: true,
			modes: []csi.VolumeCapability_AccessMode_Mode{csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY}},
		{name: "no size",
			in: createInput{name: "pvc-1", class: testClass(storagev1.VolumeBindingImmediate),
				claim: testClaim(func(c *corev1.PersistentVolumeClaim) { c.Spec.Resources.Requests = nil })},
			wantErr: "spec.resources.requests.storage"},
		{name: "bad access mode",
			in: createInput{name: "pvc-1", class: testClass(storagev1.VolumeBindingImmediate),
				claim: testClaim(func(c *corev1.PersistentVolumeClaim) {
					c.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{"Sometimes"}
				})},
			wantErr: `unknown access mode "Sometimes"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, fs, err := createRequest(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if req.Name != tc.in.name || req.CapacityRange.RequiredBytes != 1<<30 || fs != tc.fsType || req.AccessibilityRequirements != tc.in.topology {
				t.Errorf("name %s bytes %d fs %q", req.Name, req.CapacityRange.RequiredBytes, fs)
			}
			if !reflect.DeepEqual(req.Parameters, tc.params) {
				t.Errorf("parameters %v, want %v", req.Parameters, tc.params)
			}
			var modes []csi.VolumeCapability_AccessMode_Mode
			for _, c := range req.VolumeCapabilities {
				modes = append(modes, c.AccessMode.Mode)
				if (c.GetBlock() != nil) != tc.block {
					t.Errorf("capability %v, want block %v", c, tc.block)
				}
				if m := c.GetMount(); m != nil && (m.FsType != tc.fsType || !reflect.DeepEqual(m.MountFlags, tc.mountOpts)) {
					t.Errorf("mount capability %v", m)
				}
			}
			if !reflect.DeepEqual(modes, tc.modes) {
				t.Errorf("modes %v, want %v", modes, tc.modes)
			}
		})
	}
}

func TestBuildPV(t *testing.T) {
	claim := testClaim()
	vol := &csi.Volume{VolumeId: "vol-0abc", CapacityBytes: 2 << 30, VolumeContext: map[string]string{"blocksize": "4096"},
		AccessibleTopology: []*csi.Topology{{Segments: map[string]string{keyZone: "us-east-1b", keyWK: "us-east-1b"}}}}
	pv := buildPV(pvInput{name: "pvc-x", claim: claim, class: testClass(storagev1.VolumeBindingWaitForFirstConsumer), driver: drv, identity: "id-1", fsType: "ext4", volume: vol})
	if pv.Annotations[AnnProvisionedBy] != drv || !reflect.DeepEqual(pv.Finalizers, []string{FinalizerProvisoner}) {
		t.Errorf("meta %v %v", pv.Annotations, pv.Finalizers)
	}
	if pv.Spec.ClaimRef.UID != claim.UID || pv.Spec.ClaimRef.Name != "my-app-pvc" || pv.Spec.ClaimRef.Kind != "PersistentVolumeClaim" {
		t.Errorf("claimRef %+v", pv.Spec.ClaimRef)
	}
	if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.String() != "2Gi" {
		t.Errorf("capacity %s, want the driver's 2Gi", q.String())
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || pv.Spec.StorageClassName != "gp2" || *pv.Spec.VolumeMode != corev1.PersistentVolumeFilesystem {
		t.Errorf("spec %+v", pv.Spec)
	}
	csiSrc := pv.Spec.CSI
	if csiSrc.Driver != drv || csiSrc.VolumeHandle != "vol-0abc" || csiSrc.FSType != "ext4" ||
		csiSrc.VolumeAttributes["blocksize"] != "4096" || csiSrc.VolumeAttributes[AttrProvisionerID] != "id-1" {
		t.Errorf("csi %+v", csiSrc)
	}
	exprs := pv.Spec.NodeAffinity.Required.NodeSelectorTerms[0].MatchExpressions
	want := []corev1.NodeSelectorRequirement{
		{Key: keyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1b"}},
		{Key: keyWK, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1b"}},
	}
	if !reflect.DeepEqual(exprs, want) {
		t.Errorf("node affinity %+v, want %+v", exprs, want)
	}
	retain := corev1.PersistentVolumeReclaimRetain
	pv = buildPV(pvInput{name: "pvc-x", claim: claim, driver: drv, volume: &csi.Volume{VolumeId: "vol-1"},
		class: testClass(storagev1.VolumeBindingImmediate, func(c *storagev1.StorageClass) { c.ReclaimPolicy = &retain })})
	if len(pv.Finalizers) != 0 || pv.Spec.NodeAffinity != nil {
		t.Errorf("Retain PV finalizers %v affinity %v", pv.Finalizers, pv.Spec.NodeAffinity)
	}
	if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.String() != "1Gi" {
		t.Errorf("capacity %s, want the request when the driver says none", q.String())
	}
}

func TestDecideDelete(t *testing.T) {
	now := metav1.Now()
	mk := func(policy corev1.PersistentVolumeReclaimPolicy, phase corev1.PersistentVolumePhase, fin, deleting bool, by string) *corev1.PersistentVolume {
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv", Annotations: map[string]string{AnnProvisionedBy: by}},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeReclaimPolicy: policy,
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: drv, VolumeHandle: "vol-1"}}},
			Status: corev1.PersistentVolumeStatus{Phase: phase}}
		if fin {
			pv.Finalizers = []string{FinalizerProvisoner}
		}
		if deleting {
			pv.DeletionTimestamp = &now
		}
		return pv
	}
	del, ret := corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRetain
	cases := []struct {
		name string
		pv   *corev1.PersistentVolume
		want deleteStep
	}{
		{"bound: keep", mk(del, corev1.VolumeBound, true, false, drv), deleteNothing},
		{"released under Delete", mk(del, corev1.VolumeReleased, true, false, drv), deleteVolume},
		{"released, being deleted, finalizer still there", mk(del, corev1.VolumeReleased, true, true, drv), deleteVolume},
		{"released, being deleted, finalizer gone: done", mk(del, corev1.VolumeReleased, false, true, drv), deleteNothing},
		{"available PV deleted by a user", mk(del, corev1.VolumeAvailable, true, true, drv), deleteVolume},
		{"bound PV deleted by a user waits", mk(del, corev1.VolumeBound, true, true, drv), deleteNothing},
		{"released under Retain keeps the asset", mk(ret, corev1.VolumeReleased, false, false, drv), deleteNothing},
		{"Retain with the finalizer drops it", mk(ret, corev1.VolumeBound, true, false, drv), deleteDropFinalizer},
		{"another provisioner's PV", mk(del, corev1.VolumeReleased, true, false, "other"), deleteNothing},
	}
	for _, tc := range cases {
		if got := decideDelete(tc.pv, drv); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}

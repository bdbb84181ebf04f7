package pvbinder

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"
)

func claim(name, class string, mut ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			StorageClassName: &class,
		},
	}
	for _, m := range mut {
		m(c)
	}
	return c
}

func volume(name string, mut ...func(*corev1.PersistentVolume)) *corev1.PersistentVolume {
	v := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
		},
	}
	for _, m := range mut {
		m(v)
	}
	return v
}

func refTo(c *corev1.PersistentVolumeClaim, uid bool) func(*corev1.PersistentVolume) {
	return func(v *corev1.PersistentVolume) {
		v.Spec.ClaimRef = &corev1.ObjectReference{Namespace: c.Namespace, Name: c.Name}
		if uid {
			v.Spec.ClaimRef.UID = c.UID
		}
	}
}

func class(name string, mode storagev1.VolumeBindingMode, provisioner string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner, VolumeBindingMode: &mode}
}

func TestDecideUnboundClaim(t *testing.T) {
	wffc := class("gp2", storagev1.VolumeBindingWaitForFirstConsumer, "ebs.csi.aws.com")
	immediate := class("gp3", storagev1.VolumeBindingImmediate, "ebs.csi.aws.com")
	noProv := class("local", storagev1.VolumeBindingImmediate, storagehelpers.NotSupportedProvisioner)
	selected := func(c *corev1.PersistentVolumeClaim) {
		c.Annotations = map[string]string{storagehelpers.AnnSelectedNode: "node-b"}
	}
	preBound := func(name string) func(*corev1.PersistentVolumeClaim) {
		return func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = name }
	}
	other := claim("other", "gp2")
	block := corev1.PersistentVolumeBlock
	cases := []struct {
		name   string
		claim  *corev1.PersistentVolumeClaim
		class  *storagev1.StorageClass
		match  *corev1.PersistentVolume
		step   claimStep
		reason string
		prov   string
	}{
		{"WFFC without a node waits", claim("a", "gp2"), wffc, nil, claimWaitForConsumer, ReasonWaitForFirstConsumer, ""},
		{"WFFC with a selected node provisions", claim("a", "gp2", selected), wffc, nil, claimProvision, ReasonExternalProvisioning, "ebs.csi.aws.com"},
		{"Immediate provisions at once", claim("a", "gp3"), immediate, nil, claimProvision, ReasonExternalProvisioning, "ebs.csi.aws.com"},
		{"a matching volume binds", claim("a", "gp3"), immediate, volume("pv1"), claimBind, "", ""},
		{"a pre-bound volume binds under WFFC", claim("a", "gp2"), wffc, volume("pv1"), claimBind, "", ""},
		{"no class and no volume", claim("a", ""), nil, nil, claimPending, ReasonFailedBinding, ""},
		{"missing class", claim("a", "nope"), nil, nil, claimPending, ReasonProvisioningFailed, ""},
		{"no-provisioner class", claim("a", "local"), noProv, nil, claimPending, ReasonFailedBinding, ""},
		{"pre-bound claim, volume missing", claim("a", "gp3", preBound("pv1")), immediate, nil, claimPending, "", ""},
		{"pre-bound claim, free volume", claim("a", "gp3", preBound("pv1")), immediate, volume("pv1"), claimBind, "", ""},
		{"pre-bound claim, volume mode mismatch", claim("a", "gp3", preBound("pv1")), immediate,
			volume("pv1", func(v *corev1.PersistentVolume) { v.Spec.VolumeMode = &block }), claimPending, ReasonVolumeMismatch, ""},
		{"pre-bound claim, volume bound to it", claim("a", "gp3", preBound("pv1")), immediate, volume("pv1", refTo(claim("a", "gp3"), true)), claimBind, "", ""},
		{"pre-bound claim, volume bound elsewhere", claim("a", "gp3", preBound("pv1")), immediate, volume("pv1", refTo(other, true)), claimPending, ReasonFailedBinding, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := decideUnboundClaim(tc.claim, tc.class, tc.match)
			if d.step != tc.step || d.reason != tc.reason || d.provisioner != tc.prov {
				t.Fatalf("got step %d reason %q provisioner %q, want %d %q %q", d.step, d.reason, d.provisioner, tc.step, tc.reason, tc.prov)
			}
		})
	}
}

func TestDecideBoundClaim(t *testing.T) {
	c := claim("a", "gp3", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv1" })
	cases := []struct {
		name   string
		claim  *corev1.PersistentVolumeClaim
		volume *corev1.PersistentVolume
		step   claimStep
		reason string
	}{
		{"lost its reference", claim("a", "gp3"), nil, claimLost, ReasonClaimLost},
		{"volume gone", c, nil, claimLost, ReasonClaimLost},
		{"volume lost its claimRef: rebind", c, volume("pv1"), claimBind, ""},
		{"consistent", c, volume("pv1", refTo(c, true)), claimBind, ""},
		{"volume bound to another claim", c, volume("pv1", refTo(claim("b", "gp3"), true)), claimLost, ReasonClaimMisbound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := decideBoundClaim(tc.claim, tc.volume)
			if d.step != tc.step || d.reason != tc.reason {
				t.Fatalf("got %d %q, want %d %q", d.step, d.reason, tc.step, tc.reason)
			}
		})
	}
}

func TestDecideVolume(t *testing.T) {
	c := claim("a", "gp3")
	boundHere := claim("a", "gp3", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv1" })
	boundElsewhere := claim("a", "gp3", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv9" })
	provisioned := func(v *corev1.PersistentVolume) {
		v.Annotations = map[string]string{storagehelpers.AnnDynamicallyProvisioned: "ebs.csi.aws.com"}
	}
	cases := []struct {
		name   string
		volume *corev1.PersistentVolume
		claim  *corev1.PersistentVolumeClaim
		want   volumeStep
	}{
		{"free", volume("pv1"), nil, volumeAvailable},
		{"pre-bound by name only", volume("pv1", refTo(c, false)), nil, volumeAvailable},
		{"claim gone", volume("pv1", refTo(c, true)), nil, volumeReleased},
		{"claim not yet pointing back", volume("pv1", refTo(c, true)), c, volumeWaitClaim},
		{"bound", volume("pv1", refTo(c, true)), boundHere, volumeBound},
		{"claim bound elsewhere, provisioned for it", volume("pv1", refTo(c, true), provisioned), boundElsewhere, volumeReleased},
		{"claim bound elsewhere, static", volume("pv1", refTo(c, true)), boundElsewhere, volumeUnbind},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := decideVolume(tc.volume, tc.claim); got != tc.want {
				t.Fatalf("got %d, want %d", got, tc.want)
			}
		})
	}
}

func TestDecideReclaim(t *testing.T) {
	provisioned := func(v *corev1.PersistentVolume) {
		v.Annotations = map[string]string{storagehelpers.AnnDynamicallyProvisioned: "ebs.csi.aws.com"}
	}
	policy := func(p corev1.PersistentVolumeReclaimPolicy) func(*corev1.PersistentVolume) {
		return func(v *corev1.PersistentVolume) { v.Spec.PersistentVolumeReclaimPolicy = p }
	}
	cases := []struct {
		name   string
		volume *corev1.PersistentVolume
		fail   bool
		reason string
	}{
		{"Retain keeps", volume("pv", policy(corev1.PersistentVolumeReclaimRetain)), false, ""},
		{"Delete of a provisioned volume is the provisioner's", volume("pv", provisioned), false, ""},
		{"Delete of a static volume fails", volume("pv"), true, ReasonVolumeFailedDelete},
		{"Recycle fails", volume("pv", policy(corev1.PersistentVolumeReclaimRecycle)), true, ReasonVolumeFailedRecycle},
		{"unknown policy fails", volume("pv", policy("Shred")), true, ReasonVolumeUnknownPolicy},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := decideReclaim(tc.volume)
			if r.fail != tc.fail || r.reason != tc.reason {
				t.Fatalf("got %+v, want fail %v reason %q", r, tc.fail, tc.reason)
			}
		})
	}
}

func TestBindChanges(t *testing.T) {
	c := claim("a", "gp3")
	v := volume("pv1")
	bound, dirty, err := bindVolumeChange(v, c)
	if err != nil || !dirty {
		t.Fatalf("bind volume: dirty %v err %v", dirty, err)
	}
	if bound.Spec.ClaimRef.UID != c.UID || bound.Annotations[storagehelpers.AnnBoundByController] != "yes" || v.Spec.ClaimRef != nil {
		t.Fatalf("bound volume %+v (input must stay untouched)", bound)
	}
	if _, dirty, _ := bindVolumeChange(bound, c); dirty {
		t.Fatal("binding a bound volume again changed it")
	}
	// A volume the provisioner pre-bound with the UID is not "bound by controller".
	pre := volume("pv2", refTo(c, true))
	if out, dirty, _ := bindVolumeChange(pre, c); dirty || out.Annotations[storagehelpers.AnnBoundByController] != "" {
		t.Fatalf("pre-bound volume changed: %v", out.Annotations)
	}

	cb, dirty := bindClaimChange(c, bound)
	if !dirty || cb.Spec.VolumeName != "pv1" || cb.Annotations[storagehelpers.AnnBindCompleted] != "yes" || cb.Annotations[storagehelpers.AnnBoundByController] != "yes" {
		t.Fatalf("bound claim %+v", cb)
	}
	if _, dirty := bindClaimChange(cb, bound); dirty {
		t.Fatal("binding a bound claim again changed it")
	}
	userBound := claim("u", "gp3", func(c *corev1.PersistentVolumeClaim) { c.Spec.VolumeName = "pv1" })
	if out, _ := bindClaimChange(userBound, bound); out.Annotations[storagehelpers.AnnBoundByController] != "" {
		t.Fatal("a claim the user pre-bound got bound-by-controller")
	}

	st, dirty := boundClaimStatus(cb, bound)
	if !dirty || st.Status.Phase != corev1.ClaimBound || st.Status.Capacity.Storage().String() != "2Gi" || len(st.Status.AccessModes) != 1 {
		t.Fatalf("status %+v", st.Status)
	}
	// A resize in progress (PV larger than the recorded capacity) is not clobbered.
	grown := bound.DeepCopy()
	grown.Spec.Capacity[corev1.ResourceStorage] = resource.MustParse("4Gi")
	if again, dirty := boundClaimStatus(st, grown); dirty || again.Status.Capacity.Storage().String() != "2Gi" {
		t.Fatalf("bound claim capacity changed to %s", again.Status.Capacity.Storage())
	}
}

func TestProvisionAnnotations(t *testing.T) {
	c := claim("a", "gp3")
	out, changed := provisionAnnotations(c, "ebs.csi.aws.com")
	if !changed || out.Annotations[storagehelpers.AnnStorageProvisioner] != "ebs.csi.aws.com" || out.Annotations[storagehelpers.AnnBetaStorageProvisioner] != "ebs.csi.aws.com" {
		t.Fatalf("annotations %v", out.Annotations)
	}
	if c.Annotations != nil {
		t.Fatal("input claim was modified")
	}
	if _, changed := provisionAnnotations(out, "ebs.csi.aws.com"); changed {
		t.Fatal("annotating twice changed the claim")
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (&Config{Workers: -1}).validate(); err == nil {
		t.Fatal("negative workers accepted")
	}
	if _, err := New(Config{}, nil, nil); err == nil {
		t.Fatal("New without client accepted")
	}
}

func TestWantsDefaultClass(t *testing.T) {
	noClass := &corev1.PersistentVolumeClaim{}
	empty := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("")}}
	named := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("io1")}}
	betaAnn := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{corev1.BetaStorageClassAnnotation: "io1"}}}
	prebound := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-1"}}
	for claim, want := range map[*corev1.PersistentVolumeClaim]bool{noClass: true, empty: false, named: false, betaAnn: false, prebound: false} {
		if got := wantsDefaultClass(claim); got != want {
			t.Errorf("wantsDefaultClass(class %v, annotations %v, volume %q) = %v, want %v",
				claim.Spec.StorageClassName, claim.Annotations, claim.Spec.VolumeName, got, want)
		}
	}
}

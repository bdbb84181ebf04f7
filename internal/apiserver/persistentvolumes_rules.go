package apiserver

import (
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// pvHooks make a new volume Pending and check its spec.
func pvHooks() hooks {
	return hooks{
		prepareForCreate: func(o runtime.Object) {
			now := metav1.NewTime(time.Now().Truncate(time.Second))
			o.(*corev1.PersistentVolume).Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending, LastPhaseTransitionTime: &now}
		},
		validate: func(o runtime.Object) field.ErrorList {
			return validatePVSpec(&o.(*corev1.PersistentVolume).Spec, field.NewPath("spec"))
		},
	}
}

var supportedAccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOnce, corev1.ReadWriteOncePod}

// validateAccessModes: known modes, ReadWriteOncePod alone.
func validateAccessModes(modes []corev1.PersistentVolumeAccessMode, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, m := range modes {
		if !slices.Contains(supportedAccessModes, m) {
			errs = append(errs, field.NotSupported(p, m, supportedAccessModes))
		}
	}
	if slices.Contains(modes, corev1.ReadWriteOncePod) && len(modes) > 1 {
		errs = append(errs, field.Forbidden(p, "may not use ReadWriteOncePod with other access modes"))
	}
	return errs
}

// validateVolumeModeAndClass: the volume mode and storage class name shared by claims and volumes.
func validateVolumeModeAndClass(mode *corev1.PersistentVolumeMode, class *string, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	if mode != nil && *mode != corev1.PersistentVolumeBlock && *mode != corev1.PersistentVolumeFilesystem {
		errs = append(errs, field.NotSupported(spec.Child("volumeMode"), *mode, []corev1.PersistentVolumeMode{corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem}))
	}
	if class != nil && *class != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(*class, false) {
			errs = append(errs, field.Invalid(spec.Child("storageClassName"), *class, msg))
		}
	}
	return errs
}

// validatePVSpec checks a volume's spec: access modes, capacity (storage only), reclaim
// policy, exactly one source and the fields of the common sources.
func validatePVSpec(ps *corev1.PersistentVolumeSpec, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(ps.AccessModes) == 0 {
		errs = append(errs, field.Required(spec.Child("accessModes"), ""))
	}
	errs = append(errs, validateAccessModes(ps.AccessModes, spec.Child("accessModes"))...)
	cp := spec.Child("capacity")
	if len(ps.Capacity) == 0 {
		errs = append(errs, field.Required(cp, ""))
	}
	if _, ok := ps.Capacity[corev1.ResourceStorage]; !ok || len(ps.Capacity) > 1 {
		errs = append(errs, field.NotSupported(cp, ps.Capacity, []corev1.ResourceName{corev1.ResourceStorage}))
	}
	for name, q := range ps.Capacity {
		if q.Sign() <= 0 {
			errs = append(errs, field.Invalid(cp.Key(string(name)), q.String(), "must be greater than zero"))
		}
	}
	policies := []corev1.PersistentVolumeReclaimPolicy{corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRecycle, corev1.PersistentVolumeReclaimRetain}
	if rp := ps.PersistentVolumeReclaimPolicy; rp != "" && !slices.Contains(policies, rp) {
		errs = append(errs, field.NotSupported(spec.Child("persistentVolumeReclaimPolicy"), rp, policies))
	}
	if ps.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRecycle && ps.HostPath != nil && filepath.Clean(ps.HostPath.Path) == "/" {
		errs = append(errs, field.Forbidden(spec.Child("persistentVolumeReclaimPolicy"), "may not be 'recycle' for a hostPath volume with the root directory '/'"))
	}
	// The sources in upstream's order: the first one set counts, the others are forbidden.
	src := ps.PersistentVolumeSource
	n := 0
	for _, f := range []struct {
		name string
		set  bool
	}{{"hostPath", src.HostPath != nil}, {"gcePersistentDisk", src.GCEPersistentDisk != nil}, {"awsElasticBlockStore", src.AWSElasticBlockStore != nil},
		{"glusterfs", src.Glusterfs != nil}, {"flocker", src.Flocker != nil}, {"nfs", src.NFS != nil}, {"rbd", src.RBD != nil},
		{"quobyte", src.Quobyte != nil}, {"cephfs", src.CephFS != nil}, {"iscsi", src.ISCSI != nil}, {"cinder", src.Cinder != nil},
		{"fc", src.FC != nil}, {"flexVolume", src.FlexVolume != nil}, {"azureFile", src.AzureFile != nil}, {"vsphereVolume", src.VsphereVolume != nil},
		{"photonPersistentDisk", src.PhotonPersistentDisk != nil}, {"portworxVolume", src.PortworxVolume != nil}, {"azureDisk", src.AzureDisk != nil},
		{"scaleIO", src.ScaleIO != nil}, {"local", src.Local != nil}, {"storageos", src.StorageOS != nil}, {"csi", src.CSI != nil}} {
		if !f.set {
			continue
		}
		if n > 0 {
			errs = append(errs, field.Forbidden(spec.Child(f.name), "may not specify more than 1 volume type"))
		}
		n++
	}
	if n == 0 {
		errs = append(errs, field.Required(spec, "must specify a volume type"))
	}
	if hp := src.HostPath; hp != nil {
		if slices.Contains(strings.Split(filepath.ToSlash(hp.Path), "/"), "..") {
			errs = append(errs, field.Invalid(spec.Child("hostPath", "path"), hp.Path, "must not contain '..'"))
		}
		if t := hp.Type; t != nil {
			valid := []corev1.HostPathType{corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory,
				corev1.HostPathFileOrCreate, corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev}
			if !slices.Contains(valid, *t) {
				errs = append(errs, field.NotSupported(spec.Child("hostPath", "type"), *t, valid))
			}
		}
	}
	if src.Local != nil && (ps.NodeAffinity == nil || ps.NodeAffinity.Required == nil) {
		errs = append(errs, field.Required(spec.Child("nodeAffinity"), "Local volume requires node affinity"))
	}
	if na := ps.NodeAffinity; na != nil && na.Required != nil && len(na.Required.NodeSelectorTerms) == 0 {
		errs = append(errs, field.Required(spec.Child("nodeAffinity", "required", "nodeSelectorTerms"), "must have at least one node selector term"))
	}
	if c := src.CSI; c != nil {
		if c.Driver == "" {
			errs = append(errs, field.Required(spec.Child("csi", "driver"), ""))
		}
		if c.VolumeHandle == "" {
			errs = append(errs, field.Required(spec.Child("csi", "volumeHandle"), ""))
		}
	}
	if nfs := src.NFS; nfs != nil {
		if nfs.Server == "" {
			errs = append(errs, field.Required(spec.Child("nfs", "server"), ""))
		}
		if nfs.Path == "" {
			errs = append(errs, field.Required(spec.Child("nfs", "path"), ""))
		} else if !filepath.IsAbs(nfs.Path) {
			errs = append(errs, field.Invalid(spec.Child("nfs", "path"), nfs.Path, "must be an absolute path"))
		}
	}
	return append(errs, validateVolumeModeAndClass(ps.VolumeMode, &ps.StorageClassName, spec)...)
}

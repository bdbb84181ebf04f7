package apiserver

import (
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kubelab/kubelab/internal/storageclass"
)

// storageResources are the rows of storage.k8s.io/v1: classes, attachments and the CSI
// objects (CSIDriver, CSINode, CSIStorageCapacity).
func storageResources() []resource {
	st := func(r resource) resource { r.group, r.version = "storage.k8s.io", "v1"; return r }
	return []resource{
		st(resource{
			kind: "StorageClass", plural: "storageclasses", singular: "storageclass", shortNames: []string{"sc"},
			newObj: func() runtime.Object { return &storagev1.StorageClass{} }, newList: func() runtime.Object { return &storagev1.StorageClassList{} },
			columns: []metav1.TableColumnDefinition{nameCol(),
				col("Provisioner", "string", "Indicates the type of the provisioner."),
				col("ReclaimPolicy", "string", "Indicates the type of the reclaim policy."),
				col("VolumeBindingMode", "string", "Indicates when volume binding and dynamic provisioning should occur"),
				col("AllowVolumeExpansion", "string", "Indicates whether the storage class allow volume expand"), ageCol()},
			row: func(o runtime.Object) []interface{} {
				sc := o.(*storagev1.StorageClass)
				name := sc.Name
				if storageclass.IsDefault(sc) {
					name += " (default)"
				}
				reclaim, mode := "Delete", "Immediate"
				if sc.ReclaimPolicy != nil {
					reclaim = string(*sc.ReclaimPolicy)
				}
				if sc.VolumeBindingMode != nil {
					mode = string(*sc.VolumeBindingMode)
				}
				expand := sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion
				return []interface{}{name, sc.Provisioner, reclaim, mode, strconv.FormatBool(expand), age(sc.CreationTimestamp)}
			},
			hooks: hooks{
				validate: func(o runtime.Object) field.ErrorList {
					return validateStorageClass(o.(*storagev1.StorageClass))
				},
				validateUpdate: func(o, old runtime.Object) field.ErrorList {
					sc, osc := o.(*storagev1.StorageClass), old.(*storagev1.StorageClass)
					var errs field.ErrorList
					if !apiequality.Semantic.DeepEqual(sc.Parameters, osc.Parameters) {
						errs = append(errs, field.Forbidden(field.NewPath("parameters"), "updates to parameters are forbidden."))
					}
					if sc.Provisioner != osc.Provisioner {
						errs = append(errs, field.Forbidden(field.NewPath("provisioner"), "updates to provisioner are forbidden."))
					}
					if !apiequality.Semantic.DeepEqual(sc.VolumeBindingMode, osc.VolumeBindingMode) {
						errs = append(errs, field.Forbidden(field.NewPath("volumeBindingMode"), "field is immutable"))
					}
					return errs
				},
			},
		}),
		st(resource{
			kind: "VolumeAttachment", plural: "volumeattachments", singular: "volumeattachment", status: true,
			newObj: func() runtime.Object { return &storagev1.VolumeAttachment{} }, newList: func() runtime.Object { return &storagev1.VolumeAttachmentList{} },
			columns: []metav1.TableColumnDefinition{nameCol(),
				col("Attacher", "string", "Name of the CSI driver that attaches the volume"),
				col("PV", "string", "The persistent volume to attach"), col("Node", "string", "The node to attach to"),
				col("Attached", "boolean", "Whether the volume is attached"), ageCol()},
			row: func(o runtime.Object) []interface{} {
				va := o.(*storagev1.VolumeAttachment)
				pv := ""
				if va.Spec.Source.PersistentVolumeName != nil {
					pv = *va.Spec.Source.PersistentVolumeName
				}
				return []interface{}{va.Name, va.Spec.Attacher, pv, va.Spec.NodeName, va.Status.Attached, age(va.CreationTimestamp)}
			},
			hooks: hooks{
				validate: func(o runtime.Object) field.ErrorList {
					va := o.(*storagev1.VolumeAttachment)
					spec := field.NewPath("spec")
					var errs field.ErrorList
					if va.Spec.Attacher == "" {
						errs = append(errs, field.Required(spec.Child("attacher"), ""))
					} else {
						for _, msg := range utilvalidation.IsDNS1123Subdomain(strings.ToLower(va.Spec.Attacher)) {
							errs = append(errs, field.Invalid(spec.Child("attacher"), va.Spec.Attacher, msg))
						}
					}
					for _, msg := range apivalidation.NameIsDNSSubdomain(va.Spec.NodeName, false) {
						errs = append(errs, field.Invalid(spec.Child("nodeName"), va.Spec.NodeName, msg))
					}
					const one = "must specify exactly one of inlineVolumeSpec and persistentVolumeName"
					switch pv, inline := va.Spec.Source.PersistentVolumeName, va.Spec.Source.InlineVolumeSpec; {
					case pv == nil && inline == nil:
						errs = append(errs, field.Required(spec.Child("source"), one))
					case pv != nil && inline != nil:
						errs = append(errs, field.Forbidden(spec.Child("source"), one))
					case pv != nil && *pv == "":
						errs = append(errs, field.Required(spec.Child("source", "persistentVolumeName"), "must specify non empty persistentVolumeName"))
					case pv != nil:
						for _, msg := range apivalidation.NameIsDNSSubdomain(*pv, false) {
							errs = append(errs, field.Invalid(spec.Child("source", "persistentVolumeName"), *pv, msg))
						}
					}
					return errs
				},
				validateUpdate: func(o, old runtime.Object) field.ErrorList {
					if !apiequality.Semantic.DeepEqual(o.(*storagev1.VolumeAttachment).Spec, old.(*storagev1.VolumeAttachment).Spec) {
						return field.ErrorList{field.Invalid(field.NewPath("spec"), "", "field is immutable")}
					}
					return nil
				},
			},
		}),
		st(resource{
			kind: "CSIDriver", plural: "csidrivers", singular: "csidriver",
			newObj: func() runtime.Object { return &storagev1.CSIDriver{} }, newList: func() runtime.Object { return &storagev1.CSIDriverList{} },
			columns: []metav1.TableColumnDefinition{nameCol(),
				col("AttachRequired", "boolean", "Whether the driver needs an attach step"),
				col("PodInfoOnMount", "boolean", "Whether the driver wants pod information on mount"),
				col("StorageCapacity", "boolean", "Whether the driver publishes capacity"),
				col("TokenRequests", "string", "Service account tokens the driver asks for"),
				col("RequiresRepublish", "boolean", "Whether NodePublishVolume is called periodically"),
				col("Modes", "string", "Volume lifecycle modes"), ageCol()},
			row: func(o runtime.Object) []interface{} {
				d := o.(*storagev1.CSIDriver)
				var modes []string
				for _, m := range d.Spec.VolumeLifecycleModes {
					modes = append(modes, string(m))
				}
				var tokens []string
				for _, t := range d.Spec.TokenRequests {
					tokens = append(tokens, t.Audience)
				}
				return []interface{}{d.Name, boolOr(d.Spec.AttachRequired, true), boolOr(d.Spec.PodInfoOnMount, false),
					boolOr(d.Spec.StorageCapacity, false), joinOrNone(tokens), boolOr(d.Spec.RequiresRepublish, false),
					strings.Join(modes, ","), age(d.CreationTimestamp)}
			},
			hooks: hooks{validate: func(o runtime.Object) field.ErrorList { return validateCSIDriverSpec(&o.(*storagev1.CSIDriver).Spec) }},
		}),
		st(resource{
			kind: "CSINode", plural: "csinodes", singular: "csinode", status: true,
			newObj: func() runtime.Object { return &storagev1.CSINode{} }, newList: func() runtime.Object { return &storagev1.CSINodeList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), col("Drivers", "integer", "Number of CSI drivers on the node"), ageCol()},
			row: func(o runtime.Object) []interface{} {
				n := o.(*storagev1.CSINode)
				return []interface{}{n.Name, int64(len(n.Spec.Drivers)), age(n.CreationTimestamp)}
			},
		}),
		st(resource{
			kind: "CSIStorageCapacity", plural: "csistoragecapacities", singular: "csistoragecapacity", namespaced: true,
			newObj: func() runtime.Object { return &storagev1.CSIStorageCapacity{} }, newList: func() runtime.Object { return &storagev1.CSIStorageCapacityList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), col("StorageClassName", "string", "The storage class"), col("Capacity", "string", "Capacity available"), ageCol()},
			row: func(o runtime.Object) []interface{} {
				c := o.(*storagev1.CSIStorageCapacity)
				capacity := "<unset>"
				if c.Capacity != nil {
					capacity = c.Capacity.String()
				}
				return []interface{}{c.Name, c.StorageClassName, capacity, age(c.CreationTimestamp)}
			},
		}),
		st(resource{
			kind: "VolumeAttributesClass", plural: "volumeattributesclasses", singular: "volumeattributesclass", shortNames: []string{"vac"},
			newObj:  func() runtime.Object { return &storagev1.VolumeAttributesClass{} },
			newList: func() runtime.Object { return &storagev1.VolumeAttributesClassList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), col("DriverName", "string", "The CSI driver the parameters are for."), ageCol()},
			row: func(o runtime.Object) []interface{} {
				c := o.(*storagev1.VolumeAttributesClass)
				return []interface{}{c.Name, c.DriverName, age(c.CreationTimestamp)}
			},
			hooks: hooks{
				validate: func(o runtime.Object) field.ErrorList {
					c := o.(*storagev1.VolumeAttributesClass)
					var errs field.ErrorList
					if c.DriverName == "" {
						errs = append(errs, field.Required(field.NewPath("driverName"), ""))
					}
					if len(c.Parameters) == 0 {
						errs = append(errs, field.Required(field.NewPath("parameters"), "must contain at least one key/value pair"))
					}
					return errs
				},
				validateUpdate: func(o, old runtime.Object) field.ErrorList {
					c, prev := o.(*storagev1.VolumeAttributesClass), old.(*storagev1.VolumeAttributesClass)
					var errs field.ErrorList
					if c.DriverName != prev.DriverName {
						errs = append(errs, field.Invalid(field.NewPath("driverName"), c.DriverName, "field is immutable"))
					}
					if !apiequality.Semantic.DeepEqual(c.Parameters, prev.Parameters) {
						errs = append(errs, field.Invalid(field.NewPath("parameters"), c.Parameters, "field is immutable"))
					}
					return errs
				},
			},
		}),
	}
}

func boolOr(b *bool, d bool) bool {
	if b == nil {
		return d
	}
	return *b
}

// validateStorageClass checks the provisioner (a qualified name), the reclaim policy
// (Delete or Retain), the binding mode and the allowed topologies.
func validateStorageClass(sc *storagev1.StorageClass) field.ErrorList {
	var errs field.ErrorList
	pp := field.NewPath("provisioner")
	if sc.Provisioner == "" {
		errs = append(errs, field.Required(pp, ""))
	} else {
		for _, msg := range utilvalidation.IsQualifiedName(strings.ToLower(sc.Provisioner)) {
			errs = append(errs, field.Invalid(pp, sc.Provisioner, msg))
		}
	}
	if rp := sc.ReclaimPolicy; rp != nil && *rp != "" && *rp != corev1.PersistentVolumeReclaimDelete && *rp != corev1.PersistentVolumeReclaimRetain {
		errs = append(errs, field.NotSupported(field.NewPath("reclaimPolicy"), *rp,
			[]corev1.PersistentVolumeReclaimPolicy{corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRetain}))
	}
	if m := sc.VolumeBindingMode; m == nil {
		errs = append(errs, field.Required(field.NewPath("volumeBindingMode"), ""))
	} else if *m != storagev1.VolumeBindingImmediate && *m != storagev1.VolumeBindingWaitForFirstConsumer {
		errs = append(errs, field.NotSupported(field.NewPath("volumeBindingMode"), *m,
			[]storagev1.VolumeBindingMode{storagev1.VolumeBindingImmediate, storagev1.VolumeBindingWaitForFirstConsumer}))
	}
	var seen []map[string]sets.Set[string]
	for i, term := range sc.AllowedTopologies {
		tp := field.NewPath("allowedTopologies").Index(i)
		exprs := map[string]sets.Set[string]{}
		for j, req := range term.MatchLabelExpressions {
			rp := tp.Child("matchLabelExpressions").Index(j)
			errs = append(errs, metav1validation.ValidateLabelName(req.Key, rp.Child("key"))...)
			if _, dup := exprs[req.Key]; dup {
				errs = append(errs, field.Duplicate(rp.Child("key"), req.Key))
			}
			if len(req.Values) == 0 {
				errs = append(errs, field.Required(rp.Child("values"), "must specify as least one value"))
			}
			values := sets.New[string]()
			for k, v := range req.Values {
				if values.Has(v) {
					errs = append(errs, field.Duplicate(rp.Child("values").Index(k), v))
				}
				values.Insert(v)
			}
			exprs[req.Key] = values
		}
		// An empty term selects everything, as an absent one does: it counts as a duplicate.
		dup := len(exprs) == 0
		for _, prev := range seen {
			if apiequality.Semantic.DeepEqual(prev, exprs) {
				dup = true
			}
		}
		if dup {
			errs = append(errs, field.Duplicate(tp.Child("matchLabelExpressions"), ""))
		}
		seen = append(seen, exprs)
	}
	return errs
}

// validateCSIDriverSpec checks the enumerations, token requests (distinct audiences,
// at least ten minutes) and the allocatable update period (at least ten seconds).
func validateCSIDriverSpec(spec *storagev1.CSIDriverSpec) field.ErrorList {
	sp := field.NewPath("spec")
	var errs field.ErrorList
	for _, m := range spec.VolumeLifecycleModes {
		if m != storagev1.VolumeLifecyclePersistent && m != storagev1.VolumeLifecycleEphemeral {
			errs = append(errs, field.NotSupported(sp.Child("volumeLifecycleModes"), m,
				[]storagev1.VolumeLifecycleMode{storagev1.VolumeLifecyclePersistent, storagev1.VolumeLifecycleEphemeral}))
		}
	}
	if p := spec.FSGroupPolicy; p != nil {
		valid := []storagev1.FSGroupPolicy{storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy, storagev1.FileFSGroupPolicy, storagev1.NoneFSGroupPolicy}
		if !slices.Contains(valid, *p) {
			errs = append(errs, field.NotSupported(sp.Child("fsGroupPolicy"), *p, valid))
		}
	}
	audiences := sets.New[string]()
	for i, tr := range spec.TokenRequests {
		tp := sp.Child("tokenRequests").Index(i)
		if audiences.Has(tr.Audience) {
			errs = append(errs, field.Duplicate(tp.Child("audience"), tr.Audience))
		}
		audiences.Insert(tr.Audience)
		if es := tr.ExpirationSeconds; es != nil {
			switch {
			case *es < 600:
				errs = append(errs, field.Invalid(tp.Child("expirationSeconds"), *es, "may not specify a duration less than 10 minutes"))
			case *es > 1<<32:
				errs = append(errs, field.Invalid(tp.Child("expirationSeconds"), *es, "may not specify a duration larger than 2^32 seconds"))
			}
		}
	}
	if p := spec.NodeAllocatableUpdatePeriodSeconds; p != nil && *p < 10 {
		errs = append(errs, field.Invalid(sp.Child("nodeAllocatableUpdatePeriodSeconds"), *p, "must be greater than or equal to 10 seconds"))
	}
	return errs
}

package apiserver

import (
	"context"

	"strings"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// draResources are the rows of resource.k8s.io/v1, the API of dynamic resource
// allocation: DeviceClasses, ResourceClaims (with /status) and their templates,
// ResourceSlices (selectable by node, driver and pool) and DeviceTaintRules (with
// /status). They are stored and validated as kube-apiserver does; no kubelab component
// allocates claims or publishes slices. Their rules are in dra_rules.go.
func draResources() []resource {
	dra := func(r resource) resource { r.group, r.version = resourcev1.GroupName, "v1"; return r }
	return []resource{
		dra(resource{
			kind: "DeviceClass", plural: "deviceclasses", singular: "deviceclass", generation: true,
			newObj:  func() runtime.Object { return &resourcev1.DeviceClass{} },
			newList: func() runtime.Object { return &resourcev1.DeviceClassList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), ageCol()},
			row: func(o runtime.Object) []interface{} {
				c := o.(*resourcev1.DeviceClass)
				return []interface{}{c.Name, age(c.CreationTimestamp)}
			},
			hooks: hooks{validate: func(o runtime.Object) field.ErrorList {
				return validateDeviceClassSpec(&o.(*resourcev1.DeviceClass).Spec, field.NewPath("spec"))
			}},
		}),
		dra(resource{
			kind: "ResourceClaim", plural: "resourceclaims", singular: "resourceclaim", namespaced: true, status: true,
			newObj:  func() runtime.Object { return &resourcev1.ResourceClaim{} },
			newList: func() runtime.Object { return &resourcev1.ResourceClaimList{} },
			columns: []metav1.TableColumnDefinition{nameCol(),
				col("State", "string", "A summary of the current state (allocated, pending, reserved, etc.)."), ageCol()},
			row: func(o runtime.Object) []interface{} {
				c := o.(*resourcev1.ResourceClaim)
				return []interface{}{c.Name, resourceClaimState(c), age(c.CreationTimestamp)}
			},
			hooks: hooks{
				validate: func(o runtime.Object) field.ErrorList {
					return validateResourceClaimSpec(&o.(*resourcev1.ResourceClaim).Spec, field.NewPath("spec"))
				},
				validateUpdate: func(o, old runtime.Object) field.ErrorList {
					return apivalidation.ValidateImmutableField(o.(*resourcev1.ResourceClaim).Spec, old.(*resourcev1.ResourceClaim).Spec, field.NewPath("spec"))
				},
				validateStatusUpdate: func(_ context.Context, o, old runtime.Object) field.ErrorList {
					return validateResourceClaimStatusUpdate(o.(*resourcev1.ResourceClaim), old.(*resourcev1.ResourceClaim))
				},
			},
		}),
		dra(resource{
			kind: "ResourceClaimTemplate", plural: "resourceclaimtemplates", singular: "resourceclaimtemplate", namespaced: true,
			newObj:  func() runtime.Object { return &resourcev1.ResourceClaimTemplate{} },
			newList: func() runtime.Object { return &resourcev1.ResourceClaimTemplateList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), ageCol()},
			row: func(o runtime.Object) []interface{} {
				t := o.(*resourcev1.ResourceClaimTemplate)
				return []interface{}{t.Name, age(t.CreationTimestamp)}
			},
			hooks: hooks{
				validate: func(o runtime.Object) field.ErrorList {
					spec := &o.(*resourcev1.ResourceClaimTemplate).Spec
					p := field.NewPath("spec")
					errs := validateTemplateObjectMeta(&spec.ObjectMeta, p.Child("metadata"))
					return append(errs, validateResourceClaimSpec(&spec.Spec, p.Child("spec"))...)
				},
				validateUpdate: func(o, old runtime.Object) field.ErrorList {
					return apivalidation.ValidateImmutableField(o.(*resourcev1.ResourceClaimTemplate).Spec, old.(*resourcev1.ResourceClaimTemplate).Spec, field.NewPath("spec"))
				},
			},
		}),
		dra(resource{
			kind: "ResourceSlice", plural: "resourceslices", singular: "resourceslice", generation: true,
			newObj:           func() runtime.Object { return &resourcev1.ResourceSlice{} },
			newList:          func() runtime.Object { return &resourcev1.ResourceSliceList{} },
			selectableFields: []string{resourcev1.ResourceSliceSelectorNodeName, resourcev1.ResourceSliceSelectorDriver, resourcev1.ResourceSliceSelectorPoolName},
			fields: func(o runtime.Object) fields.Set {
				s := o.(*resourcev1.ResourceSlice)
				node := ""
				if s.Spec.NodeName != nil {
					node = *s.Spec.NodeName
				}
				return fields.Set{resourcev1.ResourceSliceSelectorNodeName: node,
					resourcev1.ResourceSliceSelectorDriver: s.Spec.Driver, resourcev1.ResourceSliceSelectorPoolName: s.Spec.Pool.Name}
			},
			columns: []metav1.TableColumnDefinition{nameCol(),
				col("Node", "string", resourcev1.ResourceSliceSpec{}.SwaggerDoc()["nodeName"]),
				col("Driver", "string", resourcev1.ResourceSliceSpec{}.SwaggerDoc()["driver"]),
				col("Pool", "string", resourcev1.ResourcePool{}.SwaggerDoc()["name"]), ageCol()},
			row: func(o runtime.Object) []interface{} {
				s := o.(*resourcev1.ResourceSlice)
				node := ""
				if s.Spec.NodeName != nil {
					node = *s.Spec.NodeName
				}
				return []interface{}{s.Name, node, s.Spec.Driver, s.Spec.Pool.Name, age(s.CreationTimestamp)}
			},
			hooks: hooks{
				validate: func(o runtime.Object) field.ErrorList {
					return validateResourceSliceSpec(&o.(*resourcev1.ResourceSlice).Spec, field.NewPath("spec"))
				},
				validateUpdate: func(o, old runtime.Object) field.ErrorList {
					return validateResourceSliceUpdate(&o.(*resourcev1.ResourceSlice).Spec, &old.(*resourcev1.ResourceSlice).Spec, field.NewPath("spec"))
				},
			},
		}),
		dra(resource{
			kind: "DeviceTaintRule", plural: "devicetaintrules", singular: "devicetaintrule", status: true, generation: true,
			newObj:  func() runtime.Object { return &resourcev1.DeviceTaintRule{} },
			newList: func() runtime.Object { return &resourcev1.DeviceTaintRuleList{} },
			columns: []metav1.TableColumnDefinition{nameCol(),
				col("Key", "string", resourcev1.DeviceTaint{}.SwaggerDoc()["key"]),
				col("Value", "string", resourcev1.DeviceTaint{}.SwaggerDoc()["value"]),
				col("Effect", "string", resourcev1.DeviceTaint{}.SwaggerDoc()["effect"]),
				col("TimeAdded", "string", resourcev1.DeviceTaint{}.SwaggerDoc()["timeAdded"]), ageCol()},
			row: func(o runtime.Object) []interface{} {
				r := o.(*resourcev1.DeviceTaintRule)
				added := ""
				if r.Spec.Taint.TimeAdded != nil {
					added = age(*r.Spec.Taint.TimeAdded)
				}
				return []interface{}{r.Name, r.Spec.Taint.Key, r.Spec.Taint.Value, string(r.Spec.Taint.Effect), added, age(r.CreationTimestamp)}
			},
			hooks: hooks{
				validate: func(o runtime.Object) field.ErrorList {
					return validateDeviceTaintRuleSpec(&o.(*resourcev1.DeviceTaintRule).Spec, field.NewPath("spec"))
				},
				prepareForUpdate: func(o, old runtime.Object) {
					touchDeviceTaintTime(&o.(*resourcev1.DeviceTaintRule).Spec.Taint, &old.(*resourcev1.DeviceTaintRule).Spec.Taint)
				},
				validateStatusUpdate: func(_ context.Context, o, old runtime.Object) field.ErrorList {
					return validateDeviceTaintRuleStatus(&o.(*resourcev1.DeviceTaintRule).Status, field.NewPath("status"))
				},
			},
		}),
	}
}

// resourceClaimState is the claim's State column: deleted, pending, allocated, reserved.
func resourceClaimState(c *resourcev1.ResourceClaim) string {
	var states []string
	if c.DeletionTimestamp != nil {
		states = append(states, "deleted")
	}
	switch {
	case c.Status.Allocation != nil:
		states = append(states, "allocated")
		if len(c.Status.ReservedFor) > 0 {
			states = append(states, "reserved")
		}
	case c.DeletionTimestamp == nil:
		states = append(states, "pending")
	}
	return strings.Join(states, ",")
}

// touchDeviceTaintTime makes a taint's timeAdded the time its effect last changed: an
// update that changes the effect but keeps the old timeAdded gets the current time.
func touchDeviceTaintTime(taint, old *resourcev1.DeviceTaint) {
	if taint.Effect != old.Effect && apiequality.Semantic.DeepEqual(taint.TimeAdded, old.TimeAdded) {
		taint.TimeAdded = &metav1.Time{Time: time.Now().Truncate(time.Second)}
	}
}

// addDRADefaults registers the defaults of resource.k8s.io/v1: a request of exactly
// some devices allocates ExactCount of them, one unless it says otherwise; a toleration's
// operator is Equal; a taint is added now.
func addDRADefaults(s *runtime.Scheme) {
	s.AddTypeDefaultingFunc(&resourcev1.ResourceClaim{}, func(o interface{}) {
		c := o.(*resourcev1.ResourceClaim)
		defaultDeviceRequests(c.Spec.Devices.Requests)
		if a := c.Status.Allocation; a != nil {
			for i := range a.Devices.Results {
				defaultDeviceTolerations(a.Devices.Results[i].Tolerations)
			}
		}
	})
	s.AddTypeDefaultingFunc(&resourcev1.ResourceClaimTemplate{}, func(o interface{}) {
		defaultDeviceRequests(o.(*resourcev1.ResourceClaimTemplate).Spec.Spec.Devices.Requests)
	})
	s.AddTypeDefaultingFunc(&resourcev1.ResourceSlice{}, func(o interface{}) {
		devices := o.(*resourcev1.ResourceSlice).Spec.Devices
		for i := range devices {
			for j := range devices[i].Taints {
				defaultDeviceTaint(&devices[i].Taints[j])
			}
		}
	})
	s.AddTypeDefaultingFunc(&resourcev1.DeviceTaintRule{}, func(o interface{}) {
		defaultDeviceTaint(&o.(*resourcev1.DeviceTaintRule).Spec.Taint)
	})
}

func defaultDeviceRequests(requests []resourcev1.DeviceRequest) {
	for i := range requests {
		if e := requests[i].Exactly; e != nil {
			defaultAllocationMode(&e.AllocationMode, &e.Count)
			defaultDeviceTolerations(e.Tolerations)
		}
		for j := range requests[i].FirstAvailable {
			sub := &requests[i].FirstAvailable[j]
			defaultAllocationMode(&sub.AllocationMode, &sub.Count)
			defaultDeviceTolerations(sub.Tolerations)
		}
	}
}

func defaultAllocationMode(mode *resourcev1.DeviceAllocationMode, count *int64) {
	if *mode == "" {
		*mode = resourcev1.DeviceAllocationModeExactCount
	}
	if *mode == resourcev1.DeviceAllocationModeExactCount && *count == 0 {
		*count = 1
	}
}

func defaultDeviceTolerations(tolerations []resourcev1.DeviceToleration) {
	for i := range tolerations {
		if tolerations[i].Operator == "" {
			tolerations[i].Operator = resourcev1.DeviceTolerationOpEqual
		}
	}
}

func defaultDeviceTaint(t *resourcev1.DeviceTaint) {
	if t.TimeAdded == nil {
		t.TimeAdded = &metav1.Time{Time: time.Now().Truncate(time.Second)}
	}
}

package apiserver

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The built-in PriorityClasses every cluster has, with upstream's values.
const (
	systemNodeCritical    = "system-node-critical"
	systemClusterCritical = "system-cluster-critical"
	// highestUserPriority is the largest value a user's PriorityClass may have.
	highestUserPriority = 1000000000
)

// systemPriorityClasses are created by the API server at start.
func systemPriorityClasses() []*schedulingv1.PriorityClass {
	return []*schedulingv1.PriorityClass{
		{ObjectMeta: metav1.ObjectMeta{Name: systemNodeCritical}, Value: 2000001000,
			Description: "Used for system critical pods that must not be moved from their current node."},
		{ObjectMeta: metav1.ObjectMeta{Name: systemClusterCritical}, Value: 2000000000,
			Description: "Used for system critical pods that must run in the cluster, but can be moved to another node if necessary."},
	}
}

// schedulingResources is the row of scheduling.k8s.io/v1 PriorityClasses.
func schedulingResources() []resource {
	return []resource{{
		group: "scheduling.k8s.io", version: "v1", kind: "PriorityClass", plural: "priorityclasses", singular: "priorityclass", generation: true,
		shortNames: []string{"pc"},
		newObj:     func() runtime.Object { return &schedulingv1.PriorityClass{} }, newList: func() runtime.Object { return &schedulingv1.PriorityClassList{} },
		columns: []metav1.TableColumnDefinition{nameCol(), col("Value", "integer", "The priority of pods of this class."),
			col("Global-Default", "boolean", "Whether pods without a class get this one."), ageCol(),
			col("PreemptionPolicy", "string", "Whether pods of this class may preempt others.")},
		row: func(o runtime.Object) []interface{} {
			pc := o.(*schedulingv1.PriorityClass)
			return []interface{}{pc.Name, int64(pc.Value), pc.GlobalDefault, age(pc.CreationTimestamp), string(ptr.Deref(pc.PreemptionPolicy, ""))}
		},
		hooks: hooks{
			validate: func(o runtime.Object) field.ErrorList { return validatePriorityClass(o.(*schedulingv1.PriorityClass)) },
			validateUpdate: func(o, old runtime.Object) field.ErrorList {
				pc, prev := o.(*schedulingv1.PriorityClass), old.(*schedulingv1.PriorityClass)
				var errs field.ErrorList
				if pc.Value != prev.Value {
					errs = append(errs, field.Forbidden(field.NewPath("value"), "may not be changed in an update."))
				}
				if ptr.Deref(pc.PreemptionPolicy, "") != ptr.Deref(prev.PreemptionPolicy, "") {
					errs = append(errs, field.Forbidden(field.NewPath("preemptionPolicy"), "may not be changed in an update."))
				}
				return errs
			},
		},
	}}
}

func validatePriorityClass(pc *schedulingv1.PriorityClass) field.ErrorList {
	var errs field.ErrorList
	for _, sys := range systemPriorityClasses() {
		if pc.Name == sys.Name {
			if pc.Value != sys.Value {
				errs = append(errs, field.Forbidden(field.NewPath("metadata", "name"),
					fmt.Sprintf("%v is a system priority class and cannot have a different value", pc.Name)))
			}
			return errs
		}
	}
	if pp := pc.PreemptionPolicy; pp != nil && *pp != corev1.PreemptLowerPriority && *pp != corev1.PreemptNever {
		errs = append(errs, field.NotSupported(field.NewPath("preemptionPolicy"), *pp, []corev1.PreemptionPolicy{corev1.PreemptLowerPriority, corev1.PreemptNever}))
	}
	if strings.HasPrefix(pc.Name, "system-") {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "name"), "priority class names with 'system-' prefix are reserved for system use only"))
	}
	if pc.Value > highestUserPriority {
		errs = append(errs, field.Forbidden(field.NewPath("value"),
			fmt.Sprintf("maximum allowed value of a user defined priority is %v", highestUserPriority)))
	}
	return errs
}

// ensureSystemPriorityClasses creates the built-in PriorityClasses that are missing.
func ensureSystemPriorityClasses(ctx context.Context, client kubernetes.Interface) error {
	for _, pc := range systemPriorityClasses() {
		if _, err := client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("priority class %s: %w", pc.Name, err)
		}
	}
	return nil
}

// nodeResources is the row of node.k8s.io/v1 RuntimeClasses.
func nodeResources() []resource {
	return []resource{{
		group: "node.k8s.io", version: "v1", kind: "RuntimeClass", plural: "runtimeclasses", singular: "runtimeclass",
		newObj: func() runtime.Object { return &nodev1.RuntimeClass{} }, newList: func() runtime.Object { return &nodev1.RuntimeClassList{} },
		columns: []metav1.TableColumnDefinition{nameCol(), col("Handler", "string", "The CRI handler of the class."), ageCol()},
		row: func(o runtime.Object) []interface{} {
			rc := o.(*nodev1.RuntimeClass)
			return []interface{}{rc.Name, rc.Handler, age(rc.CreationTimestamp)}
		},
		hooks: hooks{
			validate: func(o runtime.Object) field.ErrorList {
				rc := o.(*nodev1.RuntimeClass)
				errs := dnsLabel(field.NewPath("handler"), rc.Handler)
				if rc.Overhead != nil {
					for name, q := range rc.Overhead.PodFixed {
						if q.Sign() < 0 {
							errs = append(errs, field.Invalid(field.NewPath("overhead", "limits").Key(string(name)), q.String(), "must be greater than or equal to 0"))
						}
					}
				}
				if sc := rc.Scheduling; sc != nil {
					errs = append(errs, metav1validation.ValidateLabels(sc.NodeSelector, field.NewPath("scheduling", "nodeSelector"))...)
					for i, t := range sc.Tolerations {
						errs = append(errs, validateToleration(t, field.NewPath("scheduling", "tolerations").Index(i))...)
					}
				}
				return errs
			},
			validateUpdate: func(o, old runtime.Object) field.ErrorList {
				if o.(*nodev1.RuntimeClass).Handler != old.(*nodev1.RuntimeClass).Handler {
					return field.ErrorList{field.Invalid(field.NewPath("handler"), o.(*nodev1.RuntimeClass).Handler, "field is immutable")}
				}
				return nil
			},
		},
	}}
}

package apiserver

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// coordinationResources is the row of coordination.k8s.io/v1 Leases: node heartbeats
// and leader election.
func coordinationResources() []resource {
	return []resource{
		{
			group: "coordination.k8s.io", version: "v1", kind: "Lease", plural: "leases", singular: "lease", namespaced: true,
			newObj: func() runtime.Object { return &coordinationv1.Lease{} }, newList: func() runtime.Object { return &coordinationv1.LeaseList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), col("Holder", "string", "The holder of the lease"), ageCol()},
			row: func(o runtime.Object) []interface{} {
				l := o.(*coordinationv1.Lease)
				holder := ""
				if l.Spec.HolderIdentity != nil {
					holder = *l.Spec.HolderIdentity
				}
				return []interface{}{l.Name, holder, age(l.CreationTimestamp)}
			},
			hooks: hooks{validate: func(o runtime.Object) field.ErrorList {
				l := o.(*coordinationv1.Lease)
				var errs field.ErrorList
				if d := l.Spec.LeaseDurationSeconds; d != nil && *d <= 0 {
					errs = append(errs, field.Invalid(field.NewPath("spec", "leaseDurationSeconds"), *d, "must be greater than 0"))
				}
				if t := l.Spec.LeaseTransitions; t != nil && *t < 0 {
					errs = append(errs, field.Invalid(field.NewPath("spec", "leaseTransitions"), *t, "must be greater than or equal to 0"))
				}
				return errs
			}},
		},
	}
}

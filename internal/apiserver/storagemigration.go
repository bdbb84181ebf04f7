package apiserver

import (
	"context"

	"strings"

	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// storageMigrationResources are the rows of storagemigration.k8s.io/v1:
// StorageVersionMigration, a request to rewrite every stored object of a resource.
// Every kind is stored in one version here, so nothing acts on them: they are
// objects whose status their writers keep.
func storageMigrationResources() []resource {
	return []resource{{
		group: storagemigrationv1.GroupName, version: "v1", kind: "StorageVersionMigration",
		plural: "storageversionmigrations", singular: "storageversionmigration", status: true,
		newObj:  func() runtime.Object { return &storagemigrationv1.StorageVersionMigration{} },
		newList: func() runtime.Object { return &storagemigrationv1.StorageVersionMigrationList{} },
		columns: []metav1.TableColumnDefinition{col("Name", "string", metav1.ObjectMeta{}.SwaggerDoc()["name"]),
			col("Resource", "string", "GroupResource to migrate"), col("Status", "string", "Status of the migration")},
		row: func(o runtime.Object) []interface{} {
			m := o.(*storagemigrationv1.StorageVersionMigration)
			return []interface{}{m.Name, m.Spec.Resource.String(), migrationState(m.Status.Conditions)}
		},
		hooks: hooks{
			// Finalizers are the standard ones, as for the built-in groups.
			validate: func(o runtime.Object) field.ErrorList {
				m := o.(*storagemigrationv1.StorageVersionMigration)
				return append(validateStandardFinalizers(m.Finalizers, field.NewPath("metadata", "finalizers")),
					validateMigrationResource(m.Spec.Resource)...)
			},
			validateUpdate: func(o, old runtime.Object) field.ErrorList {
				return apivalidation.ValidateImmutableField(o.(*storagemigrationv1.StorageVersionMigration).Spec,
					old.(*storagemigrationv1.StorageVersionMigration).Spec, field.NewPath("spec"))
			},
			validateStatusUpdate: func(_ context.Context, o, old runtime.Object) field.ErrorList {
				return validateMigrationStatus(&o.(*storagemigrationv1.StorageVersionMigration).Status,
					&old.(*storagemigrationv1.StorageVersionMigration).Status)
			},
		},
	}}
}

// validateMigrationResource: the resource is a DNS-1035 label, the group empty or a
// DNS subdomain.
func validateMigrationResource(gr metav1.GroupResource) field.ErrorList {
	p := field.NewPath("spec", "resource")
	var errs field.ErrorList
	if gr.Resource == "" {
		errs = append(errs, field.Required(p.Child("resource"), "resource is required to be set"))
	} else if msgs := utilvalidation.IsDNS1035Label(gr.Resource); len(msgs) > 0 {
		errs = append(errs, field.Invalid(p.Child("resource"), gr.Resource, strings.Join(msgs, ",")))
	}
	if gr.Group != "" {
		if msgs := utilvalidation.IsDNS1123Subdomain(gr.Group); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("group"), gr.Group, strings.Join(msgs, ",")))
		}
	}
	return errs
}

// validateMigrationStatus: status.resourceVersion is a resource version and, once
// set, never changes; the conditions are well-formed; Succeeded and Failed are never
// both true, and neither is taken back once true.
func validateMigrationStatus(st, old *storagemigrationv1.StorageVersionMigrationStatus) field.ErrorList {
	p := field.NewPath("status")
	var errs field.ErrorList
	if rv := st.ResourceVersion; rv != "" {
		if _, err := resourceversion.CompareResourceVersion(rv, rv); err != nil {
			errs = append(errs, field.Invalid(p.Child("resourceVersion"), rv, err.Error()))
		}
	}
	errs = append(errs, metav1validation.ValidateConditions(st.Conditions, p.Child("conditions"))...)
	if old.ResourceVersion != "" && old.ResourceVersion != st.ResourceVersion {
		errs = append(errs, field.Invalid(p.Child("resourceVersion"), st.ResourceVersion, "field is immutable"))
	}
	succeeded := func(c []metav1.Condition) bool {
		return apimeta.IsStatusConditionTrue(c, string(storagemigrationv1.MigrationSucceeded))
	}
	failed := func(c []metav1.Condition) bool {
		return apimeta.IsStatusConditionTrue(c, string(storagemigrationv1.MigrationFailed))
	}
	conditions := p.Child("conditions")
	if succeeded(st.Conditions) && failed(st.Conditions) {
		errs = append(errs, field.Invalid(conditions, st.Conditions, "Both success and failed conditions cannot be true at the same time"))
	}
	if succeeded(old.Conditions) && !succeeded(st.Conditions) {
		errs = append(errs, field.Invalid(conditions, st.Conditions, "Success condition cannot be set to false once it is true"))
	}
	if failed(old.Conditions) && !failed(st.Conditions) {
		errs = append(errs, field.Invalid(conditions, st.Conditions, "Failed condition cannot be set to false once it is true"))
	}
	return errs
}

// migrationState is how kubectl shows a migration: the last of Running, Failed and
// Succeeded that is true, else Unknown.
func migrationState(conditions []metav1.Condition) string {
	state := "Unknown"
	for _, c := range conditions {
		if c.Status != metav1.ConditionTrue {
			continue
		}
		switch storagemigrationv1.MigrationConditionType(c.Type) {
		case storagemigrationv1.MigrationRunning, storagemigrationv1.MigrationFailed, storagemigrationv1.MigrationSucceeded:
			state = c.Type
		}
	}
	return state
}

package apiserver

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
)

// resource is one row of the registry: everything the generic store, discovery, tables
// and field selectors need to serve a kind. Adding a kind is adding a row (resources.go)
// and, where the kind has rules of its own, a few hooks.
type resource struct {
	group, version, kind, plural, singular string
	// alsoVersions are further versions of the group the same store is served in,
	// converted through the scheme (version is the preferred and stored one).
	alsoVersions           []string
	shortNames, categories []string
	namespaced             bool
	newObj, newList        func() runtime.Object

	// status: the kind has a /status subresource; the main resource then ignores status
	// and /status ignores the rest.
	status bool
	// approval: the kind has an /approval subresource, written as /status is.
	approval bool
	// scale: the kind has a /scale subresource (autoscaling/v1 Scale over spec.replicas).
	scale bool
	// generation: writes that change spec bump metadata.generation.
	generation bool

	// selectableFields are the field-selector labels beyond metadata.name/namespace.
	selectableFields []string
	fields           func(obj runtime.Object) fields.Set
	// indexedField is a selectable field the watch cache indexes (lists with an exact
	// match read one index bucket) and triggers on (an event reaches only the watches
	// whose exact match is the object's value or its previous value), and indexValue its
	// value in an object; empty: none.
	indexedField string
	indexValue   func(obj runtime.Object) string

	columns []metav1.TableColumnDefinition
	row     func(obj runtime.Object) []interface{}

	hooks hooks
}

// hooks are the rules of a kind beyond the generic ones.
type hooks struct {
	// name validates metadata.name; DNS-1123 subdomain when nil.
	name func(name string, prefix bool) []string
	// objectName is the rule for metadata.name when it depends on the object itself;
	// it takes the place of name.
	objectName func(obj runtime.Object) func(name string, prefix bool) []string
	// validate checks an object about to be created or updated.
	validate func(obj runtime.Object) field.ErrorList
	// validateCreate checks what only a new object must satisfy.
	validateCreate func(obj runtime.Object) field.ErrorList
	// validateUpdate checks what may not change.
	validateUpdate func(obj, old runtime.Object) field.ErrorList
	// prepareForCreate sets server-owned fields on create (after status is cleared).
	prepareForCreate func(obj runtime.Object)
	// requestor records the requesting user in an object being created.
	requestor func(obj runtime.Object, u user.Info)
	// prepareForUpdate carries server-owned fields over on update.
	prepareForUpdate func(obj, old runtime.Object)
	// prepareForStatusUpdate carries status fields over on an update of /status.
	prepareForStatusUpdate func(obj, old runtime.Object)
	// validateStatusUpdate checks a write of /status beyond its metadata (who writes it
	// too).
	validateStatusUpdate func(ctx context.Context, obj, old runtime.Object) field.ErrorList
	// gracefulDelete decides whether a delete is graceful, adjusting the options.
	gracefulDelete func(ctx context.Context, obj runtime.Object, options *metav1.DeleteOptions) bool
}

func (r *resource) gv() schema.GroupVersion {
	return schema.GroupVersion{Group: r.group, Version: r.version}
}

func (r *resource) gvk() schema.GroupVersionKind { return r.gv().WithKind(r.kind) }

func (r *resource) groupResource() schema.GroupResource {
	return schema.GroupResource{Group: r.group, Resource: r.plural}
}

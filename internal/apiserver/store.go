package apiserver

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// newStore builds the etcd-backed store of a row.
func newStore(scheme *runtime.Scheme, r *resource, optsGetter generic.RESTOptionsGetter) (*genericregistry.Store, error) {
	strat := newStrategy(scheme, r)
	store := &genericregistry.Store{
		NewFunc:                   r.newObj,
		NewListFunc:               r.newList,
		DefaultQualifiedResource:  r.groupResource(),
		SingularQualifiedResource: schema.GroupResource{Group: r.group, Resource: r.singular},
		CreateStrategy:            strat,
		UpdateStrategy:            strat,
		DeleteStrategy:            strat,
		ResetFieldsStrategy:       strat,
		TableConvertor:            tableConvertor{r: r, fallback: rest.NewDefaultTableConvertor(r.groupResource())},
	}
	opts := &generic.StoreOptions{RESTOptions: tooLargeOptions{optsGetter}, AttrFunc: attrFunc(r)}
	if r.indexedField != "" {
		opts.TriggerFunc, opts.Indexers = watchCacheIndex(r)
		attrs, indexFields := attrFunc(r), []string{r.indexedField}
		store.PredicateFunc = func(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
			return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: attrs, IndexFields: indexFields}
		}
	}
	if err := store.CompleteWithOptions(opts); err != nil {
		return nil, fmt.Errorf("store for %s: %w", r.groupResource(), err)
	}
	return store, nil
}

// watchCacheIndex is the trigger and the index of row r's indexed field in the watch
// cache: with them an event is handed only to the watches selecting its value (a node's
// kubelet's pod watch sees its own pods' events, not every pod's), and a list selecting
// one value reads that value's objects only.
func watchCacheIndex(r *resource) (storage.IndexerFuncs, *cache.Indexers) {
	value := r.indexValue
	triggers := storage.IndexerFuncs{r.indexedField: value}
	indexers := &cache.Indexers{storage.FieldIndex(r.indexedField): func(obj any) ([]string, error) {
		o, ok := obj.(runtime.Object)
		if !ok {
			return nil, fmt.Errorf("not a %s: %T", r.kind, obj)
		}
		return []string{value(o)}, nil
	}}
	return triggers, indexers
}

// attrFunc returns the labels and selectable fields of an object of row r.
func attrFunc(r *resource) func(obj runtime.Object) (labels.Set, fields.Set, error) {
	return func(obj runtime.Object) (labels.Set, fields.Set, error) {
		m, ok := metaOf(obj)
		if !ok {
			return nil, nil, fmt.Errorf("not a %s: %T", r.kind, obj)
		}
		set := generic.ObjectMetaFieldsSet(m, r.namespaced)
		if r.fields != nil {
			set = generic.MergeFieldsSets(set, r.fields(obj))
		}
		return labels.Set(m.Labels), set, nil
	}
}

// statusREST serves <resource>/status.
type statusREST struct {
	store *genericregistry.Store
}

func newStatusREST(scheme *runtime.Scheme, r *resource, store *genericregistry.Store) *statusREST {
	s := *store
	st := statusStrategy{newStrategy(scheme, r)}
	s.UpdateStrategy = st
	s.ResetFieldsStrategy = st
	s.CreateStrategy = nil
	s.DeleteStrategy = nil
	return &statusREST{store: &s}
}

func (s *statusREST) New() runtime.Object { return s.store.New() }
func (s *statusREST) Destroy()            {}

func (s *statusREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return s.store.Get(ctx, name, options)
}

func (s *statusREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	// Status writes never create the object.
	return s.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

func (s *statusREST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return s.store.GetResetFields()
}

func (s *statusREST) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	return s.store.ConvertToTable(ctx, obj, opts)
}

var (
	_ rest.Patcher             = &statusREST{}
	_ rest.ResetFieldsStrategy = &statusREST{}
	_ rest.Storage             = &statusREST{}
)

// mustList extracts the items of a list object.
func mustList(obj runtime.Object) []runtime.Object {
	items, err := meta.ExtractList(obj)
	if err != nil {
		return nil
	}
	return items
}

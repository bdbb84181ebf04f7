package openapi

import (
	"reflect"
	"strings"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// Definitions returns the definitions of all served kinds.
func Definitions(ref common.ReferenceCallback) map[string]common.OpenAPIDefinition {
	defs := GetOpenAPIDefinitions(ref)
	for _, obj := range []interface{}{
		&snapshotv1.VolumeSnapshot{}, &snapshotv1.VolumeSnapshotList{},
		&snapshotv1.VolumeSnapshotContent{}, &snapshotv1.VolumeSnapshotContentList{},
		&snapshotv1.VolumeSnapshotClass{}, &snapshotv1.VolumeSnapshotClassList{},
	} {
		addReflected(defs, reflect.TypeOf(obj).Elem(), ref)
	}
	return defs
}

// addReflected derives the definition of struct type t (and of the structs of its own
// package it uses) from its fields and json tags.
func addReflected(defs map[string]common.OpenAPIDefinition, t reflect.Type, ref common.ReferenceCallback) {
	name := canonical(t)
	if _, done := defs[name]; done {
		return
	}
	defs[name] = common.OpenAPIDefinition{} // placeholder against cycles
	schema := spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}, Properties: map[string]spec.Schema{}}}
	var deps []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			jsonName, opts, _ := strings.Cut(tag, ",")
			if jsonName == "-" {
				continue
			}
			if jsonName == "" && (f.Anonymous || strings.Contains(opts, "inline")) {
				walk(f.Type)
				continue
			}
			if jsonName == "" {
				jsonName = f.Name
			}
			prop, dep := propertyFor(f.Type, t.PkgPath(), defs, ref)
			if dep != "" {
				deps = append(deps, dep)
			}
			schema.Properties[jsonName] = prop
			if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") && f.Type.Kind() != reflect.Pointer {
				schema.Required = append(schema.Required, jsonName)
			}
		}
	}
	walk(t)
	defs[name] = common.OpenAPIDefinition{Schema: schema, Dependencies: deps}
}

// canonical is the name the OpenAPI builder looks a type's definition up by: the model
// name of the k8s.io types, the Go path of the others.
func canonical(t reflect.Type) string {
	return util.GetCanonicalTypeName(reflect.New(t).Interface())
}

// propertyFor is the schema of a field of type t; dep names a referenced definition.
func propertyFor(t reflect.Type, pkg string, defs map[string]common.OpenAPIDefinition, ref common.ReferenceCallback) (spec.Schema, string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct && t.PkgPath() != "" {
		name := canonical(t)
		if t.PkgPath() == pkg {
			addReflected(defs, t, ref)
		}
		return spec.Schema{SchemaProps: spec.SchemaProps{Ref: ref(name)}}, name
	}
	switch t.Kind() {
	case reflect.String:
		return *spec.StringProperty(), ""
	case reflect.Bool:
		return *spec.BooleanProperty(), ""
	case reflect.Int32, reflect.Uint32, reflect.Int16, reflect.Uint16, reflect.Int8, reflect.Uint8:
		return *spec.Int32Property(), ""
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint64:
		return *spec.Int64Property(), ""
	case reflect.Float32, reflect.Float64:
		return *spec.Float64Property(), ""
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			s := *spec.StringProperty()
			s.Format = "byte"
			return s, ""
		}
		item, dep := propertyFor(t.Elem(), pkg, defs, ref)
		return *spec.ArrayProperty(&item), dep
	case reflect.Map:
		val, dep := propertyFor(t.Elem(), pkg, defs, ref)
		return *spec.MapProperty(&val), dep
	default:
		return spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}}}, ""
	}
}

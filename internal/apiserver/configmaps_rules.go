package apiserver

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// validateConfigMap checks the keys and that the values of data and binaryData total at
// most corev1.MaxSecretSize (1 MiB).
func validateConfigMap(o runtime.Object) field.ErrorList {
	cm := o.(*corev1.ConfigMap)
	var errs field.ErrorList
	size := 0
	for k, v := range cm.Data {
		errs = append(errs, configKey(field.NewPath("data").Key(k), k)...)
		size += len(v)
	}
	for k, v := range cm.BinaryData {
		errs = append(errs, configKey(field.NewPath("binaryData").Key(k), k)...)
		if _, dup := cm.Data[k]; dup {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(k), k, "duplicate of key present in data"))
		}
		size += len(v)
	}
	if size > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", corev1.MaxSecretSize))
	}
	return errs
}

// immutableMessage is the refusal of a change to what `immutable: true` froze.
const immutableMessage = "field is immutable when `immutable` is set"

// validateConfigMapUpdate: once immutable is true, it stays true and data and binaryData
// stay as they are.
func validateConfigMapUpdate(o, old runtime.Object) field.ErrorList {
	cm, prev := o.(*corev1.ConfigMap), old.(*corev1.ConfigMap)
	if !ptr.Deref(prev.Immutable, false) {
		return nil
	}
	var errs field.ErrorList
	if !ptr.Deref(cm.Immutable, false) {
		errs = append(errs, field.Forbidden(field.NewPath("immutable"), immutableMessage))
	}
	if !reflect.DeepEqual(cm.Data, prev.Data) {
		errs = append(errs, field.Forbidden(field.NewPath("data"), immutableMessage))
	}
	if !reflect.DeepEqual(cm.BinaryData, prev.BinaryData) {
		errs = append(errs, field.Forbidden(field.NewPath("binaryData"), immutableMessage))
	}
	return errs
}

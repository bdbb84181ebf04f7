package apiserver

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
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

package apiserver

import (
	"encoding/json"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// validateSecret checks the keys and that the values of data total at most
// corev1.MaxSecretSize (1 MiB), stringData counted as the data it stands for.
func validateSecret(o runtime.Object) field.ErrorList {
	s := o.(*corev1.Secret)
	var errs field.ErrorList
	size := 0
	for k, v := range s.Data {
		errs = append(errs, configKey(field.NewPath("data").Key(k), k)...)
		if _, replaced := s.StringData[k]; !replaced {
			size += len(v)
		}
	}
	for _, v := range s.StringData {
		size += len(v)
	}
	if size > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(field.NewPath("data"), "", corev1.MaxSecretSize))
	}
	return append(errs, validateSecretType(s)...)
}

// validateSecretUpdate: the type never changes; once immutable is true, it stays true
// and data (stringData already merged into it) stays as it is.
func validateSecretUpdate(o, old runtime.Object) field.ErrorList {
	s, prev := o.(*corev1.Secret), old.(*corev1.Secret)
	var errs field.ErrorList
	if s.Type != prev.Type {
		errs = append(errs, field.Invalid(field.NewPath("type"), s.Type, "field is immutable"))
	}
	if !ptr.Deref(prev.Immutable, false) {
		return errs
	}
	if !ptr.Deref(s.Immutable, false) {
		errs = append(errs, field.Forbidden(field.NewPath("immutable"), immutableMessage))
	}
	if !reflect.DeepEqual(s.Data, prev.Data) {
		errs = append(errs, field.Forbidden(field.NewPath("data"), immutableMessage))
	}
	return errs
}

// validateSecretType checks the keys each well-known secret type needs.
func validateSecretType(s *corev1.Secret) field.ErrorList {
	data := field.NewPath("data")
	has := func(k string) bool {
		if _, ok := s.Data[k]; ok {
			return true
		}
		_, ok := s.StringData[k]
		return ok
	}
	var errs field.ErrorList
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg, corev1.SecretTypeDockerConfigJson:
		key := corev1.DockerConfigKey
		if s.Type == corev1.SecretTypeDockerConfigJson {
			key = corev1.DockerConfigJsonKey
		}
		if !has(key) {
			errs = append(errs, field.Required(data.Key(key), ""))
			break
		}
		var cfg map[string]interface{}
		if err := json.Unmarshal(s.Data[key], &cfg); err != nil {
			errs = append(errs, field.Invalid(data.Key(key), "<secret contents redacted>", err.Error()))
		}
	case corev1.SecretTypeBasicAuth:
		if !has(corev1.BasicAuthUsernameKey) && !has(corev1.BasicAuthPasswordKey) {
			errs = append(errs, field.Required(data.Key(corev1.BasicAuthUsernameKey), ""),
				field.Required(data.Key(corev1.BasicAuthPasswordKey), ""))
		}
	case corev1.SecretTypeSSHAuth:
		if len(s.Data[corev1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(data.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeTLS:
		for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
			if !has(k) {
				errs = append(errs, field.Required(data.Key(k), ""))
			}
		}
	}
	return errs
}

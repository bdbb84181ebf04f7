package apiserver

import (
	"k8s.io/apimachinery/pkg/api/validation/path"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The kinds' own rules are beside their rows: <kind>_rules.go for the core kinds and
// admissionregistration, the group's file for the others. They follow upstream's messages
// so that errors read as they would on any cluster. The checks below are shared.

// pathSegmentName: a name (or, with prefix, a generateName) usable as one URL path segment.
func pathSegmentName(name string, prefix bool) []string {
	if prefix {
		return path.IsValidPathSegmentPrefix(name)
	}
	return path.IsValidPathSegmentName(name)
}

// configKey: a valid ConfigMap or Secret data key.
func configKey(p *field.Path, k string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsConfigMapKey(k) {
		errs = append(errs, field.Invalid(p, k, msg))
	}
	return errs
}

// dnsLabel: a required DNS-1123 label.
func dnsLabel(p *field.Path, v string) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

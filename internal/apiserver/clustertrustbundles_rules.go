package apiserver

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// maxTrustBundleSize is the largest spec.trustBundle a ClusterTrustBundle may have.
const maxTrustBundleSize = 1 << 20

// clusterTrustBundleName is the rule for a ClusterTrustBundle's name, which depends on
// its signer: without spec.signerName, a DNS subdomain without ":"; with one, the
// signer name with "/" written ":", then ":", then a DNS subdomain
// (example.com/signer → "example.com:signer:<name>").
func clusterTrustBundleName(o runtime.Object) func(name string, prefix bool) []string {
	signer := o.(*certificatesv1.ClusterTrustBundle).Spec.SignerName
	return func(name string, prefix bool) []string {
		if signer == "" {
			if strings.Contains(name, ":") {
				return []string{`ClusterTrustBundle without signer name must not have ":" in its name`}
			}
			return apivalidation.NameIsDNSSubdomain(name, prefix)
		}
		want := strings.ReplaceAll(signer, "/", ":") + ":"
		rest, ok := strings.CutPrefix(name, want)
		if !ok {
			return []string{fmt.Sprintf("ClusterTrustBundle for signerName %s must be named with prefix %s", signer, want)}
		}
		return apivalidation.NameIsDNSSubdomain(rest, prefix)
	}
}

// validateClusterTrustBundle checks spec.signerName (when set) and spec.trustBundle.
func validateClusterTrustBundle(o runtime.Object) field.ErrorList {
	b := o.(*certificatesv1.ClusterTrustBundle)
	var errs field.ErrorList
	if b.Spec.SignerName != "" {
		errs = append(errs, validateSignerName(field.NewPath("spec", "signerName"), b.Spec.SignerName)...)
	}
	return append(errs, validateTrustBundle(field.NewPath("spec", "trustBundle"), b.Spec.TrustBundle)...)
}

// validateClusterTrustBundleUpdate: the signer never changes.
func validateClusterTrustBundleUpdate(o, old runtime.Object) field.ErrorList {
	b, prev := o.(*certificatesv1.ClusterTrustBundle), old.(*certificatesv1.ClusterTrustBundle)
	if b.Spec.SignerName != prev.Spec.SignerName {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "signerName"), b.Spec.SignerName, "field is immutable")}
	}
	return nil
}

// validateTrustBundle: at most maxTrustBundleSize of PEM CERTIFICATE blocks without
// headers, each an X.509 CA certificate with valid basic constraints, at least one,
// none twice.
func validateTrustBundle(p *field.Path, bundle string) field.ErrorList {
	if len(bundle) > maxTrustBundleSize {
		return field.ErrorList{field.TooLong(p, "", maxTrustBundleSize)}
	}
	const omitted = "<value omitted>"
	var errs field.ErrorList
	var blocks [][]byte
	var seenAt [][]int
	rest := []byte(bundle)
	for i := 0; ; i++ {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		var problem string
		switch cert, err := x509.ParseCertificate(b.Bytes); {
		case b.Type != "CERTIFICATE":
			problem = "has bad block type: " + b.Type
		case len(b.Headers) != 0:
			problem = "has PEM block headers"
		case err != nil:
			problem = "does not parse as X.509"
		case !cert.IsCA:
			problem = "does not have the CA bit set"
		case !cert.BasicConstraintsValid:
			problem = "has invalid basic constraints"
		}
		if problem != "" {
			errs = append(errs, field.Invalid(p, omitted, fmt.Sprintf("entry %d %s", i, problem)))
			continue
		}
		if j := slices.IndexFunc(blocks, func(seen []byte) bool { return string(seen) == string(b.Bytes) }); j >= 0 {
			seenAt[j] = append(seenAt[j], i)
			continue
		}
		blocks, seenAt = append(blocks, b.Bytes), append(seenAt, []int{i})
	}
	if len(errs) > 0 {
		return errs
	}
	if len(blocks) == 0 {
		return field.ErrorList{field.Invalid(p, omitted, "at least one trust anchor must be provided")}
	}
	for _, at := range seenAt {
		if len(at) > 1 {
			errs = append(errs, field.Invalid(p, omitted, fmt.Sprintf("duplicate trust anchor (indices %v)", at)))
		}
	}
	return errs
}

// validateSignerName: a signer name is "<domain>/<path>", the domain of at least two
// DNS labels and at most 253 characters, the path of DNS subdomains separated by dots.
func validateSignerName(p *field.Path, name string) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	domain, path, ok := strings.Cut(name, "/")
	if !ok || strings.Contains(path, "/") {
		return field.ErrorList{field.Invalid(p, name, "must be a fully qualified domain and path of the form 'example.com/signer-name'")}
	}
	var errs field.ErrorList
	if len(domain) > validation.DNS1123SubdomainMaxLength {
		errs = append(errs, field.TooLong(p, "", validation.DNS1123SubdomainMaxLength))
	}
	labels := strings.Split(domain, ".")
	errs = append(errs, firstBadSegment(p, domain, labels, validation.IsDNS1123Label)...)
	if len(labels) < 2 {
		errs = append(errs, field.Invalid(p, domain, "should be a domain with at least two segments separated by dots"))
	}
	errs = append(errs, firstBadSegment(p, path, strings.Split(path, "."), validation.IsDNS1123Subdomain)...)
	maxLen := validation.DNS1123SubdomainMaxLength + (validation.DNS1123SubdomainMaxLength + validation.DNS1123LabelMaxLength + 1) + 1
	if len(name) > maxLen {
		errs = append(errs, field.TooLong(p, "", maxLen))
	}
	return errs
}

// firstBadSegment reports the problems of the first of segments (of whole) check
// refuses.
func firstBadSegment(p *field.Path, whole string, segments []string, check func(string) []string) field.ErrorList {
	for _, s := range segments {
		if problems := check(s); len(problems) > 0 {
			var errs field.ErrorList
			for _, msg := range problems {
				errs = append(errs, field.Invalid(p, whole, fmt.Sprintf("validating label %q: %s", s, msg)))
			}
			return errs
		}
	}
	return nil
}

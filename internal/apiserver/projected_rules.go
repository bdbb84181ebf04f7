package apiserver

import (
	"fmt"
	"path"
	"strings"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The bounds of a podCertificate source's (and a PodCertificateRequest's)
// maxExpirationSeconds: at least an hour, at most 91 days, or a day for the signers of
// the Kubernetes project (kubernetes.io and its subdomains).
const (
	minMaxExpirationSeconds           = 60 * 60
	maxMaxExpirationSeconds           = 91 * 24 * 60 * 60
	kubernetesMaxMaxExpirationSeconds = 24 * 60 * 60
)

// podCertificateKeyTypes are the key types a podCertificate source may ask for.
var podCertificateKeyTypes = []string{"RSA3072", "RSA4096", "ECDSAP256", "ECDSAP384", "ECDSAP521", "ED25519"}

// isKubernetesSignerName says whether a signer is one of the Kubernetes project's: its
// domain is kubernetes.io or a subdomain of it.
func isKubernetesSignerName(signer string) bool {
	domain, _, _ := strings.Cut(signer, "/")
	return domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io")
}

// maxExpirationLimit is the largest maxExpirationSeconds the signer's certificates may
// ask for.
func maxExpirationLimit(signer string) int32 {
	if isKubernetesSignerName(signer) {
		return kubernetesMaxMaxExpirationSeconds
	}
	return maxMaxExpirationSeconds
}

// validateProjectedSources checks a projected volume (at p): its defaultMode; that each
// source is of one type; the files of its sources, none twice ("conflicting duplicate
// paths"); the clusterTrustBundle sources (a name or a signer with a label selector) and
// the podCertificate sources (signer, key type, lifetime, paths).
func validateProjectedSources(src *corev1.ProjectedVolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if m := src.DefaultMode; m != nil && (*m < 0 || *m > 0o777) {
		errs = append(errs, field.Invalid(p.Child("defaultMode"), *m, "must be a number between 0 and 0777 (octal), both inclusive"))
	}
	errs = append(errs, validateUserID(src.DefaultUser, p.Child("defaultUser"))...)
	paths := sets.New[string]()
	// file records a file of a source; a path seen before is reported with value.
	file := func(filePath string, value any) {
		if filePath == "" {
			return
		}
		if paths.Has(filePath) {
			errs = append(errs, field.Invalid(p, value, "conflicting duplicate paths"))
		}
		paths.Insert(filePath)
	}
	for i, s := range src.Sources {
		sp := p.Child("sources").Index(i)
		kinds := 0
		if s.Secret != nil {
			kinds++
			if s.Secret.Name == "" {
				errs = append(errs, field.Required(sp.Child("secret", "name"), ""))
			}
			for _, it := range s.Secret.Items {
				file(it.Path, s.Secret.Name)
			}
		}
		if s.ConfigMap != nil {
			kinds++
			if s.ConfigMap.Name == "" {
				errs = append(errs, field.Required(sp.Child("configMap", "name"), ""))
			}
			for _, it := range s.ConfigMap.Items {
				file(it.Path, s.ConfigMap.Name)
			}
		}
		if s.DownwardAPI != nil {
			kinds++
			for _, it := range s.DownwardAPI.Items {
				file(it.Path, it.Path)
			}
		}
		if s.ServiceAccountToken != nil {
			kinds++
			if s.ServiceAccountToken.Path == "" {
				errs = append(errs, field.Required(p.Child("path"), ""))
			} else {
				errs = append(errs, localNonReservedPath(s.ServiceAccountToken.Path, p.Child("path"))...)
			}
			errs = append(errs, validateUserID(s.ServiceAccountToken.User, sp.Child("serviceAccountToken", "user"))...)
		}
		if s.ClusterTrustBundle != nil {
			kinds++
			errs = append(errs, validateClusterTrustBundleProjection(s.ClusterTrustBundle, sp.Child("clusterTrustBundle"))...)
			file(s.ClusterTrustBundle.Path, s.ClusterTrustBundle.Path)
		}
		if s.PodCertificate != nil {
			kinds++
			pc := s.PodCertificate
			errs = append(errs, validatePodCertificateProjection(pc, sp.Child("podCertificate"))...)
			for _, f := range []string{pc.CredentialBundlePath, pc.KeyPath, pc.CertificateChainPath} {
				file(f, f)
			}
		}
		if kinds > 1 {
			errs = append(errs, field.Forbidden(sp, "may not specify more than 1 volume type per source"))
		}
	}
	return errs
}

// validateClusterTrustBundleProjection: a clusterTrustBundle source names a bundle (a
// valid ClusterTrustBundle name, no label selector) or a signer (with a valid label
// selector), and a relative path.
func validateClusterTrustBundleProjection(ctb *corev1.ClusterTrustBundleProjection, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	switch {
	case ctb.Name != nil && ctb.SignerName != nil:
		errs = append(errs, field.Invalid(p, ctb, "only one of name and signerName may be used"))
	case ctb.Name != nil:
		name := *ctb.Name
		if name == "" {
			errs = append(errs, field.Required(p.Child("name"), "must be a valid object name"))
		}
		// A name with ":" is a signer's bundle: the signer is what comes before its last
		// ":", with ":" written "/".
		signer := ""
		if i := strings.LastIndex(name, ":"); i >= 0 {
			signer = strings.ReplaceAll(name[:i], ":", "/")
		}
		rule := clusterTrustBundleName(&certificatesv1.ClusterTrustBundle{Spec: certificatesv1.ClusterTrustBundleSpec{SignerName: signer}})
		for _, msg := range rule(name, false) {
			errs = append(errs, field.Invalid(p.Child("name"), name, "not a valid clustertrustbundlename: "+msg))
		}
		if ctb.LabelSelector != nil {
			errs = append(errs, field.Invalid(p.Child("labelSelector"), ctb.LabelSelector, "labelSelector must be unset if name is specified"))
		}
	case ctb.SignerName != nil:
		if *ctb.SignerName == "" {
			errs = append(errs, field.Required(p.Child("signerName"), "must be a valid signer name"))
		}
		errs = append(errs, validateSignerName(p.Child("signerName"), *ctb.SignerName)...)
		errs = append(errs, metav1validation.ValidateLabelSelector(ctb.LabelSelector, metav1validation.LabelSelectorValidationOptions{}, p.Child("labelSelector"))...)
	default:
		errs = append(errs, field.Required(p, "either name or signerName must be specified"))
	}
	if ctb.Path == "" {
		errs = append(errs, field.Required(p.Child("path"), ""))
	}
	errs = append(errs, validateUserID(ctb.User, p.Child("user"))...)
	return append(errs, localNonReservedPath(ctb.Path, p.Child("path"))...)
}

// validatePodCertificateProjection: a podCertificate source names a valid signer and
// key type, a lifetime within the signer's bounds, valid user annotations, and at least
// one relative path to write.
func validatePodCertificateProjection(pc *corev1.PodCertificateProjection, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	errs = append(errs, validateSignerName(p.Child("signerName"), pc.SignerName)...)
	if pc.UserAnnotations != nil {
		errs = append(errs, validateUserAnnotations(pc.UserAnnotations, p.Child("userAnnotations"))...)
	}
	errs = append(errs, validateUserID(pc.User, p.Child("user"))...)
	if !sets.New(podCertificateKeyTypes...).Has(pc.KeyType) {
		errs = append(errs, field.NotSupported(p.Child("keyType"), pc.KeyType, podCertificateKeyTypes))
	}
	if s := pc.MaxExpirationSeconds; s != nil {
		if *s < minMaxExpirationSeconds {
			errs = append(errs, field.Invalid(p.Child("maxExpirationSeconds"), *s, fmt.Sprintf("if provided, maxExpirationSeconds must be >= %d", minMaxExpirationSeconds)))
		}
		if limit := maxExpirationLimit(pc.SignerName); *s > limit {
			errs = append(errs, field.Invalid(p.Child("maxExpirationSeconds"), *s, fmt.Sprintf("if provided, maxExpirationSeconds must be <= %d", limit)))
		}
	}
	n := 0
	for _, f := range []struct{ name, path string }{
		{"credentialBundlePath", pc.CredentialBundlePath}, {"keyPath", pc.KeyPath}, {"certificateChainPath", pc.CertificateChainPath},
	} {
		if f.path != "" {
			n++
			errs = append(errs, localNonReservedPath(f.path, p.Child(f.name))...)
		}
	}
	if n == 0 {
		errs = append(errs, field.Required(p, "specify at least one of credentialBundlePath, keyPath, and certificateChainPath"))
	}
	return errs
}

// validateUserAnnotations: the keys of user annotations are domain-prefixed (in any
// case), and all of them together fit the size of annotations.
func validateUserAnnotations(annotations map[string]string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for k := range annotations {
		errs = append(errs, utilvalidation.IsDomainPrefixedKey(p, strings.ToLower(k))...)
	}
	if err := apivalidation.ValidateAnnotationsSize(annotations); err != nil {
		errs = append(errs, field.TooLong(p, "", apivalidation.TotalAnnotationSizeLimitB))
	}
	return errs
}

// validateUserID checks an optional user ID of a file.
func validateUserID(uid *int64, p *field.Path) field.ErrorList {
	if uid == nil {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsValidUserID(*uid) {
		errs = append(errs, field.Invalid(p, *uid, msg))
	}
	return errs
}

// localNonReservedPath: a file path in a volume is relative, has no ".." element and
// does not start with "..".
func localNonReservedPath(filePath string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(filePath) {
		errs = append(errs, field.Invalid(p, filePath, "must be a relative path"))
	}
	for _, part := range strings.Split(filePath, "/") {
		if part == ".." {
			errs = append(errs, field.Invalid(p, filePath, "must not contain '..'"))
			break
		}
	}
	if strings.HasPrefix(filePath, "..") && !strings.HasPrefix(filePath, "../") {
		errs = append(errs, field.Invalid(p, filePath, "must not start with '..'"))
	}
	return errs
}

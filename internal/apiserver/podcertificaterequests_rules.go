package apiserver

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/mail"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/utils/ptr"
)

// The size limits of a PodCertificateRequest's stub request and issued chain.
const (
	maxStubPKCS10RequestSize = 10 * 1024
	maxCertificateChainSize  = 100 * 1024
)

// defaultPodCertificateMaxExpirationSeconds is a request's maxExpirationSeconds when it
// names none: a day.
const defaultPodCertificateMaxExpirationSeconds = 24 * 60 * 60

var (
	pcrSpecPath      = field.NewPath("spec")
	stubRequestPath  = pcrSpecPath.Child("stubPKCS10Request")
	certChainPath    = field.NewPath("status", "certificateChain")
	notBeforePath    = field.NewPath("status", "notBefore")
	notAfterPath     = field.NewPath("status", "notAfter")
	beginRefreshPath = field.NewPath("status", "beginRefreshAt")
)

// podCertificateRequestResource is the row of PodCertificateRequests: a kubelet's
// request, for one pod's podCertificate volume source, that the signer it names issue a
// certificate to a key the kubelet holds. Its spec never changes; its status is the
// signer's to write once (Issued, Denied or Failed), with "sign" rights on the signer.
// Selectable by spec.signerName, spec.podName and spec.nodeName.
func podCertificateRequestResource() resource {
	return resource{
		group: "certificates.k8s.io", version: "v1",
		kind: "PodCertificateRequest", plural: "podcertificaterequests", singular: "podcertificaterequest",
		namespaced: true, status: true,
		newObj:           func() runtime.Object { return &certificatesv1.PodCertificateRequest{} },
		newList:          func() runtime.Object { return &certificatesv1.PodCertificateRequestList{} },
		selectableFields: []string{"spec.signerName", "spec.podName", "spec.nodeName"},
		fields: func(o runtime.Object) fields.Set {
			r := o.(*certificatesv1.PodCertificateRequest)
			return fields.Set{"spec.signerName": r.Spec.SignerName, "spec.podName": r.Spec.PodName, "spec.nodeName": string(r.Spec.NodeName)}
		},
		columns: []metav1.TableColumnDefinition{nameCol(),
			col("PodName", "string", certificatesv1.PodCertificateRequestSpec{}.SwaggerDoc()["podName"]),
			col("ServiceAccountName", "string", certificatesv1.PodCertificateRequestSpec{}.SwaggerDoc()["serviceAccountName"]),
			col("NodeName", "string", certificatesv1.PodCertificateRequestSpec{}.SwaggerDoc()["nodeName"]),
			col("SignerName", "string", certificatesv1.PodCertificateRequestSpec{}.SwaggerDoc()["signerName"]),
			col("State", "string", "Is the request Pending, Issued, Denied, or Failed?"),
			wide("UnverifiedUserAnnotations", "string", certificatesv1.PodCertificateRequestSpec{}.SwaggerDoc()["unverifiedUserAnnotations"])},
		row: func(o runtime.Object) []interface{} {
			r := o.(*certificatesv1.PodCertificateRequest)
			return []interface{}{r.Name, r.Spec.PodName, r.Spec.ServiceAccountName, string(r.Spec.NodeName), r.Spec.SignerName,
				podCertificateRequestState(r), labels.FormatLabels(r.Spec.UnverifiedUserAnnotations)}
		},
		hooks: hooks{
			validate:       validatePodCertificateRequest,
			validateUpdate: validatePodCertificateRequestUpdate,
		},
	}
}

// podCertificateRequestState is Issued, Denied or Failed after its condition, else Pending.
func podCertificateRequestState(r *certificatesv1.PodCertificateRequest) string {
	state := "Pending"
	for _, c := range r.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied,
			certificatesv1.PodCertificateRequestConditionTypeFailed:
			state = c.Type
		}
	}
	return state
}

// defaultPodCertificateRequest: a request without maxExpirationSeconds asks for a day.
func defaultPodCertificateRequest(r *certificatesv1.PodCertificateRequest) {
	if r.Spec.MaxExpirationSeconds == nil {
		r.Spec.MaxExpirationSeconds = ptr.To[int32](defaultPodCertificateMaxExpirationSeconds)
	}
}

// validatePodCertificateRequest checks a request's spec: its signer, annotations, the
// names and UIDs of its pod, service account and node, its lifetime within the signer's
// bounds, and its key, in a stub PKCS#10 request.
func validatePodCertificateRequest(o runtime.Object) field.ErrorList {
	r := o.(*certificatesv1.PodCertificateRequest)
	spec := r.Spec
	var errs field.ErrorList
	errs = append(errs, validateSignerName(pcrSpecPath.Child("signerName"), spec.SignerName)...)
	if spec.UnverifiedUserAnnotations != nil {
		errs = append(errs, validateUserAnnotations(spec.UnverifiedUserAnnotations, pcrSpecPath.Child("unverifiedUserAnnotations"))...)
	}
	named := func(name, value, uidName, uid string) {
		for _, msg := range apivalidation.NameIsDNSSubdomain(value, false) {
			errs = append(errs, field.Invalid(pcrSpecPath.Child(name), value, msg))
		}
		if uid == "" {
			errs = append(errs, field.Invalid(pcrSpecPath.Child(uidName), uid, "must not be empty"))
		}
		if len(uid) > 128 {
			errs = append(errs, field.TooLong(pcrSpecPath.Child(uidName), uid, 128))
		}
	}
	named("podName", spec.PodName, "podUID", string(spec.PodUID))
	named("serviceAccountName", spec.ServiceAccountName, "serviceAccountUID", string(spec.ServiceAccountUID))
	named("nodeName", string(spec.NodeName), "nodeUID", string(spec.NodeUID))
	if spec.MaxExpirationSeconds == nil {
		return append(errs, field.Required(pcrSpecPath.Child("maxExpirationSeconds"), "must be set"))
	}
	if s, limit := *spec.MaxExpirationSeconds, maxExpirationLimit(spec.SignerName); s < minMaxExpirationSeconds || s > limit {
		errs = append(errs, field.Invalid(pcrSpecPath.Child("maxExpirationSeconds"), spec.MaxExpirationSeconds,
			fmt.Sprintf("must be in the range [%d, %d]", minMaxExpirationSeconds, limit)))
	}
	// certificates.k8s.io/v1 has only the stub request; the older public key with its
	// proof of possession is never set through it.
	if len(spec.StubPKCS10Request) == 0 {
		return append(errs, field.Invalid(pcrSpecPath, field.OmitValueType{}, "exactly one of (stubPKCS10Request) or (pkixPublicKey, proofOfPossession) must be set"))
	}
	return append(errs, validateStubPKCS10Request(spec.StubPKCS10Request)...)
}

// validateStubPKCS10Request: the request parses, is signed by its key, and the key is
// Ed25519, ECDSA on P-256, P-384 or P-521, or RSA of 3072 or 4096 bits. What else the
// request says is the signer's business.
func validateStubPKCS10Request(der []byte) field.ErrorList {
	if len(der) > maxStubPKCS10RequestSize {
		return field.ErrorList{field.TooLong(stubRequestPath, der, maxStubPKCS10RequestSize)}
	}
	req, err := x509.ParseCertificateRequest(der)
	if err != nil {
		return field.ErrorList{field.Invalid(stubRequestPath, field.OmitValueType{}, "must be a valid PKCS#10 CSR")}
	}
	switch pub := req.PublicKey.(type) {
	case ed25519.PublicKey:
	case *ecdsa.PublicKey:
		if pub.Curve != elliptic.P256() && pub.Curve != elliptic.P384() && pub.Curve != elliptic.P521() {
			return field.ErrorList{field.Invalid(stubRequestPath, "curve "+pub.Curve.Params().Name, "elliptic public keys must use curve P256, P384, or P521")}
		}
	case *rsa.PublicKey:
		if bits := pub.Size() * 8; bits != 3072 && bits != 4096 {
			return field.ErrorList{field.Invalid(stubRequestPath, fmt.Sprintf("%d-bit modulus", bits), "RSA keys must have modulus size 3072 or 4096")}
		}
	default:
		return field.ErrorList{field.Invalid(stubRequestPath, field.OmitValueType{}, "unknown public key type; supported types are Ed25519, ECDSA, and RSA")}
	}
	if err := req.CheckSignature(); err != nil {
		return field.ErrorList{field.Invalid(stubRequestPath, field.OmitValueType{}, "invalid signature")}
	}
	return nil
}

// validatePodCertificateRequestUpdate: the spec never changes.
func validatePodCertificateRequestUpdate(o, old runtime.Object) field.ErrorList {
	r, prev := o.(*certificatesv1.PodCertificateRequest), old.(*certificatesv1.PodCertificateRequest)
	if !apiequality.Semantic.DeepEqual(r.Spec, prev.Spec) {
		return field.ErrorList{field.Invalid(pcrSpecPath, r.Spec, apivalidation.FieldImmutableErrorMsg)}
	}
	return nil
}

// podCertificateRequestStatusRule is the check of a status write: the status rules
// (validatePodCertificateRequestStatus, as of now()), then, for a write that changes
// the status, that the user may "sign" for the request's signer.
func podCertificateRequestStatusRule(authz authorizer.Authorizer, now func() time.Time) func(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return func(ctx context.Context, obj, old runtime.Object) field.ErrorList {
		r, prev := obj.(*certificatesv1.PodCertificateRequest), old.(*certificatesv1.PodCertificateRequest)
		if errs := validatePodCertificateRequestStatus(r, prev, now()); len(errs) > 0 {
			return errs
		}
		if apiequality.Semantic.DeepEqual(r.Status, prev.Status) {
			return nil
		}
		u, ok := genericrequest.UserFrom(ctx)
		if !ok {
			return field.ErrorList{field.InternalError(pcrSpecPath.Child("signerName"), fmt.Errorf("cannot determine calling user to perform \"sign\" check"))}
		}
		if !mayForSigner(ctx, authz, u, "sign", prev.Spec.SignerName) {
			return field.ErrorList{field.Forbidden(pcrSpecPath.Child("signerName"),
				fmt.Sprintf("User %q is not permitted to \"sign\" for signer %q", u.GetName(), prev.Spec.SignerName))}
		}
		return nil
	}
}

// mayForSigner says whether u may do verb on the signer (certificates.k8s.io signers,
// named by the signer or by "<domain>/*").
func mayForSigner(ctx context.Context, authz authorizer.Authorizer, u user.Info, verb, signer string) bool {
	domain, _, _ := strings.Cut(signer, "/")
	for _, name := range []string{signer, domain + "/*"} {
		d, _, _ := authz.Authorize(ctx, authorizer.AttributesRecord{User: u, Verb: verb, Name: name,
			APIGroup: "certificates.k8s.io", APIVersion: "*", Resource: "signers", ResourceRequest: true})
		if d == authorizer.DecisionAllow {
			return true
		}
	}
	return false
}

// podCertificateRequestTerminal is the request's Issued, Denied or Failed condition
// type that is True ("" for a pending one).
func podCertificateRequestTerminal(r *certificatesv1.PodCertificateRequest) string {
	for _, c := range r.Status.Conditions {
		switch c.Type {
		case certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied,
			certificatesv1.PodCertificateRequestConditionTypeFailed:
			if c.Status == metav1.ConditionTrue {
				return c.Type
			}
		}
	}
	return ""
}

// validatePodCertificateRequestStatus checks a status write: at most one condition, of
// type Issued, Denied or Failed and status True; a request in one of those states keeps
// its status; a denial or failure is only conditions; an issuance is a chain whose leaf
// was issued to the request's key, with notBefore, notAfter and beginRefreshAt matching
// it (notBefore within 5 minutes of now, a lifetime of at least an hour and at most
// maxExpirationSeconds, a refresh at least 10 minutes after notBefore and before
// notAfter); a pending request's status does not change.
func validatePodCertificateRequestStatus(r, prev *certificatesv1.PodCertificateRequest, now time.Time) field.ErrorList {
	var errs field.ErrorList
	conds := field.NewPath("status", "conditions")
	known := []string{certificatesv1.PodCertificateRequestConditionTypeIssued, certificatesv1.PodCertificateRequestConditionTypeDenied,
		certificatesv1.PodCertificateRequestConditionTypeFailed}
	seen := 0
	for i, c := range r.Status.Conditions {
		cp := conds.Child(fmt.Sprintf("[%d]", i)) // kube-apiserver names the index as a field
		switch c.Type {
		case known[0], known[1], known[2]:
			if seen++; seen > 1 {
				errs = append(errs, field.Invalid(cp.Child("type"), c.Type, `There may be at most one condition with type "Issued", "Denied", or "Failed"`))
			}
			if c.Status != metav1.ConditionTrue {
				errs = append(errs, field.NotSupported(cp.Child("status"), c.Status, []metav1.ConditionStatus{metav1.ConditionTrue}))
			}
		default:
			errs = append(errs, field.NotSupported(cp.Child("type"), c.Type, known))
		}
	}
	errs = append(errs, metav1validation.ValidateConditions(r.Status.Conditions, conds)...)
	if len(errs) > 0 {
		return errs
	}
	status := field.NewPath("status")
	if podCertificateRequestTerminal(prev) != "" {
		if !apiequality.Semantic.DeepEqual(r.Status, prev.Status) {
			return field.ErrorList{field.Invalid(status, field.OmitValueType{}, "immutable after PodCertificateRequest is issued, denied, or failed")}
		}
		return nil
	}
	switch podCertificateRequestTerminal(r) {
	case certificatesv1.PodCertificateRequestConditionTypeDenied, certificatesv1.PodCertificateRequestConditionTypeFailed:
		if !apiequality.Semantic.DeepEqual(r.Status, certificatesv1.PodCertificateRequestStatus{Conditions: r.Status.Conditions}) {
			return field.ErrorList{field.Invalid(status, field.OmitValueType{}, "non-condition status fields must be empty when denying or failing the PodCertificateRequest")}
		}
		return nil
	case certificatesv1.PodCertificateRequestConditionTypeIssued:
		return validateIssuedCertificate(r, prev, now)
	}
	if !apiequality.Semantic.DeepEqual(r.Status, prev.Status) {
		return field.ErrorList{field.Invalid(status, field.OmitValueType{}, `status is immutable unless transitioning to "Issued", "Denied", or "Failed"`)}
	}
	return nil
}

// validateIssuedCertificate checks the chain and times of an issuance (see
// validatePodCertificateRequestStatus); prev holds the request's key.
func validateIssuedCertificate(r, prev *certificatesv1.PodCertificateRequest, now time.Time) field.ErrorList {
	st := r.Status
	chain := st.CertificateChain
	if len(chain) > maxCertificateChainSize {
		return field.ErrorList{field.TooLong(certChainPath, chain, maxCertificateChainSize)}
	}
	leafBlock, rest := pem.Decode([]byte(chain))
	if leafBlock == nil {
		return field.ErrorList{field.Invalid(certChainPath, chain, "issued certificate chain must contain at least one certificate")}
	}
	if leafBlock.Type != "CERTIFICATE" {
		return field.ErrorList{field.Invalid(certChainPath, chain, "issued certificate chain must consist entirely of CERTIFICATE PEM blocks")}
	}
	leaf, err := x509.ParseCertificate(leafBlock.Bytes)
	if err != nil {
		return field.ErrorList{field.Invalid(certChainPath, chain, "leaf certificate does not parse as valid X.509")}
	}
	var errs field.ErrorList
	for _, name := range leaf.DNSNames {
		if name == "" {
			errs = append(errs, field.Invalid(certChainPath, name, "leaf certificate should not contain empty DNSName"))
		}
		if strings.Contains(name, "..") {
			errs = append(errs, field.Invalid(certChainPath, name, "leaf certificate's DNSName should not contain '..'"))
		}
		if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") {
			errs = append(errs, field.Invalid(certChainPath, name, "leaf certificate's DNSName should not start or end with '.'"))
		}
	}
	for _, addr := range leaf.EmailAddresses {
		if _, err := mail.ParseAddress(addr); err != nil {
			errs = append(errs, field.Invalid(certChainPath, addr, "leaf certificate should not contain invalid EmailAddress"))
		}
	}
	req, err := x509.ParseCertificateRequest(prev.Spec.StubPKCS10Request)
	if err != nil {
		return append(errs, field.Invalid(stubRequestPath, field.OmitValueType{}, "must be a valid PKCS#10 CSR"))
	}
	if k, ok := req.PublicKey.(interface{ Equal(crypto.PublicKey) bool }); ok && !k.Equal(leaf.PublicKey) {
		return append(errs, field.Invalid(certChainPath, chain, "leaf certificate was not issued to the requested public key"))
	}
	if st.NotBefore == nil {
		errs = append(errs, field.Required(notBeforePath, "must be present and consistent with the issued certificate"))
	}
	if st.NotAfter == nil {
		errs = append(errs, field.Required(notAfterPath, "must be present and consistent with the issued certificate"))
	}
	if st.BeginRefreshAt == nil {
		errs = append(errs, field.Required(beginRefreshPath, "must be present and in the range [notbefore+10min, notafter-10min]"))
	}
	if len(errs) > 0 {
		return errs
	}
	notBefore, notAfter, refresh := st.NotBefore.Time, st.NotAfter.Time, st.BeginRefreshAt.Time
	switch lifetime := leaf.NotAfter.Sub(leaf.NotBefore); {
	case !notBefore.Equal(leaf.NotBefore):
		return field.ErrorList{field.Invalid(notBeforePath, notBefore, "must be set to the NotBefore time encoded in the leaf certificate")}
	case !(notBefore.After(now.Add(-5*time.Minute)) && notBefore.Before(now.Add(5*time.Minute))):
		return field.ErrorList{field.Invalid(notBeforePath, notBefore, "must be set to within 5 minutes of kube-apiserver's current time")}
	case !notAfter.Equal(leaf.NotAfter):
		return field.ErrorList{field.Invalid(notAfterPath, notAfter, "must be set to the NotAfter time encoded in the leaf certificate")}
	case lifetime < time.Hour:
		return field.ErrorList{field.Invalid(certChainPath, lifetime, "leaf certificate lifetime must be >= 1 hour")}
	case lifetime > time.Duration(*r.Spec.MaxExpirationSeconds)*time.Second:
		return field.ErrorList{field.Invalid(certChainPath, lifetime, fmt.Sprintf("leaf certificate lifetime must be <= spec.maxExpirationSeconds (%v)", *r.Spec.MaxExpirationSeconds))}
	case refresh.Before(notBefore.Add(10 * time.Minute)):
		return field.ErrorList{field.Invalid(beginRefreshPath, refresh, "must be at least 10 minutes after status.notBefore")}
	case refresh.After(notAfter.Add(-10 * time.Minute)):
		return field.ErrorList{field.Invalid(beginRefreshPath, refresh, "must be at least 10 minutes before status.notAfter")}
	}
	// The rest of the chain cannot be verified without its root; each block must be a
	// certificate. (kube-apiserver's message has the typo "CERTFICATE".)
	for {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			return nil
		}
		if blk.Type != "CERTIFICATE" {
			return field.ErrorList{field.Invalid(certChainPath, chain, "issued certificate chain must consist entirely of CERTFICATE PEM blocks")}
		}
		if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
			return field.ErrorList{field.Invalid(certChainPath, chain, "intermediate certificate does not parse as valid X.509")}
		}
	}
}

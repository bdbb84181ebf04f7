package apiserver

import (
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
)

// certificatesResources are the rows of certificates.k8s.io/v1: CertificateSigningRequests
// (with /status and /approval) and ClusterTrustBundles (their rules in
// clustertrustbundles_rules.go), both selectable by spec.signerName, and
// PodCertificateRequests (podcertificaterequests_rules.go).
func certificatesResources() []resource {
	certs := func(r resource) resource { r.group, r.version = "certificates.k8s.io", "v1"; return r }
	return []resource{
		certs(resource{
			kind: "CertificateSigningRequest", plural: "certificatesigningrequests", singular: "certificatesigningrequest",
			shortNames: []string{"csr"}, status: true, approval: true,
			newObj:           func() runtime.Object { return &certificatesv1.CertificateSigningRequest{} },
			newList:          func() runtime.Object { return &certificatesv1.CertificateSigningRequestList{} },
			selectableFields: []string{"spec.signerName"},
			fields: func(o runtime.Object) fields.Set {
				return fields.Set{"spec.signerName": o.(*certificatesv1.CertificateSigningRequest).Spec.SignerName}
			},
			columns: []metav1.TableColumnDefinition{nameCol(), ageCol(),
				col("SignerName", "string", "The signer the request is for."),
				col("Requestor", "string", "Name of the user that made the request."),
				col("RequestedDuration", "string", "The validity the requestor asks for."),
				col("Condition", "string", "The state of the request.")},
			row: func(o runtime.Object) []interface{} {
				c := o.(*certificatesv1.CertificateSigningRequest)
				duration := "<none>"
				if c.Spec.ExpirationSeconds != nil {
					duration = humanDuration(secondsDuration(*c.Spec.ExpirationSeconds))
				}
				return []interface{}{c.Name, age(c.CreationTimestamp), c.Spec.SignerName, c.Spec.Username, duration, csrCondition(c)}
			},
			hooks: hooks{
				prepareForCreate: func(o runtime.Object) {
					o.(*certificatesv1.CertificateSigningRequest).Status = certificatesv1.CertificateSigningRequestStatus{}
				},
				requestor: csrRequestor,
				validate: func(o runtime.Object) field.ErrorList {
					return validateCSR(o.(*certificatesv1.CertificateSigningRequest))
				},
			},
		}),
		certs(resource{
			kind: "ClusterTrustBundle", plural: "clustertrustbundles", singular: "clustertrustbundle",
			newObj:  func() runtime.Object { return &certificatesv1.ClusterTrustBundle{} },
			newList: func() runtime.Object { return &certificatesv1.ClusterTrustBundleList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), col("SignerName", "string", "The signer of the bundle.")},
			row: func(o runtime.Object) []interface{} {
				b := o.(*certificatesv1.ClusterTrustBundle)
				return []interface{}{b.Name, orNone(b.Spec.SignerName)}
			},
			selectableFields: []string{"spec.signerName"},
			fields: func(o runtime.Object) fields.Set {
				return fields.Set{"spec.signerName": o.(*certificatesv1.ClusterTrustBundle).Spec.SignerName}
			},
			hooks: hooks{objectName: clusterTrustBundleName, validate: validateClusterTrustBundle,
				validateUpdate: validateClusterTrustBundleUpdate},
		}),
		podCertificateRequestResource(),
	}
}

// csrRequestor records who asked, whatever the request's spec says.
func csrRequestor(o runtime.Object, u user.Info) {
	c := o.(*certificatesv1.CertificateSigningRequest)
	c.Spec.Username, c.Spec.UID, c.Spec.Groups = u.GetName(), u.GetUID(), u.GetGroups()
	c.Spec.Extra = nil
	for k, v := range u.GetExtra() {
		if c.Spec.Extra == nil {
			c.Spec.Extra = map[string]certificatesv1.ExtraValue{}
		}
		c.Spec.Extra[k] = v
	}
}

func csrCondition(c *certificatesv1.CertificateSigningRequest) string {
	var conds []string
	for _, cond := range c.Status.Conditions {
		if cond.Status == corev1.ConditionTrue || cond.Status == "" {
			conds = append(conds, string(cond.Type))
		}
	}
	if len(c.Status.Certificate) > 0 {
		conds = append(conds, "Issued")
	}
	if len(conds) == 0 {
		return "Pending"
	}
	return strings.Join(conds, ",")
}

func validateCSR(c *certificatesv1.CertificateSigningRequest) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if len(c.Spec.Request) == 0 {
		errs = append(errs, field.Required(spec.Child("request"), ""))
	} else if !strings.Contains(string(c.Spec.Request), "CERTIFICATE REQUEST") {
		errs = append(errs, field.Invalid(spec.Child("request"), c.Spec.Request, "PEM block type must be CERTIFICATE REQUEST"))
	}
	errs = append(errs, validateSignerName(spec.Child("signerName"), c.Spec.SignerName)...)
	if e := c.Spec.ExpirationSeconds; e != nil && *e < 600 {
		errs = append(errs, field.Invalid(spec.Child("expirationSeconds"), *e, "may not specify a duration less than 600 seconds (10 minutes)"))
	}
	return errs
}

func secondsDuration(s int32) time.Duration { return time.Duration(s) * time.Second }

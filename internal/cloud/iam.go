package cloud

import (
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/kubelab/kubelab/internal/cloud/iampolicy"
)

// The IAM API: the Query protocol of Version 2010-05-08 on the EC2 API's endpoint, told
// apart by its signing name. IAM is global: requests are signed for us-east-1 whatever
// region the cloud serves (or for the cloud's region, as the SDKs sign for a custom
// endpoint).
const (
	iamAPIVersion  = "2010-05-08"
	iamSigningName = "iam"
	iamRegion      = "us-east-1"
	iamNamespace   = "https://iam.amazonaws.com/doc/" + iamAPIVersion + "/"
)

// IAM's quotas this cloud enforces (AWS's defaults).
const (
	maxRoles             = 1000
	maxOIDCProviders     = 100
	maxAttachedPerRole   = 10
	maxInlinePolicyBytes = 10240 // all inline policies of a role together
	maxManagedPolicySize = 6144
	maxTrustPolicySize   = 2048
	maxClientIDs         = 100
	maxThumbprints       = 5
)

// iamAction serves one IAM action: it returns the action's Result element (nil for
// none) or an error.
type iamAction func(c *Cloud, p *eparams) (any, *apiError)

var iamActions = map[string]iamAction{
	"CreateOpenIDConnectProvider":           (*Cloud).createOIDCProvider,
	"GetOpenIDConnectProvider":              (*Cloud).getOIDCProvider,
	"ListOpenIDConnectProviders":            (*Cloud).listOIDCProviders,
	"DeleteOpenIDConnectProvider":           (*Cloud).deleteOIDCProvider,
	"UpdateOpenIDConnectProviderThumbprint": (*Cloud).updateOIDCThumbprints,
	"CreateRole":                            (*Cloud).createRole,
	"GetRole":                               (*Cloud).getRole,
	"ListRoles":                             (*Cloud).listRoles,
	"DeleteRole":                            (*Cloud).deleteRole,
	"UpdateAssumeRolePolicy":                (*Cloud).updateAssumeRolePolicy,
	"PutRolePolicy":                         (*Cloud).putRolePolicy,
	"GetRolePolicy":                         (*Cloud).getRolePolicy,
	"DeleteRolePolicy":                      (*Cloud).deleteRolePolicy,
	"ListRolePolicies":                      (*Cloud).listRolePolicies,
	"CreatePolicy":                          (*Cloud).createPolicy,
	"GetPolicy":                             (*Cloud).getPolicy,
	"GetPolicyVersion":                      (*Cloud).getPolicyVersion,
	"DeletePolicy":                          (*Cloud).deletePolicy,
	"AttachRolePolicy":                      (*Cloud).attachRolePolicy,
	"DetachRolePolicy":                      (*Cloud).detachRolePolicy,
	"ListAttachedRolePolicies":              (*Cloud).listAttachedRolePolicies,
	"CreateInstanceProfile":                 (*Cloud).createInstanceProfile,
	"AddRoleToInstanceProfile":              (*Cloud).addRoleToInstanceProfile,
	"GetInstanceProfile":                    (*Cloud).getInstanceProfile,
	"RemoveRoleFromInstanceProfile":         (*Cloud).removeRoleFromInstanceProfile,
	"DeleteInstanceProfile":                 (*Cloud).deleteInstanceProfile,
}

// serveIAM answers one authenticated IAM request.
func (c *Cloud) serveIAM(w http.ResponseWriter, who *caller, form url.Values, reqID string, start time.Time) {
	name := form.Get("Action")
	if name == "" {
		writeQueryError(w, iamNamespace, reqID, &apiError{Code: "MissingAction", Message: "Missing Action", Status: http.StatusBadRequest})
		return
	}
	act, ok := iamActions[name]
	if !ok {
		writeQueryError(w, iamNamespace, reqID, &apiError{Code: "InvalidAction", Message: "Could not find operation " + name + " for version " + iamAPIVersion, Status: http.StatusBadRequest})
		return
	}
	if v := form.Get("Version"); v != iamAPIVersion {
		writeQueryError(w, iamNamespace, reqID, errValidation("Version '%s' is not %s, the version this service speaks", v, iamAPIVersion))
		return
	}
	p := &eparams{params: &params{v: form}}
	if aerr := c.authorize(who, "iam:"+name, []authResource{{arn: c.iamResource(p)}}, accessDenied); aerr != nil {
		writeQueryError(w, iamNamespace, reqID, aerr)
		return
	}
	result, aerr := act(c, p)
	if aerr == nil && p.err != nil {
		aerr = p.err
	}
	if aerr != nil {
		c.log.Info("action failed", "action", name, "code", aerr.Code, "message", aerr.Message, "requestId", reqID)
		writeQueryError(w, iamNamespace, reqID, aerr)
		return
	}
	inner, err := marshalInner(result)
	if err != nil {
		writeQueryError(w, iamNamespace, reqID, errInternal(err))
		return
	}
	writeQueryResult(w, iamNamespace, name, inner, reqID)
	c.log.Debug("action", "action", name, "requestId", reqID, "duration", time.Since(start))
}

// iamResource is the ARN an IAM request acts on, for authorization.
func (c *Cloud) iamResource(p *eparams) string {
	switch {
	case p.str("OpenIDConnectProviderArn") != "":
		return p.str("OpenIDConnectProviderArn")
	case p.str("Url") != "":
		return c.iamARN("oidc-provider/" + strings.TrimPrefix(p.str("Url"), "https://"))
	case p.str("PolicyArn") != "" && p.str("RoleName") == "":
		return p.str("PolicyArn")
	case p.str("InstanceProfileName") != "":
		return c.iamARN("instance-profile" + pathOr(p.str("Path")) + p.str("InstanceProfileName"))
	case p.str("RoleName") != "":
		return c.iamARN("role" + pathOr(p.str("Path")) + p.str("RoleName"))
	case p.str("PolicyName") != "":
		return c.iamARN("policy" + pathOr(p.str("Path")) + p.str("PolicyName"))
	}
	return "*"
}

func pathOr(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

func (c *Cloud) iamARN(resource string) string { return "arn:aws:iam::" + c.ownerID + ":" + resource }

// IAM's errors.

func iamErr(code string, status int, format string, args ...any) *apiError {
	e := elbErr(code, format, args...)
	e.Status = status
	return e
}

func errNoSuchEntity(format string, args ...any) *apiError {
	return iamErr("NoSuchEntity", http.StatusNotFound, format, args...)
}

func errEntityExists(format string, args ...any) *apiError {
	return iamErr("EntityAlreadyExists", http.StatusConflict, format, args...)
}

func errDeleteConflict(format string, args ...any) *apiError {
	return iamErr("DeleteConflict", http.StatusConflict, format, args...)
}

func errLimitExceeded(format string, args ...any) *apiError {
	return iamErr("LimitExceeded", http.StatusConflict, format, args...)
}

func errMalformedPolicy(format string, args ...any) *apiError {
	return iamErr("MalformedPolicyDocument", http.StatusBadRequest, format, args...)
}

func errRoleNotFound(name string) *apiError {
	return errNoSuchEntity("The role with name %s cannot be found.", name)
}

// IAM's names: roles, policies and instance profiles.
var (
	iamNameRE = regexp.MustCompile(`^[\w+=,.@-]+$`)
	iamPathRE = regexp.MustCompile(`^/([\x21-\x7e]*/)?$`)
)

// iamName reads the required name parameter: 1 to max characters of [\w+=,.@-].
func (p *eparams) iamName(param string, max int) string {
	s := p.requiredStr(param)
	switch {
	case p.err != nil:
	case len(s) > max:
		p.fail(errValidation("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must have length less than or equal to %d", s, lowerFirst(param), max))
	case !iamNameRE.MatchString(s):
		p.fail(errValidation("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]+", s, lowerFirst(param)))
	}
	return s
}

// iamPath reads Path (default /): it starts and ends with a slash.
func (p *eparams) iamPath() string {
	s := p.str("Path")
	if s == "" {
		return "/"
	}
	if len(s) > 512 || !iamPathRE.MatchString(s) {
		p.fail(errValidation("The specified value for path is invalid. It must begin and end with / and contain only alphanumeric characters and/or / characters."))
	}
	return s
}

// iamTags reads Tags.member.N.Key/Value (at most 50, keys unique).
func (p *eparams) iamTags() []Tag {
	var out []Tag
	seen := map[string]bool{}
	for _, k := range p.indexed("Tags.member") {
		key := p.str(k + ".Key")
		if key == "" || len(key) > 128 || len(p.str(k+".Value")) > 256 {
			p.fail(errValidation("1 validation error detected: Value '%s' at 'tags.%s.member.key' failed to satisfy constraint: Member must have length between 1 and 128", key, strings.TrimPrefix(k, "Tags.member.")))
			continue
		}
		if seen[strings.ToLower(key)] {
			p.fail(errValidation("Duplicate tag keys found. Please note that Tag keys are case insensitive."))
			continue
		}
		seen[strings.ToLower(key)] = true
		out = append(out, Tag{Key: key, Value: p.str(k + ".Value")})
	}
	if len(out) > 50 {
		p.fail(errLimitExceeded("The number of tags has reached the maximum limit."))
	}
	return out
}

// policyDoc reads the required policy document parameter and parses it: an error is
// MalformedPolicyDocument, as IAM answers.
func (p *eparams) policyDoc(param string, trust bool) string {
	s := p.requiredStr(param)
	if p.err != nil {
		return s
	}
	if _, err := iampolicy.Parse(s, iampolicy.ParseOptions{Trust: trust}); err != nil {
		var perr *iampolicy.Error
		if errors.As(err, &perr) {
			p.fail(errMalformedPolicy("%s", perr.Msg))
		} else {
			p.fail(errMalformedPolicy("%v", err))
		}
	}
	return s
}

// XML of IAM's objects.

type xmlIAMTag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

func iamXMLTags(tags []Tag) []xmlIAMTag {
	out := make([]xmlIAMTag, len(tags))
	for i, t := range tags {
		out[i] = xmlIAMTag{t.Key, t.Value}
	}
	return out
}

// policyText is a policy document as IAM returns it: URL-encoded.
func policyText(doc string) string { return sigEscape(doc) }

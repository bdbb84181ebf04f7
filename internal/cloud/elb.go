package cloud

import (
	"encoding/xml"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The Elastic Load Balancing (v2) API: the Query protocol of Version 2015-12-01 on the
// EC2 API's endpoint, told apart by its signing name.
const (
	elbAPIVersion  = "2015-12-01"
	elbSigningName = "elasticloadbalancing"
	elbNamespace   = "http://elasticloadbalancing.amazonaws.com/doc/" + elbAPIVersion + "/"
)

// elbAction serves one ELB action: it returns the action's Result element or an error.
type elbAction func(c *Cloud, p *eparams) (any, *apiError)

var elbActions = map[string]elbAction{
	"CreateLoadBalancer":             (*Cloud).createLoadBalancer,
	"DescribeLoadBalancers":          (*Cloud).describeLoadBalancers,
	"DeleteLoadBalancer":             (*Cloud).deleteLoadBalancer,
	"DescribeLoadBalancerAttributes": (*Cloud).describeLoadBalancerAttributes,
	"ModifyLoadBalancerAttributes":   (*Cloud).modifyLoadBalancerAttributes,
	"CreateTargetGroup":              (*Cloud).createTargetGroup,
	"DescribeTargetGroups":           (*Cloud).describeTargetGroups,
	"ModifyTargetGroup":              (*Cloud).modifyTargetGroup,
	"DeleteTargetGroup":              (*Cloud).deleteTargetGroup,
	"DescribeTargetGroupAttributes":  (*Cloud).describeTargetGroupAttributes,
	"ModifyTargetGroupAttributes":    (*Cloud).modifyTargetGroupAttributes,
	"RegisterTargets":                (*Cloud).registerTargets,
	"DeregisterTargets":              (*Cloud).deregisterTargets,
	"DescribeTargetHealth":           (*Cloud).describeTargetHealth,
	"CreateListener":                 (*Cloud).createListener,
	"DescribeListeners":              (*Cloud).describeListeners,
	"ModifyListener":                 (*Cloud).modifyListener,
	"DeleteListener":                 (*Cloud).deleteListener,
	"CreateRule":                     (*Cloud).createRule,
	"DescribeRules":                  (*Cloud).describeRules,
	"ModifyRule":                     (*Cloud).modifyRule,
	"DeleteRule":                     (*Cloud).deleteRule,
	"SetRulePriorities":              (*Cloud).setRulePriorities,
	"AddTags":                        (*Cloud).addTags,
	"RemoveTags":                     (*Cloud).removeTags,
	"DescribeTags":                   (*Cloud).describeTags,
}

// serveELB answers one signed ELB request.
func (c *Cloud) serveELB(w http.ResponseWriter, who *caller, form url.Values, reqID string, start time.Time) {
	name := form.Get("Action")
	if name == "" {
		writeELBError(w, reqID, &apiError{Code: "MissingAction", Message: "Missing Action", Status: http.StatusBadRequest})
		return
	}
	act, ok := elbActions[name]
	if !ok {
		writeELBError(w, reqID, &apiError{Code: "InvalidAction", Message: "Could not find operation " + name + " for version " + elbAPIVersion, Status: http.StatusBadRequest})
		return
	}
	if v := form.Get("Version"); v != elbAPIVersion {
		writeELBError(w, reqID, errValidation("Version '%s' is not %s, the version this service speaks", v, elbAPIVersion))
		return
	}
	if aerr := c.authorize(who, "elasticloadbalancing:"+name, elbAuthResources(form), accessDenied); aerr != nil {
		writeELBError(w, reqID, aerr)
		return
	}
	p := &eparams{params: &params{v: form}}
	result, aerr := act(c, p)
	if aerr != nil {
		c.log.Info("action failed", "action", name, "code", aerr.Code, "message", aerr.Message, "requestId", reqID)
		writeELBError(w, reqID, aerr)
		return
	}
	inner := []byte{}
	if result != nil {
		b, err := xml.Marshal(result)
		if err != nil {
			writeELBError(w, reqID, errInternal(err))
			return
		}
		inner = stripRoot(b)
	}
	writeQueryResult(w, elbNamespace, name, inner, reqID)
	c.log.Debug("action", "action", name, "requestId", reqID, "duration", time.Since(start))
}

var anyRootRE = regexp.MustCompile(`^<[A-Za-z.]+>`)

// stripRoot drops the outer element of a marshalled struct, keeping its children.
func stripRoot(b []byte) []byte {
	m := anyRootRE.Find(b)
	if m == nil {
		return b
	}
	end := "</" + string(m[1:])
	return []byte(strings.TrimSuffix(string(b[len(m):]), end))
}

// writeELBError answers with the Query protocol's error form.
func writeELBError(w http.ResponseWriter, reqID string, e *apiError) {
	writeQueryError(w, elbNamespace, reqID, e)
}

func elbErr(code, format string, args ...any) *apiError {
	return &apiError{Code: code, Message: fmt.Sprintf(format, args...), Status: http.StatusBadRequest}
}

func errValidation(format string, args ...any) *apiError {
	return elbErr("ValidationError", format, args...)
}

func errLBNotFound() *apiError {
	return elbErr("LoadBalancerNotFound", "One or more load balancers not found")
}

func errTGNotFound() *apiError {
	return elbErr("TargetGroupNotFound", "One or more target groups not found")
}

func errListenerNotFound() *apiError {
	return elbErr("ListenerNotFound", "One or more listeners not found")
}

func errRuleNotFound() *apiError {
	return elbErr("RuleNotFound", "One or more rules not found")
}

// eparams reads an ELB action's parameters: lists are Name.member.N, and a bad value is a
// ValidationError. The first problem is kept.
type eparams struct {
	*params
}

func (p *eparams) members(name string) []string { return p.list(name + ".member") }

func (p *eparams) has(name string) bool { _, ok := p.v[name]; return ok }

// requiredStr reads a required string parameter.
func (p *eparams) requiredStr(name string) string {
	s := p.str(name)
	if s == "" {
		p.fail(errValidation("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", lowerFirst(name)))
	}
	return s
}

// intIn reads an integer in [lo, hi]; absent is def.
func (p *eparams) intIn(name string, lo, hi, def int) int {
	s := p.str(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		p.fail(errValidation("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must be a number", s, lowerFirst(name)))
		return def
	}
	if n < lo {
		p.fail(errValidation("1 validation error detected: Value '%d' at '%s' failed to satisfy constraint: Member must have value greater than or equal to %d", n, lowerFirst(name), lo))
	} else if n > hi {
		p.fail(errValidation("1 validation error detected: Value '%d' at '%s' failed to satisfy constraint: Member must have value less than or equal to %d", n, lowerFirst(name), hi))
	}
	return n
}

// oneOf reads a string that must be one of allowed (absent is def).
func (p *eparams) oneOf(name, def string, allowed ...string) string {
	s := p.str(name)
	if s == "" {
		return def
	}
	for _, a := range allowed {
		if s == a {
			return s
		}
	}
	p.fail(errValidation("1 validation error detected: Value '%s' at '%s' failed to satisfy constraint: Member must satisfy enum value set: [%s]", s, lowerFirst(name), strings.Join(allowed, ", ")))
	return def
}

// elbTags reads Tags.member.N.Key/Value: DuplicateTagKeys when a key comes twice.
func (p *eparams) elbTags() []Tag {
	var out []Tag
	seen := map[string]bool{}
	for _, k := range p.indexed("Tags.member") {
		key := p.str(k + ".Key")
		if key == "" {
			p.fail(errValidation("A tag key must be specified"))
			continue
		}
		if len(key) > 128 || len(p.str(k+".Value")) > 256 {
			p.fail(errValidation("Tag key '%s' or its value is too long", key))
			continue
		}
		if strings.HasPrefix(strings.ToLower(key), "aws:") {
			p.fail(errValidation("Tag keys starting with 'aws:' are reserved"))
			continue
		}
		if seen[key] {
			p.fail(elbErr("DuplicateTagKeys", "Tag key '%s' specified more than once", key))
			continue
		}
		seen[key] = true
		out = append(out, Tag{Key: key, Value: p.str(k + ".Value")})
	}
	return out
}

func lowerFirst(s string) string {
	if s == "" {
		return s
	}
	s, _, _ = strings.Cut(s, ".")
	return strings.ToLower(s[:1]) + s[1:]
}

// maxTags is how many tags an ELB resource may carry.
const maxTags = 50

// nameRE is what a load balancer's or target group's name may be: up to 32 letters,
// digits and hyphens, with no hyphen at either end.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,30}[A-Za-z0-9])?$`)

func checkName(kind, name string) *apiError {
	switch {
	case len(name) > 32:
		return errValidation("%s name cannot be longer than '32' characters", kind)
	case !nameRE.MatchString(name):
		return errValidation("%s name '%s' can only contain characters that are alphanumeric characters or hyphens(-), and must not begin or end with a hyphen", kind, name)
	}
	return nil
}

// Amazon Resource Names of ELB resources.
func (c *Cloud) elbARN(resource string) string {
	return "arn:aws:elasticloadbalancing:" + c.cfg.Region + ":" + c.ownerID + ":" + resource
}

// checkARN says whether s has the form of an ELB ARN of the kind ("loadbalancer",
// "targetgroup", "listener", "listener-rule").
func (c *Cloud) checkARN(kind, s string) *apiError {
	if !strings.HasPrefix(s, "arn:aws:elasticloadbalancing:") || !strings.Contains(s, ":"+kind+"/") {
		return errValidation("'%s' is not a valid %s ARN", s, strings.ReplaceAll(kind, "-", " "))
	}
	return nil
}

// requiredARN reads the required parameter name, an ARN of kind (loadbalancer,
// targetgroup, listener, listener-rule).
func (c *Cloud) requiredARN(p *eparams, name, kind string) (string, *apiError) {
	arn := p.requiredStr(name)
	if p.err != nil {
		return "", p.err
	}
	return arn, c.checkARN(kind, arn)
}

func hexID(n int) string {
	return newID("")[:n]
}

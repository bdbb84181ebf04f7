package cloud

import (
	"net/http"
	"strings"

	"github.com/kubelab/kubelab/internal/cloud/iampolicy"
)

// caller is who signed a request: the account (the cloud's static key pair, which may
// do everything) or a role session STS issued (which may do what the role's policies
// allow).
type caller struct {
	arn     string
	userID  string
	session *Session
}

// authDialect is how a service words authentication failures: EC2 its own way, the
// Query services (ELB, IAM, STS) theirs.
type authDialect int

const (
	ec2Dialect authDialect = iota
	queryDialect
)

func (d authDialect) invalidKey(id string) *apiError {
	if d == ec2Dialect {
		return errUnknownKey(id)
	}
	return &apiError{Code: "InvalidClientTokenId", Message: "The security token included in the request is invalid.", Status: http.StatusForbidden}
}

func (d authDialect) expired() *apiError {
	if d == ec2Dialect {
		return &apiError{Code: "RequestExpired", Message: "Request has expired.", Status: http.StatusBadRequest}
	}
	return &apiError{Code: "ExpiredToken", Message: "The security token included in the request is expired", Status: http.StatusForbidden}
}

// authenticate checks r's signature for service and returns its caller. Temporary
// credentials must come with their session token (X-Amz-Security-Token) and be unexpired.
func (c *Cloud) authenticate(r *http.Request, body []byte, service string, regions []string, d authDialect) (*caller, *apiError) {
	var sess *Session
	secretFor := func(id string) (string, *apiError) {
		if id == c.accessKey {
			return c.secretKey, nil
		}
		c.mu.Lock()
		s := c.sessions[id]
		c.mu.Unlock()
		if s == nil {
			return "", d.invalidKey(id)
		}
		sess = s
		return s.SecretAccessKey, nil
	}
	if _, aerr := verifySigV4(r, body, sigv4Check{secretFor, regions, service, c.now()}); aerr != nil {
		return nil, aerr
	}
	if sess == nil {
		return &caller{arn: "arn:aws:iam::" + c.ownerID + ":root", userID: c.ownerID}, nil
	}
	if r.Header.Get("X-Amz-Security-Token") != sess.Token {
		return nil, d.invalidKey(sess.AccessKeyID)
	}
	if !c.now().Before(sess.Expiration) {
		return nil, d.expired()
	}
	return &caller{arn: sess.ARN(c.ownerID), userID: sess.RoleID + ":" + sess.SessionName, session: sess}, nil
}

// authResource is one (action, resource) pair a request needs allowed, with the
// condition keys of that resource (its tags, the request's tags).
type authResource struct {
	// action overrides the request's action (ec2:CreateTags for tags on create).
	action string
	arn    string
	ctx    map[string][]string
}

// denial words a refusal: who, the action and the resource, and whether a Deny
// statement refused it.
type denial func(who, action, resource string, explicit bool) *apiError

func denyReason(action string, explicit bool) string {
	if explicit {
		return "with an explicit deny in an identity-based policy"
	}
	return "because no identity-based policy allows the " + action + " action"
}

// unauthorizedOperation is EC2's refusal.
func unauthorizedOperation(who, action, resource string, explicit bool) *apiError {
	return &apiError{Code: "UnauthorizedOperation", Status: http.StatusForbidden,
		Message: "You are not authorized to perform this operation. User: " + who + " is not authorized to perform: " + action +
			" on resource: " + resource + " " + denyReason(action, explicit)}
}

// accessDenied is the Query services' refusal.
func accessDenied(who, action, resource string, explicit bool) *apiError {
	return &apiError{Code: "AccessDenied", Status: http.StatusForbidden,
		Message: "User: " + who + " is not authorized to perform: " + action + " on resource: " + resource + " " + denyReason(action, explicit)}
}

// authorize checks that who may do action on every resource: always for the account,
// by the role's inline and attached policies for a session.
func (c *Cloud) authorize(who *caller, action string, resources []authResource, deny denial) *apiError {
	if who == nil || who.session == nil {
		return nil
	}
	c.mu.Lock()
	docs, role := c.roleDocsLocked(who.session)
	c.mu.Unlock()
	global := map[string][]string{
		"aws:PrincipalArn":     {who.session.RoleARN},
		"aws:PrincipalAccount": {c.ownerID},
		"aws:userid":           {who.userID},
		"aws:RequestedRegion":  {c.cfg.Region},
	}
	if role != nil {
		for _, t := range role.Tags {
			global["aws:PrincipalTag/"+t.Key] = []string{t.Value}
		}
	}
	if len(resources) == 0 {
		resources = []authResource{{arn: "*"}}
	}
	for _, res := range resources {
		act := action
		if res.action != "" {
			act = res.action
		}
		ctx := make(map[string][]string, len(global)+len(res.ctx))
		for k, v := range global {
			ctx[k] = v
		}
		for k, v := range res.ctx {
			ctx[k] = v
		}
		switch iampolicy.Evaluate(iampolicy.Request{Action: act, Resource: res.arn, Context: ctx}, docs...) {
		case iampolicy.Allow:
			continue
		case iampolicy.ExplicitDeny:
			c.log.Info("request denied", "caller", who.arn, "action", act, "resource", res.arn, "explicit", true)
			return deny(who.arn, act, res.arn, true)
		default:
			c.log.Info("request denied", "caller", who.arn, "action", act, "resource", res.arn, "explicit", false)
			return deny(who.arn, act, res.arn, false)
		}
	}
	return nil
}

// roleDocsLocked parses the policies of a session's role: its inline policies and the
// managed policies attached to it. A role deleted (or deleted and made again) since
// the session began has none.
func (c *Cloud) roleDocsLocked(s *Session) ([]*iampolicy.Document, *Role) {
	r := c.roles[strings.ToLower(s.RoleName)]
	if r == nil || r.ID != s.RoleID {
		return nil, nil
	}
	var docs []*iampolicy.Document
	add := func(text string) {
		if d, err := iampolicy.Parse(text, iampolicy.ParseOptions{}); err == nil {
			docs = append(docs, d)
		}
	}
	for _, k := range sortedKeys(r.Inline) {
		add(r.Inline[k])
	}
	for _, arn := range r.Attached {
		if mp := c.policyLocked(arn); mp != nil {
			add(mp.Document)
		}
	}
	return docs, r
}

// Condition keys of tags.

// requestTagKeys are the condition keys of the tags a request puts on what it creates.
func requestTagKeys(tags []Tag) map[string][]string {
	out := map[string][]string{}
	var keys []string
	for _, t := range tags {
		out["aws:RequestTag/"+t.Key] = []string{t.Value}
		keys = append(keys, t.Key)
	}
	if len(keys) > 0 {
		out["aws:TagKeys"] = keys
	}
	return out
}

// resourceTagKeys are the condition keys of an existing resource's tags (prefix "ec2").
func resourceTagKeys(prefix string, tags []Tag) map[string][]string {
	out := map[string][]string{}
	for _, t := range tags {
		out[prefix+":ResourceTag/"+t.Key] = []string{t.Value}
		if prefix != "aws" {
			out["aws:ResourceTag/"+t.Key] = []string{t.Value}
		}
	}
	return out
}

func mergeKeys(ms ...map[string][]string) map[string][]string {
	out := map[string][]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

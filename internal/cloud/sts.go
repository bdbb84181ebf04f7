package cloud

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/kubelab/kubelab/internal/cloud/iampolicy"
)

// The STS API: the Query protocol of Version 2011-06-15 on the EC2 API's endpoint, told
// apart by its signing name (or, for the unsigned AssumeRoleWithWebIdentity, by its
// version). Requests may be signed for the cloud's region or for us-east-1 (STS's
// global endpoint).
const (
	stsAPIVersion  = "2011-06-15"
	stsSigningName = "sts"
	stsNamespace   = "https://sts.amazonaws.com/doc/" + stsAPIVersion + "/"
)

// serveSTS answers one STS request.
func (c *Cloud) serveSTS(w http.ResponseWriter, r *http.Request, body []byte, form url.Values, ferr error, reqID string, start time.Time) {
	name := form.Get("Action")
	fail := func(aerr *apiError) {
		c.log.Info("action failed", "action", name, "code", aerr.Code, "message", aerr.Message, "requestId", reqID)
		writeQueryError(w, stsNamespace, reqID, aerr)
	}
	var who *caller
	if name != "AssumeRoleWithWebIdentity" {
		var aerr *apiError
		if who, aerr = c.authenticate(r, body, stsSigningName, []string{c.cfg.Region, iamRegion}, queryDialect); aerr != nil {
			fail(aerr)
			return
		}
	}
	if ferr != nil {
		fail(errValidation("The request body is not form-encoded: %v", ferr))
		return
	}
	if v := form.Get("Version"); v != stsAPIVersion {
		fail(errValidation("Version '%s' is not %s, the version this service speaks", v, stsAPIVersion))
		return
	}
	p := &eparams{params: &params{v: form}}
	var result any
	var aerr *apiError
	switch name {
	case "":
		aerr = &apiError{Code: "MissingAction", Message: "Missing Action", Status: http.StatusBadRequest}
	case "AssumeRoleWithWebIdentity":
		result, aerr = c.assumeRoleWithWebIdentity(r.Context(), p)
	case "GetCallerIdentity":
		result = &struct {
			ARN     string `xml:"Arn"`
			UserID  string `xml:"UserId"`
			Account string `xml:"Account"`
		}{who.arn, who.userID, c.ownerID}
	default:
		aerr = &apiError{Code: "InvalidAction", Message: "Could not find operation " + name + " for version " + stsAPIVersion, Status: http.StatusBadRequest}
	}
	if aerr == nil && p.err != nil {
		aerr = p.err
	}
	if aerr != nil {
		fail(aerr)
		return
	}
	inner, err := marshalInner(result)
	if err != nil {
		fail(errInternal(err))
		return
	}
	writeQueryResult(w, stsNamespace, name, inner, reqID)
	c.log.Debug("action", "action", name, "requestId", reqID, "duration", time.Since(start))
}

// STS's errors.

func errInvalidIdentityToken(format string, args ...any) *apiError {
	return elbErr("InvalidIdentityToken", format, args...)
}

func errNotAuthorizedWebIdentity() *apiError {
	return iamErr("AccessDenied", http.StatusForbidden, "Not authorized to perform sts:AssumeRoleWithWebIdentity")
}

var sessionNameRE = regexp.MustCompile(`^[\w+=,.@-]*$`)

type xmlCredentials struct {
	AccessKeyID     string `xml:"AccessKeyId"`
	SecretAccessKey string `xml:"SecretAccessKey"`
	SessionToken    string `xml:"SessionToken"`
	Expiration      string `xml:"Expiration"`
}

type xmlAssumedRoleUser struct {
	ARN           string `xml:"Arn"`
	AssumedRoleID string `xml:"AssumedRoleId"`
}

type assumeRoleWithWebIdentityResult struct {
	Credentials     xmlCredentials     `xml:"Credentials"`
	Subject         string             `xml:"SubjectFromWebIdentityToken"`
	AssumedRoleUser xmlAssumedRoleUser `xml:"AssumedRoleUser"`
	Provider        string             `xml:"Provider"`
	Audience        string             `xml:"Audience"`
}

// assumeRoleWithWebIdentity checks an OIDC token (its issuer an IAM OIDC provider of the
// account, its audience one of the provider's client ids, its lifetime, its signature
// by the issuer's published keys) and the role's trust policy, then issues temporary
// credentials of the role.
func (c *Cloud) assumeRoleWithWebIdentity(ctx context.Context, p *eparams) (any, *apiError) {
	roleARN := p.requiredStr("RoleArn")
	sessionName := p.requiredStr("RoleSessionName")
	token := p.requiredStr("WebIdentityToken")
	dur := p.intIn("DurationSeconds", 900, 43200, 3600)
	if p.err != nil {
		return nil, p.err
	}
	if len(sessionName) < 2 || len(sessionName) > 64 {
		return nil, errValidation("1 validation error detected: Value '%s' at 'roleSessionName' failed to satisfy constraint: Member must have length between 2 and 64", sessionName)
	}
	if !sessionNameRE.MatchString(sessionName) {
		return nil, errValidation("1 validation error detected: Value '%s' at 'roleSessionName' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]*", sessionName)
	}
	if len(roleARN) < 20 || len(roleARN) > 2048 {
		return nil, errValidation("1 validation error detected: Value '%s' at 'roleArn' failed to satisfy constraint: Member must have length greater than or equal to 20", roleARN)
	}
	if p.has("Policy") || p.has("PolicyArns.member.1") {
		return nil, errValidation("Session policies are not supported by this cloud.")
	}
	tok, aerr := parseJWT(token)
	if aerr != nil {
		return nil, aerr
	}
	key := issuerKey(tok.claims.Issuer)
	c.mu.Lock()
	prov := c.oidcProviders[c.iamARN("oidc-provider/"+key)]
	c.mu.Unlock()
	if prov == nil || tok.claims.Issuer == "" {
		return nil, errInvalidIdentityToken("No OpenIDConnect provider found in your account for %s", tok.claims.Issuer)
	}
	aud := ""
	for _, a := range tok.claims.Audience {
		for _, id := range prov.ClientIDs {
			if a == id && aud == "" {
				aud = a
			}
		}
	}
	if aud == "" {
		return nil, errInvalidIdentityToken("Incorrect token audience")
	}
	if aerr := tok.checkTimes(c.now()); aerr != nil {
		return nil, aerr
	}
	keys, aerr := c.fetchIssuerKeys(ctx, prov, tok.claims.Issuer)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := tok.verify(keys); aerr != nil {
		return nil, aerr
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	role := c.roleByARNLocked(roleARN)
	if role == nil {
		return nil, errNotAuthorizedWebIdentity()
	}
	trust, err := iampolicy.Parse(role.TrustPolicy, iampolicy.ParseOptions{Trust: true})
	if err != nil {
		return nil, errNotAuthorizedWebIdentity()
	}
	req := iampolicy.Request{PrincipalType: "Federated", Principal: prov.ARN, Action: "sts:AssumeRoleWithWebIdentity",
		Context: map[string][]string{
			key + ":sub":            {tok.claims.Subject},
			key + ":aud":            {aud},
			"aws:FederatedProvider": {prov.ARN},
		}}
	if iampolicy.Evaluate(req, trust) != iampolicy.Allow {
		return nil, errNotAuthorizedWebIdentity()
	}
	if dur > role.MaxSessionDuration {
		return nil, errValidation("The requested DurationSeconds exceeds the MaxSessionDuration set for this role.")
	}
	s, aerr := c.issueSessionLocked(role, sessionName, time.Duration(dur)*time.Second, "")
	if aerr != nil {
		return nil, aerr
	}
	return &assumeRoleWithWebIdentityResult{
		Credentials:     xmlCredentials{s.AccessKeyID, s.SecretAccessKey, s.Token, ts(s.Expiration)},
		Subject:         tok.claims.Subject,
		AssumedRoleUser: xmlAssumedRoleUser{s.ARN(c.ownerID), s.RoleID + ":" + s.SessionName},
		Provider:        tok.claims.Issuer,
		Audience:        aud,
	}, nil
}

// roleByARNLocked finds a role of the account by its ARN (nil when there is none).
func (c *Cloud) roleByARNLocked(arn string) *Role {
	rest, ok := strings.CutPrefix(arn, "arn:aws:iam::"+c.ownerID+":role/")
	if !ok {
		return nil
	}
	name := rest[strings.LastIndex(rest, "/")+1:]
	r := c.roles[strings.ToLower(name)]
	if r == nil || r.ARN != arn {
		return nil
	}
	return r
}

// issueSessionLocked makes and keeps temporary credentials of role, valid for d; the
// sessions expired are dropped in the same write.
func (c *Cloud) issueSessionLocked(role *Role, name string, d time.Duration, instanceID string) (*Session, *apiError) {
	now := c.now().UTC()
	s := &Session{
		AccessKeyID: iamID("ASIA")[:20], SecretAccessKey: randomBase64(30), Token: randomBase64(120),
		Expiration: now.Add(d).Truncate(time.Second), RoleARN: role.ARN, RoleName: role.Name, RoleID: role.ID,
		SessionName: name, InstanceID: instanceID, Issued: now,
	}
	changes := []change{put(bucketSessions, s.AccessKeyID, s)}
	var expired []string
	for id, old := range c.sessions {
		if !now.Before(old.Expiration) {
			expired = append(expired, id)
			changes = append(changes, del(bucketSessions, id))
		}
	}
	if aerr := c.persist(changes...); aerr != nil {
		return nil, aerr
	}
	for _, id := range expired {
		delete(c.sessions, id)
	}
	c.sessions[s.AccessKeyID] = s
	return s, nil
}

func randomBase64(n int) string {
	b := make([]byte, n)
	io.ReadFull(rand.Reader, b)
	return base64.StdEncoding.EncodeToString(b)
}

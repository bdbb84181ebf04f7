package cloud

import (
	"encoding/json"
	"github.com/kubelab/kubelab/internal/cloud/iampolicy"
	"strings"
	"time"
)

// launchProfileLocked resolves RunInstances' IamInstanceProfile (by ARN or by name) to
// the profile's ARN; "" when none is given.
func (c *Cloud) launchProfileLocked(arn, name string) (string, *apiError) {
	switch {
	case arn != "" && name != "":
		return "", errf("InvalidParameterCombination", "The parameter 'iamInstanceProfile.name' may not be used in combination with 'iamInstanceProfile.arn'")
	case arn != "":
		if c.profileByARNLocked(arn) == nil {
			return "", errf("InvalidParameterValue", "Value (%s) for parameter iamInstanceProfile.arn is invalid. Invalid IAM Instance Profile ARN", arn)
		}
		return arn, nil
	case name != "":
		ip := c.profiles[strings.ToLower(name)]
		if ip == nil || ip.Name != name {
			return "", errf("InvalidParameterValue", "Value (%s) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name", name)
		}
		return ip.ARN, nil
	}
	return "", nil
}

func (c *Cloud) profileByARNLocked(arn string) *InstanceProfile {
	if arn == "" {
		return nil
	}
	for _, ip := range c.profiles {
		if ip.ARN == arn {
			return ip
		}
	}
	return nil
}

// Instance profile credentials last six hours; IMDS hands out new ones from a quarter
// of an hour before the old ones expire (AWS: at least five minutes before).
const (
	instanceCredsLifetime = 6 * time.Hour
	instanceCredsRefresh  = 15 * time.Minute
)

// instanceCredsLocked returns the session IMDS serves for an instance's profile role,
// issuing a new one when there is none or it is close to expiry. nil when the
// instance has no profile or its profile no role.
func (c *Cloud) instanceCredsLocked(inst *Instance) (*Session, *Role, *InstanceProfile) {
	ip := c.profileByARNLocked(inst.InstanceProfile)
	if ip == nil || len(ip.Roles) == 0 {
		return nil, nil, ip
	}
	role := c.roles[strings.ToLower(ip.Roles[0])]
	if role == nil {
		return nil, nil, ip
	}
	if !ec2MayAssume(role) {
		return nil, role, ip
	}
	now := c.now()
	var cur *Session
	for _, s := range c.sessions {
		if s.InstanceID == inst.ID && s.RoleID == role.ID && (cur == nil || s.Issued.After(cur.Issued)) {
			cur = s
		}
	}
	if cur != nil && now.Add(instanceCredsRefresh).Before(cur.Expiration) {
		return cur, role, ip
	}
	s, aerr := c.issueSessionLocked(role, inst.ID, instanceCredsLifetime, inst.ID)
	if aerr != nil {
		c.log.Error("issue instance profile credentials", "instance", inst.ID, "err", aerr)
		return cur, role, ip
	}
	return s, role, ip
}

// imdsIAMLocked adds the instance's iam/ entries to an IMDS tree: iam/info and
// iam/security-credentials/<role>.
func (c *Cloud) imdsIAMLocked(inst *Instance, t map[string]string) {
	s, role, ip := c.instanceCredsLocked(inst)
	md := "/latest/meta-data/iam/"
	if s == nil && role != nil {
		// The role's trust policy does not let EC2 assume it.
		t[md+"info"] = `{"Code":"AssumeRoleUnauthorizedAccess","Message":"EC2 cannot assume the role ` + role.Name + `."}`
		return
	}
	if s == nil {
		return
	}
	info, _ := json.MarshalIndent(struct {
		Code               string
		LastUpdated        string
		InstanceProfileArn string
		InstanceProfileID  string `json:"InstanceProfileId"`
	}{"Success", imdsTime(s.Issued), ip.ARN, ip.ID}, "", "  ")
	creds, _ := json.MarshalIndent(struct {
		Code            string
		LastUpdated     string
		Type            string
		AccessKeyID     string `json:"AccessKeyId"`
		SecretAccessKey string
		Token           string
		Expiration      string
	}{"Success", imdsTime(s.Issued), "AWS-HMAC", s.AccessKeyID, s.SecretAccessKey, s.Token, imdsTime(s.Expiration)}, "", "  ")
	t[md+"info"] = string(info)
	t[md+"security-credentials/"+role.Name] = string(creds)
}

func imdsTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// ec2MayAssume says whether a role's trust policy lets EC2 (the service principal
// ec2.amazonaws.com) assume it for an instance.
func ec2MayAssume(r *Role) bool {
	doc, err := iampolicy.Parse(r.TrustPolicy, iampolicy.ParseOptions{Trust: true})
	if err != nil {
		return false
	}
	req := iampolicy.Request{PrincipalType: "Service", Principal: "ec2.amazonaws.com", Action: "sts:AssumeRole"}
	return iampolicy.Evaluate(req, doc) == iampolicy.Allow
}

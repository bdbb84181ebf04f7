package cloud

import (
	"slices"
	"strings"
)

type xmlPolicy struct {
	PolicyName       string      `xml:"PolicyName"`
	DefaultVersionID string      `xml:"DefaultVersionId"`
	PolicyID         string      `xml:"PolicyId"`
	Path             string      `xml:"Path"`
	ARN              string      `xml:"Arn"`
	AttachmentCount  int         `xml:"AttachmentCount"`
	BoundaryCount    int         `xml:"PermissionsBoundaryUsageCount"`
	IsAttachable     bool        `xml:"IsAttachable"`
	Description      string      `xml:"Description,omitempty"`
	CreateDate       string      `xml:"CreateDate"`
	UpdateDate       string      `xml:"UpdateDate"`
	Tags             []xmlIAMTag `xml:"Tags>member,omitempty"`
}

func (c *Cloud) toXMLPolicyLocked(mp *ManagedPolicy) xmlPolicy {
	n := 0
	for _, r := range c.roles {
		if slices.Contains(r.Attached, mp.ARN) {
			n++
		}
	}
	return xmlPolicy{PolicyName: mp.Name, DefaultVersionID: "v1", PolicyID: mp.ID, Path: mp.Path, ARN: mp.ARN,
		AttachmentCount: n, IsAttachable: true, Description: mp.Description, CreateDate: ts(mp.CreateDate),
		UpdateDate: ts(mp.CreateDate), Tags: iamXMLTags(mp.Tags)}
}

func (c *Cloud) createPolicy(p *eparams) (any, *apiError) {
	name := p.iamName("PolicyName", 128)
	path := p.iamPath()
	doc := p.policyDoc("PolicyDocument", false)
	desc := p.str("Description")
	tags := p.iamTags()
	if p.err != nil {
		return nil, p.err
	}
	if len(doc) > maxManagedPolicySize {
		return nil, errLimitExceeded("Cannot exceed quota for PolicySize: %d", maxManagedPolicySize)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, mp := range c.policies {
		if strings.EqualFold(mp.Name, name) {
			return nil, errEntityExists("A policy called %s already exists. Duplicate names are not allowed.", name)
		}
	}
	mp := &ManagedPolicy{Name: name, ID: iamID("ANPA"), ARN: c.iamARN("policy" + path + name), Path: path,
		Description: desc, Document: doc, CreateDate: c.now().UTC(), Tags: tags}
	if aerr := c.persist(put(bucketPolicies, mp.ARN, mp)); aerr != nil {
		return nil, aerr
	}
	c.policies[mp.ARN] = mp
	return &struct {
		Policy xmlPolicy `xml:"Policy"`
	}{c.toXMLPolicyLocked(mp)}, nil
}

func (c *Cloud) getPolicy(p *eparams) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	mp, aerr := c.policyArgLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	return &struct {
		Policy xmlPolicy `xml:"Policy"`
	}{c.toXMLPolicyLocked(mp)}, nil
}

func (c *Cloud) getPolicyVersion(p *eparams) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	mp, aerr := c.policyArgLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	v := p.requiredStr("VersionId")
	if p.err != nil {
		return nil, p.err
	}
	if v != "v1" {
		return nil, errNoSuchEntity("Policy %s version %s does not exist or is not attachable.", mp.ARN, v)
	}
	type version struct {
		Document         string `xml:"Document"`
		VersionID        string `xml:"VersionId"`
		IsDefaultVersion bool   `xml:"IsDefaultVersion"`
		CreateDate       string `xml:"CreateDate"`
	}
	return &struct {
		Version version `xml:"PolicyVersion"`
	}{version{policyText(mp.Document), "v1", true, ts(mp.CreateDate)}}, nil
}

func (c *Cloud) deletePolicy(p *eparams) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	mp, aerr := c.policyArgLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	if c.policies[mp.ARN] == nil {
		return nil, iamErr("AccessDenied", 403, "AWS managed policies cannot be deleted.")
	}
	for _, r := range c.roles {
		if slices.Contains(r.Attached, mp.ARN) {
			return nil, errDeleteConflict("Cannot delete a policy attached to entities.")
		}
	}
	if aerr := c.persist(del(bucketPolicies, mp.ARN)); aerr != nil {
		return nil, aerr
	}
	delete(c.policies, mp.ARN)
	return nil, nil
}

type xmlInstanceProfile struct {
	ID         string    `xml:"InstanceProfileId"`
	Roles      []xmlRole `xml:"Roles>member"`
	Name       string    `xml:"InstanceProfileName"`
	Path       string    `xml:"Path"`
	ARN        string    `xml:"Arn"`
	CreateDate string    `xml:"CreateDate"`
}

func (c *Cloud) toXMLProfileLocked(ip *InstanceProfile) xmlInstanceProfile {
	out := xmlInstanceProfile{ID: ip.ID, Roles: []xmlRole{}, Name: ip.Name, Path: ip.Path, ARN: ip.ARN, CreateDate: ts(ip.CreateDate)}
	for _, n := range ip.Roles {
		if r := c.roles[strings.ToLower(n)]; r != nil {
			out.Roles = append(out.Roles, toXMLRole(r))
		}
	}
	return out
}

func (c *Cloud) createInstanceProfile(p *eparams) (any, *apiError) {
	name := p.iamName("InstanceProfileName", 128)
	path := p.iamPath()
	if p.err != nil {
		return nil, p.err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.profiles[strings.ToLower(name)] != nil {
		return nil, errEntityExists("Instance Profile %s already exists.", name)
	}
	ip := &InstanceProfile{Name: name, ID: iamID("AIPA"), ARN: c.iamARN("instance-profile" + path + name), Path: path, CreateDate: c.now().UTC()}
	if aerr := c.persist(put(bucketProfiles, strings.ToLower(name), ip)); aerr != nil {
		return nil, aerr
	}
	c.profiles[strings.ToLower(name)] = ip
	return &struct {
		Profile xmlInstanceProfile `xml:"InstanceProfile"`
	}{c.toXMLProfileLocked(ip)}, nil
}

func (c *Cloud) profileLocked(p *eparams) (*InstanceProfile, *apiError) {
	name := p.iamName("InstanceProfileName", 128)
	if p.err != nil {
		return nil, p.err
	}
	ip := c.profiles[strings.ToLower(name)]
	if ip == nil {
		return nil, errNoSuchEntity("Instance Profile %s cannot be found.", name)
	}
	return ip, nil
}

func (c *Cloud) addRoleToInstanceProfile(p *eparams) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ip, aerr := c.profileLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	r, aerr := c.roleLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	if len(ip.Roles) >= 1 {
		return nil, errLimitExceeded("Cannot exceed quota for InstanceSessionsPerInstanceProfile: 1")
	}
	n := *ip
	n.Roles = []string{r.Name}
	if aerr := c.persist(put(bucketProfiles, strings.ToLower(n.Name), &n)); aerr != nil {
		return nil, aerr
	}
	c.profiles[strings.ToLower(n.Name)] = &n
	return nil, nil
}

func (c *Cloud) getInstanceProfile(p *eparams) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ip, aerr := c.profileLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	return &struct {
		Profile xmlInstanceProfile `xml:"InstanceProfile"`
	}{c.toXMLProfileLocked(ip)}, nil
}

func (c *Cloud) removeRoleFromInstanceProfile(p *eparams) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ip, aerr := c.profileLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	r, aerr := c.roleLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	i := slices.Index(ip.Roles, r.Name)
	if i < 0 {
		return nil, errNoSuchEntity("Role %s in Instance Profile %s cannot be found.", r.Name, ip.Name)
	}
	n := *ip
	n.Roles = slices.Delete(slices.Clone(ip.Roles), i, i+1)
	if aerr := c.persist(put(bucketProfiles, strings.ToLower(n.Name), &n)); aerr != nil {
		return nil, aerr
	}
	c.profiles[strings.ToLower(n.Name)] = &n
	return nil, nil
}

func (c *Cloud) deleteInstanceProfile(p *eparams) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ip, aerr := c.profileLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	if len(ip.Roles) > 0 {
		return nil, errDeleteConflict("Cannot delete entity, must remove roles from instance profile first.")
	}
	if aerr := c.persist(del(bucketProfiles, strings.ToLower(ip.Name))); aerr != nil {
		return nil, aerr
	}
	delete(c.profiles, strings.ToLower(ip.Name))
	return nil, nil
}

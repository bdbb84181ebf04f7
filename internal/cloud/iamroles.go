package cloud

import (
	"slices"
	"strings"
)

type xmlRole struct {
	Path               string      `xml:"Path"`
	RoleName           string      `xml:"RoleName"`
	RoleID             string      `xml:"RoleId"`
	ARN                string      `xml:"Arn"`
	CreateDate         string      `xml:"CreateDate"`
	AssumeRolePolicy   string      `xml:"AssumeRolePolicyDocument"`
	Description        string      `xml:"Description,omitempty"`
	MaxSessionDuration int         `xml:"MaxSessionDuration"`
	Tags               []xmlIAMTag `xml:"Tags>member,omitempty"`
}

func toXMLRole(r *Role) xmlRole {
	return xmlRole{Path: r.Path, RoleName: r.Name, RoleID: r.ID, ARN: r.ARN, CreateDate: ts(r.CreateDate),
		AssumeRolePolicy: policyText(r.TrustPolicy), Description: r.Description, MaxSessionDuration: r.MaxSessionDuration,
		Tags: iamXMLTags(r.Tags)}
}

func (c *Cloud) createRole(p *eparams) (any, *apiError) {
	name := p.iamName("RoleName", 64)
	path := p.iamPath()
	trust := p.policyDoc("AssumeRolePolicyDocument", true)
	desc := p.str("Description")
	maxDur := p.intIn("MaxSessionDuration", 3600, 43200, 3600)
	tags := p.iamTags()
	if p.err != nil {
		return nil, p.err
	}
	if len(trust) > maxTrustPolicySize {
		return nil, errLimitExceeded("Cannot exceed quota for ACLSizePerRole: %d", maxTrustPolicySize)
	}
	if len(desc) > 1000 {
		return nil, errValidation("1 validation error detected: Value at 'description' failed to satisfy constraint: Member must have length less than or equal to 1000")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.roles[strings.ToLower(name)] != nil {
		return nil, errEntityExists("Role with name %s already exists.", name)
	}
	if len(c.roles) >= maxRoles {
		return nil, errLimitExceeded("Cannot exceed quota for RolesPerAccount: %d", maxRoles)
	}
	r := &Role{Name: name, ID: iamID("AROA"), ARN: c.iamARN("role" + path + name), Path: path, TrustPolicy: trust,
		Description: desc, MaxSessionDuration: maxDur, CreateDate: c.now().UTC(), Tags: tags}
	if aerr := c.persist(put(bucketRoles, strings.ToLower(name), r)); aerr != nil {
		return nil, aerr
	}
	c.roles[strings.ToLower(name)] = r
	return &struct {
		Role xmlRole `xml:"Role"`
	}{toXMLRole(r)}, nil
}

// roleLocked reads RoleName and finds the role.
func (c *Cloud) roleLocked(p *eparams) (*Role, *apiError) {
	name := p.iamName("RoleName", 64)
	if p.err != nil {
		return nil, p.err
	}
	r := c.roles[strings.ToLower(name)]
	if r == nil {
		return nil, errRoleNotFound(name)
	}
	return r, nil
}

func (c *Cloud) getRole(p *eparams) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, aerr := c.roleLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	return &struct {
		Role xmlRole `xml:"Role"`
	}{toXMLRole(r)}, nil
}

func (c *Cloud) listRoles(p *eparams) (any, *apiError) {
	prefix := p.str("PathPrefix")
	c.mu.Lock()
	defer c.mu.Unlock()
	out := struct {
		Roles       []xmlRole `xml:"Roles>member"`
		IsTruncated bool      `xml:"IsTruncated"`
	}{Roles: []xmlRole{}}
	for _, k := range sortedKeys(c.roles) {
		if r := c.roles[k]; strings.HasPrefix(r.Path, prefix) {
			out.Roles = append(out.Roles, toXMLRole(r))
		}
	}
	return &out, nil
}

func (c *Cloud) deleteRole(p *eparams) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, aerr := c.roleLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	switch {
	case len(r.Inline) > 0:
		return nil, errDeleteConflict("Cannot delete entity, must delete policies first.")
	case len(r.Attached) > 0:
		return nil, errDeleteConflict("Cannot delete entity, must detach all policies first.")
	}
	for _, ip := range c.profiles {
		if slices.Contains(ip.Roles, r.Name) {
			return nil, errDeleteConflict("Cannot delete entity, must remove roles from instance profile first.")
		}
	}
	if aerr := c.persist(del(bucketRoles, strings.ToLower(r.Name))); aerr != nil {
		return nil, aerr
	}
	delete(c.roles, strings.ToLower(r.Name))
	return nil, nil
}

func (c *Cloud) updateAssumeRolePolicy(p *eparams) (any, *apiError) {
	doc := p.policyDoc("PolicyDocument", true)
	if p.err != nil {
		return nil, p.err
	}
	if len(doc) > maxTrustPolicySize {
		return nil, errLimitExceeded("Cannot exceed quota for ACLSizePerRole: %d", maxTrustPolicySize)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r, aerr := c.roleLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	nr := r.clone()
	nr.TrustPolicy = doc
	if aerr := c.saveRoleLocked(nr); aerr != nil {
		return nil, aerr
	}
	return nil, nil
}

// saveRoleLocked persists a changed copy of a role and then keeps it.
func (c *Cloud) saveRoleLocked(r *Role) *apiError {
	if aerr := c.persist(put(bucketRoles, strings.ToLower(r.Name), r)); aerr != nil {
		return aerr
	}
	c.roles[strings.ToLower(r.Name)] = r
	return nil
}

func (c *Cloud) putRolePolicy(p *eparams) (any, *apiError) {
	pname := p.iamName("PolicyName", 128)
	doc := p.policyDoc("PolicyDocument", false)
	if p.err != nil {
		return nil, p.err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	r, aerr := c.roleLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	nr := r.clone()
	nr.Inline[pname] = doc
	size := 0
	for _, d := range nr.Inline {
		size += len(d)
	}
	if size > maxInlinePolicyBytes {
		return nil, errLimitExceeded("Maximum policy size of %d bytes exceeded for role %s", maxInlinePolicyBytes, r.Name)
	}
	if aerr := c.saveRoleLocked(nr); aerr != nil {
		return nil, aerr
	}
	return nil, nil
}

// inlineLocked reads RoleName and PolicyName and finds the role's inline policy.
func (c *Cloud) inlineLocked(p *eparams) (*Role, string, *apiError) {
	pname := p.iamName("PolicyName", 128)
	r, aerr := c.roleLocked(p)
	if aerr != nil {
		return nil, "", aerr
	}
	for k := range r.Inline {
		if strings.EqualFold(k, pname) {
			return r, k, nil
		}
	}
	return nil, "", errNoSuchEntity("The role policy with name %s cannot be found.", pname)
}

func (c *Cloud) getRolePolicy(p *eparams) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, pname, aerr := c.inlineLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	return &struct {
		RoleName       string `xml:"RoleName"`
		PolicyName     string `xml:"PolicyName"`
		PolicyDocument string `xml:"PolicyDocument"`
	}{r.Name, pname, policyText(r.Inline[pname])}, nil
}

func (c *Cloud) deleteRolePolicy(p *eparams) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, pname, aerr := c.inlineLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	nr := r.clone()
	delete(nr.Inline, pname)
	if aerr := c.saveRoleLocked(nr); aerr != nil {
		return nil, aerr
	}
	return nil, nil
}

func (c *Cloud) listRolePolicies(p *eparams) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, aerr := c.roleLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	out := struct {
		Names       []string `xml:"PolicyNames>member"`
		IsTruncated bool     `xml:"IsTruncated"`
	}{Names: sortedKeys(r.Inline)}
	return &out, nil
}

// policyLocked finds a managed policy (the account's or AWS's) by ARN.
func (c *Cloud) policyLocked(arn string) *ManagedPolicy {
	if mp := c.policies[arn]; mp != nil {
		return mp
	}
	return awsManagedPolicies[arn]
}

// policyArg reads the required PolicyArn and finds the policy.
func (c *Cloud) policyArgLocked(p *eparams) (*ManagedPolicy, *apiError) {
	arn := p.requiredStr("PolicyArn")
	if p.err != nil {
		return nil, p.err
	}
	if !strings.HasPrefix(arn, "arn:aws:iam::") || !strings.Contains(arn, ":policy/") {
		return nil, errValidation("ARN %s is not valid.", arn)
	}
	mp := c.policyLocked(arn)
	if mp == nil {
		return nil, errNoSuchEntity("Policy %s does not exist or is not attachable.", arn)
	}
	return mp, nil
}

func (c *Cloud) attachRolePolicy(p *eparams) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, aerr := c.roleLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	mp, aerr := c.policyArgLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	if slices.Contains(r.Attached, mp.ARN) {
		return nil, nil
	}
	if len(r.Attached) >= maxAttachedPerRole {
		return nil, errLimitExceeded("Cannot exceed quota for PoliciesPerRole: %d", maxAttachedPerRole)
	}
	nr := r.clone()
	nr.Attached = append(nr.Attached, mp.ARN)
	if aerr := c.saveRoleLocked(nr); aerr != nil {
		return nil, aerr
	}
	return nil, nil
}

func (c *Cloud) detachRolePolicy(p *eparams) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, aerr := c.roleLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	arn := p.requiredStr("PolicyArn")
	if p.err != nil {
		return nil, p.err
	}
	i := slices.Index(r.Attached, arn)
	if i < 0 {
		return nil, errNoSuchEntity("Policy %s was not found.", arn)
	}
	nr := r.clone()
	nr.Attached = slices.Delete(nr.Attached, i, i+1)
	if aerr := c.saveRoleLocked(nr); aerr != nil {
		return nil, aerr
	}
	return nil, nil
}

func (c *Cloud) listAttachedRolePolicies(p *eparams) (any, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r, aerr := c.roleLocked(p)
	if aerr != nil {
		return nil, aerr
	}
	type attached struct {
		PolicyName string `xml:"PolicyName"`
		PolicyArn  string `xml:"PolicyArn"`
	}
	out := struct {
		Policies    []attached `xml:"AttachedPolicies>member"`
		IsTruncated bool       `xml:"IsTruncated"`
	}{Policies: []attached{}}
	for _, arn := range r.Attached {
		if mp := c.policyLocked(arn); mp != nil {
			out.Policies = append(out.Policies, attached{mp.Name, arn})
		}
	}
	return &out, nil
}

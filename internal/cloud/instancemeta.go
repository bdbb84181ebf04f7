package cloud

import "strconv"

// Changing a running instance's metadata settings and giving it an instance profile, as
// EC2's ModifyInstanceMetadataOptions and AssociateIamInstanceProfile do: what
// RunInstances' MetadataOptions and IamInstanceProfile set at launch.

func init() {
	actions["ModifyInstanceMetadataOptions"] = (*Cloud).modifyInstanceMetadataOptions
	actions["AssociateIamInstanceProfile"] = (*Cloud).associateIamInstanceProfile
}

type modifyMetadataOptionsResponse struct {
	respBase
	InstanceID string          `xml:"instanceId"`
	Options    xmlMetadataOpts `xml:"instanceMetadataOptions"`
}

type xmlProfileAssociation struct {
	AssociationID string        `xml:"associationId"`
	InstanceID    string        `xml:"instanceId"`
	Profile       xmlIamProfile `xml:"iamInstanceProfile"`
	State         string        `xml:"state"`
}

type associateProfileResponse struct {
	respBase
	Association xmlProfileAssociation `xml:"iamInstanceProfileAssociation"`
}

// instanceForChangeLocked finds InstanceId's instance, which must not be terminated.
func (c *Cloud) instanceForChangeLocked(id string) (*Instance, *apiError) {
	if aerr := checkID("i-", id); aerr != nil {
		return nil, aerr
	}
	inst := c.instances[id]
	if inst == nil {
		return nil, errInstanceNotFound(id)
	}
	if inst.State == "terminated" || inst.State == "shutting-down" {
		return nil, errf("IncorrectInstanceState", "The instance '%s' is not in a state from which it can be modified.", id)
	}
	return inst, nil
}

// modifyInstanceMetadataOptions sets HttpTokens and HttpPutResponseHopLimit (each kept
// when not given); IMDS applies them to the next request.
func (c *Cloud) modifyInstanceMetadataOptions(p *params) (response, *apiError) {
	id := p.str("InstanceId")
	tokens := p.str("HttpTokens")
	hops := p.int("HttpPutResponseHopLimit")
	dry := p.dryRun()
	if p.err != nil {
		return nil, p.err
	}
	if id == "" {
		return nil, errMissing("InstanceId")
	}
	switch tokens {
	case "", "optional", "required":
	default:
		return nil, errInvalid("HttpTokens", tokens, "It must be optional or required.")
	}
	if p.str("HttpPutResponseHopLimit") != "" && (hops < 1 || hops > 64) {
		return nil, errInvalid("HttpPutResponseHopLimit", strconv.Itoa(hops), "It must be an integer from 1 to 64.")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	inst, aerr := c.instanceForChangeLocked(id)
	if aerr != nil {
		return nil, aerr
	}
	if dry {
		return nil, errDryRun()
	}
	ni := inst.clone()
	if tokens != "" {
		ni.HTTPTokens = tokens
	}
	if hops != 0 {
		ni.HopLimit = hops
	}
	if aerr := c.persist(put(bucketInstances, id, ni)); aerr != nil {
		return nil, aerr
	}
	c.instances[id] = ni
	return &modifyMetadataOptionsResponse{InstanceID: id,
		Options: xmlMetadataOpts{"pending", ni.HTTPTokens, ni.hopLimit(), "enabled"}}, nil
}

// associateIamInstanceProfile gives an instance without one the profile
// IamInstanceProfile.Arn or .Name; IMDS serves its role's credentials from then on.
func (c *Cloud) associateIamInstanceProfile(p *params) (response, *apiError) {
	id := p.str("InstanceId")
	arn, name := p.str("IamInstanceProfile.Arn"), p.str("IamInstanceProfile.Name")
	if p.err != nil {
		return nil, p.err
	}
	if id == "" {
		return nil, errMissing("InstanceId")
	}
	if arn == "" && name == "" {
		return nil, errMissing("IamInstanceProfile")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	inst, aerr := c.instanceForChangeLocked(id)
	if aerr != nil {
		return nil, aerr
	}
	profile, aerr := c.launchProfileLocked(arn, name)
	if aerr != nil {
		return nil, aerr
	}
	if inst.InstanceProfile != "" {
		return nil, errf("IncorrectState", "There is an existing association for instance %s", id)
	}
	ni := inst.clone()
	ni.InstanceProfile = profile
	if aerr := c.persist(put(bucketInstances, id, ni)); aerr != nil {
		return nil, aerr
	}
	c.instances[id] = ni
	ip := c.profileByARNLocked(profile)
	return &associateProfileResponse{Association: xmlProfileAssociation{AssociationID: newID("iip-assoc-"), InstanceID: id,
		Profile: xmlIamProfile{ARN: ip.ARN, ID: ip.ID}, State: "associating"}}, nil
}

package cloud

import "strings"

// ec2ARN is the ARN of an EC2 resource of kind (volume, instance, snapshot, …); id "*"
// names one not yet made.
func (c *Cloud) ec2ARN(kind, id string) string {
	return "arn:aws:ec2:" + c.cfg.Region + ":" + c.ownerID + ":" + kind + "/" + id
}

// ec2Kinds maps resource id prefixes to their ARN's resource type.
var ec2Kinds = map[string]string{"vol-": "volume", "i-": "instance", "snap-": "snapshot", "subnet-": "subnet", "vpc-": "vpc"}

// ec2ResourceLocked is the ARN and tag condition keys of an EC2 resource by id.
func (c *Cloud) ec2ResourceLocked(id string) authResource {
	prefix, _, _ := strings.Cut(id, "-")
	kind := ec2Kinds[prefix+"-"]
	if kind == "" {
		return authResource{arn: "*"}
	}
	var tags []Tag
	switch kind {
	case "volume":
		if v := c.volumes[id]; v != nil {
			tags = v.Tags
		}
	case "instance":
		if i := c.instances[id]; i != nil {
			tags = i.Tags
		}
	case "snapshot":
		if s := c.snapshots[id]; s != nil {
			tags = s.Tags
		}
	case "subnet":
		if s := c.subnets[id]; s != nil {
			tags = s.Tags
		}
	}
	return authResource{arn: c.ec2ARN(kind, id), ctx: resourceTagKeys("ec2", tags)}
}

// ec2AuthResources lists what an EC2 request needs allowed, as IAM's service
// authorization reference lists the resource types of each action: actions without
// resource-level permissions (Describe*) act on "*"; creating a resource acts on
// "<type>/*" with the request's tags as aws:RequestTag keys, and tagging it on create
// needs ec2:CreateTags with ec2:CreateAction.
func (c *Cloud) ec2AuthResources(action string, form map[string][]string) []authResource {
	p := &params{v: form} // a copy's reading errors are the action's to report
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []authResource
	created := func(kind, resourceType string) {
		tags := p.tagSpecs(resourceType)
		out = append(out, authResource{arn: c.ec2ARN(kind, "*"), ctx: requestTagKeys(tags)})
		if len(tags) > 0 {
			out = append(out, authResource{action: "ec2:CreateTags", arn: c.ec2ARN(kind, "*"),
				ctx: mergeKeys(requestTagKeys(tags), map[string][]string{"ec2:CreateAction": {action}})})
		}
	}
	existing := func(ids ...string) {
		for _, id := range ids {
			if id != "" {
				out = append(out, c.ec2ResourceLocked(id))
			}
		}
	}
	switch action {
	case "CreateVolume":
		created("volume", "volume")
		existing(p.str("SnapshotId"))
	case "DeleteVolume", "ModifyVolume":
		existing(p.str("VolumeId"))
	case "AttachVolume":
		existing(p.str("VolumeId"), p.str("InstanceId"))
	case "DetachVolume":
		existing(p.str("VolumeId"))
		inst := p.str("InstanceId")
		if v := c.volumes[p.str("VolumeId")]; inst == "" && v != nil && len(v.Attachments) > 0 {
			inst = v.Attachments[0].InstanceID
		}
		existing(inst)
	case "CreateSnapshot":
		existing(p.str("VolumeId"))
		created("snapshot", "snapshot")
	case "DeleteSnapshot":
		existing(p.str("SnapshotId"))
	case "RunInstances":
		created("instance", "instance")
	case "TerminateInstances", "StopInstances", "StartInstances":
		existing(p.list("InstanceId")...)
	case "ModifyInstanceMetadataOptions", "AssociateIamInstanceProfile":
		existing(p.str("InstanceId"))
	case "CreateTags", "DeleteTags":
		tags := requestTagKeys(p.tags("Tag"))
		for _, id := range p.list("ResourceId") {
			r := c.ec2ResourceLocked(id)
			if action == "CreateTags" {
				r.ctx = mergeKeys(r.ctx, tags)
			}
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		out = []authResource{{arn: "*"}}
	}
	return out
}

// elbAuthResources lists the ARNs an ELB request names (its load balancer, target
// group, listener, rule or tagged resources), "*" for one that names none.
func elbAuthResources(form map[string][]string) []authResource {
	p := &eparams{params: &params{v: form}}
	var out []authResource
	for _, k := range []string{"LoadBalancerArn", "TargetGroupArn", "ListenerArn", "RuleArn"} {
		if a := p.str(k); a != "" {
			out = append(out, authResource{arn: a})
		}
	}
	for _, a := range p.members("ResourceArns") {
		out = append(out, authResource{arn: a})
	}
	if len(out) == 0 {
		out = []authResource{{arn: "*"}}
	}
	return out
}

package cloud

import "strings"

func (c *Cloud) createTags(p *params) (response, *apiError) {
	ids := p.list("ResourceId")
	tags := p.tags("Tag")
	dry := p.dryRun()
	if p.err != nil {
		return nil, p.err
	}
	if len(ids) == 0 {
		return nil, errMissing("ResourceId")
	}
	if len(tags) == 0 {
		return nil, errMissing("Tag")
	}
	return c.retag(ids, dry, func(old []Tag) []Tag { return mergeTags(old, tags) })
}

func (c *Cloud) deleteTags(p *params) (response, *apiError) {
	ids := p.list("ResourceId")
	var dels []tagDel
	for _, k := range p.indexed("Tag") {
		key := p.str(k + ".Key")
		if key == "" {
			p.fail(errMissing(k + ".Key"))
			continue
		}
		_, hasValue := p.v[k+".Value"]
		dels = append(dels, tagDel{Key: key, Value: p.str(k + ".Value"), HasValue: hasValue})
	}
	dry := p.dryRun()
	if p.err != nil {
		return nil, p.err
	}
	if len(ids) == 0 {
		return nil, errMissing("ResourceId")
	}
	return c.retag(ids, dry, func(old []Tag) []Tag {
		if len(dels) == 0 {
			return nil // no Tag given: all tags go
		}
		return removeTags(old, dels)
	})
}

// retag applies change to the tags of every resource in ids: all or none.
func (c *Cloud) retag(ids []string, dry bool, edit func([]Tag) []Tag) (response, *apiError) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var changes []change
	vols, insts, snaps := map[string]*Volume{}, map[string]*Instance{}, map[string]*Snapshot{}
	subnets := map[string]*Subnet{}
	enis := map[string]*NetworkInterface{}
	var vpc *VPC
	for _, id := range dedupe(ids) {
		switch {
		case strings.HasPrefix(id, "vol-"):
			v := c.volumes[id]
			if v == nil {
				return nil, errVolumeNotFound(id)
			}
			nv := v.clone()
			nv.Tags = edit(nv.Tags)
			vols[id] = nv
			changes = append(changes, put(bucketVolumes, id, nv))
		case strings.HasPrefix(id, "i-"):
			i := c.instances[id]
			if i == nil {
				return nil, errInstanceNotFound(id)
			}
			ni := i.clone()
			ni.Tags = edit(ni.Tags)
			insts[id] = ni
			changes = append(changes, put(bucketInstances, id, ni))
		case strings.HasPrefix(id, "snap-"):
			s := c.snapshots[id]
			if s == nil {
				return nil, errSnapshotNotFound(id)
			}
			ns := s.clone()
			ns.Tags = edit(ns.Tags)
			snaps[id] = ns
			changes = append(changes, put(bucketSnapshots, id, ns))
		case strings.HasPrefix(id, "subnet-"):
			s := c.subnets[id]
			if s == nil {
				return nil, errSubnetNotFound(id)
			}
			ns := s.clone()
			ns.Tags = edit(ns.Tags)
			subnets[id] = ns
			changes = append(changes, put(bucketSubnets, id, ns))
		case strings.HasPrefix(id, "eni-"):
			n := c.enis[id]
			if n == nil {
				return nil, errENINotFound(id)
			}
			nn := n.clone()
			nn.Tags = edit(nn.Tags)
			enis[id] = nn
			changes = append(changes, put(bucketNetworkInterfaces, id, nn))
		case strings.HasPrefix(id, "vpc-"):
			if c.vpc.ID != id {
				return nil, errVPCNotFound(id)
			}
			nv := c.vpc.clone()
			nv.Tags = edit(nv.Tags)
			vpc = nv
			changes = append(changes, put(bucketVPCs, id, nv))
		default:
			return nil, errf("InvalidID", "The ID '%s' is not valid", id)
		}
	}
	if dry {
		return nil, errDryRun()
	}
	if aerr := c.persist(changes...); aerr != nil {
		return nil, aerr
	}
	for id, v := range vols {
		c.volumes[id] = v
	}
	for id, i := range insts {
		c.instances[id] = i
	}
	for id, s := range snaps {
		c.snapshots[id] = s
	}
	for id, s := range subnets {
		c.subnets[id] = s
	}
	for id, n := range enis {
		c.enis[id] = n
	}
	if vpc != nil {
		c.vpc = vpc
	}
	return &returnResponse{Return: true}, nil
}

package cloud

import (
	"strconv"
)

type xmlTag struct {
	Key   string `xml:"key"`
	Value string `xml:"value"`
}

func xmlTags(tags []Tag) []xmlTag {
	out := make([]xmlTag, len(tags))
	for i, t := range tags {
		out[i] = xmlTag{t.Key, t.Value}
	}
	return out
}

type xmlAttachment struct {
	VolumeID            string `xml:"volumeId"`
	InstanceID          string `xml:"instanceId"`
	Device              string `xml:"device"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime,omitempty"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xmlVolume struct {
	VolumeID           string          `xml:"volumeId"`
	Size               int             `xml:"size"`
	SnapshotID         string          `xml:"snapshotId"`
	AvailabilityZone   string          `xml:"availabilityZone"`
	Status             string          `xml:"status"`
	CreateTime         string          `xml:"createTime"`
	Attachments        []xmlAttachment `xml:"attachmentSet>item"`
	Tags               []xmlTag        `xml:"tagSet>item,omitempty"`
	VolumeType         string          `xml:"volumeType"`
	Iops               int             `xml:"iops,omitempty"`
	Throughput         int             `xml:"throughput,omitempty"`
	Encrypted          bool            `xml:"encrypted"`
	KmsKeyID           string          `xml:"kmsKeyId,omitempty"`
	MultiAttachEnabled bool            `xml:"multiAttachEnabled"`
}

func toXMLVolume(v *Volume) xmlVolume {
	out := xmlVolume{
		VolumeID: v.ID, Size: v.SizeGiB, SnapshotID: v.SnapshotID, AvailabilityZone: v.Zone, Status: v.State,
		CreateTime: ts(v.CreateTime), Tags: xmlTags(v.Tags), VolumeType: v.Type, Iops: v.Iops, Throughput: v.Throughput,
		Encrypted: v.Encrypted, KmsKeyID: v.KmsKeyID, MultiAttachEnabled: v.MultiAttach,
	}
	for _, a := range v.Attachments {
		out.Attachments = append(out.Attachments, toXMLAttachment(v.ID, a))
	}
	return out
}

func toXMLAttachment(volID string, a Attachment) xmlAttachment {
	return xmlAttachment{VolumeID: volID, InstanceID: a.InstanceID, Device: a.Device, Status: a.State, AttachTime: ts(a.AttachTime)}
}

type createVolumeResponse struct {
	respBase
	xmlVolume
}

type describeVolumesResponse struct {
	respBase
	Volumes   []xmlVolume `xml:"volumeSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}

// saveVolumeLocked persists v (and extra changes), then makes it the current volume.
func (c *Cloud) saveVolumeLocked(v *Volume, extra ...change) *apiError {
	if aerr := c.persist(append([]change{put(bucketVolumes, v.ID, v)}, extra...)...); aerr != nil {
		return aerr
	}
	c.volumes[v.ID] = v
	return nil
}

func (c *Cloud) zoneKnown(z string) bool {
	for _, k := range c.cfg.Zones {
		if k == z {
			return true
		}
	}
	return false
}

func (c *Cloud) createVolume(p *params) (response, *apiError) {
	zone := p.required("AvailabilityZone")
	spec := volumeSpec{Type: p.str("VolumeType"), Size: p.int("Size"), Iops: p.int("Iops"), Throughput: p.int("Throughput"), MultiAttach: p.bool("MultiAttachEnabled")}
	encrypted, kms, snapID := p.bool("Encrypted"), p.str("KmsKeyId"), p.str("SnapshotId")
	tags := p.tagSpecs("volume")
	token := p.str("ClientToken")
	dry := p.dryRun()
	if p.err != nil {
		return nil, p.err
	}
	if !c.zoneKnown(zone) {
		return nil, errInvalid("AvailabilityZone", zone, "Invalid availability zone: ["+zone+"]")
	}
	if kms != "" && !encrypted {
		return nil, errf("InvalidParameterDependency", "The parameter KmsKeyId requires the parameter Encrypted to be set.")
	}
	if snapID != "" {
		if aerr := checkID("snap-", snapID); aerr != nil {
			return nil, aerr
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	hash := p.requestHash()
	if token != "" {
		if rec, ok := c.tokens[token]; ok {
			if rec.Action != "CreateVolume" || rec.Hash != hash {
				return nil, errf("IdempotentParameterMismatch", "The client token %s was used with different parameters.", token)
			}
			if v := c.volumes[rec.ResourceID]; v != nil && !dry {
				return &createVolumeResponse{xmlVolume: toXMLVolume(v)}, nil
			}
		}
	}
	var snap *Snapshot
	if snapID != "" {
		snap = c.snapshots[snapID]
		if snap == nil {
			return nil, errSnapshotNotFound(snapID)
		}
		if snap.State != "completed" {
			return nil, errf("IncorrectState", "Snapshot '%s' is in the '%s' state.", snapID, snap.State)
		}
		if spec.Size == 0 {
			spec.Size = snap.VolumeSize
		}
		if spec.Size < snap.VolumeSize {
			return nil, errInvalid("Size", strconv.Itoa(spec.Size), "The volume size must be at least the snapshot's size of "+strconv.Itoa(snap.VolumeSize)+" GiB.")
		}
		encrypted = encrypted || snap.Encrypted
	} else if spec.Size == 0 {
		return nil, errMissing("Size")
	}
	resolved, aerr := resolveSpec(spec)
	if aerr != nil {
		return nil, aerr
	}
	if dry {
		return nil, errDryRun()
	}
	if f := c.matchFaultLocked("CreateVolume", "", "", tags, "fail"); f != nil {
		return nil, f.apiError()
	}
	if len(c.volumes) >= c.cfg.MaxVolumes {
		return nil, errf("VolumeLimitExceeded", "You have reached the maximum of %d volumes.", c.cfg.MaxVolumes)
	}
	v := &Volume{
		ID: newID("vol-"), Zone: zone, Type: resolved.Type, SizeGiB: resolved.Size, Iops: resolved.Iops,
		Throughput: resolved.Throughput, Encrypted: encrypted, KmsKeyID: kms, MultiAttach: resolved.MultiAttach,
		SnapshotID: snapID, State: "creating", CreateTime: c.now().UTC(), Tags: tags,
	}
	if encrypted && v.KmsKeyID == "" {
		v.KmsKeyID = "arn:aws:kms:" + c.cfg.Region + ":" + c.ownerID + ":alias/aws/ebs"
	}
	if c.dev != nil && snap == nil {
		if err := c.dev.CreateFile(c.volumeFile(v.ID), int64(v.SizeGiB)<<30); err != nil {
			return nil, errInternal(err)
		}
	}
	var extra []change
	if token != "" {
		extra = append(extra, put(bucketTokens, token, tokenEntry(token, tokenRecord{Action: "CreateVolume", Hash: hash, ResourceID: v.ID})))
	}
	if aerr := c.saveVolumeLocked(v, extra...); aerr != nil {
		if c.dev != nil && snap == nil {
			c.dev.RemoveFile(c.volumeFile(v.ID))
		}
		return nil, aerr
	}
	if token != "" {
		c.tokens[token] = tokenRecord{Action: "CreateVolume", Hash: hash, ResourceID: v.ID}
	}
	resp := &createVolumeResponse{xmlVolume: toXMLVolume(v)}
	c.startCreateLocked(v)
	return resp, nil
}

func tokenEntry(token string, r tokenRecord) any {
	return struct {
		Token string `json:"token"`
		tokenRecord
	}{token, r}
}

// startCreateLocked drives a creating volume to available: from a snapshot it first
// copies the snapshot's data (in the background).
func (c *Cloud) startCreateLocked(v *Volume) {
	id, tags := v.ID, v.Tags
	finish := func() {
		c.after(c.lat.Create, "CreateVolume", id, "", tags, func() {
			cur := c.volumes[id]
			if cur == nil || cur.State != "creating" {
				return
			}
			nv := cur.clone()
			nv.State = "available"
			c.saveVolumeLocked(nv)
		})
	}
	if c.dev == nil || v.SnapshotID == "" {
		finish()
		return
	}
	src, dst, size := c.snapshotFile(v.SnapshotID), c.volumeFile(id), int64(v.SizeGiB)<<30
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.dev.RemoveFile(dst) // a partial copy from before a restart
		err := c.dev.CopyFile(dst, src, size)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed {
			return
		}
		if err != nil {
			c.log.Error("restore volume from snapshot", "volume", id, "snapshot", v.SnapshotID, "err", err)
			if cur := c.volumes[id]; cur != nil && cur.State == "creating" {
				nv := cur.clone()
				nv.State = "error"
				c.saveVolumeLocked(nv)
			}
			return
		}
		finish()
	}()
}

func (c *Cloud) deleteVolume(p *params) (response, *apiError) {
	id := p.required("VolumeId")
	dry := p.dryRun()
	if aerr := p.checkArgs(idArg{"vol-", id}); aerr != nil {
		return nil, aerr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.volumes[id]
	if v == nil {
		return nil, errVolumeNotFound(id)
	}
	if len(v.Attachments) > 0 {
		return nil, errf("VolumeInUse", "Volume %s is currently attached to %s", id, v.Attachments[0].InstanceID)
	}
	if v.State == "creating" {
		return nil, errf("IncorrectState", "The volume '%s' is in the 'creating' state.", id)
	}
	if dry {
		return nil, errDryRun()
	}
	if f := c.matchFaultLocked("DeleteVolume", id, "", v.Tags, "fail"); f != nil {
		return nil, f.apiError()
	}
	if v.State != "deleting" {
		nv := v.clone()
		nv.State = "deleting"
		if aerr := c.saveVolumeLocked(nv); aerr != nil {
			return nil, aerr
		}
		c.after(c.lat.Delete, "DeleteVolume", id, "", v.Tags, func() { c.finishDeleteLocked(id) })
	}
	return &returnResponse{Return: true}, nil
}

// finishDeleteLocked removes a deleting volume's file and record.
func (c *Cloud) finishDeleteLocked(id string) {
	v := c.volumes[id]
	if v == nil || v.State != "deleting" {
		return
	}
	if c.dev != nil {
		if err := c.dev.RemoveFile(c.volumeFile(id)); err != nil {
			c.log.Error("delete volume file", "volume", id, "err", err)
			return // stays deleting; the next start retries
		}
	}
	changes := []change{del(bucketVolumes, id)}
	if _, ok := c.mods[id]; ok {
		changes = append(changes, del(bucketModifications, id))
	}
	if c.persist(changes...) == nil {
		delete(c.volumes, id)
		delete(c.mods, id)
	}
}

func volumeFields(v *Volume) fieldsFunc {
	return func(name string) ([]string, bool) {
		var out []string
		switch name {
		case "volume-id":
			return []string{v.ID}, true
		case "availability-zone":
			return []string{v.Zone}, true
		case "status":
			return []string{v.State}, true
		case "size":
			return []string{strconv.Itoa(v.SizeGiB)}, true
		case "volume-type":
			return []string{v.Type}, true
		case "snapshot-id":
			return []string{v.SnapshotID}, true
		case "encrypted":
			return []string{strconv.FormatBool(v.Encrypted)}, true
		case "multi-attach-enabled":
			return []string{strconv.FormatBool(v.MultiAttach)}, true
		case "create-time":
			return []string{ts(v.CreateTime)}, true
		case "attachment.instance-id", "attachment.device", "attachment.status", "attachment.attach-time", "attachment.delete-on-termination":
			for _, a := range v.Attachments {
				out = append(out, map[string]string{
					"attachment.instance-id": a.InstanceID, "attachment.device": a.Device, "attachment.status": a.State,
					"attachment.attach-time": ts(a.AttachTime), "attachment.delete-on-termination": "false",
				}[name])
			}
			return out, true
		}
		return tagFields(v.Tags, name)
	}
}

func (c *Cloud) describeVolumes(p *params) (response, *apiError) {
	q, aerr := parseDescribe(p, describeSpec{idParam: "VolumeId", idPrefix: "vol-", minMax: 5, maxMax: 500, exclusive: true})
	if aerr != nil {
		return nil, aerr
	}
	if q.dry {
		return nil, errDryRun()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	page, next, aerr := selectPage(c.volumes, q, volumeFields, errVolumeNotFound)
	if aerr != nil {
		return nil, aerr
	}
	resp := &describeVolumesResponse{NextToken: next}
	for _, id := range page {
		resp.Volumes = append(resp.Volumes, toXMLVolume(c.volumes[id]))
	}
	return resp, nil
}

func dedupe(ids []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

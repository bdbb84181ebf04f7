package cloud

import "strconv"

type xmlModification struct {
	VolumeID                  string `xml:"volumeId"`
	ModificationState         string `xml:"modificationState"`
	StatusMessage             string `xml:"statusMessage,omitempty"`
	TargetSize                int    `xml:"targetSize"`
	TargetIops                int    `xml:"targetIops,omitempty"`
	TargetVolumeType          string `xml:"targetVolumeType"`
	TargetThroughput          int    `xml:"targetThroughput,omitempty"`
	TargetMultiAttachEnabled  bool   `xml:"targetMultiAttachEnabled"`
	OriginalSize              int    `xml:"originalSize"`
	OriginalIops              int    `xml:"originalIops,omitempty"`
	OriginalVolumeType        string `xml:"originalVolumeType"`
	OriginalThroughput        int    `xml:"originalThroughput,omitempty"`
	OriginalMultiAttachEnable bool   `xml:"originalMultiAttachEnabled"`
	Progress                  int    `xml:"progress"`
	StartTime                 string `xml:"startTime"`
	EndTime                   string `xml:"endTime,omitempty"`
}

func toXMLModification(m *Modification) xmlModification {
	out := xmlModification{
		VolumeID: m.VolumeID, ModificationState: m.State, TargetSize: m.TargetSize, TargetIops: m.TargetIops,
		TargetVolumeType: m.TargetType, TargetThroughput: m.TargetThroughput, TargetMultiAttachEnabled: m.TargetMultiAttach,
		OriginalSize: m.OriginalSize, OriginalIops: m.OriginalIops, OriginalVolumeType: m.OriginalType,
		OriginalThroughput: m.OriginalThroughput, OriginalMultiAttachEnable: m.OriginalMultiAttach,
		Progress: m.Progress, StartTime: ts(m.StartTime), EndTime: ts(m.EndTime),
	}
	if m.State == "failed" {
		out.StatusMessage = "The modification could not be applied to the volume's storage."
	}
	return out
}

type modifyVolumeResponse struct {
	respBase
	Modification xmlModification `xml:"volumeModification"`
}

type describeModificationsResponse struct {
	respBase
	Modifications []xmlModification `xml:"volumeModificationSet>item"`
	NextToken     string            `xml:"nextToken,omitempty"`
}

func (c *Cloud) modifyVolume(p *params) (response, *apiError) {
	id := p.required("VolumeId")
	spec := volumeSpec{Type: p.str("VolumeType"), Size: p.int("Size"), Iops: p.int("Iops"), Throughput: p.int("Throughput"), MultiAttach: p.bool("MultiAttachEnabled")}
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
	prev := c.mods[id]
	inProgress := prev != nil && (prev.State == "modifying" || prev.State == "optimizing")
	target, aerr := checkModify(v, spec, inProgress)
	if aerr != nil {
		return nil, aerr
	}
	if dry {
		return nil, errDryRun()
	}
	if f := c.matchFaultLocked("ModifyVolume", id, "", v.Tags, "fail"); f != nil {
		return nil, f.apiError()
	}
	m := &Modification{
		VolumeID: id, State: "modifying", StartTime: c.now().UTC(),
		TargetSize: target.Size, TargetType: target.Type, TargetIops: target.Iops, TargetThroughput: target.Throughput, TargetMultiAttach: target.MultiAttach,
		OriginalSize: v.SizeGiB, OriginalType: v.Type, OriginalIops: v.Iops, OriginalThroughput: v.Throughput, OriginalMultiAttach: v.MultiAttach,
	}
	if aerr := c.persist(put(bucketModifications, id, m)); aerr != nil {
		return nil, aerr
	}
	c.mods[id] = m
	resp := &modifyVolumeResponse{Modification: toXMLModification(m)}
	c.after(c.lat.ModifyToOptimizing, "ModifyVolume", id, "", v.Tags, func() { c.optimizeLocked(id) })
	return resp, nil
}

// optimizeLocked applies a modification to the volume (the file grows and the loop
// devices take the new size) and moves it to optimizing, then to completed.
func (c *Cloud) optimizeLocked(id string) {
	v, m := c.volumes[id], c.mods[id]
	if v == nil || m == nil || m.State != "modifying" {
		return
	}
	nm := *m
	if c.dev != nil && m.TargetSize > v.SizeGiB {
		err := c.dev.GrowFile(c.volumeFile(id), int64(m.TargetSize)<<30)
		for _, a := range v.Attachments {
			if err == nil && a.LoopDev != "" {
				err = c.dev.Refresh(a.LoopDev)
			}
		}
		if err != nil {
			c.log.Error("modify volume failed", "volume", id, "err", err)
			nm.State, nm.EndTime = "failed", c.now().UTC()
			if c.persist(put(bucketModifications, id, &nm)) == nil {
				c.mods[id] = &nm
			}
			return
		}
	}
	nv := v.clone()
	nv.SizeGiB, nv.Type, nv.Iops, nv.Throughput, nv.MultiAttach = m.TargetSize, m.TargetType, m.TargetIops, m.TargetThroughput, m.TargetMultiAttach
	nm.State, nm.Progress = "optimizing", 50
	if c.saveVolumeLocked(nv, put(bucketModifications, id, &nm)) != nil {
		return
	}
	c.mods[id] = &nm
	c.after(c.lat.Optimize, "optimize", id, "", v.Tags, func() {
		cur := c.mods[id]
		if cur == nil || cur.State != "optimizing" {
			return
		}
		done := *cur
		done.State, done.Progress, done.EndTime = "completed", 100, c.now().UTC()
		if c.persist(put(bucketModifications, id, &done)) == nil {
			c.mods[id] = &done
		}
	})
}

func (c *Cloud) describeVolumesModifications(p *params) (response, *apiError) {
	q, aerr := parseDescribe(p, describeSpec{idParam: "VolumeId", idPrefix: "vol-", minMax: 1, maxMax: 500})
	if aerr != nil {
		return nil, aerr
	}
	if q.dry {
		return nil, errDryRun()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var candidates []string
	if len(q.ids) > 0 {
		for _, id := range dedupe(q.ids) {
			if c.volumes[id] == nil {
				return nil, errVolumeNotFound(id)
			}
			if c.mods[id] == nil {
				return nil, errf("InvalidVolumeModification.NotFound", "Modification for volume '%s' does not exist.", id)
			}
			candidates = append(candidates, id)
		}
	} else {
		for id := range c.mods {
			candidates = append(candidates, id)
		}
	}
	page, next, aerr := filterPage(c.mods, candidates, q, modificationFields)
	if aerr != nil {
		return nil, aerr
	}
	resp := &describeModificationsResponse{NextToken: next}
	for _, id := range page {
		resp.Modifications = append(resp.Modifications, toXMLModification(c.mods[id]))
	}
	return resp, nil
}

func modificationFields(m *Modification) fieldsFunc {
	return func(name string) ([]string, bool) {
		switch name {
		case "volume-id":
			return []string{m.VolumeID}, true
		case "modification-state":
			return []string{m.State}, true
		case "target-size":
			return []string{strconv.Itoa(m.TargetSize)}, true
		case "target-volume-type":
			return []string{m.TargetType}, true
		case "original-size":
			return []string{strconv.Itoa(m.OriginalSize)}, true
		case "original-volume-type":
			return []string{m.OriginalType}, true
		}
		return nil, false
	}
}

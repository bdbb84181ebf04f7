package cloud

import (
	"strconv"
)

type xmlSnapshot struct {
	SnapshotID   string   `xml:"snapshotId"`
	VolumeID     string   `xml:"volumeId"`
	Status       string   `xml:"status"`
	StateMessage string   `xml:"statusMessage,omitempty"`
	StartTime    string   `xml:"startTime"`
	Progress     string   `xml:"progress"`
	OwnerID      string   `xml:"ownerId"`
	VolumeSize   int      `xml:"volumeSize"`
	Description  string   `xml:"description"`
	Encrypted    bool     `xml:"encrypted"`
	Tags         []xmlTag `xml:"tagSet>item,omitempty"`
}

func (c *Cloud) toXMLSnapshot(s *Snapshot) xmlSnapshot {
	out := xmlSnapshot{
		SnapshotID: s.ID, VolumeID: s.VolumeID, Status: s.State, StartTime: ts(s.StartTime),
		Progress: strconv.Itoa(s.Progress) + "%", OwnerID: c.ownerID, VolumeSize: s.VolumeSize,
		Description: s.Description, Encrypted: s.Encrypted, Tags: xmlTags(s.Tags),
	}
	if s.State == "error" {
		out.StateMessage = "The snapshot's data could not be copied."
	}
	return out
}

type createSnapshotResponse struct {
	respBase
	xmlSnapshot
}

type describeSnapshotsResponse struct {
	respBase
	Snapshots []xmlSnapshot `xml:"snapshotSet>item"`
	NextToken string        `xml:"nextToken,omitempty"`
}

func (c *Cloud) createSnapshot(p *params) (response, *apiError) {
	volID := p.required("VolumeId")
	desc := p.str("Description")
	tags := p.tagSpecs("snapshot")
	dry := p.dryRun()
	if aerr := p.checkArgs(idArg{"vol-", volID}); aerr != nil {
		return nil, aerr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.volumes[volID]
	if v == nil {
		return nil, errVolumeNotFound(volID)
	}
	if v.State != "available" && v.State != "in-use" {
		return nil, errf("IncorrectState", "The volume '%s' is in the '%s' state.", volID, v.State)
	}
	if dry {
		return nil, errDryRun()
	}
	if f := c.matchFaultLocked("CreateSnapshot", volID, "", v.Tags, "fail"); f != nil {
		return nil, f.apiError()
	}
	s := &Snapshot{ID: newID("snap-"), VolumeID: volID, VolumeSize: v.SizeGiB, State: "pending", Description: desc,
		StartTime: c.now().UTC(), Encrypted: v.Encrypted, Tags: tags}
	if aerr := c.persist(put(bucketSnapshots, s.ID, s)); aerr != nil {
		return nil, aerr
	}
	c.snapshots[s.ID] = s
	resp := &createSnapshotResponse{xmlSnapshot: c.toXMLSnapshot(s)}
	c.startSnapshotLocked(s)
	return resp, nil
}

// startSnapshotLocked copies the volume's data (in the background, in real mode), then
// completes the snapshot after the profile's latency.
func (c *Cloud) startSnapshotLocked(s *Snapshot) {
	id, volID, tags := s.ID, s.VolumeID, s.Tags
	finish := func() {
		c.after(c.lat.Snapshot, "CreateSnapshot", volID, "", tags, func() {
			cur := c.snapshots[id]
			if cur == nil || cur.State != "pending" {
				return
			}
			ns := cur.clone()
			ns.State, ns.Progress = "completed", 100
			if c.persist(put(bucketSnapshots, id, ns)) == nil {
				c.snapshots[id] = ns
			}
		})
	}
	if c.dev == nil {
		finish()
		return
	}
	src, dst := c.volumeFile(volID), c.snapshotFile(id)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.dev.RemoveFile(dst) // a partial copy from before a restart
		err := c.dev.CopyFile(dst, src, 0)
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.closed {
			return
		}
		if err != nil {
			c.log.Error("snapshot copy failed", "snapshot", id, "volume", volID, "err", err)
			if cur := c.snapshots[id]; cur != nil {
				ns := cur.clone()
				ns.State = "error"
				if c.persist(put(bucketSnapshots, id, ns)) == nil {
					c.snapshots[id] = ns
				}
			}
			return
		}
		finish()
	}()
}

func (c *Cloud) deleteSnapshot(p *params) (response, *apiError) {
	id := p.required("SnapshotId")
	dry := p.dryRun()
	if aerr := p.checkArgs(idArg{"snap-", id}); aerr != nil {
		return nil, aerr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.snapshots[id]
	if s == nil {
		return nil, errSnapshotNotFound(id)
	}
	if s.State == "pending" {
		return nil, errf("IncorrectState", "Snapshot '%s' is in the 'pending' state; wait until it completes.", id)
	}
	for _, v := range c.volumes {
		if v.SnapshotID == id && v.State == "creating" {
			return nil, errf("InvalidSnapshot.InUse", "The snapshot %s is currently in use by %s", id, v.ID)
		}
	}
	if dry {
		return nil, errDryRun()
	}
	if c.dev != nil {
		if err := c.dev.RemoveFile(c.snapshotFile(id)); err != nil {
			return nil, errInternal(err)
		}
	}
	if aerr := c.persist(del(bucketSnapshots, id)); aerr != nil {
		return nil, aerr
	}
	delete(c.snapshots, id)
	return &returnResponse{Return: true}, nil
}

func (c *Cloud) describeSnapshots(p *params) (response, *apiError) {
	owners := p.list("Owner")
	q, aerr := parseDescribe(p, describeSpec{idParam: "SnapshotId", idPrefix: "snap-", minMax: 5, maxMax: 1000, exclusive: true})
	if aerr != nil {
		return nil, aerr
	}
	if q.dry {
		return nil, errDryRun()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, o := range owners {
		if o != "self" && o != c.ownerID {
			return &describeSnapshotsResponse{}, nil // nobody else's snapshots are here
		}
	}
	page, next, aerr := selectPage(c.snapshots, q, func(s *Snapshot) fieldsFunc { return snapshotFields(c, s) }, errSnapshotNotFound)
	if aerr != nil {
		return nil, aerr
	}
	resp := &describeSnapshotsResponse{NextToken: next}
	for _, id := range page {
		resp.Snapshots = append(resp.Snapshots, c.toXMLSnapshot(c.snapshots[id]))
	}
	return resp, nil
}

func snapshotFields(c *Cloud, s *Snapshot) fieldsFunc {
	return func(name string) ([]string, bool) {
		switch name {
		case "snapshot-id":
			return []string{s.ID}, true
		case "volume-id":
			return []string{s.VolumeID}, true
		case "status":
			return []string{s.State}, true
		case "owner-id":
			return []string{c.ownerID}, true
		case "progress":
			return []string{strconv.Itoa(s.Progress) + "%"}, true
		case "volume-size":
			return []string{strconv.Itoa(s.VolumeSize)}, true
		case "encrypted":
			return []string{strconv.FormatBool(s.Encrypted)}, true
		case "description":
			return []string{s.Description}, true
		case "start-time":
			return []string{ts(s.StartTime)}, true
		}
		return tagFields(s.Tags, name)
	}
}

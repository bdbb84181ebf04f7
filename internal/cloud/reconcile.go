package cloud

import (
	"os"
	"path/filepath"
	"strings"
)

// reconcile makes the machine match the stored state at start: it finishes or resumes
// the transitions that were under way, brings back the loop devices and links of attached
// volumes, and removes volume files, loop devices and links that nothing accounts for.
func (c *Cloud) reconcile() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range sortedKeys(c.instances) {
		i := c.instances[id]
		next := map[string]string{"pending": "running", "shutting-down": "terminated", "stopping": "stopped"}[i.State]
		if next == "terminated" {
			if aerr := c.terminatedLocked(i); aerr != nil {
				return aerr
			}
			continue
		}
		if next != "" {
			ni := i.clone()
			ni.State = next
			if aerr := c.persist(put(bucketInstances, id, ni)); aerr != nil {
				return aerr
			}
			c.instances[id] = ni
		}
	}
	c.resumeENITransitionsLocked()
	if c.dev != nil {
		c.removeOrphanFilesLocked()
		c.releaseLeakedLoopsLocked()
	}
	for _, v := range sortedVolumes(c.volumes) {
		id := v.ID
		switch v.State {
		case "creating":
			if c.dev != nil && v.SnapshotID == "" && !c.dev.FileExists(c.volumeFile(id)) {
				if err := c.dev.CreateFile(c.volumeFile(id), int64(v.SizeGiB)<<30); err != nil {
					c.log.Error("recreate volume file", "volume", id, "err", err)
				}
			}
			c.startCreateLocked(v)
			continue
		case "deleting":
			c.finishDeleteLocked(id)
			continue
		}
		if c.dev != nil && !c.dev.FileExists(c.volumeFile(id)) && v.State != "error" {
			c.log.Error("volume file missing; making a blank one", "volume", id)
			c.dev.CreateFile(c.volumeFile(id), int64(v.SizeGiB)<<30)
		}
		for _, a := range v.Attachments {
			instID := a.InstanceID
			switch a.State {
			case "attaching":
				c.after(c.lat.Attach, "AttachVolume", id, instID, v.Tags, func() { c.finishAttachLocked(id, instID) })
			case "detaching":
				c.after(c.lat.Detach, "DetachVolume", id, instID, v.Tags, func() { c.finishDetachLocked(id, instID) })
			case "attached":
				if c.dev != nil {
					c.restoreDeviceLocked(id, instID)
				}
			}
		}
	}
	if c.dev != nil {
		c.removeStaleLinksLocked()
	}
	c.reconcileLoadBalancersLocked()
	for _, id := range sortedKeys(c.snapshots) {
		if s := c.snapshots[id]; s.State == "pending" {
			c.startSnapshotLocked(s)
		}
	}
	for _, id := range sortedKeys(c.mods) {
		switch c.mods[id].State {
		case "modifying":
			c.after(c.lat.ModifyToOptimizing, "ModifyVolume", id, "", nil, func() { c.optimizeLocked(id) })
		case "optimizing":
			m := *c.mods[id]
			m.State, m.Progress, m.EndTime = "completed", 100, c.now().UTC()
			if c.persist(put(bucketModifications, id, &m)) == nil {
				c.mods[id] = &m
			}
		}
	}
	return nil
}

// restoreDeviceLocked makes sure an attached volume has its loop device and links.
func (c *Cloud) restoreDeviceLocked(volID, instID string) {
	v := c.volumes[volID]
	a := v.attachment(instID)
	inst := c.instances[instID]
	file := c.volumeFile(volID)
	if a.LoopDev != "" && c.dev.BackingFile(a.LoopDev) == file {
		if err := c.makeLinks(inst, a.Device, volID, a.LoopDev); err != nil {
			c.log.Error("restore links", "volume", volID, "instance", instID, "err", err)
		}
		return
	}
	dev, err := c.setUpDeviceLocked(inst, a.Device, volID)
	if err != nil {
		c.log.Error("restore attached volume's device", "volume", volID, "instance", instID, "err", err)
		return
	}
	nv := v.clone()
	nv.attachment(instID).LoopDev = dev
	if c.saveVolumeLocked(nv) != nil {
		c.tearDownDeviceLocked(inst, *nv.attachment(instID), volID)
		return
	}
	c.log.Info("restored attached volume's device", "volume", volID, "instance", instID, "device", dev)
}

// removeOrphanFilesLocked removes volume and snapshot files that no object accounts for.
func (c *Cloud) removeOrphanFilesLocked() {
	for dir, known := range map[string]func(string) bool{
		c.volumesDir():   func(id string) bool { return c.volumes[id] != nil },
		c.snapshotsDir(): func(id string) bool { return c.snapshots[id] != nil },
	} {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			id, ok := strings.CutSuffix(e.Name(), ".img")
			if ok && known(id) {
				continue
			}
			c.log.Info("removing orphan file", "file", filepath.Join(dir, e.Name()))
			c.dev.RemoveFile(filepath.Join(dir, e.Name()))
		}
	}
}

// releaseLeakedLoopsLocked releases loop devices over our volume files that no attached
// attachment records.
func (c *Cloud) releaseLeakedLoopsLocked() {
	wanted := map[string]bool{}
	for _, v := range c.volumes {
		for _, a := range v.Attachments {
			if a.LoopDev != "" && a.State != "attaching" {
				wanted[a.LoopDev+"\x00"+c.volumeFile(v.ID)] = true
			}
		}
	}
	for dev, file := range c.dev.List(c.volumesDir()) {
		if wanted[dev+"\x00"+file] {
			continue
		}
		c.log.Info("releasing leaked loop device", "device", dev, "file", file)
		if err := c.dev.Detach(dev); err != nil {
			c.log.Error("release leaked loop device", "device", dev, "err", err)
		}
	}
}

// removeStaleLinksLocked removes the EBS-style links in instances' device dirs that no
// attachment accounts for. Only names the cloud makes are considered.
func (c *Cloud) removeStaleLinksLocked() {
	want := map[string]bool{}
	for _, v := range c.volumes {
		for _, a := range v.Attachments {
			if a.LoopDev != "" {
				for _, l := range c.links(c.instances[a.InstanceID], a.Device, v.ID) {
					want[l] = true
				}
			}
		}
	}
	for _, inst := range c.instances {
		dir := c.devDirOf(inst)
		for _, d := range []string{dir, filepath.Join(dir, "disk", "by-id")} {
			entries, _ := os.ReadDir(d)
			for _, e := range entries {
				p := filepath.Join(d, e.Name())
				if e.Type()&os.ModeSymlink == 0 || want[p] {
					continue
				}
				if !deviceRE.MatchString("/dev/"+e.Name()) && !strings.HasPrefix(e.Name(), "nvme-Amazon_Elastic_Block_Store_vol") {
					continue
				}
				target, err := os.Readlink(p)
				if err != nil || !strings.HasPrefix(target, "/dev/") {
					continue
				}
				c.log.Info("removing stale device link", "link", p, "target", target)
				os.Remove(p)
			}
		}
	}
}

// releaseAllLocked releases every loop device and link the cloud made; the attachments
// stay in the API and the next start sets them up again.
func (c *Cloud) releaseAllLocked() {
	for _, v := range sortedVolumes(c.volumes) {
		nv := v.clone()
		changed := false
		for k, a := range nv.Attachments {
			if a.LoopDev == "" {
				continue
			}
			if err := c.tearDownDeviceLocked(c.instances[a.InstanceID], a, v.ID); err != nil {
				c.log.Error("release device", "volume", v.ID, "device", a.LoopDev, "err", err)
				continue
			}
			nv.Attachments[k].LoopDev = ""
			changed = true
		}
		if changed {
			c.saveVolumeLocked(nv)
		}
	}
}

func sortedKeys[T any](m map[string]T) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	ids, _, _ = paginate(ids, 0, "")
	return ids
}

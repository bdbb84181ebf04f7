package cloud

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kubelab/kubelab/internal/util/atomicfile"
)

type attachResponse struct {
	respBase
	xmlAttachment
}

func (c *Cloud) attachVolume(p *params) (response, *apiError) {
	volID := p.required("VolumeId")
	instID := p.required("InstanceId")
	device := p.required("Device")
	dry := p.dryRun()
	if aerr := p.checkArgs(idArg{"vol-", volID}, idArg{"i-", instID}); aerr != nil {
		return nil, aerr
	}
	if aerr := checkDevice(device); aerr != nil {
		return nil, aerr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.volumes[volID]
	if v == nil {
		return nil, errVolumeNotFound(volID)
	}
	inst := c.instances[instID]
	if inst == nil {
		return nil, errInstanceNotFound(instID)
	}
	used, count := c.instanceDevicesLocked(instID)
	if aerr := checkAttach(v, inst, device, count, used); aerr != nil {
		return nil, aerr
	}
	if dry {
		return nil, errDryRun()
	}
	if f := c.matchFaultLocked("AttachVolume", volID, instID, v.Tags, "fail"); f != nil {
		return nil, f.apiError()
	}
	nv := v.clone()
	a := Attachment{InstanceID: instID, Device: device, State: "attaching", AttachTime: c.now().UTC()}
	nv.Attachments = append(nv.Attachments, a)
	nv.State = "in-use"
	if aerr := c.saveVolumeLocked(nv); aerr != nil {
		return nil, aerr
	}
	resp := &attachResponse{xmlAttachment: toXMLAttachment(volID, a)}
	c.after(c.lat.Attach, "AttachVolume", volID, instID, v.Tags, func() { c.finishAttachLocked(volID, instID) })
	return resp, nil
}

// instanceDevicesLocked returns the devices in use on an instance (device → volume) and
// the number of its attachments.
func (c *Cloud) instanceDevicesLocked(instID string) (map[string]string, int) {
	used := map[string]string{}
	for _, v := range c.volumes {
		if a := v.attachment(instID); a != nil {
			used[a.Device] = v.ID
		}
	}
	return used, len(used)
}

// finishAttachLocked sets up the device of an attaching attachment and marks it
// attached; if the device cannot be set up, the attachment is dropped.
func (c *Cloud) finishAttachLocked(volID, instID string) {
	v := c.volumes[volID]
	if v == nil {
		return
	}
	a := v.attachment(instID)
	if a == nil || a.State != "attaching" {
		return
	}
	nv := v.clone()
	na := nv.attachment(instID)
	if c.dev != nil {
		dev, err := c.setUpDeviceLocked(c.instances[instID], na.Device, volID)
		if err != nil {
			c.log.Error("attach failed; dropping the attachment", "volume", volID, "instance", instID, "err", err)
			nv.Attachments = dropAttachment(nv.Attachments, instID)
			if len(nv.Attachments) == 0 {
				nv.State = "available"
			}
			c.saveVolumeLocked(nv)
			return
		}
		na.LoopDev = dev
	}
	na.State = "attached"
	if aerr := c.saveVolumeLocked(nv); aerr != nil && na.LoopDev != "" {
		c.tearDownDeviceLocked(c.instances[instID], *na, volID)
	}
}

func dropAttachment(as []Attachment, instID string) []Attachment {
	var out []Attachment
	for _, a := range as {
		if a.InstanceID != instID {
			out = append(out, a)
		}
	}
	return out
}

func (c *Cloud) detachVolume(p *params) (response, *apiError) {
	volID := p.required("VolumeId")
	instID, device := p.str("InstanceId"), p.str("Device")
	force := p.bool("Force")
	dry := p.dryRun()
	if aerr := p.checkArgs(idArg{"vol-", volID}); aerr != nil {
		return nil, aerr
	}
	if instID != "" {
		if aerr := checkID("i-", instID); aerr != nil {
			return nil, aerr
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	v := c.volumes[volID]
	if v == nil {
		return nil, errVolumeNotFound(volID)
	}
	if len(v.Attachments) == 0 {
		return nil, errf("IncorrectState", "Volume '%s' is in the '%s' state.", volID, v.State)
	}
	var a *Attachment
	switch {
	case instID != "":
		if c.instances[instID] == nil {
			return nil, errInstanceNotFound(instID)
		}
		if a = v.attachment(instID); a == nil {
			return nil, errf("InvalidAttachment.NotFound", "The volume '%s' is not attached to instance '%s'.", volID, instID)
		}
	case len(v.Attachments) > 1:
		return nil, errf("MissingParameter", "The volume '%s' is attached to several instances; the request must contain the parameter InstanceId.", volID)
	default:
		a = &v.Attachments[0]
	}
	if device != "" && device != a.Device {
		return nil, errf("InvalidAttachment.NotFound", "The volume '%s' is not attached to instance '%s' at '%s'.", volID, a.InstanceID, device)
	}
	if dry {
		return nil, errDryRun()
	}
	if f := c.matchFaultLocked("DetachVolume", volID, a.InstanceID, v.Tags, "fail"); f != nil {
		return nil, f.apiError()
	}
	instID = a.InstanceID
	if a.State == "detaching" {
		resp := &attachResponse{xmlAttachment: toXMLAttachment(volID, *a)}
		if force {
			// A forced detach completes one that is stuck (for instance, held by a fault).
			c.forceDetachLocked(volID, instID)
		}
		return resp, nil
	}
	nv := v.clone()
	na := nv.attachment(instID)
	na.State = "detaching"
	if aerr := c.saveVolumeLocked(nv); aerr != nil {
		return nil, aerr
	}
	resp := &attachResponse{xmlAttachment: toXMLAttachment(volID, *na)}
	if force {
		c.forceDetachLocked(volID, instID)
	} else {
		c.after(c.lat.Detach, "DetachVolume", volID, instID, v.Tags, func() { c.finishDetachLocked(volID, instID) })
	}
	return resp, nil
}

// forceDetachLocked finishes a detach now, dropping a parked one.
func (c *Cloud) forceDetachLocked(volID, instID string) {
	var keep []parkedTransition
	for _, p := range c.parked {
		if !(p.action == "DetachVolume" && p.volumeID == volID && p.instanceID == instID) {
			keep = append(keep, p)
		}
	}
	c.parked = keep
	c.finishDetachLocked(volID, instID)
}

// finishDetachLocked removes a detaching attachment's device and the attachment.
func (c *Cloud) finishDetachLocked(volID, instID string) {
	v := c.volumes[volID]
	if v == nil {
		return
	}
	a := v.attachment(instID)
	if a == nil || a.State != "detaching" {
		return
	}
	if c.dev != nil && a.LoopDev != "" {
		if err := c.tearDownDeviceLocked(c.instances[instID], *a, volID); err != nil {
			c.log.Error("detach: retrying", "volume", volID, "instance", instID, "err", err)
			c.after(time.Second, "retry-detach", volID, instID, nil, func() { c.finishDetachLocked(volID, instID) })
			return
		}
	}
	nv := v.clone()
	nv.Attachments = dropAttachment(nv.Attachments, instID)
	if len(nv.Attachments) == 0 && nv.State == "in-use" {
		nv.State = "available"
	}
	c.saveVolumeLocked(nv)
}

// setUpDeviceLocked sets up a loop device over the volume's file and the instance's
// links to it; on failure it leaves nothing behind.
func (c *Cloud) setUpDeviceLocked(inst *Instance, device, volID string) (string, error) {
	if inst == nil {
		return "", errors.New("no such instance")
	}
	dev, err := c.dev.Attach(c.volumeFile(volID))
	if err != nil {
		return "", err
	}
	if err := c.makeLinks(inst, device, volID, dev); err != nil {
		if derr := c.dev.Detach(dev); derr != nil {
			c.log.Error("release loop device after failed attach", "device", dev, "err", derr)
		}
		return "", err
	}
	return dev, nil
}

func (c *Cloud) links(inst *Instance, device, volID string) []string {
	dir := c.devDirOf(inst)
	return []string{filepath.Join(dir, linkName(device)), filepath.Join(dir, "disk", "by-id", byIDName(volID))}
}

func (c *Cloud) makeLinks(inst *Instance, device, volID, dev string) error {
	links := c.links(inst, device, volID)
	if err := os.MkdirAll(filepath.Dir(links[1]), 0o755); err != nil {
		return fmt.Errorf("make device dir: %w", err)
	}
	for i, l := range links {
		if err := atomicfile.Symlink(dev, l); err != nil {
			for _, m := range links[:i] {
				os.Remove(m)
			}
			return err
		}
	}
	return nil
}

// tearDownDeviceLocked removes an attachment's links (those that point at its loop
// device) and releases the loop device.
func (c *Cloud) tearDownDeviceLocked(inst *Instance, a Attachment, volID string) error {
	if inst != nil {
		for _, l := range c.links(inst, a.Device, volID) {
			if target, err := os.Readlink(l); err == nil && target == a.LoopDev {
				if err := os.Remove(l); err != nil && !errors.Is(err, os.ErrNotExist) {
					return fmt.Errorf("remove link %s: %w", l, err)
				}
			}
		}
	}
	if a.LoopDev == "" {
		return nil
	}
	// Only release the device if it is still ours.
	if back := c.dev.BackingFile(a.LoopDev); back != "" && back != c.volumeFile(volID) {
		return nil
	}
	return c.dev.Detach(a.LoopDev)
}

package cloud

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// volumeType holds the limits of one EBS volume type.
type volumeType struct {
	minSize, maxSize int
	// iops: settable, required, range and the maximum ratio of IOPS per GiB.
	iopsSettable, iopsRequired bool
	minIops, maxIops, defIops  int
	iopsPerGiB                 int
	// throughput (MiB/s): settable, range, default.
	thrSettable            bool
	minThr, maxThr, defThr int
	multiAttach            bool
}

// volumeTypes are EBS's volume types with their documented limits (gp3 as raised in
// 2025: up to 64 TiB, 80,000 IOPS and 2,000 MiB/s).
var volumeTypes = map[string]volumeType{
	"gp2":      {minSize: 1, maxSize: 16384},
	"gp3":      {minSize: 1, maxSize: 65536, iopsSettable: true, minIops: 3000, maxIops: 80000, defIops: 3000, iopsPerGiB: 500, thrSettable: true, minThr: 125, maxThr: 2000, defThr: 125},
	"io1":      {minSize: 4, maxSize: 16384, iopsSettable: true, iopsRequired: true, minIops: 100, maxIops: 64000, iopsPerGiB: 50, multiAttach: true},
	"io2":      {minSize: 4, maxSize: 65536, iopsSettable: true, iopsRequired: true, minIops: 100, maxIops: 256000, iopsPerGiB: 1000, multiAttach: true},
	"st1":      {minSize: 125, maxSize: 16384},
	"sc1":      {minSize: 125, maxSize: 16384},
	"standard": {minSize: 1, maxSize: 1024},
}

// volumeSpec is what a create or modify asks for; zero means "not given".
type volumeSpec struct {
	Type        string
	Size        int
	Iops        int
	Throughput  int
	MultiAttach bool
}

// resolveSpec validates spec and fills in the type's defaults: the volume's type, size,
// IOPS (as EC2 reports them) and throughput.
func resolveSpec(spec volumeSpec) (volumeSpec, *apiError) {
	if spec.Type == "" {
		spec.Type = "gp3"
	}
	vt, ok := volumeTypes[spec.Type]
	if !ok {
		return spec, errInvalid("VolumeType", spec.Type, "Valid types are gp2, gp3, io1, io2, st1, sc1 and standard.")
	}
	if spec.Size < vt.minSize || spec.Size > vt.maxSize {
		return spec, errInvalid("Size", strconv.Itoa(spec.Size), fmt.Sprintf("Volume size for %s must be between %d and %d GiB.", spec.Type, vt.minSize, vt.maxSize))
	}
	if spec.Iops != 0 && !vt.iopsSettable {
		return spec, errf("InvalidParameterCombination", "The parameter Iops is not supported for %s volumes.", spec.Type)
	}
	if spec.Throughput != 0 && !vt.thrSettable {
		return spec, errf("InvalidParameterCombination", "The parameter Throughput is not supported for %s volumes.", spec.Type)
	}
	if spec.MultiAttach && !vt.multiAttach {
		return spec, errf("InvalidParameterCombination", "Multi-Attach is supported only for io1 and io2 volumes, not for %s.", spec.Type)
	}
	if vt.iopsRequired && spec.Iops == 0 {
		return spec, errMissing("Iops")
	}
	switch spec.Type {
	case "gp2":
		spec.Iops = min(max(3*spec.Size, 100), 16000)
	case "st1", "sc1", "standard":
		spec.Iops = 0
	}
	if vt.iopsSettable {
		if spec.Iops == 0 {
			spec.Iops = vt.defIops
		}
		if spec.Iops < vt.minIops || spec.Iops > vt.maxIops {
			return spec, errInvalid("Iops", strconv.Itoa(spec.Iops), fmt.Sprintf("IOPS for %s must be between %d and %d.", spec.Type, vt.minIops, vt.maxIops))
		}
		if spec.Iops > vt.defIops && spec.Iops > vt.iopsPerGiB*spec.Size {
			return spec, errInvalid("Iops", strconv.Itoa(spec.Iops), fmt.Sprintf("The maximum ratio for %s is %d IOPS per GiB; a %d GiB volume allows at most %d.", spec.Type, vt.iopsPerGiB, spec.Size, vt.iopsPerGiB*spec.Size))
		}
	}
	if vt.thrSettable {
		if spec.Throughput == 0 {
			spec.Throughput = vt.defThr
		}
		if spec.Throughput < vt.minThr || spec.Throughput > vt.maxThr {
			return spec, errInvalid("Throughput", strconv.Itoa(spec.Throughput), fmt.Sprintf("Throughput for %s must be between %d and %d MiB/s.", spec.Type, vt.minThr, vt.maxThr))
		}
		if spec.Throughput > vt.defThr && spec.Throughput*4 > spec.Iops {
			return spec, errInvalid("Throughput", strconv.Itoa(spec.Throughput), fmt.Sprintf("The maximum ratio is 0.25 MiB/s per IOPS; %d IOPS allow at most %d MiB/s.", spec.Iops, spec.Iops/4))
		}
	}
	return spec, nil
}

var deviceRE = regexp.MustCompile(`^/dev/(sd[b-z][a-z]?|xvd[b-z][a-z]?|xvda[a-z])$`)

// checkDevice validates an attachment's device name.
func checkDevice(dev string) *apiError {
	if dev == "" {
		return errMissing("Device")
	}
	if !deviceRE.MatchString(dev) {
		return errInvalid("Device", dev, "Device names must look like /dev/sd[b-z] or /dev/xvd[b-z][a-z]; /dev/sda and /dev/xvda are reserved for the root device.")
	}
	return nil
}

// linkName is the name of an attachment's link in the instance's device dir.
func linkName(device string) string { return strings.TrimPrefix(device, "/dev/") }

// byIDName is the NVMe-style by-id name of a volume's device.
func byIDName(volumeID string) string {
	return "nvme-Amazon_Elastic_Block_Store_" + strings.ReplaceAll(volumeID, "-", "")
}

// xenFamilies are instance families on the Xen hypervisor (39 attachment slots);
// everything else is Nitro, where 28 slots are shared with the root volume and the
// primary network interface, leaving 26 for data volumes.
var xenFamilies = map[string]bool{"t1": true, "t2": true, "m1": true, "m2": true, "m3": true, "m4": true,
	"c1": true, "c3": true, "c4": true, "r3": true, "r4": true, "i2": true, "i3": true, "d2": true, "x1": true, "p2": true, "p3": true, "g3": true, "h1": true}

// attachLimit returns the number of data volumes an instance type can have attached.
func attachLimit(instanceType string) int {
	family, _, _ := strings.Cut(instanceType, ".")
	if xenFamilies[family] {
		return 39
	}
	return 26
}

// maxMultiAttach is the number of instances an io1/io2 Multi-Attach volume can have.
const maxMultiAttach = 16

// checkAttach decides whether vol can be attached to inst at device, given the number of
// attachments inst already has and the devices it uses. It has no side effects.
func checkAttach(vol *Volume, inst *Instance, device string, instAttached int, usedDevices map[string]string) *apiError {
	if inst.State != "running" {
		return errf("IncorrectInstanceState", "The instance '%s' is not in the 'running' state.", inst.ID)
	}
	if vol.Zone != inst.Zone {
		return errf("InvalidVolume.ZoneMismatch", "The volume '%s' is not in the same availability zone as instance '%s'", vol.ID, inst.ID)
	}
	if a := vol.attachment(inst.ID); a != nil {
		return errf("VolumeInUse", "%s is already attached to instance %s", vol.ID, inst.ID)
	}
	switch {
	case vol.State == "creating" || vol.State == "deleting":
		return errf("IncorrectState", "The volume '%s' is in the '%s' state.", vol.ID, vol.State)
	case len(vol.Attachments) > 0 && !vol.MultiAttach:
		return errf("VolumeInUse", "%s is already attached to an instance", vol.ID)
	case len(vol.Attachments) >= maxMultiAttach:
		return errf("AttachmentLimitExceeded", "The volume '%s' is attached to the maximum of %d instances.", vol.ID, maxMultiAttach)
	}
	if other, ok := usedDevices[device]; ok {
		return errf("InvalidParameterValue", "Invalid value '%s' for unixDevice. Attachment point %s is already in use (by %s)", device, device, other)
	}
	if instAttached >= inst.AttachLimit {
		return errf("AttachmentLimitExceeded", "The instance '%s' has reached its limit of %d attached volumes.", inst.ID, inst.AttachLimit)
	}
	return nil
}

// checkModify validates a modification of vol to spec (zero fields keep the current
// value) and returns the resolved target.
func checkModify(vol *Volume, spec volumeSpec, inProgress bool) (volumeSpec, *apiError) {
	if inProgress {
		return spec, errf("IncorrectModificationState", "A modification of volume %s is already in progress.", vol.ID)
	}
	if vol.State != "available" && vol.State != "in-use" {
		return spec, errf("IncorrectState", "The volume '%s' is in the '%s' state.", vol.ID, vol.State)
	}
	typeChanged := spec.Type != "" && spec.Type != vol.Type
	if spec.Type == "" {
		spec.Type = vol.Type
	}
	if spec.Size == 0 {
		spec.Size = vol.SizeGiB
	} else if spec.Size < vol.SizeGiB {
		return spec, errInvalid("Size", strconv.Itoa(spec.Size), fmt.Sprintf("New size cannot be smaller than the existing size of %d GiB.", vol.SizeGiB))
	}
	vt := volumeTypes[spec.Type]
	if spec.Iops == 0 && vt.iopsSettable && !typeChanged || spec.Iops == 0 && vt.iopsRequired {
		spec.Iops = vol.Iops
	}
	if spec.Throughput == 0 && vt.thrSettable && !typeChanged {
		spec.Throughput = vol.Throughput
	}
	if !spec.MultiAttach {
		spec.MultiAttach = vol.MultiAttach && vt.multiAttach
	}
	if spec.Type == "gp2" {
		spec.Iops = 0
	}
	out, err := resolveSpec(spec)
	if err != nil {
		return out, err
	}
	if out.Type == vol.Type && out.Size == vol.SizeGiB && out.Iops == vol.Iops && out.Throughput == vol.Throughput && out.MultiAttach == vol.MultiAttach {
		return out, errf("InvalidParameterValue", "Invalid parameter value: the modification of volume %s changes nothing.", vol.ID)
	}
	return out, nil
}

package driver

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// StorageClass parameter keys the controller accepts (matched case-insensitively, as
// the upstream driver does). Anything else is refused with InvalidArgument.
const (
	ParamType              = "type"
	ParamIOPS              = "iops"
	ParamIOPSPerGB         = "iopspergb"
	ParamAllowIOPSIncrease = "allowautoiopspergbincrease"
	ParamThroughput        = "throughput"
	ParamEncrypted         = "encrypted"
	ParamKMSKeyID          = "kmskeyid"
	ParamFSType            = "csi.storage.k8s.io/fstype"
	ParamFSTypeLegacy      = "fstype"
	ParamBlockSize         = "blocksize"
	ParamInodeSize         = "inodesize"
	ParamBytesPerInode     = "bytesperinode"
	ParamNumberOfInodes    = "numberofinodes"
	ParamTagPrefix         = "tagspecification_"
	ParamPVName            = "csi.storage.k8s.io/pv/name"
	ParamPVCName           = "csi.storage.k8s.io/pvc/name"
	ParamPVCNamespace      = "csi.storage.k8s.io/pvc/namespace"
)

// Volume context keys NodeStageVolume reads: the mkfs options chosen in the
// StorageClass travel to the node in the volume context.
const (
	ContextBlockSize      = "blocksize"
	ContextInodeSize      = "inodesize"
	ContextBytesPerInode  = "bytesperinode"
	ContextNumberOfInodes = "numberofinodes"
)

// Volume types EBS offers.
var volumeTypes = map[string]bool{
	"gp2": true, "gp3": true, "io1": true, "io2": true, "sc1": true, "st1": true, "standard": true,
}

// DefaultVolumeType is used when the StorageClass names none, as on EBS.
const DefaultVolumeType = "gp3"

// volumeParams is the parsed form of a CreateVolume's parameters.
type volumeParams struct {
	Type       string
	IOPS       int32
	IOPSPerGB  int32
	AllowIOPS  bool
	Throughput int32
	Encrypted  bool
	KMSKeyID   string
	Tags       map[string]string
	// Context is copied into the volume context of the new volume.
	Context map[string]string
}

// parseVolumeParams validates StorageClass parameters. It is pure: it names the
// first offending key in its error (keys are visited in sorted order).
func parseVolumeParams(params map[string]string) (volumeParams, error) {
	p := volumeParams{Type: DefaultVolumeType, Tags: map[string]string{}, Context: map[string]string{}}
	keys := make([]string, 0, len(params))
	for k := range params {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		v := params[key]
		k := strings.ToLower(key)
		switch {
		case k == ParamType:
			t := strings.ToLower(v)
			if !volumeTypes[t] {
				return p, fmt.Errorf("parameter %q: unknown volume type %q (want one of gp2, gp3, io1, io2, sc1, st1, standard)", key, v)
			}
			p.Type = t
		case k == ParamIOPS:
			n, err := positiveInt32(key, v)
			if err != nil {
				return p, err
			}
			p.IOPS = n
		case k == ParamIOPSPerGB:
			n, err := positiveInt32(key, v)
			if err != nil {
				return p, err
			}
			p.IOPSPerGB = n
		case k == ParamAllowIOPSIncrease:
			b, err := parseBool(key, v)
			if err != nil {
				return p, err
			}
			p.AllowIOPS = b
		case k == ParamThroughput:
			n, err := positiveInt32(key, v)
			if err != nil {
				return p, err
			}
			p.Throughput = n
		case k == ParamEncrypted:
			b, err := parseBool(key, v)
			if err != nil {
				return p, err
			}
			p.Encrypted = b
		case k == ParamKMSKeyID:
			p.KMSKeyID = v
		case k == ParamFSType || k == ParamFSTypeLegacy:
			switch strings.ToLower(v) {
			case "", "ext2", "ext3", "ext4", "xfs":
			default:
				return p, fmt.Errorf("parameter %q: unsupported filesystem %q (want ext2, ext3, ext4 or xfs)", key, v)
			}
		case k == ParamBlockSize || k == ParamInodeSize || k == ParamBytesPerInode || k == ParamNumberOfInodes:
			if _, err := positiveInt32(key, v); err != nil {
				return p, err
			}
			p.Context[k] = v
		case strings.HasPrefix(k, ParamTagPrefix):
			tk, tv, ok := strings.Cut(v, "=")
			if !ok || tk == "" {
				return p, fmt.Errorf("parameter %q: tag %q is not key=value", key, v)
			}
			p.Tags[tk] = tv
		case k == ParamPVName:
			p.Tags["kubernetes.io/created-for/pv/name"] = v
		case k == ParamPVCName:
			p.Tags["kubernetes.io/created-for/pvc/name"] = v
		case k == ParamPVCNamespace:
			p.Tags["kubernetes.io/created-for/pvc/namespace"] = v
		default:
			return p, fmt.Errorf("parameter %q is not supported", key)
		}
	}
	if p.KMSKeyID != "" && !p.Encrypted {
		return p, fmt.Errorf("parameter %q needs %q=true", ParamKMSKeyID, ParamEncrypted)
	}
	if (p.IOPS > 0 || p.IOPSPerGB > 0) && !(p.Type == "io1" || p.Type == "io2" || p.Type == "gp3") {
		return p, fmt.Errorf("iops can only be set for io1, io2 and gp3 volumes, not %s", p.Type)
	}
	if p.IOPS > 0 && p.IOPSPerGB > 0 {
		return p, fmt.Errorf("parameters %q and %q are exclusive", ParamIOPS, ParamIOPSPerGB)
	}
	if p.Throughput > 0 && p.Type != "gp3" {
		return p, fmt.Errorf("throughput can only be set for gp3 volumes, not %s", p.Type)
	}
	return p, nil
}

// iopsFor returns the IOPS to ask for a volume of sizeGiB.
func (p volumeParams) iopsFor(sizeGiB int32) int32 {
	if p.IOPSPerGB == 0 {
		return p.IOPS
	}
	iops := int64(p.IOPSPerGB) * int64(sizeGiB)
	if iops < 100 && p.AllowIOPS {
		iops = 100
	}
	if iops > 64000 {
		iops = 64000
	}
	return int32(iops)
}

func positiveInt32(key, v string) (int32, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("parameter %q: %q is not a positive integer", key, v)
	}
	return int32(n), nil
}

func parseBool(key, v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("parameter %q: %q is not true or false", key, v)
	}
	return b, nil
}

// GiB is 2^30 bytes; EBS sizes are whole GiB.
const GiB = int64(1) << 30

// sizeGiB picks the size of a new volume from a CSI capacity range: the required
// bytes rounded up to whole GiB, else def. It fails when the limit forbids it.
func sizeGiB(required, limit int64, def int32) (int32, error) {
	if required < 0 || limit < 0 {
		return 0, fmt.Errorf("capacity range must not be negative (required %d, limit %d)", required, limit)
	}
	if limit > 0 && required > limit {
		return 0, fmt.Errorf("required bytes %d exceed limit bytes %d", required, limit)
	}
	if required == 0 {
		if limit > 0 && int64(def)*GiB > limit {
			// Largest whole GiB under the limit.
			g := limit / GiB
			if g == 0 {
				return 0, fmt.Errorf("limit bytes %d is less than 1 GiB, the smallest volume", limit)
			}
			return int32(g), nil
		}
		return def, nil
	}
	g := (required + GiB - 1) / GiB
	if limit > 0 && g*GiB > limit {
		return 0, fmt.Errorf("required bytes %d rounded up to %d GiB exceed limit bytes %d", required, g, limit)
	}
	if g > 64*1024 {
		return 0, fmt.Errorf("required bytes %d exceed the largest volume, 64 TiB", required)
	}
	return int32(g), nil
}

// mkfsOptions turns the volume context into mkfs options for fsType.
func mkfsOptions(fsType string, ctx map[string]string) ([]string, error) {
	var opts []string
	get := func(k string) string { return ctx[k] }
	switch fsType {
	case "ext2", "ext3", "ext4":
		if v := get(ContextBlockSize); v != "" {
			opts = append(opts, "-b", v)
		}
		if v := get(ContextInodeSize); v != "" {
			opts = append(opts, "-I", v)
		}
		if v := get(ContextBytesPerInode); v != "" {
			opts = append(opts, "-i", v)
		}
		if v := get(ContextNumberOfInodes); v != "" {
			opts = append(opts, "-N", v)
		}
	case "xfs":
		if v := get(ContextBlockSize); v != "" {
			opts = append(opts, "-b", "size="+v)
		}
		if v := get(ContextInodeSize); v != "" {
			opts = append(opts, "-i", "size="+v)
		}
		for _, k := range []string{ContextBytesPerInode, ContextNumberOfInodes} {
			if get(k) != "" {
				return nil, fmt.Errorf("volume context %q is not supported for xfs", k)
			}
		}
	default:
		return nil, fmt.Errorf("unsupported filesystem %q (want ext2, ext3, ext4 or xfs)", fsType)
	}
	for _, k := range []string{ContextBlockSize, ContextInodeSize, ContextBytesPerInode, ContextNumberOfInodes} {
		if v := get(k); v != "" {
			if _, err := positiveInt32(k, v); err != nil {
				return nil, err
			}
		}
	}
	return opts, nil
}

package driver

import (
	"fmt"
	"strings"
)

// nextDeviceName returns the first free EBS device name in the order /dev/xvdba,
// /dev/xvdbb, …, /dev/xvdzz, /dev/xvdaa, …, /dev/xvdaz, skipping the names in use.
func nextDeviceName(inUse map[string]bool) (string, error) {
	firsts := "bcdefghijklmnopqrstuvwxyza"
	for _, a := range firsts {
		for b := 'a'; b <= 'z'; b++ {
			name := fmt.Sprintf("/dev/xvd%c%c", a, b)
			if !inUse[name] && !inUse[strings.TrimPrefix(name, "/dev/")] {
				return name, nil
			}
		}
	}
	return "", fmt.Errorf("all %d device names are in use", 26*26)
}

// maxVolumesPerNode returns how many EBS volumes the node can take: the override
// when set, else the EC2 limit for the instance family (28 attachments shared with
// the root volume and the primary network interface on Nitro; 39 on Xen), less
// reserved.
func maxVolumesPerNode(instanceType string, override, reserved int64) int64 {
	if override > 0 {
		return override
	}
	family, _, _ := strings.Cut(instanceType, ".")
	limit := int64(28 - 2) // Nitro: root volume and one network interface
	if xenFamilies[family] {
		limit = 39
	}
	limit -= reserved
	if limit < 1 {
		limit = 1
	}
	return limit
}

// xenFamilies are the instance families on the Xen hypervisor, which have the older,
// larger block device limit.
var xenFamilies = map[string]bool{
	"c1": true, "c3": true, "c4": true, "d2": true, "g2": true, "g3": true, "h1": true,
	"i2": true, "i3": true, "m1": true, "m2": true, "m3": true, "m4": true, "p2": true,
	"p3": true, "r3": true, "r4": true, "t1": true, "t2": true, "x1": true, "x1e": true,
}

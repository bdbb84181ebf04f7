package driver

import (
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// Topology keys the driver reports and accepts, as the upstream driver does, so that
// StorageClasses and node labels written for EKS work unchanged.
const (
	TopologyKeyZone      = "topology.ebs.csi.aws.com/zone"
	TopologyKeyWellKnown = "topology.kubernetes.io/zone"
)

// zoneTopology is the accessible topology of a volume or node in zone.
func zoneTopology(zone string) *csi.Topology {
	return &csi.Topology{Segments: map[string]string{TopologyKeyZone: zone, TopologyKeyWellKnown: zone}}
}

// zoneOf returns the zone a topology segment set names, or "".
func zoneOf(t *csi.Topology) string {
	if t == nil {
		return ""
	}
	if z := t.GetSegments()[TopologyKeyZone]; z != "" {
		return z
	}
	return t.GetSegments()[TopologyKeyWellKnown]
}

// pickZone chooses the zone of a new volume: the first preferred topology that
// names a zone, else the first requisite one, else "" (the caller's default). It
// fails when the requirement names zones under keys the driver does not know, or
// when a preferred zone is not among the requisite ones.
func pickZone(req *csi.TopologyRequirement) (string, error) {
	if req == nil {
		return "", nil
	}
	requisite := map[string]bool{}
	for _, t := range req.GetRequisite() {
		if err := checkTopologyKeys(t); err != nil {
			return "", err
		}
		if z := zoneOf(t); z != "" {
			requisite[z] = true
		}
	}
	for _, t := range req.GetPreferred() {
		if err := checkTopologyKeys(t); err != nil {
			return "", err
		}
		if z := zoneOf(t); z != "" {
			if len(requisite) > 0 && !requisite[z] {
				continue
			}
			return z, nil
		}
	}
	for _, t := range req.GetRequisite() {
		if z := zoneOf(t); z != "" {
			return z, nil
		}
	}
	return "", nil
}

func checkTopologyKeys(t *csi.Topology) error {
	for k := range t.GetSegments() {
		switch k {
		case TopologyKeyZone, TopologyKeyWellKnown:
		default:
			if strings.HasPrefix(k, "topology.ebs.csi.aws.com/") || k == "kubernetes.io/os" {
				continue
			}
			return fmt.Errorf("topology key %q is not supported (want %s or %s)", k, TopologyKeyZone, TopologyKeyWellKnown)
		}
	}
	return nil
}

// zoneAllowed reports whether zone satisfies the requirement's requisite topologies
// (any zone when there are none).
func zoneAllowed(req *csi.TopologyRequirement, zone string) bool {
	if len(req.GetRequisite()) == 0 {
		return true
	}
	for _, t := range req.GetRequisite() {
		if z := zoneOf(t); z == "" || z == zone {
			return true
		}
	}
	return false
}

package provisioner

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// segment is one topology segment (key → value), e.g. {topology.ebs.csi.aws.com/zone: us-east-1b}.
type segment map[string]string

func (s segment) String() string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + s[k]
	}
	return strings.Join(parts, ",")
}

// topologyKeys returns the driver's topology keys on a node, from its CSINode.
func topologyKeys(csiNode *storagev1.CSINode, driver string) ([]string, bool) {
	if csiNode == nil {
		return nil, false
	}
	for _, d := range csiNode.Spec.Drivers {
		if d.Name == driver {
			return d.TopologyKeys, true
		}
	}
	return nil, false
}

// nodeSegment is the node's segment over keys, from its labels.
func nodeSegment(node *corev1.Node, keys []string) (segment, error) {
	s := segment{}
	for _, k := range keys {
		v, ok := node.Labels[k]
		if !ok {
			return nil, fmt.Errorf("node %q has no label %q (a topology key of its CSINode)", node.Name, k)
		}
		s[k] = v
	}
	return s, nil
}

// flattenAllowed expands a StorageClass's allowedTopologies into segments: each
// term is the product of its expressions' values.
func flattenAllowed(terms []corev1.TopologySelectorTerm) []segment {
	var out []segment
	for _, t := range terms {
		acc := []segment{{}}
		for _, e := range t.MatchLabelExpressions {
			var next []segment
			for _, base := range acc {
				for _, v := range e.Values {
					s := segment{}
					for k, bv := range base {
						s[k] = bv
					}
					s[e.Key] = v
					next = append(next, s)
				}
			}
			acc = next
		}
		if len(t.MatchLabelExpressions) > 0 {
			out = append(out, acc...)
		}
	}
	return out
}

// dedupSorted removes repeated segments and sorts them.
func dedupSorted(in []segment) []segment {
	seen := map[string]bool{}
	var out []segment
	for _, s := range in {
		if k := s.String(); !seen[k] {
			seen[k] = true
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// topologyInput is what the accessibility requirement of a new volume depends on.
type topologyInput struct {
	driver   string
	allowed  []corev1.TopologySelectorTerm
	selected *corev1.Node // the scheduler's choice (WaitForFirstConsumer), or nil
	nodes    map[string]*corev1.Node
	csiNodes []*storagev1.CSINode
	strict   bool   // requisite is the selected node's segment only
	pvName   string // spreads the preferred order of Immediate volumes
}

// accessibilityRequirements computes CreateVolume's accessibility requirements as
// the external-provisioner does. With a selected node: its segment (from its
// CSINode topology keys and labels) is preferred first; the requisite set is every
// segment of the nodes that run the driver with the same keys (only the selected
// one when strict), or the allowed topologies of the class. Without one: the
// allowed topologies, else every node's segment, preferred in an order rotated by
// the volume name's hash so that volumes spread. Nil when nothing is known.
func accessibilityRequirements(in topologyInput) (*csi.TopologyRequirement, error) {
	var requisite []segment
	var selected segment
	if in.selected != nil {
		var csiNode *storagev1.CSINode
		for _, cn := range in.csiNodes {
			if cn.Name == in.selected.Name {
				csiNode = cn
			}
		}
		keys, ok := topologyKeys(csiNode, in.driver)
		if !ok {
			return nil, fmt.Errorf("driver %s is not registered on selected node %q (no CSINode entry)", in.driver, in.selected.Name)
		}
		if len(keys) == 0 {
			return nil, fmt.Errorf("driver %s reports no topology keys on selected node %q", in.driver, in.selected.Name)
		}
		s, err := nodeSegment(in.selected, keys)
		if err != nil {
			return nil, err
		}
		selected = s
	}
	switch {
	case len(in.allowed) > 0:
		requisite = flattenAllowed(in.allowed)
		if selected != nil {
			found := false
			for _, r := range requisite {
				if covers(selected, r) {
					found = true
				}
			}
			if !found {
				return nil, fmt.Errorf("selected node %q (%s) is outside the class's allowedTopologies", in.selected.Name, selected)
			}
			if in.strict {
				requisite = []segment{selected}
			}
		}
	case selected != nil && in.strict:
		requisite = []segment{selected}
	default:
		var want []string
		if selected != nil {
			for k := range selected {
				want = append(want, k)
			}
			sort.Strings(want)
		}
		for _, cn := range in.csiNodes {
			keys, ok := topologyKeys(cn, in.driver)
			if !ok || len(keys) == 0 {
				continue
			}
			if want != nil && !sameKeys(keys, want) {
				continue
			}
			node := in.nodes[cn.Name]
			if node == nil {
				continue
			}
			if s, err := nodeSegment(node, keys); err == nil {
				requisite = append(requisite, s)
			}
		}
		if selected != nil {
			requisite = append(requisite, selected)
		}
	}
	requisite = dedupSorted(requisite)
	if len(requisite) == 0 {
		return nil, nil
	}
	var preferred []segment
	if selected != nil {
		preferred = append(preferred, selected)
		for _, r := range requisite {
			if r.String() != selected.String() {
				preferred = append(preferred, r)
			}
		}
	} else {
		h := fnv.New32a()
		h.Write([]byte(in.pvName))
		i := int(h.Sum32() % uint32(len(requisite)))
		preferred = append(append(preferred, requisite[i:]...), requisite[:i]...)
	}
	req := &csi.TopologyRequirement{}
	for _, s := range requisite {
		req.Requisite = append(req.Requisite, &csi.Topology{Segments: s})
	}
	for _, s := range preferred {
		req.Preferred = append(req.Preferred, &csi.Topology{Segments: s})
	}
	return req, nil
}

// covers says whether every key of r has the same value in s.
func covers(s, r segment) bool {
	for k, v := range r {
		if s[k] != v {
			return false
		}
	}
	return true
}

func sameKeys(keys, sortedWant []string) bool {
	if len(keys) != len(sortedWant) {
		return false
	}
	k := append([]string(nil), keys...)
	sort.Strings(k)
	for i := range k {
		if k[i] != sortedWant[i] {
			return false
		}
	}
	return true
}

// nodeAffinity turns a volume's accessible topology into the PV's required node
// affinity: one term per topology, one In expression per key.
func nodeAffinity(topos []*csi.Topology) *corev1.VolumeNodeAffinity {
	var terms []corev1.NodeSelectorTerm
	for _, t := range topos {
		segs := t.GetSegments()
		if len(segs) == 0 {
			continue
		}
		keys := make([]string, 0, len(segs))
		for k := range segs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var term corev1.NodeSelectorTerm
		for _, k := range keys {
			term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{
				Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{segs[k]},
			})
		}
		terms = append(terms, term)
	}
	if len(terms) == 0 {
		return nil
	}
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: terms}}
}

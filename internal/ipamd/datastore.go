package ipamd

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"time"

	"github.com/kubelab/kubelab/internal/util/atomicfile"
	"github.com/kubelab/kubelab/internal/util/ipamdapi"
)

// CheckpointFile is the checkpoint's name in the manager's dir, as aws-node keeps
// /var/run/aws-node/ipam.json.
const CheckpointFile = "ipam.json"

// CheckpointVersion is the checkpoint's format, aws-node's.
const CheckpointVersion = "vpc-cni-ipam/1"

// Checkpoint is the durable record of which attachment holds which address.
type Checkpoint struct {
	Version     string            `json:"version"`
	Allocations []CheckpointEntry `json:"allocations"`
}

// CheckpointEntry is one attachment's address.
type CheckpointEntry struct {
	ContainerID string             `json:"containerID"`
	IfName      string             `json:"ifName"`
	NetworkName string             `json:"networkName,omitempty"`
	IPv4        string             `json:"ipv4"`
	Metadata    CheckpointMetadata `json:"metadata,omitzero"`
}

// CheckpointMetadata names the pod of an entry.
type CheckpointMetadata struct {
	PodNamespace string `json:"k8sPodNamespace,omitempty"`
	PodName      string `json:"k8sPodName,omitempty"`
}

func (e CheckpointEntry) attachment() ipamdapi.Attachment {
	return ipamdapi.Attachment{ContainerID: e.ContainerID, IfName: e.IfName}
}

// readCheckpoint reads the checkpoint at path; a missing file is an empty one.
func readCheckpoint(path string) (Checkpoint, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return Checkpoint{Version: CheckpointVersion}, nil
	}
	if err != nil {
		return Checkpoint{}, fmt.Errorf("read checkpoint: %w", err)
	}
	var c Checkpoint
	if err := json.Unmarshal(b, &c); err != nil {
		return Checkpoint{}, fmt.Errorf("checkpoint %s: %w", path, err)
	}
	if c.Version != CheckpointVersion {
		return Checkpoint{}, fmt.Errorf("checkpoint %s: version %q, want %q", path, c.Version, CheckpointVersion)
	}
	return c, nil
}

// writeCheckpoint replaces the checkpoint at path atomically, without syncing it: it
// must outlive the manager's process (a restart, a kill -9), not the machine, whose end
// ends the pods it records too; a sync on every pod's ADD and DEL would double their time.
func writeCheckpoint(path string, c Checkpoint) error {
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Replace(path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("write checkpoint: %w", err)
	}
	return nil
}

// restore splits the checkpoint's entries into those whose address is still one of the
// instance's ENIs' (cloud, address → ENI id) and those the cloud no longer has (or a
// second entry for an address or attachment already kept), which are dropped.
func restore(entries []CheckpointEntry, cloud map[netip.Addr]string) (keep, drop []CheckpointEntry) {
	seenIP := map[netip.Addr]bool{}
	seenAtt := map[ipamdapi.Attachment]bool{}
	for _, e := range entries {
		ip, err := netip.ParseAddr(e.IPv4)
		if err != nil || cloud[ip] == "" || seenIP[ip] || seenAtt[e.attachment()] {
			drop = append(drop, e)
			continue
		}
		seenIP[ip], seenAtt[e.attachment()] = true, true
		keep = append(keep, e)
	}
	return keep, drop
}

// eniState is one attached ENI and its secondary addresses.
type eniState struct {
	ID, MAC, AttachmentID, SubnetID string
	DeviceNumber                    int
	Primary                         bool
	PrimaryIP                       netip.Addr
	SubnetCIDR                      netip.Prefix
	ips                             []*ipState
	// ready says the ENI's interface in the node is set up (its route table and address).
	ready bool
}

// ipState is one secondary address: the entry holding it, or when it was last released.
type ipState struct {
	addr     netip.Addr
	eni      *eniState
	owner    *CheckpointEntry
	released time.Time
}

// datastore is the pool: the ENIs, their addresses, who holds which. Not safe for
// concurrent use; the manager's lock guards it.
type datastore struct {
	enis []*eniState
	byIP map[netip.Addr]*ipState
}

func newDatastore() *datastore { return &datastore{byIP: map[netip.Addr]*ipState{}} }

func (d *datastore) eni(id string) *eniState {
	for _, e := range d.enis {
		if e.ID == id {
			return e
		}
	}
	return nil
}

// setENIs replaces the ENIs by what the cloud reports (each with its secondary
// addresses): addresses the cloud no longer has leave the pool, and the entries holding
// them are returned; new ones join it free. The ENIs' readiness carries over.
func (d *datastore) setENIs(cloud []cloudENI) (lost []CheckpointEntry) {
	old := map[string]*eniState{}
	for _, e := range d.enis {
		old[e.ID] = e
	}
	byIP := map[netip.Addr]*ipState{}
	var enis []*eniState
	for _, c := range cloud {
		e := &eniState{ID: c.ID, MAC: c.MAC, AttachmentID: c.AttachmentID, SubnetID: c.SubnetID, DeviceNumber: c.DeviceNumber,
			Primary: c.DeviceNumber == 0, PrimaryIP: c.PrimaryIP, SubnetCIDR: c.SubnetCIDR}
		if o := old[c.ID]; o != nil {
			e.ready = o.ready
		}
		for _, a := range c.Secondary {
			ip := d.byIP[a]
			if ip == nil {
				ip = &ipState{addr: a}
			}
			ip.eni = e
			e.ips = append(e.ips, ip)
			byIP[a] = ip
		}
		enis = append(enis, e)
	}
	for a, ip := range d.byIP {
		if byIP[a] == nil && ip.owner != nil {
			lost = append(lost, *ip.owner)
		}
	}
	slices.SortFunc(enis, func(a, b *eniState) int { return a.DeviceNumber - b.DeviceNumber })
	d.enis, d.byIP = enis, byIP
	return lost
}

// owner finds the address a holds.
func (d *datastore) owner(a ipamdapi.Attachment) *ipState {
	for _, e := range d.enis {
		for _, ip := range e.ips {
			if ip.owner != nil && ip.owner.attachment() == a {
				return ip
			}
		}
	}
	return nil
}

// assign gives entry e a free address whose cooldown is over at now, of the ready ENI
// with the lowest device number (the primary's first: its pods need no policy routing).
func (d *datastore) assign(e CheckpointEntry, now time.Time, cooldown time.Duration) *ipState {
	for _, eni := range d.enis {
		if !eni.ready {
			continue
		}
		for _, ip := range eni.ips {
			if ip.owner == nil && now.Sub(ip.released) >= cooldown {
				e.IPv4 = ip.addr.String()
				ip.owner = &e
				return ip
			}
		}
	}
	return nil
}

// release frees ip at now.
func (ip *ipState) release(now time.Time) {
	ip.owner = nil
	ip.released = now
}

// remove takes the addresses ips of an ENI out of the pool (before they are given back).
func (d *datastore) remove(eni *eniState, ips []netip.Addr) {
	eni.ips = slices.DeleteFunc(eni.ips, func(ip *ipState) bool { return slices.Contains(ips, ip.addr) })
	for _, a := range ips {
		delete(d.byIP, a)
	}
}

// add puts addresses of an ENI into the pool, free.
func (d *datastore) add(eni *eniState, ips []netip.Addr) {
	for _, a := range ips {
		if d.byIP[a] != nil {
			continue
		}
		ip := &ipState{addr: a, eni: eni}
		eni.ips = append(eni.ips, ip)
		d.byIP[a] = ip
	}
}

// checkpoint is the pool's allocations in address order.
func (d *datastore) checkpoint() Checkpoint {
	c := Checkpoint{Version: CheckpointVersion, Allocations: []CheckpointEntry{}}
	for _, e := range d.enis {
		for _, ip := range e.ips {
			if ip.owner != nil {
				c.Allocations = append(c.Allocations, *ip.owner)
			}
		}
	}
	slices.SortFunc(c.Allocations, func(a, b CheckpointEntry) int {
		x, _ := netip.ParseAddr(a.IPv4)
		y, _ := netip.ParseAddr(b.IPv4)
		return x.Compare(y)
	})
	return c
}

// poolENIs is the pool as Decide sees it at now.
func (d *datastore) poolENIs(now time.Time, cooldown time.Duration) []PoolENI {
	out := make([]PoolENI, 0, len(d.enis))
	for _, e := range d.enis {
		p := PoolENI{ID: e.ID, DeviceNumber: e.DeviceNumber, Primary: e.Primary, Assigned: len(e.ips),
			Freeable: freeable(e.ips, now, cooldown)}
		for _, ip := range e.ips {
			if ip.owner != nil {
				p.Used++
			}
		}
		out = append(out, p)
	}
	return out
}

// stats counts the pool's addresses: all and those in use.
func (d *datastore) stats() (total, used int) {
	for _, e := range d.enis {
		for _, ip := range e.ips {
			total++
			if ip.owner != nil {
				used++
			}
		}
	}
	return total, used
}

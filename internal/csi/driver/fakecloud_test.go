package driver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// FakeCloud is an in-memory Cloud for unit tests and the hollow sanity run. It keeps
// the EC2 rules the driver relies on: client tokens, zone match on attach, one device
// name per attachment, in-use volumes not deletable, "creating" and "attaching" seen
// once before they settle, and position tokens for DescribeSnapshots pages.
type FakeCloud struct {
	mu        sync.Mutex
	zones     []string
	volumes   map[string]*Disk
	tokens    map[string]string // client token -> volume id
	instances map[string]*Instance
	snapshots map[string]*Snapshot
	mods      map[string]string
	seq       int
	calls     map[string]int
	// NoCopyVolumes makes CopyVolume answer ErrUnsupported.
	NoCopyVolumes bool
	// DeviceDirs, when set for an instance, get EBS-style links on attach (to a
	// regular file standing for the device) and lose them on detach.
	DeviceDirs map[string]string
	// Fail, when set, is asked before each call and fails it with its error.
	Fail func(op, id string) error
}

func NewFakeCloud(zones ...string) *FakeCloud {
	if len(zones) == 0 {
		zones = []string{"us-east-1a", "us-east-1b", "us-east-1c"}
	}
	return &FakeCloud{
		zones: zones, volumes: map[string]*Disk{}, tokens: map[string]string{},
		instances: map[string]*Instance{}, snapshots: map[string]*Snapshot{}, mods: map[string]string{},
		calls: map[string]int{}, DeviceDirs: map[string]string{},
	}
}

// AddInstance makes an instance in zone and returns its id.
func (f *FakeCloud) AddInstance(zone, typ string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seq++
	id := fmt.Sprintf("i-%017x", f.seq)
	f.instances[id] = &Instance{ID: id, Zone: zone, Type: typ, State: "running", Devices: map[string]string{"/dev/xvda": ""}}
	return id
}

// Calls returns how many times op was called.
func (f *FakeCloud) Calls(op string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[op]
}

// Volumes returns a copy of every volume.
func (f *FakeCloud) Volumes() []Disk {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Disk
	for _, v := range f.volumes {
		out = append(out, *cloneDisk(v))
	}
	return out
}

func (f *FakeCloud) enter(op, id string) error {
	f.calls[op]++
	if f.Fail != nil {
		return f.Fail(op, id)
	}
	return nil
}

// volume returns volume id, or ErrNotFound; f.mu is held.
func (f *FakeCloud) volume(id string) (*Disk, error) {
	v, ok := f.volumes[id]
	if !ok {
		return nil, fmt.Errorf("volume %s: %w", id, ErrNotFound)
	}
	return v, nil
}

// enterVolume counts op on volume id (failing it as Fail says) and returns the volume;
// f.mu is held.
func (f *FakeCloud) enterVolume(op, id string) (*Disk, error) {
	if err := f.enter(op, id); err != nil {
		return nil, err
	}
	return f.volume(id)
}

// instance returns instance id, or ErrNotFound; f.mu is held.
func (f *FakeCloud) instance(id string) (*Instance, error) {
	inst, ok := f.instances[id]
	if !ok {
		return nil, fmt.Errorf("instance %s: %w", id, ErrNotFound)
	}
	return inst, nil
}

func (f *FakeCloud) newID(prefix string) string {
	f.seq++
	return fmt.Sprintf("%s-%017x", prefix, f.seq)
}

func cloneDisk(d *Disk) *Disk {
	c := *d
	c.Tags = map[string]string{}
	for k, v := range d.Tags {
		c.Tags[k] = v
	}
	c.Attachments = append([]Attachment(nil), d.Attachments...)
	return &c
}

func (f *FakeCloud) CreateVolume(_ context.Context, in CreateVolumeInput) (*Disk, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("CreateVolume", ""); err != nil {
		return nil, err
	}
	if id, ok := f.tokens[in.ClientToken]; ok && in.ClientToken != "" {
		v := f.volumes[id]
		if v == nil || v.SizeGiB != in.SizeGiB || v.Zone != in.Zone {
			return nil, fmt.Errorf("client token reused with other parameters: %w", ErrIdempotentParams)
		}
		return cloneDisk(v), nil
	}
	if !f.zoneKnown(in.Zone) {
		return nil, fmt.Errorf("zone %q: %w", in.Zone, ErrInvalidParameter)
	}
	if in.SizeGiB < 1 {
		return nil, fmt.Errorf("size %d: %w", in.SizeGiB, ErrInvalidParameter)
	}
	if in.SnapshotID != "" {
		s, ok := f.snapshots[in.SnapshotID]
		if !ok {
			return nil, fmt.Errorf("snapshot %s: %w", in.SnapshotID, ErrNotFound)
		}
		if in.SizeGiB < s.SizeGiB {
			return nil, fmt.Errorf("size below snapshot: %w", ErrInvalidParameter)
		}
	}
	d := &Disk{
		ID: f.newID("vol"), SizeGiB: in.SizeGiB, Zone: in.Zone, State: VolumeCreating, Type: in.Type,
		IOPS: in.IOPS, Throughput: in.Throughput, SnapshotID: in.SnapshotID, MultiAttach: in.MultiAttach,
		Tags: map[string]string{},
	}
	for k, v := range in.Tags {
		d.Tags[k] = v
	}
	f.volumes[d.ID] = d
	f.tokens[in.ClientToken] = d.ID
	return cloneDisk(d), nil
}

func (f *FakeCloud) zoneKnown(z string) bool {
	for _, k := range f.zones {
		if k == z {
			return true
		}
	}
	return false
}

func (f *FakeCloud) CopyVolume(_ context.Context, in CopyVolumeInput) (*Disk, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("CopyVolumes", in.SourceVolumeID); err != nil {
		return nil, err
	}
	if f.NoCopyVolumes {
		return nil, fmt.Errorf("CopyVolumes: %w", ErrUnsupported)
	}
	src, err := f.volume(in.SourceVolumeID)
	if err != nil {
		return nil, err
	}
	d := &Disk{ID: f.newID("vol"), SizeGiB: in.SizeGiB, Zone: src.Zone, State: VolumeCreating, Type: src.Type,
		SourceID: src.ID, Tags: map[string]string{}}
	for k, v := range in.Tags {
		d.Tags[k] = v
	}
	f.volumes[d.ID] = d
	return cloneDisk(d), nil
}

func (f *FakeCloud) DeleteVolume(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, err := f.enterVolume("DeleteVolume", id)
	if err != nil {
		return err
	}
	if len(v.Attachments) > 0 {
		return fmt.Errorf("volume %s is in use: %w", id, ErrIncorrectState)
	}
	delete(f.volumes, id)
	return nil
}

// settle moves transient states one step, so each is seen once.
func (f *FakeCloud) settle(v *Disk) {
	if v.State == VolumeCreating {
		v.State = VolumeAvailable
		return
	}
	for i := range v.Attachments {
		if v.Attachments[i].State == AttachAttaching {
			v.Attachments[i].State = AttachAttached
		}
	}
	var keep []Attachment
	for _, a := range v.Attachments {
		if a.State != AttachDetaching {
			keep = append(keep, a)
		}
	}
	v.Attachments = keep
	if len(keep) == 0 {
		v.State = VolumeAvailable
	}
}

func (f *FakeCloud) DescribeVolume(_ context.Context, id string) (*Disk, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, err := f.enterVolume("DescribeVolumes", id)
	if err != nil {
		return nil, err
	}
	out := cloneDisk(v)
	f.settle(v)
	return out, nil
}

func (f *FakeCloud) FindVolumesByName(_ context.Context, name string) ([]*Disk, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("DescribeVolumes", name); err != nil {
		return nil, err
	}
	var out []*Disk
	for _, v := range f.volumes {
		if v.Tags[TagVolumeName] == name {
			out = append(out, cloneDisk(v))
		}
	}
	return out, nil
}

func deviceLinkNames(dev, volID string) []string {
	return []string{
		strings.TrimPrefix(dev, "/dev/"),
		filepath.Join("disk", "by-id", "nvme-Amazon_Elastic_Block_Store_"+strings.ReplaceAll(volID, "-", "")),
	}
}

func (f *FakeCloud) AttachVolume(_ context.Context, volID, instID, device string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, err := f.enterVolume("AttachVolume", volID)
	if err != nil {
		return err
	}
	inst, err := f.instance(instID)
	if err != nil {
		return err
	}
	if v.Zone != inst.Zone {
		return fmt.Errorf("volume %s is in %s, instance %s in %s: %w", volID, v.Zone, instID, inst.Zone, ErrZoneMismatch)
	}
	if _, used := inst.Devices[device]; used {
		return fmt.Errorf("device %s is already in use: %w", device, ErrDeviceInUse)
	}
	if len(v.Attachments) > 0 && !v.MultiAttach {
		return fmt.Errorf("volume %s is attached: %w", volID, ErrIncorrectState)
	}
	v.Attachments = append(v.Attachments, Attachment{InstanceID: instID, Device: device, State: AttachAttaching})
	v.State = VolumeInUse
	inst.Devices[device] = volID
	if dir := f.DeviceDirs[instID]; dir != "" {
		backing := filepath.Join(dir, ".backing-"+volID)
		if err := os.WriteFile(backing, nil, 0o600); err != nil {
			return err
		}
		_ = os.Truncate(backing, int64(v.SizeGiB)*GiB)
		for _, n := range deviceLinkNames(device, volID) {
			p := filepath.Join(dir, n)
			_ = os.MkdirAll(filepath.Dir(p), 0o755)
			_ = os.Symlink(backing, p)
		}
	}
	return nil
}

func (f *FakeCloud) DetachVolume(_ context.Context, volID, instID string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, err := f.enterVolume("DetachVolume", volID)
	if err != nil {
		return err
	}
	inst, err := f.instance(instID)
	if err != nil {
		return err
	}
	a := v.AttachmentTo(instID)
	if a == nil {
		return fmt.Errorf("attachment of %s to %s: %w", volID, instID, ErrNotFound)
	}
	a.State = AttachDetaching
	delete(inst.Devices, a.Device)
	if dir := f.DeviceDirs[instID]; dir != "" {
		for _, n := range deviceLinkNames(a.Device, volID) {
			_ = os.Remove(filepath.Join(dir, n))
		}
		_ = os.Remove(filepath.Join(dir, ".backing-"+volID))
	}
	return nil
}

func (f *FakeCloud) ModifyVolumeSize(_ context.Context, id string, size int32) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, err := f.enterVolume("ModifyVolume", id)
	if err != nil {
		return "", err
	}
	if size < v.SizeGiB {
		return "", fmt.Errorf("cannot shrink: %w", ErrInvalidParameter)
	}
	v.SizeGiB = size
	f.mods[id] = ModModifying
	return ModModifying, nil
}

func (f *FakeCloud) DescribeVolumeModification(_ context.Context, id string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("DescribeVolumesModifications", id); err != nil {
		return "", err
	}
	st, ok := f.mods[id]
	if !ok {
		return "", fmt.Errorf("no modification of %s: %w", id, ErrNotFound)
	}
	f.mods[id] = ModOptimizing
	return st, nil
}

func (f *FakeCloud) DescribeInstance(_ context.Context, id string) (*Instance, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("DescribeInstances", id); err != nil {
		return nil, err
	}
	inst, err := f.instance(id)
	if err != nil {
		return nil, err
	}
	c := *inst
	c.Devices = map[string]string{}
	for k, v := range inst.Devices {
		c.Devices[k] = v
	}
	return &c, nil
}

func (f *FakeCloud) CreateSnapshot(_ context.Context, in CreateSnapshotInput) (*Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, err := f.enterVolume("CreateSnapshot", in.VolumeID)
	if err != nil {
		return nil, err
	}
	s := &Snapshot{ID: f.newID("snap"), VolumeID: v.ID, SizeGiB: v.SizeGiB, State: SnapshotPending,
		CreationTime: time.Now(), Tags: map[string]string{}}
	for k, val := range in.Tags {
		s.Tags[k] = val
	}
	f.snapshots[s.ID] = s
	c := *s
	s.State = SnapshotCompleted
	return &c, nil
}

func (f *FakeCloud) DeleteSnapshot(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("DeleteSnapshot", id); err != nil {
		return err
	}
	if _, ok := f.snapshots[id]; !ok {
		return fmt.Errorf("snapshot %s: %w", id, ErrNotFound)
	}
	delete(f.snapshots, id)
	return nil
}

func (f *FakeCloud) DescribeSnapshot(_ context.Context, id string) (*Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("DescribeSnapshots", id); err != nil {
		return nil, err
	}
	s, ok := f.snapshots[id]
	if !ok {
		return nil, fmt.Errorf("snapshot %s: %w", id, ErrNotFound)
	}
	c := *s
	return &c, nil
}

func (f *FakeCloud) FindSnapshotsByName(_ context.Context, name string) ([]*Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("DescribeSnapshots", name); err != nil {
		return nil, err
	}
	var out []*Snapshot
	for _, s := range f.snapshots {
		if s.Tags[TagSnapshotName] == name {
			c := *s
			out = append(out, &c)
		}
	}
	return out, nil
}

func (f *FakeCloud) ListSnapshots(_ context.Context, volID string, max int32, token string) ([]*Snapshot, string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("DescribeSnapshots", volID); err != nil {
		return nil, "", err
	}
	if max != 0 && (max < 5 || max > 1000) {
		return nil, "", fmt.Errorf("MaxResults %d: %w", max, ErrInvalidParameter)
	}
	var all []*Snapshot
	for _, s := range f.snapshots {
		if volID == "" || s.VolumeID == volID {
			c := *s
			all = append(all, &c)
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	start := 0
	if token != "" {
		n, err := strconv.Atoi(token)
		if err != nil || n > len(all) {
			return nil, "", fmt.Errorf("token %q: %w", token, ErrInvalidParameter)
		}
		start = n
	}
	end := len(all)
	if max > 0 && start+int(max) < end {
		end = start + int(max)
	}
	next := ""
	if end < len(all) {
		next = strconv.Itoa(end)
	}
	return all[start:end], next, nil
}

func (f *FakeCloud) AvailabilityZones(context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.enter("DescribeAvailabilityZones", ""); err != nil {
		return nil, err
	}
	return append([]string(nil), f.zones...), nil
}

var _ Cloud = (*FakeCloud)(nil)

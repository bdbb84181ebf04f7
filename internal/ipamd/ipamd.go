package ipamd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	"github.com/kubelab/kubelab/internal/util/ipamdapi"
)

// Manager is one node's IP address manager.
type Manager struct {
	cfg Config
	api EC2
	net network

	mu   sync.Mutex
	inst instance
	ds   *datastore
	// changed is closed (and replaced) whenever the pool gains addresses.
	changed chan struct{}
	// kick asks the pool loop for a pass now.
	kick chan struct{}
	// started is closed once the pool is restored and the API serves.
	started chan struct{}
}

// New builds the manager of one node over the EC2 API api.
func New(cfg Config, api EC2) (*Manager, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, api: api, ds: newDatastore(), changed: make(chan struct{}),
		kick: make(chan struct{}, 1), started: make(chan struct{})}
	if cfg.SkipNetwork {
		m.net = noNetwork{}
	} else {
		m.net = &nodeNetwork{path: cfg.NetNS, vpc: cfg.VPCCIDR, router: cfg.RouterIP, logger: cfg.Logger}
	}
	return m, nil
}

// SocketPath is where the manager's API listens.
func (m *Manager) SocketPath() string { return m.cfg.Socket }

// Started is closed once the manager serves its API.
func (m *Manager) Started() <-chan struct{} { return m.started }

// Run restores the pool from the checkpoint and the cloud, serves the CNI plugin's
// requests and keeps the warm pool until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	if err := os.MkdirAll(m.cfg.Dir, 0o700); err != nil {
		return fmt.Errorf("ipamd: %w", err)
	}
	if err := m.start(ctx); err != nil {
		return fmt.Errorf("ipamd %s: %w", m.cfg.NodeName, err)
	}
	sock := m.SocketPath()
	if err := os.MkdirAll(filepath.Dir(sock), 0o700); err != nil {
		return fmt.Errorf("ipamd: %w", err)
	}
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("ipamd %s: %w", m.cfg.NodeName, err)
	}
	m.readyENIs()
	close(m.started)
	errc := make(chan error, 1)
	go func() { errc <- serve(ctx, l, m.handler()) }()
	m.loop(ctx)
	return <-errc
}

// start learns the instance, sets up the node's rules, and restores the pool: the
// cloud's ENIs and addresses, and the checkpoint's allocations that the cloud still has.
func (m *Manager) start(ctx context.Context) error {
	inst, err := describeInstance(ctx, m.api, m.cfg.InstanceID)
	if err != nil {
		return err
	}
	enis, err := describeENIs(ctx, m.api, inst)
	if err != nil {
		return err
	}
	if len(enis) == 0 || enis[0].DeviceNumber != 0 {
		return fmt.Errorf("instance %s has no primary network interface", inst.ID)
	}
	if err := m.net.setupHost(enis[0].PrimaryIP); err != nil {
		return err
	}
	ckptPath := filepath.Join(m.cfg.Dir, CheckpointFile)
	ckpt, err := readCheckpoint(ckptPath)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.inst = inst
	m.ds.setENIs(enis)
	cloud := map[netip.Addr]string{}
	for _, e := range m.ds.enis {
		for _, ip := range e.ips {
			cloud[ip.addr] = e.ID
		}
	}
	keep, drop := restore(ckpt.Allocations, cloud)
	for _, e := range drop {
		m.cfg.Logger.Warn("checkpoint entry dropped: the address is not the instance's any more", "node", m.cfg.NodeName,
			"container", e.ContainerID, "ip", e.IPv4, "pod", e.Metadata.PodNamespace+"/"+e.Metadata.PodName)
	}
	for _, e := range keep {
		ip := m.ds.byIP[netip.MustParseAddr(e.IPv4)]
		entry := e
		ip.owner = &entry
	}
	m.cfg.Logger.Info("ipamd started", "node", m.cfg.NodeName, "instance", inst.ID, "type", inst.Type,
		"maxENIs", inst.Limits.MaxENIs, "ipv4PerENI", inst.Limits.IPv4PerENI, "enis", len(m.ds.enis), "restored", len(keep), "dropped", len(drop))
	return writeCheckpoint(ckptPath, m.ds.checkpoint())
}

// readyENIs sets up the interfaces of the ENIs not yet ready in the node (the primary's
// is the node's eth0, which the VPC set up) and lets ADDs use their addresses.
func (m *Manager) readyENIs() {
	m.mu.Lock()
	var todo []eniState
	for _, e := range m.ds.enis {
		if !e.ready && e.Primary {
			e.ready = true
		} else if !e.ready {
			todo = append(todo, *e)
		}
	}
	m.notify()
	m.mu.Unlock()
	for _, e := range todo {
		if err := m.net.setupENI(&e); err != nil {
			m.cfg.Logger.Warn("set up ENI", "node", m.cfg.NodeName, "eni", e.ID, "device", e.DeviceNumber, "err", err)
			continue
		}
		m.mu.Lock()
		if x := m.ds.eni(e.ID); x != nil {
			x.ready = true
			m.notify()
		}
		m.mu.Unlock()
	}
}

// notify wakes the ADDs waiting for an address. Called with m.mu held.
func (m *Manager) notify() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// kickPool asks for a pass of the pool loop.
func (m *Manager) kickPool() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// loop keeps the warm pool: a pass when kicked and every PoolPeriod, and a comparison
// with the cloud every ResyncPeriod.
func (m *Manager) loop(ctx context.Context) {
	pool := time.NewTicker(m.cfg.PoolPeriod)
	defer pool.Stop()
	resync := time.NewTicker(m.cfg.ResyncPeriod)
	defer resync.Stop()
	m.kickPool()
	for {
		select {
		case <-ctx.Done():
			return
		case <-resync.C:
			if err := m.resync(ctx); err != nil && ctx.Err() == nil {
				m.cfg.Logger.Warn("resync with the cloud", "node", m.cfg.NodeName, "err", err)
			}
		case <-pool.C:
		case <-m.kick:
		}
		if err := m.poolPass(ctx); err != nil && ctx.Err() == nil {
			m.cfg.Logger.Warn("warm pool", "node", m.cfg.NodeName, "err", err)
		}
	}
}

// resync compares the pool with the cloud's ENIs: addresses the cloud no longer has
// leave the pool and free their holders' entries (logged); new ones join.
func (m *Manager) resync(ctx context.Context) error {
	m.mu.Lock()
	inst := m.inst
	m.mu.Unlock()
	enis, err := describeENIs(ctx, m.api, inst)
	if err != nil {
		return err
	}
	m.mu.Lock()
	for _, e := range m.ds.setENIs(enis) {
		m.cfg.Logger.Warn("address lost: the cloud no longer has it on the instance", "node", m.cfg.NodeName,
			"ip", e.IPv4, "container", e.ContainerID)
	}
	err = m.persist()
	m.mu.Unlock()
	m.readyENIs()
	return err
}

// persist writes the checkpoint. Called with m.mu held.
func (m *Manager) persist() error {
	return writeCheckpoint(filepath.Join(m.cfg.Dir, CheckpointFile), m.ds.checkpoint())
}

// poolPass decides and carries out one change of the pool.
func (m *Manager) poolPass(ctx context.Context) error {
	m.mu.Lock()
	now := m.cfg.Now()
	d := Decide(m.ds.poolENIs(now, m.cfg.IPCooldown), m.inst.Limits, m.cfg.Targets)
	if d.Empty() {
		m.mu.Unlock()
		return nil
	}
	// Addresses about to be given back leave the pool first, so that no ADD takes one.
	var unassign []struct {
		eni *eniState
		ips []netip.Addr
	}
	for _, u := range d.Unassign {
		e := m.ds.eni(u.ENI)
		m.ds.remove(e, u.IPs)
		unassign = append(unassign, struct {
			eni *eniState
			ips []netip.Addr
		}{e, u.IPs})
	}
	var del *eniState
	if d.DeleteENI != "" {
		del = m.ds.eni(d.DeleteENI)
		m.ds.enis = deleteENIState(m.ds.enis, del)
		for _, ip := range del.ips {
			delete(m.ds.byIP, ip.addr)
		}
	}
	device, canAttach := freeDevice(m.ds.enis, m.inst.Limits.MaxENIs)
	inst := m.inst
	m.mu.Unlock()

	var errs []error
	for _, a := range d.Assign {
		start := time.Now()
		out, err := m.api.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{
			NetworkInterfaceId: aws.String(a.ENI), SecondaryPrivateIpAddressCount: aws.Int32(int32(a.Count))})
		took := time.Since(start)
		if err != nil {
			errs = append(errs, fmt.Errorf("assign %d addresses to %s: %w", a.Count, a.ENI, err))
			continue
		}
		ips := parseAddrs(out.AssignedPrivateIpAddresses)
		m.mu.Lock()
		if e := m.ds.eni(a.ENI); e != nil {
			m.ds.add(e, ips)
			m.notify()
		}
		m.mu.Unlock()
		m.cfg.Logger.Info("assigned addresses", "node", m.cfg.NodeName, "eni", a.ENI, "ips", ips,
			"call", "AssignPrivateIpAddresses", "took", took)
	}
	for _, u := range unassign {
		_, err := m.api.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{
			NetworkInterfaceId: aws.String(u.eni.ID), PrivateIpAddresses: addrStrings(u.ips)})
		if err != nil {
			m.mu.Lock()
			m.ds.add(u.eni, u.ips) // still the ENI's: back into the pool
			m.mu.Unlock()
			errs = append(errs, fmt.Errorf("unassign %v from %s: %w", u.ips, u.eni.ID, err))
			continue
		}
		m.cfg.Logger.Info("gave addresses back", "node", m.cfg.NodeName, "eni", u.eni.ID, "ips", u.ips)
	}
	if del != nil {
		if err := m.net.teardownENI(del); err != nil {
			m.cfg.Logger.Warn("tear down ENI", "node", m.cfg.NodeName, "eni", del.ID, "err", err)
		}
		if err := deleteENI(ctx, m.api, del); err != nil {
			errs = append(errs, err)
		} else {
			m.cfg.Logger.Info("deleted surplus ENI", "node", m.cfg.NodeName, "eni", del.ID)
		}
	}
	if d.AttachENI && canAttach {
		id, took, err := createENI(ctx, m.api, inst, m.cfg.ClusterName, device, m.cfg.Now())
		if err != nil {
			errs = append(errs, err)
		}
		if id != "" {
			m.cfg.Logger.Info("attached ENI", "node", m.cfg.NodeName, "eni", id, "device", device,
				"createTook", took.create, "attachTook", took.attach)
			if err := m.resync(ctx); err != nil {
				errs = append(errs, err)
			}
			m.kickPool() // fill it
		}
	}
	if len(d.Unassign) > 0 || del != nil {
		m.mu.Lock()
		err := m.persist()
		m.mu.Unlock()
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func deleteENIState(enis []*eniState, e *eniState) []*eniState {
	out := enis[:0:0]
	for _, x := range enis {
		if x != e {
			out = append(out, x)
		}
	}
	return out
}

func addrStrings(ips []netip.Addr) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return out
}

// errNoAddress says that no address is free and the pool cannot grow.
var errNoAddress = errors.New("no available IP addresses")

// add gives req's attachment an address: the one it holds, else a free one, waiting
// (up to AddTimeout) while the pool gets more.
func (m *Manager) add(ctx context.Context, req ipamdapi.AddRequest) (ipamdapi.Assignment, error) {
	ctx, cancel := context.WithTimeout(ctx, m.cfg.AddTimeout)
	defer cancel()
	start := time.Now()
	waited := false // whether the ADD waited for the pool to get an address
	for {
		m.mu.Lock()
		ip := m.ds.owner(req.Attachment)
		if ip == nil {
			ip = m.ds.assign(CheckpointEntry{ContainerID: req.ContainerID, IfName: req.IfName, NetworkName: req.NetworkName,
				Metadata: CheckpointMetadata{PodNamespace: req.PodNamespace, PodName: req.PodName}}, m.cfg.Now(), m.cfg.IPCooldown)
			if ip != nil {
				if err := m.persist(); err != nil {
					ip.owner = nil
					m.mu.Unlock()
					return ipamdapi.Assignment{}, err
				}
				attrs := []any{"node", m.cfg.NodeName, "ip", ip.addr, "eni", ip.eni.ID,
					"pod", req.PodNamespace + "/" + req.PodName, "container", req.ContainerID}
				if waited {
					attrs = append(attrs, "waited", time.Since(start))
				}
				m.cfg.Logger.Info("assigned pod address", attrs...)
			}
		}
		if ip != nil {
			a := m.assignment(ip)
			m.mu.Unlock()
			m.kickPool()
			return a, nil
		}
		full := m.atLimit()
		changed := m.changed
		m.mu.Unlock()
		if full {
			return ipamdapi.Assignment{}, fmt.Errorf("%w: all %d addresses of the instance's ENIs are in use", errNoAddress, m.capacity())
		}
		m.kickPool()
		waited = true
		select {
		case <-ctx.Done():
			return ipamdapi.Assignment{}, fmt.Errorf("%w: the pool got none in %v", errNoAddress, m.cfg.AddTimeout)
		case <-changed:
		}
	}
}

// atLimit says whether every address the instance type allows is assigned and in use.
// Called with m.mu held.
func (m *Manager) atLimit() bool {
	total, used := m.ds.stats()
	return len(m.ds.enis) >= m.inst.Limits.MaxENIs && total >= m.inst.Limits.MaxENIs*m.inst.Limits.SecondaryPerENI() && used >= total
}

func (m *Manager) capacity() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.inst.Limits.MaxENIs * m.inst.Limits.SecondaryPerENI()
}

// assignment describes ip for the plugin. Called with m.mu held.
func (m *Manager) assignment(ip *ipState) ipamdapi.Assignment {
	return ipamdapi.Assignment{IP: ip.addr.String(), ENI: ip.eni.ID, DeviceNumber: ip.eni.DeviceNumber,
		RouteTable: RouteTable(ip.eni.DeviceNumber), VPCCIDR: m.cfg.VPCCIDR.String()}
}

// RouteTable is the policy-routing table of the ENI at device: main for the primary,
// device+1 for the others, as aws-node numbers them.
func RouteTable(device int) int {
	if device == 0 {
		return 254
	}
	return device + 1
}

// del releases a's address.
func (m *Manager) del(a ipamdapi.Attachment) (ipamdapi.Release, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ip := m.ds.owner(a)
	if ip == nil {
		return ipamdapi.Release{}, nil
	}
	r := ipamdapi.Release{Found: true, Assignment: m.assignment(ip)}
	owner := ip.owner
	ip.release(m.cfg.Now())
	if err := m.persist(); err != nil {
		ip.owner = owner
		return ipamdapi.Release{}, err
	}
	m.cfg.Logger.Info("released pod address", "node", m.cfg.NodeName, "ip", ip.addr, "container", a.ContainerID)
	m.kickPool()
	return r, nil
}

// lookup says which address a holds.
func (m *Manager) lookup(a ipamdapi.Attachment) (ipamdapi.Assignment, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ip := m.ds.owner(a)
	if ip == nil {
		return ipamdapi.Assignment{}, false
	}
	return m.assignment(ip), true
}

// gc releases the address of every attachment not in valid.
func (m *Manager) gc(valid []ipamdapi.Attachment) ([]string, error) {
	keep := map[ipamdapi.Attachment]bool{}
	for _, a := range valid {
		keep[a] = true
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var released []string
	now := m.cfg.Now()
	for _, e := range m.ds.enis {
		for _, ip := range e.ips {
			if ip.owner != nil && !keep[ip.owner.attachment()] {
				m.cfg.Logger.Info("gc: released pod address", "node", m.cfg.NodeName, "ip", ip.addr, "container", ip.owner.ContainerID)
				ip.release(now)
				released = append(released, ip.addr.String())
			}
		}
	}
	if len(released) == 0 {
		return nil, nil
	}
	m.kickPool()
	return released, m.persist()
}

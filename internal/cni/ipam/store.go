package ipam

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// lastReservedFile holds the address handed out last.
const lastReservedFile = "last_reserved_ip"

// Attachment is what an address is allocated to: a container's interface.
type Attachment struct {
	ContainerID string `json:"containerID"`
	IfName      string `json:"ifname"`
}

// Allocation is an address and the attachment that holds it. An allocation whose file
// lost its content (a crash between creating and writing it) has an empty Attachment.
type Allocation struct {
	Addr netip.Addr
	Attachment
}

// Config says where the store is and which subnet it allocates from.
type Config struct {
	// Dir is the store's directory, absolute; New creates it.
	Dir string
	// Subnet is the node's podCIDR.
	Subnet netip.Prefix
}

func (c *Config) validate() (Range, error) {
	if !filepath.IsAbs(c.Dir) {
		return Range{}, fmt.Errorf("ipam config: data dir %q must be an absolute path", c.Dir)
	}
	r, err := NewRange(c.Subnet)
	if err != nil {
		return Range{}, fmt.Errorf("ipam config: %w", err)
	}
	return r, nil
}

// Store allocates addresses of one subnet, keeping them in a directory.
type Store struct {
	dir   string
	rng   Range
	perms os.FileMode
}

// New checks cfg and makes the store's directory.
func New(cfg Config) (*Store, error) {
	r, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("ipam store: %w", err)
	}
	return &Store{dir: cfg.Dir, rng: r, perms: 0o600}, nil
}

// Range is the store's allocatable range.
func (s *Store) Range() Range { return s.rng }

// Allocate gives a an address of the subnet: the one it already holds if any, else the
// next free one after the address handed out last.
func (s *Store) Allocate(ctx context.Context, a Attachment) (netip.Addr, error) {
	unlock, err := lockDir(ctx, s.dir)
	if err != nil {
		return netip.Addr{}, err
	}
	defer unlock()
	allocs, err := s.read()
	if err != nil {
		return netip.Addr{}, err
	}
	used := make(map[netip.Addr]bool, len(allocs))
	for _, al := range allocs {
		if al.Attachment == a && s.rng.Contains(al.Addr) {
			return al.Addr, nil
		}
		used[al.Addr] = true
	}
	last := s.readLastReserved()
	for {
		addr, ok := s.rng.Next(last, func(x netip.Addr) bool { return used[x] })
		if !ok {
			inUse := 0
			for x := range used {
				if s.rng.Contains(x) {
					inUse++
				}
			}
			return netip.Addr{}, &ExhaustedError{Subnet: s.rng.Subnet, InUse: inUse}
		}
		err := s.create(addr, a)
		if errors.Is(err, fs.ErrExist) {
			// Written by something that does not take the lock: skip it.
			used[addr] = true
			continue
		}
		if err != nil {
			return netip.Addr{}, err
		}
		if err := os.WriteFile(filepath.Join(s.dir, lastReservedFile), []byte(addr.String()), s.perms); err != nil {
			_ = os.Remove(filepath.Join(s.dir, addr.String()))
			return netip.Addr{}, fmt.Errorf("ipam store: %w", err)
		}
		return addr, nil
	}
}

// Lookup returns the address a holds in the subnet.
func (s *Store) Lookup(ctx context.Context, a Attachment) (addr netip.Addr, ok bool, err error) {
	unlock, err := lockDir(ctx, s.dir)
	if err != nil {
		return netip.Addr{}, false, err
	}
	defer unlock()
	allocs, err := s.read()
	if err != nil {
		return netip.Addr{}, false, err
	}
	for _, al := range allocs {
		if al.Attachment == a && s.rng.Contains(al.Addr) {
			return al.Addr, true, nil
		}
	}
	return netip.Addr{}, false, nil
}

// Release frees every address a holds (in any subnet) and returns them; releasing an
// attachment that holds none is not an error.
func (s *Store) Release(ctx context.Context, a Attachment) ([]netip.Addr, error) {
	freed, err := s.releaseIf(ctx, func(al Allocation) bool { return al.Attachment == a })
	addrs := make([]netip.Addr, 0, len(freed))
	for _, al := range freed {
		addrs = append(addrs, al.Addr)
	}
	return addrs, err
}

// GC frees every allocation whose attachment is not in valid and returns them.
func (s *Store) GC(ctx context.Context, valid []Attachment) ([]Allocation, error) {
	return s.releaseIf(ctx, func(al Allocation) bool { return !slices.Contains(valid, al.Attachment) })
}

// List returns every allocation, in address order.
func (s *Store) List(ctx context.Context) ([]Allocation, error) {
	unlock, err := lockDir(ctx, s.dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return s.read()
}

func (s *Store) releaseIf(ctx context.Context, match func(Allocation) bool) ([]Allocation, error) {
	unlock, err := lockDir(ctx, s.dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	allocs, err := s.read()
	if err != nil {
		return nil, err
	}
	var freed []Allocation
	var errs []error
	for _, al := range allocs {
		if !match(al) {
			continue
		}
		if err := os.Remove(filepath.Join(s.dir, al.Addr.String())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("ipam store: release %s: %w", al.Addr, err))
			continue
		}
		freed = append(freed, al)
	}
	return freed, errors.Join(errs...)
}

// read returns the allocations in the directory; the caller holds the lock.
func (s *Store) read() ([]Allocation, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("ipam store: %w", err)
	}
	var allocs []Allocation
	for _, e := range entries {
		addr, err := netip.ParseAddr(e.Name())
		if err != nil || !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(s.dir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("ipam store: %w", err)
		}
		allocs = append(allocs, Allocation{Addr: addr, Attachment: parseOwner(b)})
	}
	slices.SortFunc(allocs, func(a, b Allocation) int { return a.Addr.Compare(b.Addr) })
	return allocs, nil
}

func (s *Store) create(addr netip.Addr, a Attachment) error {
	path := filepath.Join(s.dir, addr.String())
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, s.perms)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		return fmt.Errorf("ipam store: %w", err)
	}
	_, err = f.WriteString(a.ContainerID + "\n" + a.IfName + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("ipam store: write %s: %w", path, err)
	}
	return nil
}

func (s *Store) readLastReserved() netip.Addr {
	b, err := os.ReadFile(filepath.Join(s.dir, lastReservedFile))
	if err != nil {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(strings.TrimSpace(string(b)))
	if err != nil {
		return netip.Addr{}
	}
	return a
}

func parseOwner(b []byte) Attachment {
	lines := strings.Split(strings.ReplaceAll(string(b), "\r", ""), "\n")
	var a Attachment
	if len(lines) > 0 {
		a.ContainerID = strings.TrimSpace(lines[0])
	}
	if len(lines) > 1 {
		a.IfName = strings.TrimSpace(lines[1])
	}
	return a
}

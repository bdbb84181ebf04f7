package netns

import (
	"fmt"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	vnetns "github.com/vishvananda/netns"
)

// Do runs f on a locked OS thread inside the network namespace at path ("" runs it where
// the caller is). A process f starts inherits the namespace.
func Do(path string, f func() error) error {
	if path == "" {
		return f()
	}
	n, err := ns.GetNS(path)
	if err != nil {
		return fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer n.Close()
	return n.Do(func(ns.NetNS) error { return f() })
}

// Handle returns a netlink handle whose sockets live in the namespace at path ("" = the
// caller's), so that every request made through it acts there, whatever thread makes it.
// The caller closes it.
func Handle(path string) (*netlink.Handle, error) {
	if path == "" {
		return netlink.NewHandle()
	}
	nsh, err := vnetns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open network namespace %s: %w", path, err)
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		return nil, fmt.Errorf("netlink handle in %s: %w", path, err)
	}
	return h, nil
}

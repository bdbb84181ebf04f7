package testutil

import (
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	"github.com/vishvananda/netlink"

	"github.com/kubelab/kubelab/internal/util/netns"
)

// NetNS makes a network namespace for t, bound to a file of its own and removed when t
// ends. It skips t unless root runs it with tools on PATH (RequireRoot).
func NetNS(t testing.TB, tools ...string) ns.NetNS {
	t.Helper()
	RequireRoot(t, tools...)
	n, err := testutils.NewNS()
	if err != nil {
		t.Fatalf("new netns: %v", err)
	}
	t.Cleanup(func() {
		n.Close()
		if err := testutils.UnmountNS(n); err != nil {
			t.Errorf("remove netns %s: %v", n.Path(), err)
		}
	})
	return n
}

// NetlinkHandle is a netlink handle inside n, closed when t ends.
func NetlinkHandle(t testing.TB, n ns.NetNS) *netlink.Handle {
	t.Helper()
	h, err := netns.Handle(n.Path())
	if err != nil {
		t.Fatalf("netlink handle in %s: %v", n.Path(), err)
	}
	t.Cleanup(h.Close)
	return h
}

package testutil

import (
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
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

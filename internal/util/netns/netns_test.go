package netns_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"sigs.k8s.io/knftables"

	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/util/netns"
)

// threadNS names the network namespace of the calling thread (net:[inode]).
func threadNS() (string, error) {
	return os.Readlink("/proc/thread-self/ns/net")
}

func TestDo(t *testing.T) {
	n := testutil.NetNS(t, "readlink")
	var want string
	if err := n.Do(func(ns.NetNS) (err error) { want, err = threadNS(); return err }); err != nil {
		t.Fatal(err)
	}
	host := readNS(t)
	if want == host {
		t.Fatalf("the test namespace is the host's (%s)", host)
	}
	var inside, child string
	err := netns.Do(n.Path(), func() (err error) {
		if inside, err = threadNS(); err != nil {
			return err
		}
		out, err := exec.Command("readlink", "/proc/self/ns/net").Output()
		child = strings.TrimSpace(string(out))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if inside != want {
		t.Errorf("f ran in %s, want %s", inside, want)
	}
	if child != want {
		t.Errorf("a process f started runs in %s, want %s", child, want)
	}
	if got := readNS(t); got != host {
		t.Errorf("the process' namespace is %s after Do, want %s", got, host)
	}
	var here string
	if err := netns.Do("", func() (err error) { here, err = threadNS(); return err }); err != nil || here == want {
		t.Errorf(`netns.Do("") ran in %s (%v), want the caller's namespace`, here, err)
	}
	if err := netns.Do(n.Path()+"-missing", func() error { return nil }); err == nil {
		t.Error("Do in a missing namespace succeeded")
	}
}

// readNS names the network namespace of the process' main thread.
func readNS(t *testing.T) string {
	t.Helper()
	s, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestHandle(t *testing.T) {
	n := testutil.NetNS(t)
	h, err := netns.Handle(n.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	// A new namespace holds only its loopback.
	if len(links) != 1 || links[0].Attrs().Name != "lo" {
		var names []string
		for _, l := range links {
			names = append(names, l.Attrs().Name)
		}
		t.Errorf("links in the namespace: %v, want [lo]", names)
	}
}

func TestNFTables(t *testing.T) {
	n := testutil.NetNS(t, "nft")
	ctx := context.Background()
	const table = "kubelab-netns-test"
	nft, err := netns.NFTables(n.Path(), knftables.IPv4Family, table)
	if err != nil {
		t.Fatal(err)
	}
	tx := nft.NewTransaction()
	tx.Add(&knftables.Table{})
	tx.Add(&knftables.Chain{Name: "probe"})
	if err := nft.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	chains, err := nft.List(ctx, "chain")
	if err != nil || len(chains) != 1 || chains[0] != "probe" {
		t.Fatalf("chains inside: %v, %v; want [probe]", chains, err)
	}
	// The table is in the namespace only: nft run there sees it, the host's does not.
	var out []byte
	if err := netns.Do(n.Path(), func() (err error) {
		out, err = exec.Command("nft", "list", "tables").Output()
		return err
	}); err != nil || !strings.Contains(string(out), table) {
		t.Errorf("nft list tables inside: %q, %v; want %s", out, err, table)
	}
	host, err := exec.Command("nft", "list", "tables").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(host), table) {
		t.Errorf("the host's nftables hold %s:\n%s", table, host)
	}
}

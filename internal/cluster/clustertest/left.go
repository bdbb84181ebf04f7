package clustertest

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/sys/mountinfo"

	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/util/rundir"
	"github.com/kubelab/kubelab/internal/vpc"
)

// AssertNothingLeft checks that nothing of the stopped cluster on dataDir is left on
// the machine: no mount under the data dir, no loop device of its volumes, no process
// naming it or its run directory (its containerds, its shims), no network namespace of
// its VPC or nodes, no run directory (its sockets) and no cgroup of the pods of nodes.
func AssertNothingLeft(t testing.TB, dataDir string, nodes ...string) {
	t.Helper()
	mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mounts {
		t.Errorf("left mounted: %s (%s on %s)", m.Mountpoint, m.FSType, m.Source)
	}
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, f := range loops {
		if b, err := os.ReadFile(f); err == nil && strings.HasPrefix(string(b), dataDir) {
			t.Errorf("loop device left: %s → %s", f, strings.TrimSpace(string(b)))
		}
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range procs {
		if b, err := os.ReadFile(f); err == nil && (bytes.Contains(b, []byte(dataDir)) || bytes.Contains(b, []byte(rundir.For(dataDir)+"/"))) {
			t.Errorf("process left: %s: %s", f, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
	for _, ns := range vpc.Namespaces(dataDir) {
		t.Errorf("network namespace left: %s", ns)
	}
	if _, err := os.Lstat(rundir.For(dataDir)); !os.IsNotExist(err) {
		t.Errorf("run directory left: %s (%v)", rundir.For(dataDir), err)
	}
	for _, n := range nodes {
		if left, _ := filepath.Glob("/sys/fs/cgroup/*" + cluster.CgroupRoot(dataDir) + "/" + n); len(left) > 0 {
			t.Errorf("cgroups of node %s left: %v", n, left)
		}
	}
}

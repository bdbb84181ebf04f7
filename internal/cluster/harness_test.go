package cluster_test

import (
	"testing"

	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/cluster/clustertest"
)

// testCluster is a cluster started by clustertest, with the checks of this package's
// tests as its methods.
type testCluster struct {
	*clustertest.Cluster
}

// startCluster runs a hollow cluster on a fresh data dir until the test ends; tweak
// adjusts its config.
func startCluster(t testing.TB, tweak func(*cluster.Config)) *testCluster {
	t.Helper()
	return &testCluster{clustertest.Start(t, clustertest.Options{Tweak: tweak})}
}

// startRealCluster runs a cluster of nodes real nodes (containerd, real mounts) spread
// over zones, and checks at the end that stopping it left nothing on the machine
// (clustertest.AssertNothingLeft). It skips without root or the nodes' tools. The tests
// that start one (and the other long ones with a cluster of their own) call t.Parallel:
// each cluster has its own data dir, ports, namespaces and run directory, and much of
// such a test waits on its cluster, so two run at once (go test's -parallel) in about
// the time of one.
func startRealCluster(t *testing.T, nodes int, zones ...string) *testCluster {
	t.Helper()
	return startRealClusterWith(t, nil, nodes, zones...)
}

// startRealClusterWith is startRealCluster with tweak applied to the cluster's config.
func startRealClusterWith(t *testing.T, tweak func(*cluster.Config), nodes int, zones ...string) *testCluster {
	t.Helper()
	return &testCluster{clustertest.Start(t, clustertest.Options{Real: true, Nodes: nodes, Zones: zones, Tweak: tweak})}
}

package clustertest

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/cloud/cloudtest"
	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/testutil"
)

// Timeout is how long the tests of a whole cluster wait for something to happen in it
// (a pod to run, a volume to be deleted): longer than testutil.DefaultTimeout, as a
// whole cluster on a shared machine is slower than one component.
const Timeout = 2 * time.Minute

// readyTimeout is how long Start waits for the cluster to be ready.
const readyTimeout = 3 * time.Minute

// RealNodeTools are the programs real nodes need on PATH besides kubelab's own.
var RealNodeTools = []string{"containerd", "runc", "/usr/lib/cni/bridge", "mkfs.ext4"}

// Options picks the cluster a test starts.
type Options struct {
	// Real runs real nodes (containerd and runc, loop-device volumes, root) with
	// kubelab's commands built by testutil.Commands; a test that asks for them skips
	// when the machine lacks root or RealNodeTools. Without it the nodes are hollow.
	Real bool
	// Nodes and Zones of the cluster (the cluster's defaults when empty).
	Nodes int
	Zones []string
	// DataDir is the cluster's data dir: a fresh one, removed at the end, when empty.
	DataDir string
	// CSIInProcess runs the EBS CSI add-on inside kubelab on real nodes.
	CSIInProcess bool
	// Tweak adjusts any other setting of the cluster's config before it starts (the
	// components' logs go to the test's log from level Warn; Tweak may set another
	// Logger).
	Tweak func(*cluster.Config)
}

// Start runs a cluster as opts pick until the test ends, waits until it is ready, and
// returns it with its clients. A real cluster is checked at the end to have left
// nothing on the machine (AssertNothingLeft).
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	cfg := configFor(t, opts)
	var started *Cluster
	if opts.Real {
		t.Cleanup(func() { // runs after the cluster has stopped
			if started != nil {
				AssertNothingLeft(t, cfg.DataDir, started.NodeNames()...)
			}
		})
	}
	c, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Start(t, "cluster", readyTimeout, c.Run, testutil.Closed(c.Ready()))
	started = attach(t, c, cfg)
	return started
}

// configFor is the cluster's config: hollow with a node status every second on fresh
// ports and data dir, or real with kubelab's built commands, offline; then opts'
// settings.
func configFor(t testing.TB, opts Options) cluster.Config {
	t.Helper()
	cfg := cluster.Config{
		ControlPlaneConfig: cluster.ControlPlaneConfig{DataDir: opts.DataDir,
			EtcdClientPort: apiservertest.FreePort(t), EtcdPeerPort: apiservertest.FreePort(t)},
		Hollow:             !opts.Real,
		Nodes:              opts.Nodes,
		Zones:              opts.Zones,
		CSIInProcess:       opts.CSIInProcess,
		NodeStatusInterval: time.Second,
		// Tests never leave the machine: a test of the way out sets Offline back and
		// plugs stand-ins (testutil.NewInternet into EgressDial and UpstreamDNS, stand-in
		// registries into ImageUpstreams).
		Offline: true,
		Logger:  cloudtest.Logger(t, slog.LevelWarn),
	}
	if cfg.DataDir == "" {
		cfg.DataDir = shortDir(t)
	}
	if opts.Real {
		testutil.RequireRoot(t, RealNodeTools...)
		bin := testutil.Commands(t)
		cfg.PauseBinary = filepath.Join(bin, "kubelab-pause")
		cfg.CNIBinary = filepath.Join(bin, "kubelab-cni")
		cfg.KubelabBinary = filepath.Join(bin, "kubelab")
	}
	if opts.Tweak != nil {
		opts.Tweak(&cfg)
	}
	return cfg
}

// shortDir is a fresh data dir, removed at the end.
func shortDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "kl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// RESTConfig is the admin client config of the cluster of kubeconfig, with room for the
// many requests of a test.
func RESTConfig(t testing.TB, kubeconfig string) *rest.Config {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	return cfg
}

// Attach gives the test's view of c, a cluster the test runs itself (to time its start,
// say) on cfg.
func Attach(t testing.TB, c *cluster.Cluster, cfg cluster.Config) *Cluster {
	t.Helper()
	return attach(t, c, cfg)
}

func attach(t testing.TB, c *cluster.Cluster, cfg cluster.Config) *Cluster {
	t.Helper()
	restCfg := RESTConfig(t, c.Kubeconfig())
	tc := &Cluster{Cluster: c, T: t, Config: cfg, RESTConfig: restCfg,
		Client: kubernetes.NewForConfigOrDie(restCfg), ZoneOf: map[string]string{}}
	tc.EC2 = cloudtest.EC2Client(t, c.CloudEndpoint(), c.CloudConfigFile(), c.CloudCredentialsFile())
	for _, n := range c.Nodes() {
		tc.ZoneOf[n.Name] = n.Zone
	}
	return tc
}

package cluster

import (
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kubelab/kubelab/internal/util/rundir"
)

// TestConfigNeedsKubelabBinaryForAddonPods: real nodes running the add-on as pods need the
// binary its image is built from; in process, or on hollow nodes, they do not.
func TestConfigNeedsKubelabBinaryForAddonPods(t *testing.T) {
	missing := "/nonexistent/kubelab"
	for _, c := range []struct {
		cfg  Config
		want bool
	}{
		{Config{Nodes: 1, KubelabBinary: missing}, true},
		{Config{Nodes: 1, KubelabBinary: missing, CSIInProcess: true}, false},
		{Config{Nodes: 1, KubelabBinary: missing, Hollow: true}, false},
	} {
		c.cfg.DataDir = t.TempDir()
		c.cfg.setDefaults()
		err := c.cfg.validate()
		if got := err != nil && strings.Contains(err.Error(), missing); got != c.want {
			t.Errorf("validate(hollow %v, in process %v) = %v; want an error naming %s: %v", c.cfg.Hollow, c.cfg.CSIInProcess, err, missing, c.want)
		}
	}
}

// TestConfigAcceptsLongDataDir: real nodes take a data dir of any length; their sockets
// are not under it.
func TestConfigAcceptsLongDataDir(t *testing.T) {
	dir := "/tmp/" + strings.Repeat("d", 250)
	for _, hollow := range []bool{false, true} {
		cfg := Config{ControlPlaneConfig: ControlPlaneConfig{DataDir: dir}, Nodes: 3, Hollow: hollow, CSIInProcess: true}
		cfg.setDefaults()
		if err := cfg.validate(); err != nil && strings.Contains(err.Error(), "data dir") {
			t.Errorf("validate(hollow %v) refuses a %d-byte data dir: %v", hollow, len(dir), err)
		}
	}
}

// TestSocketsFitWhateverDataDir: every socket of the cluster, the longest node name's
// included, fits in a unix socket address with a 250-byte data dir as with a short one,
// and none is under the data dir.
func TestSocketsFitWhateverDataDir(t *testing.T) {
	for _, dir := range []string{"/tmp/kl", "/tmp/" + strings.Repeat("d", 250)} {
		c := &Cluster{cfg: Config{ControlPlaneConfig: ControlPlaneConfig{DataDir: dir}}}
		n := Node{Name: "ip-172-31-255-255.ec2.internal"}
		for _, sock := range []string{
			strings.TrimPrefix(c.csiSocket(), "unix://"),
			c.nodeCSISocket(n),
			filepath.Join(c.nodeRegistrationDir(n), DriverName+"-reg.sock"),
			filepath.Join(NodeContainerdSocketDir(dir, n.Name), "containerd.sock.ttrpc"),
			c.ipamdSocket(n),
		} {
			if err := rundir.CheckSocket(sock); err != nil {
				t.Errorf("data dir of %d bytes: %v", len(dir), err)
			}
			if strings.HasPrefix(sock, dir) || !strings.HasPrefix(sock, c.runDir()+"/") {
				t.Errorf("socket %s is not in the run dir %s", sock, c.runDir())
			}
		}
	}
}

// A cluster's service account issuer is a URL of its API server: on the VPC (port 443,
// unnamed) for real nodes, on loopback at a fixed port otherwise; the old default stays
// accepted second. Issuers given are kept as they are.
func TestDefaultServiceAccountIssuers(t *testing.T) {
	const old = "https://kubernetes.default.svc.cluster.local"
	for _, c := range []struct {
		cfg  ControlPlaneConfig
		want []string
	}{
		{ControlPlaneConfig{AdvertiseAddress: "172.31.0.2", SecurePort: 6443}, []string{"https://172.31.0.2", old}},
		{ControlPlaneConfig{SecurePort: 6443}, []string{"https://127.0.0.1:6443", old}},
		{ControlPlaneConfig{BindAddress: "0.0.0.0", SecurePort: 6443}, []string{"https://127.0.0.1:6443", old}},
		{ControlPlaneConfig{BindAddress: "127.0.0.5", SecurePort: 7443}, []string{"https://127.0.0.5:7443", old}},
		{ControlPlaneConfig{}, nil},
	} {
		if got := defaultServiceAccountIssuers(c.cfg); !slices.Equal(got, c.want) {
			t.Errorf("defaultServiceAccountIssuers(%+v) = %q, want %q", c.cfg, got, c.want)
		}
	}
}

// TestConfigPodNetwork: the pod network is overlay or vpc, and vpc needs real nodes.
func TestConfigPodNetwork(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{PodNetwork: PodNetworkOverlay, Hollow: true}, ""},
		{Config{PodNetwork: PodNetworkVPC, CSIInProcess: true}, ""},
		{Config{PodNetwork: "calico", Hollow: true}, `pod network "calico": want "overlay" or "vpc"`},
		{Config{PodNetwork: PodNetworkVPC, Hollow: true}, `pod network "vpc" needs real nodes`},
	} {
		c.cfg.DataDir = t.TempDir()
		c.cfg.setDefaults()
		err := c.cfg.validate()
		if c.want == "" && err != nil && strings.Contains(err.Error(), "pod network") || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("validate(%q, hollow %v) = %v, want %q", c.cfg.PodNetwork, c.cfg.Hollow, err, c.want)
		}
	}
}

// TestPodCIDRRange: a hollow cluster with more nodes than 10.244.0.0/16 has podCIDRs of
// the mask takes them from the wider hollow range; real clusters and smaller hollow ones
// keep the controller-manager's default.
func TestPodCIDRRange(t *testing.T) {
	for _, tc := range []struct {
		hollow      bool
		nodes, mask int
		want        string
	}{
		{true, 256, 0, ""},
		{true, 257, 0, hollowPodRange},
		{true, 5000, 24, hollowPodRange},
		{true, 1000, 26, ""},
		{true, 1025, 26, hollowPodRange},
		{false, 5000, 0, ""},
	} {
		if got := podCIDRRange(tc.hollow, tc.nodes, tc.mask); got != tc.want {
			t.Errorf("podCIDRRange(hollow %v, %d nodes, /%d) = %q, want %q", tc.hollow, tc.nodes, tc.mask, got, tc.want)
		}
	}
	// The hollow range must hold 5,000 /24s and stay clear of the Service range.
	p := netip.MustParsePrefix(hollowPodRange)
	if 1<<(24-p.Bits()) < 5000 || p.Overlaps(netip.MustParsePrefix("10.96.0.0/12")) || p.Overlaps(netip.MustParsePrefix("10.244.0.0/16")) {
		t.Fatalf("hollow pod range %s: too small or overlapping the Service or default pod range", p)
	}
}

package driver

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/kubelab/kubelab/internal/cloud/cloudtest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// shortDir makes a directory short enough for a unix socket path, removed at the end.
func shortDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "csi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// StartDriver runs a driver in-process until the test ends (testutil.Start) and returns
// a client connection to its socket. The driver's tests are CSI-only: they call the
// driver over its socket, with a fake cloud (hollowEnv) or kubelab's cloud
// (cloudenv_test.go), and no Kubernetes; tests of the driver in a cluster start one
// with clustertest.
func StartDriver(t testing.TB, cfg Config, deps Deps) (*Driver, *grpc.ClientConn) {
	t.Helper()
	if cfg.Endpoint == "" {
		cfg.Endpoint = "unix://" + filepath.Join(shortDir(t), "csi.sock")
	}
	if deps.Logger == nil {
		deps.Logger = cloudtest.Logger(t, slog.LevelDebug)
	}
	d, err := New(cfg, deps)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Start(t, "driver", 10*time.Second, d.Run, testutil.Closed(d.Ready()))
	conn, err := grpc.NewClient(cfg.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return d, conn
}

// hollowEnv is a driver in all mode on a fake cloud, with the hollow mounter, as
// the node instance id in zone.
type hollowEnv struct {
	cloud   *FakeCloud
	mounter *HollowMounter
	node    string
	devDir  string
	d       *Driver
	ctrl    csi.ControllerClient
	nodeC   csi.NodeClient
	ident   csi.IdentityClient
}

func newHollowEnv(t testing.TB, zone string) *hollowEnv {
	t.Helper()
	fc := NewFakeCloud()
	node := fc.AddInstance(zone, "m5.large")
	devDir := filepath.Join(shortDir(t), "dev")
	if err := os.MkdirAll(devDir, 0o755); err != nil {
		t.Fatal(err)
	}
	fc.DeviceDirs[node] = devDir
	m := NewHollowMounter()
	d, conn := StartDriver(t, Config{Mode: ModeAll, Hollow: true, DeviceDir: devDir}, Deps{
		Cloud:    fc,
		Metadata: StaticMetadata{InstanceID: node, InstanceType: "m5.large", Region: "us-east-1", Zone: zone},
		Mounter:  m,
		Devices:  DeviceDir{Dir: devDir, Hollow: true},
	})
	return &hollowEnv{cloud: fc, mounter: m, node: node, devDir: devDir, d: d,
		ctrl: csi.NewControllerClient(conn), nodeC: csi.NewNodeClient(conn), ident: csi.NewIdentityClient(conn)}
}

func mountCap(fs string) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fs}},
	}
}

func blockCap() *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
	}
}

func wantCode(t testing.TB, err error, code codes.Code, what string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("%s: got %v, want code %s", what, err, code)
	}
}

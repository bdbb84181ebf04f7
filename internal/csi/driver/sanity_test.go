package driver

import (
	"context"
	"fmt"
	"go/build"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kubelab/kubelab/internal/testutil"
)

// sanitySecret is put in every Secrets map csi-sanity sends; no log line may hold it.
const sanitySecret = "s3cr3t-kubelab-sanity-value"

// csiSanity finds the csi-sanity binary hack/setup.sh --test installs.
func csiSanity(t testing.TB) string {
	t.Helper()
	if p, err := exec.LookPath("csi-sanity"); err == nil {
		return p
	}
	p := filepath.Join(build.Default.GOPATH, "bin", "csi-sanity")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	t.Skip("csi-sanity is not installed (hack/setup.sh --test installs it with go install)")
	return ""
}

var sanitySummary = regexp.MustCompile(`(\d+) Passed \| (\d+) Failed \| (\d+) Pending \| (\d+) Skipped`)

// runSanity runs csi-sanity against endpoint with its directories under root and
// fails the test unless every spec it ran passed.
func runSanity(t *testing.T, endpoint, root string, logs *logBuffer) {
	t.Helper()
	bin := csiSanity(t)
	secrets := filepath.Join(root, "secrets.yaml")
	var b strings.Builder
	for _, k := range []string{"CreateVolumeSecret", "DeleteVolumeSecret", "ControllerPublishVolumeSecret",
		"ControllerUnpublishVolumeSecret", "ControllerValidateVolumeCapabilitiesSecret", "NodeStageVolumeSecret",
		"NodePublishVolumeSecret", "CreateSnapshotSecret", "DeleteSnapshotSecret", "ListSnapshotsSecret",
		"ControllerExpandVolumeSecret", "NodeExpandVolumeSecret"} {
		fmt.Fprintf(&b, "%s:\n  password: %s\n", k, sanitySecret)
	}
	if err := os.WriteFile(secrets, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"--csi.endpoint="+endpoint,
		"--csi.stagingdir="+filepath.Join(root, "staging"),
		"--csi.mountdir="+filepath.Join(root, "mount"),
		fmt.Sprintf("--csi.testvolumesize=%d", GiB),
		fmt.Sprintf("--csi.testvolumeexpandsize=%d", 2*GiB),
		"--csi.secrets="+secrets,
		"--ginkgo.no-color",
	)
	out, err := cmd.CombinedOutput()
	text := string(out)
	m := sanitySummary.FindStringSubmatch(text)
	if err != nil || m == nil || m[2] != "0" {
		t.Logf("csi-sanity output:\n%s", text)
		if logs != nil {
			t.Logf("driver log (tail):\n%s", tail(logs.String(), 200))
		}
		t.Fatalf("csi-sanity failed: %v", err)
	}
	ran := regexp.MustCompile(`Ran \d+ of \d+ Specs`).FindString(text)
	t.Logf("csi-sanity: %s: %s passed, %s failed, %s skipped", ran, m[1], m[2], m[4])
	if m[1] == "0" {
		t.Fatal("csi-sanity ran no spec")
	}
	if logs != nil && strings.Contains(logs.String(), sanitySecret) {
		t.Fatal("a secret from the requests reached the driver's log")
	}
}

func tail(s string, lines int) string {
	l := strings.Split(s, "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

func bufferLogger(logs *logBuffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Writer(logs), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestSanityHollow runs csi-sanity against the driver in hollow mode: the kubelab
// cloud in hollow mode over the EC2 API and IMDS, the hollow mounter. No root.
func TestSanityHollow(t *testing.T) {
	if testing.Short() {
		t.Skip("csi-sanity run skipped in -short mode")
	}
	ce := startCloud(t, true)
	node, imdsURL := ce.runInstance(t, "us-east-1b", "")
	root := shortDir(t)
	logs := &logBuffer{}
	_, _ = StartDriver(t, Config{
		Mode: ModeAll, Hollow: true, Endpoint: "unix://" + filepath.Join(root, "csi.sock"),
		DeviceDir: filepath.Join(ce.dir, "instances", node, "dev"),
	}, Deps{
		Cloud:    ce.driverCloud(t),
		Metadata: NewIMDS(imdsURL),
		Mounter:  NewHollowMounter(),
		Devices:  DeviceDir{Dir: filepath.Join(ce.dir, "instances", node, "dev"), Hollow: true},
		Logger:   bufferLogger(logs),
	})
	runSanity(t, "unix://"+filepath.Join(root, "csi.sock"), root, logs)
}

// TestSanityReal runs csi-sanity against the driver in real mode: the kubelab cloud
// with loop devices, real mkfs, mount and bind mounts. Needs root.
func TestSanityReal(t *testing.T) {
	if testing.Short() {
		t.Skip("csi-sanity run skipped in -short mode")
	}
	testutil.RequireRoot(t, realModeTools...)
	ce := startCloud(t, false)
	root := shortDir(t)
	cleanupMounts(t, root)
	devDir := filepath.Join(root, "dev")
	_, imdsURL := ce.runInstance(t, "us-east-1b", devDir)
	logs := &logBuffer{}
	_, _ = StartDriver(t, Config{
		Mode: ModeAll, Endpoint: "unix://" + filepath.Join(root, "csi.sock"), DeviceDir: devDir,
	}, Deps{
		Cloud:    ce.driverCloud(t),
		Metadata: NewIMDS(imdsURL),
		Mounter:  NewSystemMounter(),
		Devices:  DeviceDir{Dir: devDir},
		Logger:   bufferLogger(logs),
	})
	runSanity(t, "unix://"+filepath.Join(root, "csi.sock"), root, logs)
	// The node specs really made filesystems on the loop devices and mounted them.
	if !strings.Contains(logs.String(), `msg="volume staged"`) || !strings.Contains(logs.String(), "formatted=true") ||
		!strings.Contains(logs.String(), "device=/dev/loop") {
		t.Fatal("no volume was formatted and staged from a loop device during the run")
	}
}

// realModeTools are the programs the driver's real mode drives: tests that make loop
// devices, filesystems and mounts need them and root (testutil.RequireRoot).
var realModeTools = []string{"losetup", "blkid", "mkfs.ext4", "mkfs.xfs", "resize2fs", "xfs_growfs", "mount"}

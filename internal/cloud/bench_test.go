package cloud

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kubelab/kubelab/internal/benchtest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// BenchmarkCycle measures create → attach → detach → delete through the SDK, on real loop
// devices (root) or hollow, with the default (fast) profile. "attach" is from the
// AttachVolume call until DescribeVolumes reads attached and the device link opens.
func BenchmarkCycle(b *testing.B) {
	for _, mode := range []string{"real", "hollow"} {
		b.Run(mode, func(b *testing.B) {
			cfg := Config{Hollow: mode == "hollow", Logger: discardLogger()}
			if mode == "real" {
				testutil.RequireRoot(b)
				cfg.DataDir = realDataDir(b, true)
			}
			r := startCloud(b, cfg)
			ctx := context.Background()
			inst := r.runInstance(b, "us-east-1a")
			devDir := filepath.Join(r.cfg.DataDir, "instances", inst, "dev")
			var cycles, attaches []time.Duration
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				vol := r.createVolume(b, "us-east-1a", 1)
				t0 := time.Now()
				if _, err := r.ec2.AttachVolume(ctx, &ec2.AttachVolumeInput{VolumeId: &vol, InstanceId: &inst, Device: aws.String("/dev/xvdba")}); err != nil {
					b.Fatal(err)
				}
				r.waitVolume(b, vol, func(v types.Volume) bool { return attachedState(v) == "attached" })
				if mode == "real" {
					f, err := os.OpenFile(filepath.Join(devDir, "xvdba"), os.O_RDWR, 0)
					if err != nil {
						b.Fatal(err)
					}
					f.Close()
				}
				attaches = append(attaches, time.Since(t0))
				r.detach(b, vol)
				if _, err := r.ec2.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: &vol}); err != nil {
					b.Fatal(err)
				}
				cycles = append(cycles, time.Since(start))
			}
			b.StopTimer()
			benchtest.ReportLatencies(b, "cycle", cycles)
			benchtest.ReportLatencies(b, "attach", attaches)
			var total time.Duration
			for _, d := range cycles {
				total += d
			}
			b.ReportMetric(float64(len(cycles))/total.Seconds(), "cycles/s")
		})
	}
}

// BenchmarkLosetupReference is the reference for BenchmarkCycle/real: a bare
// `losetup --find --show` of a sparse file, opening the device, and `losetup -d`.
func BenchmarkLosetupReference(b *testing.B) {
	testutil.RequireRoot(b, "losetup")
	dir := realDataDir(b, true)
	file := filepath.Join(dir, "volumes", "ref.img")
	os.MkdirAll(filepath.Dir(file), 0o755)
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		b.Fatal(err)
	}
	if err := os.Truncate(file, 1<<30); err != nil {
		b.Fatal(err)
	}
	var attaches, cycles []time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		out, err := exec.Command("losetup", "--find", "--show", file).Output()
		if err != nil {
			b.Fatal(err)
		}
		dev := strings.TrimSpace(string(out))
		f, err := os.OpenFile(dev, os.O_RDWR, 0)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
		attaches = append(attaches, time.Since(t0))
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			b.Fatal(fmt.Errorf("losetup -d %s: %v: %s", dev, err, out))
		}
		cycles = append(cycles, time.Since(t0))
	}
	b.StopTimer()
	benchtest.ReportLatencies(b, "attach", attaches)
	benchtest.ReportLatencies(b, "cycle", cycles)
}

package driver

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"golang.org/x/sys/unix"

	"github.com/kubelab/kubelab/internal/cloud"
	"github.com/kubelab/kubelab/internal/cloud/cloudtest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// cloudEnv is the kubelab cloud running in-process for a test, and an EC2 client
// to it for what the driver does not do (instances) and for cleanup.
type cloudEnv struct {
	c   *cloud.Cloud
	dir string
	ec2 *ec2.Client
}

// startCloud runs the cloud until the test ends. At the end it detaches and
// deletes every volume and snapshot, then stops the cloud (which releases any
// loop device it still holds).
func startCloud(t testing.TB, hollow bool) *cloudEnv {
	t.Helper()
	dir := filepath.Join(shortDir(t), "cloud")
	c, err := cloud.New(cloud.Config{DataDir: dir, Hollow: hollow, ReleaseOnExit: true, Logger: cloudtest.Logger(t, slog.LevelDebug)})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Start(t, "cloud", 30*time.Second, c.Run, testutil.Closed(c.Ready()))
	e := &cloudEnv{c: c, dir: dir, ec2: cloudtest.EC2Client(t, c.Endpoint(), c.ConfigFile(), c.CredentialsFile())}
	t.Cleanup(func() { e.deleteAll(t) }) // before the cloud stops
	return e
}

// driverCloud is the driver's EC2 adapter pointed at this cloud.
func (e *cloudEnv) driverCloud(t testing.TB) *EC2Cloud {
	t.Helper()
	ec, err := NewEC2Cloud(context.Background(), EC2Config{Endpoint: e.c.Endpoint(), ConfigFile: e.c.ConfigFile(), CredentialsFile: e.c.CredentialsFile()})
	if err != nil {
		t.Fatal(err)
	}
	return ec
}

// runInstance launches a running instance in zone (with its device dir at devDir
// when set) and returns its id and IMDS endpoint.
func (e *cloudEnv) runInstance(t testing.TB, zone, devDir string) (string, string) {
	t.Helper()
	ctx := context.Background()
	in := &ec2.RunInstancesInput{
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: types.InstanceTypeM5Large,
		Placement: &types.Placement{AvailabilityZone: aws.String(zone)},
	}
	if devDir != "" {
		in.TagSpecifications = []types.TagSpecification{{ResourceType: types.ResourceTypeInstance,
			Tags: []types.Tag{{Key: aws.String("kubelab.dev/device-dir"), Value: aws.String(devDir)}}}}
	}
	out, err := e.ec2.RunInstances(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	testutil.Eventually(t, "instance "+id+" running", func() (bool, error) {
		d, err := e.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err != nil {
			return false, err
		}
		return d.Reservations[0].Instances[0].State.Name == types.InstanceStateNameRunning, nil
	})
	ep := e.c.IMDSEndpoint(id)
	if ep == "" {
		t.Fatalf("instance %s has no IMDS endpoint", id)
	}
	return id, ep
}

// deleteAll detaches and deletes every volume and deletes every snapshot.
func (e *cloudEnv) deleteAll(t testing.TB) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vols, err := e.ec2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{})
	if err != nil {
		t.Errorf("cleanup: describe volumes: %v", err)
		return
	}
	for _, v := range vols.Volumes {
		for _, a := range v.Attachments {
			if _, err := e.ec2.DetachVolume(ctx, &ec2.DetachVolumeInput{VolumeId: v.VolumeId, InstanceId: a.InstanceId, Force: aws.Bool(true)}); err != nil {
				t.Logf("cleanup: detach %s: %v", aws.ToString(v.VolumeId), err)
			}
		}
	}
	for _, v := range vols.Volumes {
		for {
			d, err := e.ec2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{aws.ToString(v.VolumeId)}})
			if err != nil || len(d.Volumes) == 0 || d.Volumes[0].State != types.VolumeStateInUse || ctx.Err() != nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if _, err := e.ec2.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: v.VolumeId}); err != nil {
			t.Logf("cleanup: delete %s: %v", aws.ToString(v.VolumeId), err)
		}
	}
	snaps, err := e.ec2.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{})
	if err == nil {
		for _, s := range snaps.Snapshots {
			_, _ = e.ec2.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: s.SnapshotId})
		}
	}
}

// cleanupMounts unmounts, deepest first, every mount under root (a directory this
// test made), so that a failed test leaves no mount behind.
func cleanupMounts(t testing.TB, root string) {
	t.Helper()
	t.Cleanup(func() {
		for _, m := range mountsUnder(root) {
			if err := unix.Unmount(m, 0); err != nil {
				if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
					t.Errorf("cleanup: unmount %s: %v", m, err)
				}
			}
		}
	})
}

// mountsUnder lists the mount points under root, deepest (and latest) first.
func mountsUnder(root string) []string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		mp := unescapeMount(f[4])
		if mp == root || strings.HasPrefix(mp, root+"/") {
			out = append(out, mp)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	sort.SliceStable(out, func(i, j int) bool { return strings.Count(out[i], "/") > strings.Count(out[j], "/") })
	return out
}

func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// logBuffer keeps every log line of a driver, to look for what must not be there.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	l.buf.Write(p)
	l.mu.Unlock()
	return len(p), nil
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

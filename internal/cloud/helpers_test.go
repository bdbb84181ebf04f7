package cloud

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/kubelab/kubelab/internal/cloud/cloudtest"
)

// running is a cloud served in-process for a test.
type running struct {
	*Cloud
	ec2    *ec2.Client
	cancel context.CancelFunc
	errc   chan error
}

// startCloud runs a cloud with cfg (DataDir defaults to a temp dir) until the test ends.
func startCloud(t testing.TB, cfg Config, opts ...Option) *running {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.Logger == nil {
		cfg.Logger = cloudtest.Logger(t, slog.LevelInfo)
	}
	c, err := New(cfg, opts...)
	if err != nil {
		t.Fatalf("new cloud: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Cloud: c, cancel: cancel, errc: make(chan error, 1)}
	go func() { r.errc <- c.Run(ctx) }()
	select {
	case <-c.Ready():
	case err := <-r.errc:
		cancel()
		t.Fatalf("run cloud: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("cloud not ready after 10s")
	}
	t.Cleanup(func() { r.stop(t) })
	r.ec2 = newEC2Client(t, c)
	return r
}

// stop ends the cloud's Run and waits for it.
func (r *running) stop(t testing.TB) {
	r.cancel()
	select {
	case err := <-r.errc:
		if err != nil {
			t.Errorf("cloud run: %v", err)
		}
		r.errc <- nil // let a second stop return at once
	case <-time.After(10 * time.Second):
		t.Errorf("cloud did not stop")
	}
}

// newEC2Client builds an SDK client the way a user would: the files the cloud wrote
// and its endpoint.
func newEC2Client(t testing.TB, c *Cloud) *ec2.Client {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background(),
		config.WithSharedConfigFiles([]string{c.ConfigFile()}),
		config.WithSharedCredentialsFiles([]string{c.CredentialsFile()}),
		config.WithSharedConfigProfile("default"),
	)
	if err != nil {
		t.Fatalf("load aws config: %v", err)
	}
	ep, err := os.ReadFile(c.EndpointFile())
	if err != nil {
		t.Fatalf("read endpoint file: %v", err)
	}
	url := string(ep[:len(ep)-1])
	if url != c.Endpoint() {
		t.Fatalf("endpoint file says %q, Endpoint() %q", url, c.Endpoint())
	}
	return ec2.NewFromConfig(cfg, func(o *ec2.Options) {
		o.BaseEndpoint = aws.String(url)
		o.RetryMaxAttempts = 1
	})
}

// apiCode returns the EC2 error code of err ("" when err is not an API error).
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func wantCode(t testing.TB, err error, code string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", code)
	}
	if got := apiCode(err); got != code {
		t.Fatalf("got error %v (code %q), want code %s", err, got, code)
	}
}

// runInstance launches one instance in zone and returns its id.
func (r *running) runInstance(t testing.TB, zone string, tags ...types.Tag) string {
	t.Helper()
	in := &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: types.InstanceTypeM5Large,
		Placement: &types.Placement{AvailabilityZone: aws.String(zone)}}
	if len(tags) > 0 {
		in.TagSpecifications = []types.TagSpecification{{ResourceType: types.ResourceTypeInstance, Tags: tags}}
	}
	out, err := r.ec2.RunInstances(context.Background(), in)
	if err != nil {
		t.Fatalf("run instance: %v", err)
	}
	return *out.Instances[0].InstanceId
}

// createVolume makes a volume and waits until it is available.
func (r *running) createVolume(t testing.TB, zone string, size int32) string {
	t.Helper()
	out, err := r.ec2.CreateVolume(context.Background(), &ec2.CreateVolumeInput{AvailabilityZone: aws.String(zone), Size: aws.Int32(size)})
	if err != nil {
		t.Fatalf("create volume: %v", err)
	}
	r.waitVolume(t, *out.VolumeId, func(v types.Volume) bool { return v.State == types.VolumeStateAvailable })
	return *out.VolumeId
}

// waitVolume polls DescribeVolumes until ok holds.
func (r *running) waitVolume(t testing.TB, id string, ok func(types.Volume) bool) types.Volume {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, err := r.ec2.DescribeVolumes(context.Background(), &ec2.DescribeVolumesInput{VolumeIds: []string{id}})
		if err != nil {
			t.Fatalf("describe %s: %v", id, err)
		}
		if ok(out.Volumes[0]) {
			return out.Volumes[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("volume %s: condition not reached; last %+v", id, out.Volumes[0])
		}
		time.Sleep(time.Millisecond)
	}
}

func attachedState(v types.Volume) string {
	if len(v.Attachments) == 0 {
		return ""
	}
	return string(v.Attachments[0].State)
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func mustAddr(t testing.TB, s string) netip.Addr {
	t.Helper()
	a, err := netip.ParseAddr(s)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

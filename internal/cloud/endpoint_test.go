package cloud

import (
	"context"
	"net"
	"net/url"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// TestEndpointKeptAcrossRestarts: a second Run on the same data dir serves on the
// endpoint of the first, and the endpoint file says so.
func TestEndpointKeptAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	first := startCloud(t, Config{DataDir: dir, Hollow: true})
	ep := first.Endpoint()
	first.stop(t)

	second := startCloud(t, Config{DataDir: dir, Hollow: true}) // checks the endpoint file
	if got := second.Endpoint(); got != ep {
		t.Fatalf("after a restart the endpoint is %s, want %s", got, ep)
	}
	if _, err := second.ec2.DescribeVolumes(context.Background(), &ec2.DescribeVolumesInput{}); err != nil {
		t.Fatalf("describe volumes on the kept endpoint: %v", err)
	}
}

// TestEndpointPortTaken: when another process holds the recorded port, the cloud serves
// on a new one, writes it to the endpoint file and keeps it for the next start.
func TestEndpointPortTaken(t *testing.T) {
	dir := t.TempDir()
	first := startCloud(t, Config{DataDir: dir, Hollow: true})
	ep := first.Endpoint()
	first.stop(t)

	u, err := url.Parse(ep)
	if err != nil {
		t.Fatal(err)
	}
	squatter, err := net.Listen("tcp", u.Host)
	if err != nil {
		t.Fatalf("take the cloud's port: %v", err)
	}
	t.Cleanup(func() { squatter.Close() })

	second := startCloud(t, Config{DataDir: dir, Hollow: true}) // checks the endpoint file
	moved := second.Endpoint()
	if moved == ep {
		t.Fatalf("the cloud serves on %s, which another listener holds", ep)
	}
	if _, err := second.ec2.DescribeVolumes(context.Background(), &ec2.DescribeVolumesInput{}); err != nil {
		t.Fatalf("describe volumes on the new endpoint: %v", err)
	}
	second.stop(t)
	squatter.Close()

	third := startCloud(t, Config{DataDir: dir, Hollow: true})
	if got := third.Endpoint(); got != moved {
		t.Fatalf("after the move the next start serves on %s, want the new endpoint %s", got, moved)
	}
}

package aws

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/cloud"
	"github.com/kubelab/kubelab/internal/cloud/cloudtest"
	"github.com/kubelab/kubelab/internal/cloudprovider"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestInstances asks kubelab's cloud about a node's instance through the EC2 API: by its
// private DNS name, then by provider id; stopped it is shut down, terminated it is gone.
func TestInstances(t *testing.T) {
	c, err := cloud.New(cloud.Config{DataDir: t.TempDir(), Hollow: true, NoIMDSListeners: true, Logger: cloudtest.Logger(t, slog.LevelInfo)})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Start(t, "cloud", 30*time.Second, c.Run, testutil.Closed(c.Ready()))
	client := cloudtest.EC2Client(t, c.Endpoint(), c.ConfigFile(), c.CredentialsFile())
	ctx := context.Background()
	run, err := client.RunInstances(ctx, &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		InstanceType: ec2types.InstanceTypeM5Large, Placement: &ec2types.Placement{AvailabilityZone: aws.String("us-east-1b")}})
	if err != nil {
		t.Fatal(err)
	}
	inst := run.Instances[0]
	id, dns := aws.ToString(inst.InstanceId), aws.ToString(inst.PrivateDnsName)
	i := Instances{EC2: client}

	byName := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: dns}}
	m, err := i.InstanceMetadata(ctx, byName)
	if err != nil {
		t.Fatal(err)
	}
	want := cloudprovider.Metadata{ProviderID: "aws:///us-east-1b/" + id, InstanceType: "m5.large", Zone: "us-east-1b", Region: "us-east-1"}
	if m.ProviderID != want.ProviderID || m.InstanceType != want.InstanceType || m.Zone != want.Zone || m.Region != want.Region {
		t.Errorf("metadata %+v, want %+v", m, want)
	}
	if len(m.Addresses) != 3 || m.Addresses[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: aws.ToString(inst.PrivateIpAddress)}) ||
		m.Addresses[2] != (corev1.NodeAddress{Type: corev1.NodeHostName, Address: dns}) {
		t.Errorf("addresses %+v", m.Addresses)
	}
	byID := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "renamed"}, Spec: corev1.NodeSpec{ProviderID: m.ProviderID}}
	if ok, err := i.InstanceExists(ctx, byID); !ok || err != nil {
		t.Errorf("exists: %v, %v", ok, err)
	}

	if _, err := client.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the instance shut down", func() (bool, error) { return i.InstanceShutdown(ctx, byID) })
	if _, err := client.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the instance gone", func() (bool, error) {
		ok, err := i.InstanceExists(ctx, byID)
		return !ok, err
	})
	if ok, err := i.InstanceExists(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-9-9-9.ec2.internal"}}); ok || err != nil {
		t.Errorf("a node of no instance: exists %v, %v", ok, err)
	}
	if _, err := i.InstanceMetadata(ctx, &corev1.Node{Spec: corev1.NodeSpec{ProviderID: "aws:///us-east-1a/i-0123456789abcdef0"}}); err != cloudprovider.ErrInstanceNotFound {
		t.Errorf("metadata of an unknown id: %v", err)
	}
}

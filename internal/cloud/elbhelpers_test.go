package cloud

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/kubelab/kubelab/internal/cloud/cloudtest"
)

// newELBClient builds an ELBv2 SDK client from the files the cloud wrote, as a user would.
func newELBClient(t testing.TB, c *Cloud) *elb.Client {
	t.Helper()
	ep, err := os.ReadFile(c.EndpointFile())
	if err != nil {
		t.Fatalf("read endpoint file: %v", err)
	}
	return cloudtest.ELBClient(t, string(ep[:len(ep)-1]), c.ConfigFile(), c.CredentialsFile())
}

// subnetIDs lists the cloud's subnets in zone order.
func (r *running) subnetIDs(t testing.TB) []string {
	t.Helper()
	out, err := r.ec2.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{})
	if err != nil {
		t.Fatalf("describe subnets: %v", err)
	}
	ids := make([]string, len(out.Subnets))
	for _, s := range out.Subnets {
		ids[r.zoneIndex(*s.AvailabilityZone)] = *s.SubnetId
	}
	return ids
}

func (r *running) vpcID(t testing.TB) string {
	t.Helper()
	out, err := r.ec2.DescribeVpcs(context.Background(), &ec2.DescribeVpcsInput{})
	if err != nil || len(out.Vpcs) != 1 {
		t.Fatalf("describe vpcs: %v %v", out, err)
	}
	return *out.Vpcs[0].VpcId
}

// createLB makes a load balancer and waits until it is active.
func createLB(t testing.TB, c *elb.Client, in *elb.CreateLoadBalancerInput) elbtypes.LoadBalancer {
	t.Helper()
	out, err := c.CreateLoadBalancer(context.Background(), in)
	if err != nil {
		t.Fatalf("create load balancer %s: %v", *in.Name, err)
	}
	arn := *out.LoadBalancers[0].LoadBalancerArn
	deadline := time.Now().Add(20 * time.Second)
	for {
		d, err := c.DescribeLoadBalancers(context.Background(), &elb.DescribeLoadBalancersInput{LoadBalancerArns: []string{arn}})
		if err != nil {
			t.Fatalf("describe load balancer: %v", err)
		}
		if d.LoadBalancers[0].State.Code == elbtypes.LoadBalancerStateEnumActive {
			return d.LoadBalancers[0]
		}
		if time.Now().After(deadline) {
			t.Fatalf("load balancer %s not active: %+v", arn, d.LoadBalancers[0].State)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitHealth polls DescribeTargetHealth until every target named in want (id:port) has
// its state.
func waitHealth(t testing.TB, c *elb.Client, tgARN string, want map[string]elbtypes.TargetHealthStateEnum) []elbtypes.TargetHealthDescription {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := c.DescribeTargetHealth(context.Background(), &elb.DescribeTargetHealthInput{TargetGroupArn: aws.String(tgARN)})
		if err != nil {
			t.Fatalf("describe target health: %v", err)
		}
		got := map[string]elbtypes.TargetHealthStateEnum{}
		for _, d := range out.TargetHealthDescriptions {
			got[targetKey(*d.Target.Id, int(*d.Target.Port))] = d.TargetHealth.State
		}
		ok := true
		for k, s := range want {
			if got[k] != s {
				ok = false
			}
		}
		if ok {
			return out.TargetHealthDescriptions
		}
		if time.Now().After(deadline) {
			t.Fatalf("target health of %s: got %v, want %v", tgARN, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

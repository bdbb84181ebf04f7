package cloud

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
)

// TestELBLoadBalancers drives the ELBv2 API with the SDK: create, describe, the DNS name
// and zones, idempotency, attributes and delete.
func TestELBLoadBalancers(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	c := newELBClient(t, r.Cloud)
	ctx := context.Background()
	subnets := r.subnetIDs(t)
	if len(subnets) != 3 {
		t.Fatalf("subnets %v, want one per zone", subnets)
	}
	nlb := createLB(t, c, &elb.CreateLoadBalancerInput{Name: aws.String("web"), Type: elbtypes.LoadBalancerTypeEnumNetwork,
		Scheme: elbtypes.LoadBalancerSchemeEnumInternetFacing, Subnets: subnets[:2],
		Tags: []elbtypes.Tag{{Key: aws.String("team"), Value: aws.String("a")}}})
	arn := *nlb.LoadBalancerArn
	if !strings.HasPrefix(arn, "arn:aws:elasticloadbalancing:us-east-1:") || !strings.Contains(arn, ":loadbalancer/net/web/") {
		t.Errorf("ARN %s", arn)
	}
	id := arn[strings.LastIndex(arn, "/")+1:]
	if want := "web-" + id + ".elb.us-east-1.amazonaws.com"; *nlb.DNSName != want {
		t.Errorf("DNS name %s, want %s", *nlb.DNSName, want)
	}
	if *nlb.CanonicalHostedZoneId != "Z26RNL4JYFTOTI" || *nlb.VpcId != r.vpcID(t) {
		t.Errorf("hosted zone %s, vpc %s", *nlb.CanonicalHostedZoneId, *nlb.VpcId)
	}
	if len(nlb.AvailabilityZones) != 2 || *nlb.AvailabilityZones[0].ZoneName != "us-east-1a" || *nlb.AvailabilityZones[1].SubnetId != subnets[1] {
		t.Errorf("zones %+v", nlb.AvailabilityZones)
	}
	addr := *nlb.AvailabilityZones[0].LoadBalancerAddresses[0].IpAddress
	if !r.LoadBalancerBlock().Contains(mustAddr(t, addr)) {
		t.Errorf("address %s not in the block %s", addr, r.LoadBalancerBlock())
	}
	// The subnets the EC2 API describes are the load balancer's.
	ds, err := r.ec2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{subnets[0]}})
	if err != nil || *ds.Subnets[0].AvailabilityZone != "us-east-1a" || *ds.Subnets[0].CidrBlock != "172.31.0.0/20" {
		t.Errorf("describe subnets: %+v %v", ds, err)
	}

	alb := createLB(t, c, &elb.CreateLoadBalancerInput{Name: aws.String("web-alb"), Scheme: elbtypes.LoadBalancerSchemeEnumInternal,
		Subnets: subnets})
	if alb.Type != elbtypes.LoadBalancerTypeEnumApplication || !strings.HasPrefix(*alb.DNSName, "internal-web-alb-") ||
		!strings.HasSuffix(*alb.DNSName, ".us-east-1.elb.amazonaws.com") || len(alb.SecurityGroups) != 1 {
		t.Errorf("ALB %+v", alb)
	}
	if *alb.AvailabilityZones[0].LoadBalancerAddresses[0].PrivateIPv4Address == addr {
		t.Errorf("two load balancers share the address %s", addr)
	}

	// The same request again is the same load balancer; another with the name is not.
	again, err := c.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{Name: aws.String("web"), Type: elbtypes.LoadBalancerTypeEnumNetwork, Subnets: subnets[:2]})
	if err != nil || *again.LoadBalancers[0].LoadBalancerArn != arn {
		t.Errorf("idempotent create: %v %v", again, err)
	}
	_, err = c.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{Name: aws.String("web"), Type: elbtypes.LoadBalancerTypeEnumNetwork, Subnets: subnets[:1]})
	wantCode(t, err, "DuplicateLoadBalancerName")

	byName, err := c.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{Names: []string{"web"}})
	if err != nil || len(byName.LoadBalancers) != 1 || *byName.LoadBalancers[0].LoadBalancerArn != arn {
		t.Errorf("describe by name: %v %v", byName, err)
	}
	page, err := c.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{PageSize: aws.Int32(1)})
	if err != nil || len(page.LoadBalancers) != 1 || page.NextMarker == nil {
		t.Fatalf("first page: %v %v", page, err)
	}
	page2, err := c.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{PageSize: aws.Int32(1), Marker: page.NextMarker})
	if err != nil || len(page2.LoadBalancers) != 1 || page2.NextMarker != nil || *page2.LoadBalancers[0].LoadBalancerArn == *page.LoadBalancers[0].LoadBalancerArn {
		t.Errorf("second page: %v %v", page2, err)
	}

	attrs, err := c.ModifyLoadBalancerAttributes(ctx, &elb.ModifyLoadBalancerAttributesInput{LoadBalancerArn: aws.String(arn),
		Attributes: []elbtypes.LoadBalancerAttribute{{Key: aws.String("deletion_protection.enabled"), Value: aws.String("true")}}})
	if err != nil || attrValue(attrs.Attributes, "deletion_protection.enabled") != "true" || attrValue(attrs.Attributes, "load_balancing.cross_zone.enabled") != "false" {
		t.Fatalf("modify attributes: %v %v", attrs, err)
	}
	_, err = c.DeleteLoadBalancer(ctx, &elb.DeleteLoadBalancerInput{LoadBalancerArn: aws.String(arn)})
	wantCode(t, err, "OperationNotPermitted")
	if _, err := c.ModifyLoadBalancerAttributes(ctx, &elb.ModifyLoadBalancerAttributesInput{LoadBalancerArn: aws.String(arn),
		Attributes: []elbtypes.LoadBalancerAttribute{{Key: aws.String("deletion_protection.enabled"), Value: aws.String("false")}}}); err != nil {
		t.Fatal(err)
	}
	tags, err := c.DescribeTags(ctx, &elb.DescribeTagsInput{ResourceArns: []string{arn}})
	if err != nil || len(tags.TagDescriptions[0].Tags) != 1 || *tags.TagDescriptions[0].Tags[0].Value != "a" {
		t.Errorf("describe tags: %v %v", tags, err)
	}
	if _, err := c.DeleteLoadBalancer(ctx, &elb.DeleteLoadBalancerInput{LoadBalancerArn: aws.String(arn)}); err != nil {
		t.Fatal(err)
	}
	_, err = c.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{LoadBalancerArns: []string{arn}})
	wantCode(t, err, "LoadBalancerNotFound")
	// Deleting what is gone succeeds, as on ELB.
	if _, err := c.DeleteLoadBalancer(ctx, &elb.DeleteLoadBalancerInput{LoadBalancerArn: aws.String(arn)}); err != nil {
		t.Errorf("delete again: %v", err)
	}
}

func attrValue(attrs []elbtypes.LoadBalancerAttribute, key string) string {
	for _, a := range attrs {
		if *a.Key == key {
			return *a.Value
		}
	}
	return ""
}

// TestELBTerminatedInstanceTarget: a terminated instance's registration stays, reported
// unused with Target.InvalidState, and the data plane no longer routes to it.
func TestELBTerminatedInstanceTarget(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	c := newELBClient(t, r.Cloud)
	ctx := context.Background()
	inst := r.runInstance(t, "us-east-1a")
	lb := createLB(t, c, &elb.CreateLoadBalancerInput{Name: aws.String("term"), Type: elbtypes.LoadBalancerTypeEnumNetwork, Subnets: r.subnetIDs(t)})
	tg, err := c.CreateTargetGroup(ctx, &elb.CreateTargetGroupInput{Name: aws.String("term"), Protocol: elbtypes.ProtocolEnumTcp,
		Port: aws.Int32(30000), VpcId: aws.String(r.vpcID(t))})
	if err != nil {
		t.Fatal(err)
	}
	arn := *tg.TargetGroups[0].TargetGroupArn
	if _, err := c.RegisterTargets(ctx, &elb.RegisterTargetsInput{TargetGroupArn: aws.String(arn), Targets: []elbtypes.TargetDescription{{Id: aws.String(inst)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateListener(ctx, &elb.CreateListenerInput{LoadBalancerArn: lb.LoadBalancerArn, Protocol: elbtypes.ProtocolEnumTcp, Port: aws.Int32(80),
		DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: aws.String(arn)}}}); err != nil {
		t.Fatal(err)
	}
	key := targetKey(inst, 30000)
	if _, ok := r.plane.TargetHealth(arn, key); !ok {
		t.Fatalf("the data plane does not check %s", key)
	}
	if _, err := r.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{inst}}); err != nil {
		t.Fatal(err)
	}
	th := waitHealth(t, c, arn, map[string]elbtypes.TargetHealthStateEnum{key: "unused"})
	if th[0].TargetHealth.Reason != elbtypes.TargetHealthReasonEnumInvalidState {
		t.Errorf("terminated instance's target: %+v", th[0].TargetHealth)
	}
	if _, ok := r.plane.TargetHealth(arn, key); ok {
		t.Errorf("the data plane still routes to the terminated instance")
	}
}

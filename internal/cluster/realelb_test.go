package cluster_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/kubelab/kubelab/internal/cloud/cloudtest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// assertLoadBalancer puts a network load balancer of the cluster's cloud in front of a
// NodePort Service and of a pod: instance targets (every node's instance at the node
// port, reached from the VPC) on port 80 and an ip target (the pod's address, reached
// through a node) on port 81. Both answer want from the machine's namespace at the load
// balancer's address, and the address stops answering once the load balancer is deleted.
func (tc *testCluster) assertLoadBalancer(nodePort int, podIP, want string) {
	t := tc.T
	t.Helper()
	ctx := context.Background()
	c := cloudtest.ELBClient(t, tc.Cluster.CloudEndpoint(), tc.Cluster.CloudConfigFile(), tc.Cluster.CloudCredentialsFile())
	sn, err := tc.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	if err != nil {
		t.Fatal(err)
	}
	var subnets []string
	for _, s := range sn.Subnets {
		subnets = append(subnets, *s.SubnetId)
	}
	out, err := c.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{Name: aws.String("net-web"), Type: elbtypes.LoadBalancerTypeEnumNetwork, Subnets: subnets})
	if err != nil {
		t.Fatal(err)
	}
	lb := out.LoadBalancers[0]
	addr := *lb.AvailabilityZones[0].LoadBalancerAddresses[0].IpAddress
	tg := func(name string, typ elbtypes.TargetTypeEnum, port int, targets ...string) string {
		t.Helper()
		o, err := c.CreateTargetGroup(ctx, &elb.CreateTargetGroupInput{Name: aws.String(name), Protocol: elbtypes.ProtocolEnumTcp,
			Port: aws.Int32(int32(port)), VpcId: sn.Subnets[0].VpcId, TargetType: typ, HealthCheckIntervalSeconds: aws.Int32(5),
			HealthCheckTimeoutSeconds: aws.Int32(2), HealthyThresholdCount: aws.Int32(2)})
		if err != nil {
			t.Fatal(err)
		}
		arn := *o.TargetGroups[0].TargetGroupArn
		var ts []elbtypes.TargetDescription
		for _, id := range targets {
			ts = append(ts, elbtypes.TargetDescription{Id: aws.String(id)})
		}
		if _, err := c.RegisterTargets(ctx, &elb.RegisterTargetsInput{TargetGroupArn: aws.String(arn), Targets: ts}); err != nil {
			t.Fatal(err)
		}
		return arn
	}
	var instances []string
	for _, n := range tc.Nodes() {
		instances = append(instances, n.InstanceID)
	}
	nodesTG := tg("net-web-nodes", elbtypes.TargetTypeEnumInstance, nodePort, instances...)
	podTG := tg("net-web-pod", elbtypes.TargetTypeEnumIp, 80, podIP)
	for port, arn := range map[int32]string{80: nodesTG, 81: podTG} {
		if _, err := c.CreateListener(ctx, &elb.CreateListenerInput{LoadBalancerArn: lb.LoadBalancerArn, Protocol: elbtypes.ProtocolEnumTcp,
			Port: aws.Int32(port), DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: aws.String(arn)}}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, arn := range []string{nodesTG, podTG} {
		testutil.Eventually(t, "the load balancer's targets healthy", func() (bool, error) {
			h, err := c.DescribeTargetHealth(ctx, &elb.DescribeTargetHealthInput{TargetGroupArn: aws.String(arn)})
			if err != nil {
				return false, err
			}
			for _, d := range h.TargetHealthDescriptions {
				if d.TargetHealth.State != elbtypes.TargetHealthStateEnumHealthy {
					return false, nil
				}
			}
			return true, nil
		})
	}
	for _, port := range []int{80, 81} {
		url := "http://" + net.JoinHostPort(addr, strconv.Itoa(port)) + "/"
		testutil.Eventually(t, "GET "+url+" from the machine", func() (bool, error) {
			client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := client.Get(url)
			if err != nil {
				return false, err
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			return strings.TrimSpace(string(b)) == want, err
		})
	}
	if _, err := c.DeleteLoadBalancer(ctx, &elb.DeleteLoadBalancerInput{LoadBalancerArn: lb.LoadBalancerArn}); err != nil {
		t.Fatal(err)
	}
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort(addr, "80"), time.Second); err == nil {
		conn.Close()
		t.Errorf("the deleted load balancer's address %s still answers", addr)
	}
	for _, arn := range []string{nodesTG, podTG} {
		if _, err := c.DeleteTargetGroup(ctx, &elb.DeleteTargetGroupInput{TargetGroupArn: aws.String(arn)}); err != nil {
			t.Errorf("delete target group: %v", err)
		}
	}
}

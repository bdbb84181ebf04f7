package cloud

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
)

// TestELBModify changes a running ALB: its listener's default action and port, a rule's
// conditions, a group's health check, and deletes a rule and the listener; each change
// shows in the traffic.
func TestELBModify(t *testing.T) {
	vnet := newVPCNet()
	r := startCloud(t, Config{Hollow: true, Dial: vnet.dial})
	c := newELBClient(t, r.Cloud)
	ctx := context.Background()
	a, b := startBackend(t, "a"), startBackend(t, "b")
	vnet.route("tcp", "10.0.0.1:80", a.addr)
	vnet.route("tcp", "10.0.0.2:80", b.addr)
	lb := createLB(t, c, &elb.CreateLoadBalancerInput{Name: aws.String("mod"), Subnets: r.subnetIDs(t)})
	addr := *lb.AvailabilityZones[0].LoadBalancerAddresses[0].IpAddress
	tg := func(name, ip string) string {
		out, err := c.CreateTargetGroup(ctx, &elb.CreateTargetGroupInput{Name: aws.String(name), Protocol: elbtypes.ProtocolEnumHttp,
			Port: aws.Int32(80), VpcId: aws.String(r.vpcID(t)), TargetType: elbtypes.TargetTypeEnumIp, HealthCheckPath: aws.String("/healthz"),
			HealthCheckIntervalSeconds: aws.Int32(5), HealthCheckTimeoutSeconds: aws.Int32(2), HealthyThresholdCount: aws.Int32(2)})
		if err != nil {
			t.Fatal(err)
		}
		arn := *out.TargetGroups[0].TargetGroupArn
		if _, err := c.RegisterTargets(ctx, &elb.RegisterTargetsInput{TargetGroupArn: aws.String(arn), Targets: []elbtypes.TargetDescription{{Id: aws.String(ip)}}}); err != nil {
			t.Fatal(err)
		}
		return arn
	}
	tgA, tgB := tg("mod-a", "10.0.0.1"), tg("mod-b", "10.0.0.2")
	fwd := func(arn string) []elbtypes.Action {
		return []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: aws.String(arn)}}
	}
	l, err := c.CreateListener(ctx, &elb.CreateListenerInput{LoadBalancerArn: lb.LoadBalancerArn, Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(80), DefaultActions: fwd(tgA)})
	if err != nil {
		t.Fatal(err)
	}
	listener := l.Listeners[0].ListenerArn
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	expect := func(port, host, path, want string) {
		t.Helper()
		s, _, err := get(client, host, "http://"+net.JoinHostPort(addr, port)+path)
		if err != nil || s.Backend != want {
			t.Errorf("GET %s%s on :%s went to %q (%v), want %s", host, path, port, s.Backend, err, want)
		}
	}
	waitHealth(t, c, tgA, map[string]elbtypes.TargetHealthStateEnum{"10.0.0.1:80": "healthy"})
	expect("80", "x.test", "/", "a")

	if _, err := c.ModifyListener(ctx, &elb.ModifyListenerInput{ListenerArn: listener, DefaultActions: fwd(tgB)}); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, c, tgB, map[string]elbtypes.TargetHealthStateEnum{"10.0.0.2:80": "healthy"})
	expect("80", "x.test", "/", "b")
	waitHealth(t, c, tgA, map[string]elbtypes.TargetHealthStateEnum{"10.0.0.1:80": "unused"})

	rule, err := c.CreateRule(ctx, &elb.CreateRuleInput{ListenerArn: listener, Priority: aws.Int32(1), Actions: fwd(tgA),
		Conditions: []elbtypes.RuleCondition{{Field: aws.String("host-header"), Values: []string{"x.test"}}}})
	if err != nil {
		t.Fatal(err)
	}
	waitHealth(t, c, tgA, map[string]elbtypes.TargetHealthStateEnum{"10.0.0.1:80": "healthy"})
	expect("80", "x.test", "/", "a")
	if _, err := c.ModifyRule(ctx, &elb.ModifyRuleInput{RuleArn: rule.Rules[0].RuleArn,
		Conditions: []elbtypes.RuleCondition{{Field: aws.String("path-pattern"), PathPatternConfig: &elbtypes.PathPatternConditionConfig{Values: []string{"/p/*"}}}}}); err != nil {
		t.Fatal(err)
	}
	expect("80", "x.test", "/", "b")
	expect("80", "y.test", "/p/1", "a")
	tgs, err := c.DescribeTargetGroups(ctx, &elb.DescribeTargetGroupsInput{LoadBalancerArn: lb.LoadBalancerArn})
	if err != nil || len(tgs.TargetGroups) != 2 {
		t.Errorf("the load balancer's target groups: %+v %v", tgs, err)
	}

	// A matcher the target does not meet makes it unhealthy, with the code it gave.
	if _, err := c.ModifyTargetGroup(ctx, &elb.ModifyTargetGroupInput{TargetGroupArn: aws.String(tgA), Matcher: &elbtypes.Matcher{HttpCode: aws.String("201-299")}}); err != nil {
		t.Fatal(err)
	}
	th := waitHealth(t, c, tgA, map[string]elbtypes.TargetHealthStateEnum{"10.0.0.1:80": "unhealthy"})
	if *th[0].TargetHealth.Description != "Health checks failed with these codes: [200]" {
		t.Errorf("health %+v", th[0].TargetHealth)
	}

	if _, err := c.DeleteRule(ctx, &elb.DeleteRuleInput{RuleArn: rule.Rules[0].RuleArn}); err != nil {
		t.Fatal(err)
	}
	expect("80", "y.test", "/p/1", "b")
	if _, err := c.ModifyListener(ctx, &elb.ModifyListenerInput{ListenerArn: listener, Port: aws.Int32(8080)}); err != nil {
		t.Fatal(err)
	}
	expect("8080", "y.test", "/", "b")
	if _, err := net.DialTimeout("tcp", net.JoinHostPort(addr, "80"), time.Second); err == nil {
		t.Errorf("the listener's old port still answers")
	}
	if _, err := c.DeleteListener(ctx, &elb.DeleteListenerInput{ListenerArn: listener}); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", net.JoinHostPort(addr, "8080"), time.Second); err == nil {
		t.Errorf("the deleted listener's port still answers")
	}
	if _, err := c.DeleteTargetGroup(ctx, &elb.DeleteTargetGroupInput{TargetGroupArn: aws.String(tgA)}); err != nil {
		t.Errorf("delete a target group no listener uses: %v", err)
	}
}

package cloud

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
)

// TestELBErrors sends bad requests and checks each gets ELB's error code and leaves
// nothing behind.
func TestELBErrors(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	c := newELBClient(t, r.Cloud)
	ctx := context.Background()
	subnets := r.subnetIDs(t)
	vpc := r.vpcID(t)
	nlb := createLB(t, c, &elb.CreateLoadBalancerInput{Name: aws.String("e-nlb"), Type: elbtypes.LoadBalancerTypeEnumNetwork, Subnets: subnets[:1]})
	alb := createLB(t, c, &elb.CreateLoadBalancerInput{Name: aws.String("e-alb"), Subnets: subnets})
	other := createLB(t, c, &elb.CreateLoadBalancerInput{Name: aws.String("e-other"), Subnets: subnets})
	mkTG := func(name string, proto elbtypes.ProtocolEnum) string {
		out, err := c.CreateTargetGroup(ctx, &elb.CreateTargetGroupInput{Name: aws.String(name), Protocol: proto, Port: aws.Int32(80), VpcId: aws.String(vpc)})
		if err != nil {
			t.Fatalf("create target group: %v", err)
		}
		return *out.TargetGroups[0].TargetGroupArn
	}
	tcpTG, httpTG, freeTG := mkTG("e-tcp", elbtypes.ProtocolEnumTcp), mkTG("e-http", elbtypes.ProtocolEnumHttp), mkTG("e-free", elbtypes.ProtocolEnumHttp)
	fwd := func(tg string) []elbtypes.Action {
		return []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: aws.String(tg)}}
	}
	l, err := c.CreateListener(ctx, &elb.CreateListenerInput{LoadBalancerArn: alb.LoadBalancerArn, Protocol: elbtypes.ProtocolEnumHttp,
		Port: aws.Int32(80), DefaultActions: fwd(httpTG)})
	if err != nil {
		t.Fatal(err)
	}
	listener := *l.Listeners[0].ListenerArn
	nl, err := c.CreateListener(ctx, &elb.CreateListenerInput{LoadBalancerArn: nlb.LoadBalancerArn, Protocol: elbtypes.ProtocolEnumTcp,
		Port: aws.Int32(80), DefaultActions: fwd(tcpTG)})
	if err != nil {
		t.Fatal(err)
	}
	hostCond := []elbtypes.RuleCondition{{Field: aws.String("host-header"), Values: []string{"a.test"}}}
	rule, err := c.CreateRule(ctx, &elb.CreateRuleInput{ListenerArn: aws.String(listener), Priority: aws.Int32(5), Conditions: hostCond, Actions: fwd(httpTG)})
	if err != nil {
		t.Fatal(err)
	}
	dr, _ := c.DescribeRules(ctx, &elb.DescribeRulesInput{ListenerArn: aws.String(listener)})
	defaultRule := *dr.Rules[len(dr.Rules)-1].RuleArn
	inst := r.runInstance(t, "us-east-1a")
	missingLB := *alb.LoadBalancerArn + "0"
	missingTG := tcpTG + "0"
	missingListener := listener + "0"

	counts := func() [4]int {
		r.mu.Lock()
		defer r.mu.Unlock()
		return [4]int{len(r.lbs), len(r.tgs), len(r.listeners), len(r.rules)}
	}
	before := counts()
	for _, tc := range []struct {
		name string
		code string
		call func() error
	}{
		{"duplicate name", "DuplicateLoadBalancerName", func() error {
			_, err := c.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{Name: aws.String("e-alb"), Subnets: subnets[:2], Scheme: elbtypes.LoadBalancerSchemeEnumInternal})
			return err
		}},
		{"unknown subnet", "SubnetNotFound", func() error {
			_, err := c.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{Name: aws.String("e-new"), Subnets: []string{subnets[0], "subnet-0123456789abcdef0"}})
			return err
		}},
		{"no subnet", "ValidationError", func() error {
			_, err := c.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{Name: aws.String("e-new")})
			return err
		}},
		{"ALB in one zone", "InvalidConfigurationRequest", func() error {
			_, err := c.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{Name: aws.String("e-new"), Subnets: subnets[:1]})
			return err
		}},
		{"bad name", "ValidationError", func() error {
			_, err := c.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{Name: aws.String("-bad-"), Subnets: subnets})
			return err
		}},
		{"bad security group", "InvalidSecurityGroup", func() error {
			_, err := c.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{Name: aws.String("e-new"), Subnets: subnets, SecurityGroups: []string{"nope"}})
			return err
		}},
		{"unknown load balancer", "LoadBalancerNotFound", func() error {
			_, err := c.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{LoadBalancerArns: []string{missingLB}})
			return err
		}},
		{"malformed ARN", "ValidationError", func() error {
			_, err := c.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{LoadBalancerArns: []string{"lb-1"}})
			return err
		}},
		{"duplicate target group name", "DuplicateTargetGroupName", func() error {
			_, err := c.CreateTargetGroup(ctx, &elb.CreateTargetGroupInput{Name: aws.String("e-tcp"), Protocol: elbtypes.ProtocolEnumTcp, Port: aws.Int32(81), VpcId: aws.String(vpc)})
			return err
		}},
		{"bad port", "ValidationError", func() error {
			_, err := c.CreateTargetGroup(ctx, &elb.CreateTargetGroupInput{Name: aws.String("e-new"), Protocol: elbtypes.ProtocolEnumTcp, Port: aws.Int32(70000), VpcId: aws.String(vpc)})
			return err
		}},
		{"bad health check", "ValidationError", func() error {
			_, err := c.CreateTargetGroup(ctx, &elb.CreateTargetGroupInput{Name: aws.String("e-new"), Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(80), VpcId: aws.String(vpc),
				HealthyThresholdCount: aws.Int32(11)})
			return err
		}},
		{"bad matcher", "ValidationError", func() error {
			_, err := c.CreateTargetGroup(ctx, &elb.CreateTargetGroupInput{Name: aws.String("e-new"), Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(80), VpcId: aws.String(vpc),
				Matcher: &elbtypes.Matcher{HttpCode: aws.String("600")}})
			return err
		}},
		{"unknown target group", "TargetGroupNotFound", func() error {
			_, err := c.DescribeTargetHealth(ctx, &elb.DescribeTargetHealthInput{TargetGroupArn: aws.String(missingTG)})
			return err
		}},
		{"unknown instance target", "InvalidTarget", func() error {
			_, err := c.RegisterTargets(ctx, &elb.RegisterTargetsInput{TargetGroupArn: aws.String(tcpTG), Targets: []elbtypes.TargetDescription{{Id: aws.String(inst)}, {Id: aws.String("i-0123456789abcdef0")}}})
			return err
		}},
		{"public ip target", "InvalidTarget", func() error {
			_, err := c.CreateTargetGroup(ctx, &elb.CreateTargetGroupInput{Name: aws.String("e-ip"), Protocol: elbtypes.ProtocolEnumTcp, Port: aws.Int32(80), VpcId: aws.String(vpc), TargetType: elbtypes.TargetTypeEnumIp})
			if err != nil {
				return err
			}
			d, _ := c.DescribeTargetGroups(ctx, &elb.DescribeTargetGroupsInput{Names: []string{"e-ip"}})
			arn := d.TargetGroups[0].TargetGroupArn
			defer c.DeleteTargetGroup(ctx, &elb.DeleteTargetGroupInput{TargetGroupArn: arn})
			_, err = c.RegisterTargets(ctx, &elb.RegisterTargetsInput{TargetGroupArn: arn, Targets: []elbtypes.TargetDescription{{Id: aws.String("8.8.8.8")}}})
			return err
		}},
		{"target group in use", "ResourceInUse", func() error {
			_, err := c.DeleteTargetGroup(ctx, &elb.DeleteTargetGroupInput{TargetGroupArn: aws.String(httpTG)})
			return err
		}},
		{"duplicate listener", "DuplicateListener", func() error {
			_, err := c.CreateListener(ctx, &elb.CreateListenerInput{LoadBalancerArn: alb.LoadBalancerArn, Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(80), DefaultActions: fwd(freeTG)})
			return err
		}},
		{"listener on unknown load balancer", "LoadBalancerNotFound", func() error {
			_, err := c.CreateListener(ctx, &elb.CreateListenerInput{LoadBalancerArn: aws.String(missingLB), Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(81), DefaultActions: fwd(freeTG)})
			return err
		}},
		{"listener to unknown target group", "TargetGroupNotFound", func() error {
			_, err := c.CreateListener(ctx, &elb.CreateListenerInput{LoadBalancerArn: alb.LoadBalancerArn, Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(81), DefaultActions: fwd(missingTG)})
			return err
		}},
		{"bad listener port", "ValidationError", func() error {
			_, err := c.CreateListener(ctx, &elb.CreateListenerInput{LoadBalancerArn: alb.LoadBalancerArn, Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(0), DefaultActions: fwd(freeTG)})
			return err
		}},
		{"HTTP on an NLB", "UnsupportedProtocol", func() error {
			_, err := c.CreateListener(ctx, &elb.CreateListenerInput{LoadBalancerArn: nlb.LoadBalancerArn, Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(81), DefaultActions: fwd(freeTG)})
			return err
		}},
		{"TCP listener to an HTTP group", "IncompatibleProtocols", func() error {
			_, err := c.CreateListener(ctx, &elb.CreateListenerInput{LoadBalancerArn: nlb.LoadBalancerArn, Protocol: elbtypes.ProtocolEnumTcp, Port: aws.Int32(81), DefaultActions: fwd(freeTG)})
			return err
		}},
		{"group of another load balancer", "TargetGroupAssociationLimit", func() error {
			_, err := c.CreateListener(ctx, &elb.CreateListenerInput{LoadBalancerArn: other.LoadBalancerArn, Protocol: elbtypes.ProtocolEnumHttp, Port: aws.Int32(80), DefaultActions: fwd(httpTG)})
			return err
		}},
		{"unknown listener", "ListenerNotFound", func() error {
			_, err := c.DescribeListeners(ctx, &elb.DescribeListenersInput{ListenerArns: []string{missingListener}})
			return err
		}},
		{"priority in use", "PriorityInUse", func() error {
			_, err := c.CreateRule(ctx, &elb.CreateRuleInput{ListenerArn: aws.String(listener), Priority: aws.Int32(5), Conditions: hostCond, Actions: fwd(httpTG)})
			return err
		}},
		{"rule on an NLB listener", "InvalidConfigurationRequest", func() error {
			_, err := c.CreateRule(ctx, &elb.CreateRuleInput{ListenerArn: nl.Listeners[0].ListenerArn, Priority: aws.Int32(6), Conditions: hostCond, Actions: fwd(tcpTG)})
			return err
		}},
		{"bad priority", "ValidationError", func() error {
			_, err := c.CreateRule(ctx, &elb.CreateRuleInput{ListenerArn: aws.String(listener), Priority: aws.Int32(50001), Conditions: hostCond, Actions: fwd(httpTG)})
			return err
		}},
		{"unknown rule", "RuleNotFound", func() error {
			_, err := c.DeleteRule(ctx, &elb.DeleteRuleInput{RuleArn: aws.String(*rule.Rules[0].RuleArn + "0")})
			return err
		}},
		{"delete the default rule", "OperationNotPermitted", func() error {
			_, err := c.DeleteRule(ctx, &elb.DeleteRuleInput{RuleArn: aws.String(defaultRule)})
			return err
		}},
		{"priorities that collide", "PriorityInUse", func() error {
			r2, err := c.CreateRule(ctx, &elb.CreateRuleInput{ListenerArn: aws.String(listener), Priority: aws.Int32(6), Conditions: hostCond, Actions: fwd(httpTG)})
			if err != nil {
				return err
			}
			defer c.DeleteRule(ctx, &elb.DeleteRuleInput{RuleArn: r2.Rules[0].RuleArn})
			_, err = c.SetRulePriorities(ctx, &elb.SetRulePrioritiesInput{RulePriorities: []elbtypes.RulePriorityPair{{RuleArn: r2.Rules[0].RuleArn, Priority: aws.Int32(5)}}})
			return err
		}},
		{"duplicate tag keys", "DuplicateTagKeys", func() error {
			_, err := c.AddTags(ctx, &elb.AddTagsInput{ResourceArns: []string{*alb.LoadBalancerArn}, Tags: []elbtypes.Tag{{Key: aws.String("a")}, {Key: aws.String("a")}}})
			return err
		}},
		{"tags of an unknown group", "TargetGroupNotFound", func() error {
			_, err := c.AddTags(ctx, &elb.AddTagsInput{ResourceArns: []string{*alb.LoadBalancerArn, missingTG}, Tags: []elbtypes.Tag{{Key: aws.String("a")}}})
			return err
		}},
		{"unknown attribute", "ValidationError", func() error {
			_, err := c.ModifyLoadBalancerAttributes(ctx, &elb.ModifyLoadBalancerAttributesInput{LoadBalancerArn: alb.LoadBalancerArn,
				Attributes: []elbtypes.LoadBalancerAttribute{{Key: aws.String("no.such"), Value: aws.String("1")}}})
			return err
		}},
		{"bad attribute value", "InvalidConfigurationRequest", func() error {
			_, err := c.ModifyLoadBalancerAttributes(ctx, &elb.ModifyLoadBalancerAttributesInput{LoadBalancerArn: alb.LoadBalancerArn,
				Attributes: []elbtypes.LoadBalancerAttribute{{Key: aws.String("idle_timeout.timeout_seconds"), Value: aws.String("0")}}})
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { wantCode(t, tc.call(), tc.code) })
	}
	if after := counts(); after != before {
		t.Errorf("failed requests changed the state: %v before, %v after", before, after)
	}
	tags, _ := c.DescribeTags(ctx, &elb.DescribeTagsInput{ResourceArns: []string{*alb.LoadBalancerArn}})
	if len(tags.TagDescriptions[0].Tags) != 0 {
		t.Errorf("a failed AddTags tagged the load balancer: %+v", tags.TagDescriptions[0].Tags)
	}
}

// TestELBFaults makes CreateLoadBalancer fail and hang through the fault endpoint's
// faults.
func TestELBFaults(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	c := newELBClient(t, r.Cloud)
	ctx := context.Background()
	subnets := r.subnetIDs(t)
	if _, err := r.InjectFault(Fault{Action: "CreateLoadBalancer", Mode: "fail", Code: "InternalFailure", LoadBalancer: "f-fail", Count: 1}); err != nil {
		t.Fatal(err)
	}
	_, err := c.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{Name: aws.String("f-fail"), Subnets: subnets})
	wantCode(t, err, "InternalFailure")
	if _, err := c.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{Names: []string{"f-fail"}}); apiCode(err) != "LoadBalancerNotFound" {
		t.Errorf("a failed create left a load balancer: %v", err)
	}
	id, err := r.InjectFault(Fault{Action: "CreateLoadBalancer", Mode: "hang", LoadBalancer: "f-hang"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{Name: aws.String("f-hang"), Subnets: subnets})
	if err != nil {
		t.Fatal(err)
	}
	arn := *out.LoadBalancers[0].LoadBalancerArn
	d, _ := c.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{LoadBalancerArns: []string{arn}})
	if d.LoadBalancers[0].State.Code != elbtypes.LoadBalancerStateEnumProvisioning {
		t.Errorf("a held load balancer is %s", d.LoadBalancers[0].State.Code)
	}
	r.ClearFaults(id)
	createLB(t, c, &elb.CreateLoadBalancerInput{Name: aws.String("f-hang"), Subnets: subnets}) // the same: waits for active
}

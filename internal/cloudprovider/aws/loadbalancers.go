package aws

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	"github.com/aws/smithy-go"

	"github.com/kubelab/kubelab/internal/cloudprovider"
)

// LoadBalancers makes load balancers match their desired state over the ELBv2 API, finding
// each by name; the subnets (one per zone) and the VPC come from the EC2 API.
type LoadBalancers struct {
	ELB *elb.Client
	EC2 *ec2.Client
}

var _ cloudprovider.LoadBalancers = LoadBalancers{}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// find is the load balancer of name, nil when there is none.
func (l LoadBalancers) find(ctx context.Context, name string) (*elbtypes.LoadBalancer, error) {
	out, err := l.ELB.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{Names: []string{name}})
	if apiCode(err) == "LoadBalancerNotFound" {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describe load balancer %s: %w", name, err)
	}
	if len(out.LoadBalancers) == 0 {
		return nil, nil
	}
	return &out.LoadBalancers[0], nil
}

func status(lb *elbtypes.LoadBalancer) *cloudprovider.Status {
	s := &cloudprovider.Status{ARN: aws.ToString(lb.LoadBalancerArn), DNSName: aws.ToString(lb.DNSName)}
	if lb.State != nil {
		s.State = string(lb.State.Code)
	}
	for _, z := range lb.AvailabilityZones {
		for _, a := range z.LoadBalancerAddresses {
			if ip := aws.ToString(a.IpAddress); ip != "" {
				s.Address = ip
			} else if ip := aws.ToString(a.PrivateIPv4Address); ip != "" {
				s.Address = ip
			}
			if s.Address != "" {
				return s
			}
		}
	}
	return s
}

// GetLoadBalancer is the load balancer of name.
func (l LoadBalancers) GetLoadBalancer(ctx context.Context, name string) (*cloudprovider.Status, error) {
	lb, err := l.find(ctx, name)
	if err != nil {
		return nil, err
	}
	if lb == nil {
		return nil, cloudprovider.ErrLoadBalancerNotFound
	}
	return status(lb), nil
}

// DeleteLoadBalancer deletes the load balancer of name (its listeners and rules with it),
// then the target groups it used.
func (l LoadBalancers) DeleteLoadBalancer(ctx context.Context, name string) error {
	lb, err := l.find(ctx, name)
	if err != nil || lb == nil {
		return err
	}
	tgs, err := l.ELB.DescribeTargetGroups(ctx, &elb.DescribeTargetGroupsInput{LoadBalancerArn: lb.LoadBalancerArn})
	if err != nil {
		return fmt.Errorf("target groups of %s: %w", name, err)
	}
	if _, err := l.ELB.DeleteLoadBalancer(ctx, &elb.DeleteLoadBalancerInput{LoadBalancerArn: lb.LoadBalancerArn}); err != nil {
		return fmt.Errorf("delete load balancer %s: %w", name, err)
	}
	for _, tg := range tgs.TargetGroups {
		if _, err := l.ELB.DeleteTargetGroup(ctx, &elb.DeleteTargetGroupInput{TargetGroupArn: tg.TargetGroupArn}); err != nil {
			return fmt.Errorf("delete target group %s: %w", aws.ToString(tg.TargetGroupName), err)
		}
	}
	return nil
}

func elbTags(m map[string]string) []elbtypes.Tag {
	var out []elbtypes.Tag
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, elbtypes.Tag{Key: aws.String(k), Value: aws.String(m[k])})
	}
	return out
}

// subnets are one subnet of the cloud per zone.
func (l LoadBalancers) subnets(ctx context.Context) ([]string, error) {
	out, err := l.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})
	if err != nil {
		return nil, fmt.Errorf("describe subnets: %w", err)
	}
	byZone := map[string]string{}
	for _, s := range out.Subnets {
		z := aws.ToString(s.AvailabilityZone)
		if cur, ok := byZone[z]; !ok || aws.ToString(s.SubnetId) < cur {
			byZone[z] = aws.ToString(s.SubnetId)
		}
	}
	var ids []string
	for _, z := range slices.Sorted(maps.Keys(byZone)) {
		ids = append(ids, byZone[z])
	}
	if len(ids) == 0 {
		return nil, errors.New("the cloud has no subnets")
	}
	return ids, nil
}

// EnsureLoadBalancer creates the load balancer or makes it match want: a changed type or
// scheme replaces it; target groups, targets, listeners and rules are created, changed
// or deleted to match.
func (l LoadBalancers) EnsureLoadBalancer(ctx context.Context, want *cloudprovider.LoadBalancer) (*cloudprovider.Status, error) {
	lb, err := l.find(ctx, want.Name)
	if err != nil {
		return nil, err
	}
	if lb != nil && (string(lb.Type) != want.Type || string(lb.Scheme) != want.Scheme) {
		if err := l.DeleteLoadBalancer(ctx, want.Name); err != nil {
			return nil, err
		}
		lb = nil
	}
	if lb == nil {
		subnets, err := l.subnets(ctx)
		if err != nil {
			return nil, err
		}
		out, err := l.ELB.CreateLoadBalancer(ctx, &elb.CreateLoadBalancerInput{Name: aws.String(want.Name),
			Type: elbtypes.LoadBalancerTypeEnum(want.Type), Scheme: elbtypes.LoadBalancerSchemeEnum(want.Scheme),
			Subnets: subnets, Tags: elbTags(want.Tags)})
		if err != nil {
			return nil, fmt.Errorf("create load balancer %s: %w", want.Name, err)
		}
		lb = &out.LoadBalancers[0]
	}
	old, err := l.ELB.DescribeTargetGroups(ctx, &elb.DescribeTargetGroupsInput{LoadBalancerArn: lb.LoadBalancerArn})
	if err != nil {
		return nil, fmt.Errorf("target groups of %s: %w", want.Name, err)
	}
	arns := map[string]string{} // target group name → ARN
	for _, tg := range wantedTargetGroups(want) {
		arn, err := l.ensureTargetGroup(ctx, aws.ToString(lb.VpcId), want.Tags, tg)
		if err != nil {
			return nil, err
		}
		arns[tg.Name] = arn
	}
	if err := l.ensureListeners(ctx, lb, want, arns); err != nil {
		return nil, err
	}
	for _, tg := range old.TargetGroups {
		if _, ok := arns[aws.ToString(tg.TargetGroupName)]; ok {
			continue
		}
		if _, err := l.ELB.DeleteTargetGroup(ctx, &elb.DeleteTargetGroupInput{TargetGroupArn: tg.TargetGroupArn}); err != nil {
			return nil, fmt.Errorf("delete target group %s: %w", aws.ToString(tg.TargetGroupName), err)
		}
	}
	return l.GetLoadBalancer(ctx, want.Name)
}

// wantedTargetGroups are the distinct target groups lb's listeners and rules name.
func wantedTargetGroups(lb *cloudprovider.LoadBalancer) []cloudprovider.TargetGroup {
	var out []cloudprovider.TargetGroup
	add := func(tg *cloudprovider.TargetGroup) {
		if tg != nil && !slices.ContainsFunc(out, func(o cloudprovider.TargetGroup) bool { return o.Name == tg.Name }) {
			out = append(out, *tg)
		}
	}
	for _, ls := range lb.Listeners {
		add(ls.Default)
		for _, r := range ls.Rules {
			add(&r.TargetGroup)
		}
	}
	return out
}

func healthInput(h cloudprovider.HealthCheck) (proto elbtypes.ProtocolEnum, port, path *string, interval, timeout, healthy, unhealthy *int32) {
	opt := func(v int32) *int32 {
		if v == 0 {
			return nil
		}
		return aws.Int32(v)
	}
	if h.Port != "" {
		port = aws.String(h.Port)
	}
	if h.Path != "" {
		path = aws.String(h.Path)
	}
	return elbtypes.ProtocolEnum(h.Protocol), port, path, opt(h.Interval), opt(h.Timeout), opt(h.Healthy), opt(h.Unhealthy)
}

// healthDiffers is whether the cloud's group checks otherwise than want says (zero fields
// of want are the cloud's defaults and match anything).
func healthDiffers(tg elbtypes.TargetGroup, want cloudprovider.HealthCheck) bool {
	ne := func(w string, got *string) bool { return w != "" && w != aws.ToString(got) }
	ni := func(w int32, got *int32) bool { return w != 0 && w != aws.ToInt32(got) }
	return (want.Protocol != "" && want.Protocol != string(tg.HealthCheckProtocol)) || ne(want.Port, tg.HealthCheckPort) ||
		ne(want.Path, tg.HealthCheckPath) || ni(want.Interval, tg.HealthCheckIntervalSeconds) ||
		ni(want.Timeout, tg.HealthCheckTimeoutSeconds) || ni(want.Healthy, tg.HealthyThresholdCount) ||
		ni(want.Unhealthy, tg.UnhealthyThresholdCount)
}

// ensureTargetGroup makes the group of tg.Name exist with tg's health check and exactly
// its targets; it answers its ARN.
func (l LoadBalancers) ensureTargetGroup(ctx context.Context, vpc string, tags map[string]string, tg cloudprovider.TargetGroup) (string, error) {
	proto, port, path, interval, timeout, healthy, unhealthy := healthInput(tg.Health)
	var cur *elbtypes.TargetGroup
	out, err := l.ELB.DescribeTargetGroups(ctx, &elb.DescribeTargetGroupsInput{Names: []string{tg.Name}})
	switch {
	case apiCode(err) == "TargetGroupNotFound":
	case err != nil:
		return "", fmt.Errorf("describe target group %s: %w", tg.Name, err)
	case len(out.TargetGroups) > 0:
		cur = &out.TargetGroups[0]
	}
	if cur == nil {
		created, err := l.ELB.CreateTargetGroup(ctx, &elb.CreateTargetGroupInput{Name: aws.String(tg.Name),
			Protocol: elbtypes.ProtocolEnum(tg.Protocol), Port: aws.Int32(tg.Port), VpcId: aws.String(vpc),
			TargetType: elbtypes.TargetTypeEnum(tg.TargetType), HealthCheckProtocol: proto, HealthCheckPort: port,
			HealthCheckPath: path, HealthCheckIntervalSeconds: interval, HealthCheckTimeoutSeconds: timeout,
			HealthyThresholdCount: healthy, UnhealthyThresholdCount: unhealthy, Tags: elbTags(tags)})
		if err != nil {
			return "", fmt.Errorf("create target group %s: %w", tg.Name, err)
		}
		cur = &created.TargetGroups[0]
	} else if healthDiffers(*cur, tg.Health) {
		if _, err := l.ELB.ModifyTargetGroup(ctx, &elb.ModifyTargetGroupInput{TargetGroupArn: cur.TargetGroupArn,
			HealthCheckProtocol: proto, HealthCheckPort: port, HealthCheckPath: path, HealthCheckIntervalSeconds: interval,
			HealthCheckTimeoutSeconds: timeout, HealthyThresholdCount: healthy, UnhealthyThresholdCount: unhealthy}); err != nil {
			return "", fmt.Errorf("modify target group %s: %w", tg.Name, err)
		}
	}
	arn := aws.ToString(cur.TargetGroupArn)
	health, err := l.ELB.DescribeTargetHealth(ctx, &elb.DescribeTargetHealthInput{TargetGroupArn: cur.TargetGroupArn})
	if err != nil {
		return "", fmt.Errorf("targets of %s: %w", tg.Name, err)
	}
	var have []cloudprovider.Target
	for _, d := range health.TargetHealthDescriptions {
		if d.TargetHealth != nil && d.TargetHealth.State == elbtypes.TargetHealthStateEnumDraining {
			continue
		}
		have = append(have, cloudprovider.Target{ID: aws.ToString(d.Target.Id), Port: aws.ToInt32(d.Target.Port)})
	}
	add, remove := diffTargets(have, tg.Targets)
	if len(add) > 0 {
		if _, err := l.ELB.RegisterTargets(ctx, &elb.RegisterTargetsInput{TargetGroupArn: aws.String(arn), Targets: descriptions(add)}); err != nil {
			return "", fmt.Errorf("register targets of %s: %w", tg.Name, err)
		}
	}
	if len(remove) > 0 {
		if _, err := l.ELB.DeregisterTargets(ctx, &elb.DeregisterTargetsInput{TargetGroupArn: aws.String(arn), Targets: descriptions(remove)}); err != nil {
			return "", fmt.Errorf("deregister targets of %s: %w", tg.Name, err)
		}
	}
	return arn, nil
}

// diffTargets is what to register and deregister to go from have to want.
func diffTargets(have, want []cloudprovider.Target) (add, remove []cloudprovider.Target) {
	for _, t := range want {
		if !slices.Contains(have, t) {
			add = append(add, t)
		}
	}
	for _, t := range have {
		if !slices.Contains(want, t) {
			remove = append(remove, t)
		}
	}
	return add, remove
}

func descriptions(ts []cloudprovider.Target) []elbtypes.TargetDescription {
	var out []elbtypes.TargetDescription
	for _, t := range ts {
		out = append(out, elbtypes.TargetDescription{Id: aws.String(t.ID), Port: aws.Int32(t.Port)})
	}
	return out
}

// defaultAction forwards to the group of tg, or answers 404 when there is none.
func defaultAction(tg *cloudprovider.TargetGroup, arns map[string]string) elbtypes.Action {
	if tg == nil {
		return elbtypes.Action{Type: elbtypes.ActionTypeEnumFixedResponse, FixedResponseConfig: &elbtypes.FixedResponseActionConfig{
			StatusCode: aws.String("404"), ContentType: aws.String("text/plain")}}
	}
	return forward(arns[tg.Name])
}

func forward(arn string) elbtypes.Action {
	return elbtypes.Action{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: aws.String(arn)}
}

// actionTarget is the one target group an action forwards to ("" for another action).
func actionTarget(a elbtypes.Action) string {
	if a.Type != elbtypes.ActionTypeEnumForward {
		return "fixed-response:" + aws.ToString(fixedCode(a))
	}
	if arn := aws.ToString(a.TargetGroupArn); arn != "" {
		return arn
	}
	if a.ForwardConfig != nil && len(a.ForwardConfig.TargetGroups) == 1 {
		return aws.ToString(a.ForwardConfig.TargetGroups[0].TargetGroupArn)
	}
	return ""
}

func fixedCode(a elbtypes.Action) *string {
	if a.FixedResponseConfig == nil {
		return nil
	}
	return a.FixedResponseConfig.StatusCode
}

// ensureListeners makes lb's listeners those of want, then their rules.
func (l LoadBalancers) ensureListeners(ctx context.Context, lb *elbtypes.LoadBalancer, want *cloudprovider.LoadBalancer, arns map[string]string) error {
	out, err := l.ELB.DescribeListeners(ctx, &elb.DescribeListenersInput{LoadBalancerArn: lb.LoadBalancerArn})
	if err != nil {
		return fmt.Errorf("listeners of %s: %w", want.Name, err)
	}
	byPort := map[int32]elbtypes.Listener{}
	for _, ls := range out.Listeners {
		byPort[aws.ToInt32(ls.Port)] = ls
	}
	for _, w := range want.Listeners {
		action := defaultAction(w.Default, arns)
		cur, ok := byPort[w.Port]
		delete(byPort, w.Port)
		var arn string
		switch {
		case !ok:
			created, err := l.ELB.CreateListener(ctx, &elb.CreateListenerInput{LoadBalancerArn: lb.LoadBalancerArn,
				Protocol: elbtypes.ProtocolEnum(w.Protocol), Port: aws.Int32(w.Port), DefaultActions: []elbtypes.Action{action}})
			if err != nil {
				return fmt.Errorf("create listener %s:%d of %s: %w", w.Protocol, w.Port, want.Name, err)
			}
			arn = aws.ToString(created.Listeners[0].ListenerArn)
		case string(cur.Protocol) != w.Protocol || len(cur.DefaultActions) != 1 || actionTarget(cur.DefaultActions[0]) != actionTarget(action):
			if _, err := l.ELB.ModifyListener(ctx, &elb.ModifyListenerInput{ListenerArn: cur.ListenerArn,
				Protocol: elbtypes.ProtocolEnum(w.Protocol), DefaultActions: []elbtypes.Action{action}}); err != nil {
				return fmt.Errorf("modify listener %d of %s: %w", w.Port, want.Name, err)
			}
			arn = aws.ToString(cur.ListenerArn)
		default:
			arn = aws.ToString(cur.ListenerArn)
		}
		if want.Type == cloudprovider.TypeApplication {
			if err := l.ensureRules(ctx, arn, w.Rules, arns); err != nil {
				return fmt.Errorf("rules of %s:%d: %w", want.Name, w.Port, err)
			}
		}
	}
	for _, ls := range byPort {
		if _, err := l.ELB.DeleteListener(ctx, &elb.DeleteListenerInput{ListenerArn: ls.ListenerArn}); err != nil {
			return fmt.Errorf("delete listener %d of %s: %w", aws.ToInt32(ls.Port), want.Name, err)
		}
	}
	return nil
}

func conditionValues(r elbtypes.Rule, field string) []string {
	var out []string
	for _, c := range r.Conditions {
		if aws.ToString(c.Field) != field {
			continue
		}
		out = append(out, c.Values...)
		if c.HostHeaderConfig != nil {
			out = append(out, c.HostHeaderConfig.Values...)
		}
		if c.PathPatternConfig != nil {
			out = append(out, c.PathPatternConfig.Values...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func sorted(v []string) []string {
	v = slices.Clone(v)
	slices.Sort(v)
	return slices.Compact(v)
}

func conditions(r cloudprovider.Rule) []elbtypes.RuleCondition {
	var out []elbtypes.RuleCondition
	if len(r.Hosts) > 0 {
		out = append(out, elbtypes.RuleCondition{Field: aws.String("host-header"), HostHeaderConfig: &elbtypes.HostHeaderConditionConfig{Values: r.Hosts}})
	}
	if len(r.Paths) > 0 {
		out = append(out, elbtypes.RuleCondition{Field: aws.String("path-pattern"), PathPatternConfig: &elbtypes.PathPatternConditionConfig{Values: r.Paths}})
	}
	return out
}

// ensureRules makes the listener's rules (other than its default) exactly want: a rule
// at a wanted priority that differs is replaced.
func (l LoadBalancers) ensureRules(ctx context.Context, listener string, want []cloudprovider.Rule, arns map[string]string) error {
	out, err := l.ELB.DescribeRules(ctx, &elb.DescribeRulesInput{ListenerArn: aws.String(listener)})
	if err != nil {
		return err
	}
	byPriority := map[int32]elbtypes.Rule{}
	for _, r := range out.Rules {
		if aws.ToBool(r.IsDefault) {
			continue
		}
		p, err := strconv.Atoi(aws.ToString(r.Priority))
		if err != nil {
			continue
		}
		byPriority[int32(p)] = r
	}
	same := func(cur elbtypes.Rule, w cloudprovider.Rule) bool {
		return len(cur.Actions) == 1 && actionTarget(cur.Actions[0]) == arns[w.TargetGroup.Name] &&
			slices.Equal(conditionValues(cur, "host-header"), sorted(w.Hosts)) && slices.Equal(conditionValues(cur, "path-pattern"), sorted(w.Paths))
	}
	var create []cloudprovider.Rule
	keep := map[int32]bool{}
	for _, w := range want {
		if cur, ok := byPriority[w.Priority]; ok && same(cur, w) {
			keep[w.Priority] = true
			continue
		}
		create = append(create, w)
	}
	// Delete first so that the priorities are free.
	prios := slices.Collect(maps.Keys(byPriority))
	sort.Slice(prios, func(i, j int) bool { return prios[i] < prios[j] })
	for _, p := range prios {
		if keep[p] {
			continue
		}
		if _, err := l.ELB.DeleteRule(ctx, &elb.DeleteRuleInput{RuleArn: byPriority[p].RuleArn}); err != nil {
			return fmt.Errorf("delete rule %d: %w", p, err)
		}
	}
	for _, w := range create {
		if _, err := l.ELB.CreateRule(ctx, &elb.CreateRuleInput{ListenerArn: aws.String(listener), Priority: aws.Int32(w.Priority),
			Conditions: conditions(w), Actions: []elbtypes.Action{forward(arns[w.TargetGroup.Name])}}); err != nil {
			return fmt.Errorf("create rule %d: %w", w.Priority, err)
		}
	}
	return nil
}

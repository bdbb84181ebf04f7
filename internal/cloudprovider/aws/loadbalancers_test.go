package aws

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"

	"github.com/kubelab/kubelab/internal/cloud"
	"github.com/kubelab/kubelab/internal/cloud/cloudtest"
	"github.com/kubelab/kubelab/internal/cloudprovider"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestLoadBalancers makes an NLB and an ALB match their desired state through the ELBv2
// API of kubelab's (hollow) cloud, changes them, and deletes them with their target groups.
func TestLoadBalancers(t *testing.T) {
	c, err := cloud.New(cloud.Config{DataDir: t.TempDir(), Hollow: true, NoIMDSListeners: true, Logger: cloudtest.Logger(t, slog.LevelInfo)})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Start(t, "cloud", 30*time.Second, c.Run, testutil.Closed(c.Ready()))
	ec2c := cloudtest.EC2Client(t, c.Endpoint(), c.ConfigFile(), c.CredentialsFile())
	elbc := cloudtest.ELBClient(t, c.Endpoint(), c.ConfigFile(), c.CredentialsFile())
	ctx := context.Background()
	run, err := ec2c.RunInstances(ctx, &ec2.RunInstancesInput{MinCount: aws.Int32(2), MaxCount: aws.Int32(2), InstanceType: ec2types.InstanceTypeM5Large})
	if err != nil {
		t.Fatal(err)
	}
	i0, i1 := aws.ToString(run.Instances[0].InstanceId), aws.ToString(run.Instances[1].InstanceId)
	lbs := LoadBalancers{ELB: elbc, EC2: ec2c}

	tg := cloudprovider.TargetGroup{Name: "k8s-tcp80-aaaa", Protocol: "TCP", Port: 30080, TargetType: "instance",
		Health: cloudprovider.HealthCheck{Protocol: "TCP", Interval: 10}, Targets: []cloudprovider.Target{{ID: i0, Port: 30080}}}
	want := &cloudprovider.LoadBalancer{Name: "a0123456789abcdef0123456789abcde", Type: "network", Scheme: "internet-facing",
		Tags: map[string]string{"kubernetes.io/service-name": "default/web"}, Listeners: []cloudprovider.Listener{{Protocol: "TCP", Port: 80, Default: &tg}}}
	st, err := lbs.EnsureLoadBalancer(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	if st.DNSName == "" || st.Address == "" || st.ARN == "" {
		t.Fatalf("status %+v", st)
	}
	// Again, with one more target, a changed health check and a second listener.
	tg.Targets = append(tg.Targets, cloudprovider.Target{ID: i1, Port: 30080})
	tg.Health.Interval = 5
	udp := cloudprovider.TargetGroup{Name: "k8s-udp53-bbbb", Protocol: "UDP", Port: 30053, TargetType: "instance", Targets: []cloudprovider.Target{{ID: i1, Port: 30053}}}
	want.Listeners = append(want.Listeners, cloudprovider.Listener{Protocol: "UDP", Port: 53, Default: &udp})
	st2, err := lbs.EnsureLoadBalancer(ctx, want)
	if err != nil {
		t.Fatal(err)
	}
	if st2.ARN != st.ARN {
		t.Errorf("the load balancer was replaced: %s → %s", st.ARN, st2.ARN)
	}
	ls, err := elbc.DescribeListeners(ctx, &elb.DescribeListenersInput{LoadBalancerArn: aws.String(st.ARN)})
	if err != nil || len(ls.Listeners) != 2 {
		t.Fatalf("listeners %+v, %v", ls, err)
	}
	tgs, err := elbc.DescribeTargetGroups(ctx, &elb.DescribeTargetGroupsInput{Names: []string{tg.Name}})
	if err != nil || aws.ToInt32(tgs.TargetGroups[0].HealthCheckIntervalSeconds) != 5 {
		t.Fatalf("target group %+v, %v", tgs, err)
	}
	h, err := elbc.DescribeTargetHealth(ctx, &elb.DescribeTargetHealthInput{TargetGroupArn: tgs.TargetGroups[0].TargetGroupArn})
	if err != nil || len(h.TargetHealthDescriptions) != 2 {
		t.Fatalf("targets %+v, %v", h, err)
	}
	// The UDP listener dropped: its listener and group go.
	want.Listeners = want.Listeners[:1]
	if _, err := lbs.EnsureLoadBalancer(ctx, want); err != nil {
		t.Fatal(err)
	}
	if _, err := elbc.DescribeTargetGroups(ctx, &elb.DescribeTargetGroupsInput{Names: []string{udp.Name}}); apiCode(err) != "TargetGroupNotFound" {
		t.Errorf("the UDP group after it was dropped: %v", err)
	}

	// An ALB with two rules, then one rule changed.
	web := cloudprovider.TargetGroup{Name: "k8s-web-1111", Protocol: "HTTP", Port: 30080, TargetType: "instance", Targets: []cloudprovider.Target{{ID: i0, Port: 30080}}}
	api := cloudprovider.TargetGroup{Name: "k8s-api-2222", Protocol: "HTTP", Port: 30081, TargetType: "instance", Targets: []cloudprovider.Target{{ID: i1, Port: 30081}}}
	alb := &cloudprovider.LoadBalancer{Name: "k8s-shop", Type: "application", Scheme: "internet-facing", Listeners: []cloudprovider.Listener{{
		Protocol: "HTTP", Port: 80, Rules: []cloudprovider.Rule{
			{Priority: 1, Hosts: []string{"shop.example.com"}, Paths: []string{"/api", "/api/*"}, TargetGroup: api},
			{Priority: 2, Hosts: []string{"shop.example.com"}, TargetGroup: web}}}}}
	ast, err := lbs.EnsureLoadBalancer(ctx, alb)
	if err != nil {
		t.Fatal(err)
	}
	alb.Listeners[0].Rules[1].Hosts = []string{"www.example.com"}
	if _, err := lbs.EnsureLoadBalancer(ctx, alb); err != nil {
		t.Fatal(err)
	}
	als, err := elbc.DescribeListeners(ctx, &elb.DescribeListenersInput{LoadBalancerArn: aws.String(ast.ARN)})
	if err != nil {
		t.Fatal(err)
	}
	rules, err := elbc.DescribeRules(ctx, &elb.DescribeRulesInput{ListenerArn: als.Listeners[0].ListenerArn})
	if err != nil {
		t.Fatal(err)
	}
	var hosts []string
	for _, r := range rules.Rules {
		if !aws.ToBool(r.IsDefault) {
			hosts = append(hosts, aws.ToString(r.Priority)+":"+conditionValues(r, "host-header")[0])
		}
	}
	if len(hosts) != 2 || hosts[0] != "1:shop.example.com" || hosts[1] != "2:www.example.com" {
		t.Errorf("rules %v", hosts)
	}

	for _, name := range []string{want.Name, alb.Name} {
		if err := lbs.DeleteLoadBalancer(ctx, name); err != nil {
			t.Fatal(err)
		}
		if _, err := lbs.GetLoadBalancer(ctx, name); !errors.Is(err, cloudprovider.ErrLoadBalancerNotFound) {
			t.Errorf("%s after delete: %v", name, err)
		}
		if err := lbs.DeleteLoadBalancer(ctx, name); err != nil {
			t.Errorf("delete again: %v", err)
		}
	}
	left, err := elbc.DescribeTargetGroups(ctx, &elb.DescribeTargetGroupsInput{})
	if err != nil || len(left.TargetGroups) != 0 {
		t.Errorf("target groups left: %+v, %v", left, err)
	}
}

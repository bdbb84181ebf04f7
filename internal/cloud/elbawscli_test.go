package cloud

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// awsELB runs `aws elbv2 ARGS` against the cloud, configured only by the files the cloud
// wrote and its endpoint; it returns the JSON answer, or the error output when the
// command fails.
func awsELB(t *testing.T, r *running, args ...string) (map[string]any, string, error) {
	t.Helper()
	cmd := exec.Command(awsCLI(t), append([]string{"elbv2", "--endpoint-url", r.Endpoint(), "--output", "json"}, args...)...)
	cmd.Env = []string{"AWS_CONFIG_FILE=" + r.ConfigFile(), "AWS_SHARED_CREDENTIALS_FILE=" + r.CredentialsFile(), "AWS_PAGER=", "HOME=" + t.TempDir()}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, string(out), err
	}
	m := map[string]any{}
	if len(strings.TrimSpace(string(out))) > 0 {
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatalf("aws elbv2 %v: %v\n%s", args, err, out)
		}
	}
	return m, "", nil
}

// TestAWSCLIELB drives the ELBv2 API with `aws elbv2`: a network load balancer in two of
// the subnets `aws ec2 describe-subnets` lists, a target group with an instance, a
// listener, an ALB's rules, and errors.
func TestAWSCLIELB(t *testing.T) {
	awsCLI(t)
	r := startCloud(t, Config{Hollow: true})
	run := func(args ...string) map[string]any {
		t.Helper()
		m, out, err := awsELB(t, r, args...)
		if err != nil {
			t.Fatalf("aws elbv2 %v: %v\n%s", args, err, out)
		}
		return m
	}
	first := func(m map[string]any, key string) map[string]any {
		t.Helper()
		l, _ := m[key].([]any)
		if len(l) == 0 {
			t.Fatalf("%s missing in %v", key, m)
		}
		return l[0].(map[string]any)
	}
	subnets := r.subnetIDs(t)
	inst := r.runInstance(t, "us-east-1a")
	lb := first(run("create-load-balancer", "--name", "cli-nlb", "--type", "network", "--subnets", subnets[0], subnets[1],
		"--tags", "Key=app,Value=web"), "LoadBalancers")
	arn := lb["LoadBalancerArn"].(string)
	if lb["Type"] != "network" || lb["State"].(map[string]any)["Code"] != "provisioning" || !strings.HasSuffix(lb["DNSName"].(string), ".elb.us-east-1.amazonaws.com") {
		t.Errorf("create-load-balancer: %v", lb)
	}
	zones := lb["AvailabilityZones"].([]any)
	if len(zones) != 2 || zones[0].(map[string]any)["SubnetId"] != subnets[0] {
		t.Errorf("zones %v", zones)
	}
	tg := first(run("create-target-group", "--name", "cli-nodes", "--protocol", "TCP", "--port", "30080", "--vpc-id", r.vpcID(t),
		"--health-check-interval-seconds", "10", "--healthy-threshold-count", "3"), "TargetGroups")
	tgARN := tg["TargetGroupArn"].(string)
	if tg["HealthCheckProtocol"] != "TCP" || tg["HealthCheckIntervalSeconds"] != 10.0 || tg["HealthyThresholdCount"] != 3.0 || tg["TargetType"] != "instance" {
		t.Errorf("create-target-group: %v", tg)
	}
	run("register-targets", "--target-group-arn", tgARN, "--targets", "Id="+inst)
	l := first(run("create-listener", "--load-balancer-arn", arn, "--protocol", "TCP", "--port", "80",
		"--default-actions", "Type=forward,TargetGroupArn="+tgARN), "Listeners")
	if l["Port"] != 80.0 || l["Protocol"] != "TCP" {
		t.Errorf("create-listener: %v", l)
	}
	d := first(run("describe-load-balancers", "--names", "cli-nlb"), "LoadBalancers")
	if d["State"].(map[string]any)["Code"] != "active" {
		t.Errorf("describe-load-balancers: %v", d)
	}
	th := first(run("describe-target-health", "--target-group-arn", tgARN), "TargetHealthDescriptions")
	if th["Target"].(map[string]any)["Id"] != inst || th["Target"].(map[string]any)["Port"] != 30080.0 {
		t.Errorf("describe-target-health: %v", th)
	}
	tags := first(run("describe-tags", "--resource-arns", arn), "TagDescriptions")
	if tl := tags["Tags"].([]any); len(tl) != 1 || tl[0].(map[string]any)["Value"] != "web" {
		t.Errorf("describe-tags: %v", tags)
	}

	// An ALB with a rule; describe-rules shows it and the default.
	alb := first(run("create-load-balancer", "--name", "cli-alb", "--subnets", subnets[0], subnets[1], subnets[2]), "LoadBalancers")
	htg := first(run("create-target-group", "--name", "cli-web", "--protocol", "HTTP", "--port", "80", "--vpc-id", r.vpcID(t),
		"--target-type", "ip", "--health-check-path", "/healthz", "--matcher", "HttpCode=200-299"), "TargetGroups")
	al := first(run("create-listener", "--load-balancer-arn", alb["LoadBalancerArn"].(string), "--protocol", "HTTP", "--port", "80",
		"--default-actions", `Type=fixed-response,FixedResponseConfig={StatusCode=404,ContentType=text/plain,MessageBody=none}`), "Listeners")
	run("create-rule", "--listener-arn", al["ListenerArn"].(string), "--priority", "10",
		"--conditions", "Field=host-header,Values=web.test", "--actions", "Type=forward,TargetGroupArn="+htg["TargetGroupArn"].(string))
	rules := run("describe-rules", "--listener-arn", al["ListenerArn"].(string))["Rules"].([]any)
	if len(rules) != 2 || rules[0].(map[string]any)["Priority"] != "10" || rules[1].(map[string]any)["IsDefault"] != true {
		t.Errorf("describe-rules: %v", rules)
	}

	// Errors come back with ELB's codes.
	for _, tc := range []struct {
		args []string
		code string
	}{
		{[]string{"describe-load-balancers", "--names", "no-such"}, "LoadBalancerNotFound"},
		{[]string{"create-load-balancer", "--name", "cli-nlb", "--type", "network", "--subnets", subnets[2]}, "DuplicateLoadBalancerName"},
		{[]string{"create-load-balancer", "--name", "cli-x", "--subnets", "subnet-00000000000000000", subnets[0]}, "SubnetNotFound"},
		{[]string{"delete-target-group", "--target-group-arn", tgARN}, "ResourceInUse"},
	} {
		_, out, err := awsELB(t, r, tc.args...)
		if err == nil || !strings.Contains(out, "("+tc.code+")") {
			t.Errorf("aws elbv2 %v: %v %s, want %s", tc.args, err, out, tc.code)
		}
	}

	run("delete-load-balancer", "--load-balancer-arn", arn)
	run("delete-target-group", "--target-group-arn", tgARN)
	if _, out, err := awsELB(t, r, "describe-target-groups", "--target-group-arns", tgARN); err == nil || !strings.Contains(out, "TargetGroupNotFound") {
		t.Errorf("describe after delete: %v %s", err, out)
	}
}

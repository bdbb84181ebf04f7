package cloud

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/kubelab/kubelab/internal/testutil"
)

// childEnv names the data dir of a cloud that TestELBChildCloud runs in a process of its
// own, and childRoutes its targets' routes (addr=to,…).
const (
	childEnv    = "KUBELAB_TEST_ELB_CHILD_DIR"
	childRoutes = "KUBELAB_TEST_ELB_CHILD_ROUTES"
)

// TestELBChildCloud is not a test: run with childEnv set, it serves a hollow cloud until
// it is killed (TestELBKill9 runs it).
func TestELBChildCloud(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		t.Skip("runs only as TestELBKill9's child process")
	}
	vnet := newVPCNet()
	for _, kv := range strings.Split(os.Getenv(childRoutes), ",") {
		if from, to, ok := strings.Cut(kv, "="); ok {
			vnet.route("tcp", from, to)
		}
	}
	c, err := New(Config{Hollow: true, DataDir: dir, Dial: vnet.dial, HostsFile: filepath.Join(dir, "hosts"), Logger: discardLogger()})
	if err != nil {
		t.Fatal(err)
	}
	c.Run(context.Background())
}

// TestELBKill9 kills a cloud with SIGKILL while its NLB carries traffic; the cloud
// started again on the data dir has the load balancer at the same address with its
// listener and healthy target, and carries traffic at once.
func TestELBKill9(t *testing.T) {
	dir := t.TempDir()
	echo, _ := echoServer(t, "target")
	cmd := exec.Command(os.Args[0], "-test.run=^TestELBChildCloud$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir, childRoutes+"=10.0.0.1:7000="+echo)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
		}
		cmd.Wait()
	})
	testutil.Eventually(t, "the child cloud's client files", func() bool {
		for _, f := range []string{"endpoint", "aws-config", "aws-credentials"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				return false
			}
		}
		return true
	})
	// The child's cloud as a client sees it: its data dir's files and endpoint.
	cfg := Config{DataDir: dir}
	child := &running{Cloud: &Cloud{cfg: cfg.withDefaults()}}
	ep, _ := os.ReadFile(filepath.Join(dir, "endpoint"))
	child.endpoint = strings.TrimSpace(string(ep))
	child.ec2 = newEC2Client(t, child.Cloud)
	c := newELBClient(t, child.Cloud)
	ctx := context.Background()
	testutil.Eventually(t, "the child cloud to answer", func() error {
		_, err := c.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{})
		return err
	})
	lb := createLB(t, c, &elb.CreateLoadBalancerInput{Name: aws.String("kill"), Type: elbtypes.LoadBalancerTypeEnumNetwork,
		Subnets: child.subnetIDs(t)})
	addr := *lb.AvailabilityZones[0].LoadBalancerAddresses[0].IpAddress
	tg, err := c.CreateTargetGroup(ctx, &elb.CreateTargetGroupInput{Name: aws.String("kill"), Protocol: elbtypes.ProtocolEnumTcp,
		Port: aws.Int32(7000), VpcId: aws.String(child.vpcID(t)), TargetType: elbtypes.TargetTypeEnumIp,
		HealthCheckIntervalSeconds: aws.Int32(5), HealthCheckTimeoutSeconds: aws.Int32(2), HealthyThresholdCount: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	arn := *tg.TargetGroups[0].TargetGroupArn
	if _, err := c.RegisterTargets(ctx, &elb.RegisterTargetsInput{TargetGroupArn: aws.String(arn), Targets: []elbtypes.TargetDescription{{Id: aws.String("10.0.0.1")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateListener(ctx, &elb.CreateListenerInput{LoadBalancerArn: lb.LoadBalancerArn, Protocol: elbtypes.ProtocolEnumTcp, Port: aws.Int32(80),
		DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: aws.String(arn)}}}); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, c, arn, map[string]elbtypes.TargetHealthStateEnum{"10.0.0.1:7000": "healthy"})
	if s, err := tcpAsk(addr+":80", "before"); err != nil || s != "target before" {
		t.Fatalf("through the NLB: %q %v", s, err)
	}

	cmd.Process.Signal(syscall.SIGKILL)
	killed = true
	cmd.Wait()
	if b, _ := os.ReadFile(filepath.Join(dir, "hosts")); !strings.Contains(string(b), *lb.DNSName) {
		t.Errorf("the killed cloud's hosts file lost its entry (it stays until a restart or a clean stop):\n%s", b)
	}

	vnet := newVPCNet()
	vnet.route("tcp", "10.0.0.1:7000", echo)
	r := startCloud(t, Config{Hollow: true, DataDir: dir, Dial: vnet.dial, HostsFile: filepath.Join(dir, "hosts")})
	// Traffic flows at once, to the target as registered before the kill.
	if s, err := tcpAsk(addr+":80", "after"); err != nil || s != "target after" {
		t.Errorf("through the NLB after kill -9 and restart: %q %v", s, err)
	}
	c2 := newELBClient(t, r.Cloud)
	d, err := c2.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{Names: []string{"kill"}})
	if err != nil || *d.LoadBalancers[0].AvailabilityZones[0].LoadBalancerAddresses[0].IpAddress != addr {
		t.Errorf("after restart: %+v %v", d, err)
	}
	waitHealth(t, c2, arn, map[string]elbtypes.TargetHealthStateEnum{"10.0.0.1:7000": "healthy"})
}

package cloud

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/kubelab/kubelab/internal/benchtest"
)

// BenchmarkLoadBalancers compares, in one run, an HTTP backend on loopback reached
// directly, through an NLB (TCP listener, ip target) and through an ALB (HTTP listener,
// one rule): "conn" is a new connection carrying one GET (connection rate), "req" a GET
// on a kept-alive connection (the latency a load balancer adds to a request).
func BenchmarkLoadBalancers(b *testing.B) {
	backend := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go backend.Serve(ln)
	b.Cleanup(func() { backend.Close() })
	vnet := newVPCNet()
	vnet.route("tcp", "10.0.0.1:8080", ln.Addr().String())
	r := startCloud(b, Config{Hollow: true, Dial: vnet.dial, Logger: discardLogger()})
	c := newELBClient(b, r.Cloud)
	ctx := context.Background()
	subnets := r.subnetIDs(b)
	front := func(typ elbtypes.LoadBalancerTypeEnum, proto elbtypes.ProtocolEnum) string {
		lb := createLB(b, c, &elb.CreateLoadBalancerInput{Name: aws.String("bench-" + string(typ)), Type: typ, Subnets: subnets})
		tg, err := c.CreateTargetGroup(ctx, &elb.CreateTargetGroupInput{Name: aws.String("bench-" + string(typ)), Protocol: proto,
			Port: aws.Int32(8080), VpcId: aws.String(r.vpcID(b)), TargetType: elbtypes.TargetTypeEnumIp,
			HealthCheckIntervalSeconds: aws.Int32(5), HealthCheckTimeoutSeconds: aws.Int32(2), HealthyThresholdCount: aws.Int32(2)})
		if err != nil {
			b.Fatal(err)
		}
		arn := *tg.TargetGroups[0].TargetGroupArn
		if _, err := c.RegisterTargets(ctx, &elb.RegisterTargetsInput{TargetGroupArn: aws.String(arn), Targets: []elbtypes.TargetDescription{{Id: aws.String("10.0.0.1")}}}); err != nil {
			b.Fatal(err)
		}
		l, err := c.CreateListener(ctx, &elb.CreateListenerInput{LoadBalancerArn: lb.LoadBalancerArn, Protocol: proto, Port: aws.Int32(80),
			DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: aws.String(arn)}}})
		if err != nil {
			b.Fatal(err)
		}
		if typ == elbtypes.LoadBalancerTypeEnumApplication {
			if _, err := c.CreateRule(ctx, &elb.CreateRuleInput{ListenerArn: l.Listeners[0].ListenerArn, Priority: aws.Int32(1),
				Conditions: []elbtypes.RuleCondition{{Field: aws.String("path-pattern"), Values: []string{"/*"}}},
				Actions:    []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: aws.String(arn)}}}); err != nil {
				b.Fatal(err)
			}
		}
		waitHealth(b, c, arn, map[string]elbtypes.TargetHealthStateEnum{"10.0.0.1:8080": "healthy"})
		return "http://" + *lb.AvailabilityZones[0].LoadBalancerAddresses[0].IpAddress + "/"
	}
	urls := []struct{ name, url string }{
		{"direct", "http://" + ln.Addr().String() + "/"},
		{"nlb", front(elbtypes.LoadBalancerTypeEnumNetwork, elbtypes.ProtocolEnumTcp)},
		{"alb", front(elbtypes.LoadBalancerTypeEnumApplication, elbtypes.ProtocolEnumHttp)},
	}
	for _, mode := range []string{"conn", "req"} {
		for _, u := range urls {
			b.Run(mode+"/"+u.name, func(b *testing.B) {
				tr := &http.Transport{DisableKeepAlives: mode == "conn", MaxIdleConnsPerHost: 1}
				defer tr.CloseIdleConnections()
				client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
				var ds []time.Duration
				start := time.Now()
				for b.Loop() {
					t0 := time.Now()
					resp, err := client.Get(u.url)
					if err != nil {
						b.Fatal(err)
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						b.Fatalf("GET %s: %s", u.url, resp.Status)
					}
					ds = append(ds, time.Since(t0))
				}
				elapsed := time.Since(start)
				benchtest.ReportLatencies(b, "get", ds)
				b.ReportMetric(float64(len(ds))/elapsed.Seconds(), "gets/s")
			})
		}
	}
}

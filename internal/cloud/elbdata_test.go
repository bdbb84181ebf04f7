package cloud

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"

	"github.com/kubelab/kubelab/internal/testutil"
)

// vpcNet stands in for the VPC in tests: it maps targets' addresses (network/ip:port) to
// servers on 127.0.0.1; an address it does not know refuses the connection.
type vpcNet struct {
	mu sync.Mutex
	m  map[string]string
}

func newVPCNet() *vpcNet { return &vpcNet{m: map[string]string{}} }

func (n *vpcNet) route(network, addr, to string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.m[network+"/"+addr] = to
}

func (n *vpcNet) unroute(network, addr string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.m, network+"/"+addr)
}

func (n *vpcNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	n.mu.Lock()
	to, ok := n.m[network+"/"+addr]
	n.mu.Unlock()
	if !ok {
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, to)
}

// backend is an HTTP server on loopback that answers with its name and what it saw.
type backend struct {
	name   string
	addr   string
	mu     sync.Mutex
	hits   int
	health int // status of /healthz
	srv    *http.Server
}

type seen struct {
	Backend string
	Host    string
	Path    string
	Proto   string
	Header  http.Header
}

func startBackend(t *testing.T, name string) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{name: name, addr: ln.Addr().String(), health: 200}
	b.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		if r.URL.Path == "/healthz" {
			code := b.health
			b.mu.Unlock()
			w.WriteHeader(code)
			return
		}
		b.hits++
		b.mu.Unlock()
		json.NewEncoder(w).Encode(seen{Backend: name, Host: r.Host, Path: r.URL.Path, Proto: r.Proto, Header: r.Header})
	})}
	go b.srv.Serve(ln)
	t.Cleanup(func() { b.srv.Close() })
	return b
}

func (b *backend) setHealth(code int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.health = code
}

func (b *backend) hitCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.hits
}

// get sends GET url through client and decodes what the backend saw.
func get(client *http.Client, host, url string) (seen, int, error) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if host != "" {
		req.Host = host
	}
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	resp, err := client.Do(req)
	if err != nil {
		return seen{}, 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var s seen
	if resp.Header.Get("Content-Type") != "text/plain" {
		json.Unmarshal(body, &s)
	} else {
		s.Backend = "fixed:" + string(body)
	}
	return s, resp.StatusCode, nil
}

// TestELBApplicationLoadBalancer sends HTTP/1.1 and HTTP/2 requests through an ALB to
// real backends: rules by host and path, a fixed response, the X-Forwarded headers,
// HTTP health checks that take an unhealthy target out of the rotation, the DNS name
// in the hosts file, and delete closing the address.
func TestELBApplicationLoadBalancer(t *testing.T) {
	vnet := newVPCNet()
	hosts := t.TempDir() + "/hosts"
	os.WriteFile(hosts, []byte("127.0.0.1 localhost\n"), 0o644)
	r := startCloud(t, Config{Hollow: true, Dial: vnet.dial, HostsFile: hosts})
	c := newELBClient(t, r.Cloud)
	ctx := context.Background()
	api1, api2, web := startBackend(t, "api-1"), startBackend(t, "api-2"), startBackend(t, "web")
	vnet.route("tcp", "10.0.1.1:8080", api1.addr)
	vnet.route("tcp", "10.0.1.2:8080", api2.addr)
	vnet.route("tcp", "10.0.2.1:8080", web.addr)

	lb := createLB(t, c, &elb.CreateLoadBalancerInput{Name: aws.String("shop"), Subnets: r.subnetIDs(t)})
	lbAddr := *lb.AvailabilityZones[0].LoadBalancerAddresses[0].IpAddress
	mkTG := func(name string) string {
		out, err := c.CreateTargetGroup(ctx, &elb.CreateTargetGroupInput{Name: aws.String(name), Protocol: elbtypes.ProtocolEnumHttp,
			Port: aws.Int32(8080), VpcId: aws.String(r.vpcID(t)), TargetType: elbtypes.TargetTypeEnumIp,
			HealthCheckPath: aws.String("/healthz"), HealthCheckIntervalSeconds: aws.Int32(5), HealthCheckTimeoutSeconds: aws.Int32(2),
			HealthyThresholdCount: aws.Int32(2), UnhealthyThresholdCount: aws.Int32(2)})
		if err != nil {
			t.Fatalf("create target group %s: %v", name, err)
		}
		return *out.TargetGroups[0].TargetGroupArn
	}
	apiTG, webTG := mkTG("shop-api"), mkTG("shop-web")
	register := func(tg string, ips ...string) {
		var ts []elbtypes.TargetDescription
		for _, ip := range ips {
			ts = append(ts, elbtypes.TargetDescription{Id: aws.String(ip)})
		}
		if _, err := c.RegisterTargets(ctx, &elb.RegisterTargetsInput{TargetGroupArn: aws.String(tg), Targets: ts}); err != nil {
			t.Fatalf("register targets: %v", err)
		}
	}
	register(apiTG, "10.0.1.1", "10.0.1.2")
	register(webTG, "10.0.2.1")
	// Not yet behind a listener: unused.
	waitHealth(t, c, apiTG, map[string]elbtypes.TargetHealthStateEnum{"10.0.1.1:8080": "unused"})

	l, err := c.CreateListener(ctx, &elb.CreateListenerInput{LoadBalancerArn: lb.LoadBalancerArn, Protocol: elbtypes.ProtocolEnumHttp,
		Port: aws.Int32(80), DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumFixedResponse,
			FixedResponseConfig: &elbtypes.FixedResponseActionConfig{StatusCode: aws.String("404"), ContentType: aws.String("text/plain"), MessageBody: aws.String("no route")}}}})
	if err != nil {
		t.Fatalf("create listener: %v", err)
	}
	listenerARN := *l.Listeners[0].ListenerArn
	fwd := func(tg string) []elbtypes.Action {
		return []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: aws.String(tg)}}
	}
	rule := func(prio int32, actions []elbtypes.Action, conds ...elbtypes.RuleCondition) {
		if _, err := c.CreateRule(ctx, &elb.CreateRuleInput{ListenerArn: aws.String(listenerARN), Priority: aws.Int32(prio),
			Actions: actions, Conditions: conds}); err != nil {
			t.Fatalf("create rule %d: %v", prio, err)
		}
	}
	host := func(v ...string) elbtypes.RuleCondition {
		return elbtypes.RuleCondition{Field: aws.String("host-header"), HostHeaderConfig: &elbtypes.HostHeaderConditionConfig{Values: v}}
	}
	path := func(v ...string) elbtypes.RuleCondition {
		return elbtypes.RuleCondition{Field: aws.String("path-pattern"), Values: v}
	}
	rule(10, fwd(apiTG), host("api.shop.test"), path("/v?/*"))
	rule(20, fwd(webTG), host("*.shop.test"))
	rule(30, fwd(webTG), path("/static/*"))
	waitHealth(t, c, apiTG, map[string]elbtypes.TargetHealthStateEnum{"10.0.1.1:8080": "healthy", "10.0.1.2:8080": "healthy"})
	waitHealth(t, c, webTG, map[string]elbtypes.TargetHealthStateEnum{"10.0.2.1:8080": "healthy"})

	// The DNS name is in the hosts file at the load balancer's address.
	b, _ := os.ReadFile(hosts)
	if !strings.Contains(string(b), lbAddr+"\t"+*lb.DNSName+"\n") || !strings.HasPrefix(string(b), "127.0.0.1 localhost\n") {
		t.Errorf("hosts file:\n%s", b)
	}

	h1 := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	h2t := &http.Transport{}
	h2t.Protocols = new(http.Protocols)
	h2t.Protocols.SetUnencryptedHTTP2(true)
	h2 := &http.Client{Timeout: 5 * time.Second, Transport: h2t}
	base := "http://" + lbAddr
	for _, tc := range []struct {
		client     *http.Client
		host, path string
		want       string
		code       int
	}{
		{h1, "api.shop.test", "/v1/orders", "api-", 200},
		{h2, "api.shop.test", "/v2/orders", "api-", 200},
		{h1, "api.shop.test", "/orders", "web", 200}, // the path misses rule 10; *.shop.test is rule 20
		{h1, "www.shop.test", "/v1/orders", "web", 200},
		{h1, "other.test", "/static/app.js", "web", 200},
		{h1, "other.test", "/", "fixed:no route", 404},
	} {
		s, code, err := get(tc.client, tc.host, base+tc.path)
		if err != nil || code != tc.code || !strings.HasPrefix(s.Backend, tc.want) {
			t.Errorf("GET %s%s: %d %+v %v, want %s", tc.host, tc.path, code, s.Backend, err, tc.want)
			continue
		}
		if code != 200 {
			continue
		}
		if tc.client == h2 && s.Proto != "HTTP/1.1" {
			t.Errorf("the target got %s; the load balancer speaks HTTP/1.1 to targets", s.Proto)
		}
		if s.Host != tc.host || s.Path != tc.path {
			t.Errorf("the target saw host %q path %q", s.Host, s.Path)
		}
		if got := s.Header.Get("X-Forwarded-For"); got != "203.0.113.7, 127.0.0.1" {
			t.Errorf("X-Forwarded-For %q, want the client's address appended", got)
		}
		if s.Header.Get("X-Forwarded-Proto") != "http" || s.Header.Get("X-Forwarded-Port") != "80" || !strings.HasPrefix(s.Header.Get("X-Amzn-Trace-Id"), "Root=1-") {
			t.Errorf("forwarded headers %v", s.Header)
		}
	}
	// Both API targets serve.
	for i := 0; i < 6; i++ {
		get(h1, "api.shop.test", base+"/v1/x")
	}
	if api1.hitCount() == 0 || api2.hitCount() == 0 {
		t.Errorf("round robin: api-1 %d hits, api-2 %d", api1.hitCount(), api2.hitCount())
	}

	// api-2's health check fails: it turns unhealthy with the code and gets no traffic.
	api2.setHealth(503)
	ths := waitHealth(t, c, apiTG, map[string]elbtypes.TargetHealthStateEnum{"10.0.1.2:8080": "unhealthy", "10.0.1.1:8080": "healthy"})
	for _, d := range ths {
		if *d.Target.Id == "10.0.1.2" && (d.TargetHealth.Reason != elbtypes.TargetHealthReasonEnumResponseCodeMismatch ||
			*d.TargetHealth.Description != "Health checks failed with these codes: [503]") {
			t.Errorf("unhealthy target's health %+v", d.TargetHealth)
		}
	}
	before := api2.hitCount()
	testutil.Consistently(t, time.Second, "the unhealthy target gets no request", func() error {
		s, _, err := get(h1, "api.shop.test", base+"/v1/x")
		if err != nil {
			return err
		}
		if s.Backend != "api-1" || api2.hitCount() != before {
			return fmt.Errorf("request went to %s", s.Backend)
		}
		return nil
	})
	// Both unhealthy: the group fails open and routes to both.
	api1.setHealth(500)
	waitHealth(t, c, apiTG, map[string]elbtypes.TargetHealthStateEnum{"10.0.1.1:8080": "unhealthy", "10.0.1.2:8080": "unhealthy"})
	testutil.Eventually(t, "both unhealthy targets serve (fail open)", func() bool {
		get(h1, "api.shop.test", base+"/v1/x")
		return api2.hitCount() > before
	})
	api1.setHealth(200)
	api2.setHealth(200)

	// Rules are described in priority order, the default last.
	dr, err := c.DescribeRules(ctx, &elb.DescribeRulesInput{ListenerArn: aws.String(listenerARN)})
	if err != nil || len(dr.Rules) != 4 || *dr.Rules[0].Priority != "10" || !*dr.Rules[3].IsDefault || *dr.Rules[3].Priority != "default" {
		t.Fatalf("describe rules: %+v %v", dr, err)
	}
	// Swapping priorities changes which rule matches first.
	if _, err := c.SetRulePriorities(ctx, &elb.SetRulePrioritiesInput{RulePriorities: []elbtypes.RulePriorityPair{
		{RuleArn: dr.Rules[0].RuleArn, Priority: aws.Int32(40)}}}); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := get(h1, "api.shop.test", base+"/v1/orders"); s.Backend != "web" {
		t.Errorf("after moving the api rule last, api.shop.test went to %s", s.Backend)
	}

	// Delete: the name leaves the hosts file and the address stops answering.
	if _, err := c.DeleteLoadBalancer(ctx, &elb.DeleteLoadBalancerInput{LoadBalancerArn: lb.LoadBalancerArn}); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", lbAddr+":80", time.Second); err == nil {
		t.Errorf("the deleted load balancer's address still answers")
	}
	if b, _ := os.ReadFile(hosts); string(b) != "127.0.0.1 localhost\n" {
		t.Errorf("hosts file after delete:\n%s", b)
	}
	waitHealth(t, c, apiTG, map[string]elbtypes.TargetHealthStateEnum{"10.0.1.1:8080": "unused"})
}

// echoServer answers each line on a TCP connection with its name and the line.
func echoServer(t *testing.T, name string) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				sc := bufio.NewScanner(c)
				for sc.Scan() {
					fmt.Fprintf(c, "%s %s\n", name, sc.Text())
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String(), func() { ln.Close() }
}

// udpEcho answers each datagram with its name and the datagram.
func udpEcho(t *testing.T, name string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			pc.WriteTo([]byte(name+" "+string(buf[:n])), from)
		}
	}()
	t.Cleanup(func() { pc.Close() })
	return pc.LocalAddr().String()
}

// tcpAsk sends one line to addr and reads the answer.
func tcpAsk(addr, line string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	fmt.Fprintln(c, line)
	s, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(s), err
}

// TestELBNetworkLoadBalancer carries TCP and UDP through an NLB to instance targets (a
// node port on each instance's private address) and ip targets, takes a target that
// stops answering out of the rotation, and keeps everything over a restart.
func TestELBNetworkLoadBalancer(t *testing.T) {
	vnet := newVPCNet()
	dir := t.TempDir()
	hosts := t.TempDir() + "/hosts"
	r := startCloud(t, Config{Hollow: true, Dial: vnet.dial, DataDir: dir, HostsFile: hosts})
	c := newELBClient(t, r.Cloud)
	ctx := context.Background()
	i1, i2 := r.runInstance(t, "us-east-1a"), r.runInstance(t, "us-east-1b")
	ip := func(id string) string {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.instances[id].PrivateIP
	}
	e1, stop1 := echoServer(t, "node-1")
	e2, _ := echoServer(t, "node-2")
	vnet.route("tcp", ip(i1)+":30080", e1)
	vnet.route("tcp", ip(i2)+":30080", e2)

	lb := createLB(t, c, &elb.CreateLoadBalancerInput{Name: aws.String("svc"), Type: elbtypes.LoadBalancerTypeEnumNetwork, Subnets: r.subnetIDs(t)})
	lbAddr := *lb.AvailabilityZones[0].LoadBalancerAddresses[0].IpAddress
	tg, err := c.CreateTargetGroup(ctx, &elb.CreateTargetGroupInput{Name: aws.String("svc-nodes"), Protocol: elbtypes.ProtocolEnumTcp,
		Port: aws.Int32(30080), VpcId: aws.String(r.vpcID(t)), HealthCheckIntervalSeconds: aws.Int32(5), HealthCheckTimeoutSeconds: aws.Int32(2),
		HealthyThresholdCount: aws.Int32(2), UnhealthyThresholdCount: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	tgARN := *tg.TargetGroups[0].TargetGroupArn
	if _, err := c.RegisterTargets(ctx, &elb.RegisterTargetsInput{TargetGroupArn: aws.String(tgARN),
		Targets: []elbtypes.TargetDescription{{Id: aws.String(i1)}, {Id: aws.String(i2)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateListener(ctx, &elb.CreateListenerInput{LoadBalancerArn: lb.LoadBalancerArn, Protocol: elbtypes.ProtocolEnumTcp,
		Port: aws.Int32(80), DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: aws.String(tgARN)}}}); err != nil {
		t.Fatal(err)
	}
	ths := waitHealth(t, c, tgARN, map[string]elbtypes.TargetHealthStateEnum{i1 + ":30080": "healthy", i2 + ":30080": "healthy"})
	if *ths[0].HealthCheckPort != "30080" || ths[0].Target.AvailabilityZone == nil {
		t.Errorf("target health %+v", ths[0])
	}
	got := map[string]bool{}
	for i := 0; i < 6; i++ {
		s, err := tcpAsk(lbAddr+":80", "hello")
		if err != nil {
			t.Fatalf("through the NLB: %v", err)
		}
		got[strings.Fields(s)[0]] = true
	}
	if !got["node-1"] || !got["node-2"] {
		t.Errorf("connections reached %v, want both nodes", got)
	}

	// UDP on the same port: a TCP_UDP-free UDP listener to an ip target whose health is
	// checked over TCP on another port.
	u := udpEcho(t, "dns")
	vnet.route("udp", "10.0.9.9:53", u)
	vnet.route("tcp", "10.0.9.9:8053", e1)
	utg, err := c.CreateTargetGroup(ctx, &elb.CreateTargetGroupInput{Name: aws.String("svc-udp"), Protocol: elbtypes.ProtocolEnumUdp,
		Port: aws.Int32(53), VpcId: aws.String(r.vpcID(t)), TargetType: elbtypes.TargetTypeEnumIp, HealthCheckPort: aws.String("8053"),
		HealthCheckIntervalSeconds: aws.Int32(5), HealthCheckTimeoutSeconds: aws.Int32(2), HealthyThresholdCount: aws.Int32(2)})
	if err != nil {
		t.Fatal(err)
	}
	utgARN := *utg.TargetGroups[0].TargetGroupArn
	c.RegisterTargets(ctx, &elb.RegisterTargetsInput{TargetGroupArn: aws.String(utgARN), Targets: []elbtypes.TargetDescription{{Id: aws.String("10.0.9.9")}}})
	if _, err := c.CreateListener(ctx, &elb.CreateListenerInput{LoadBalancerArn: lb.LoadBalancerArn, Protocol: elbtypes.ProtocolEnumUdp,
		Port: aws.Int32(80), DefaultActions: []elbtypes.Action{{Type: elbtypes.ActionTypeEnumForward, TargetGroupArn: aws.String(utgARN)}}}); err != nil {
		t.Fatal(err)
	}
	waitHealth(t, c, utgARN, map[string]elbtypes.TargetHealthStateEnum{"10.0.9.9:53": "healthy"})
	uc, err := net.Dial("udp", lbAddr+":80")
	if err != nil {
		t.Fatal(err)
	}
	uc.SetDeadline(time.Now().Add(5 * time.Second))
	uc.Write([]byte("query"))
	buf := make([]byte, 100)
	n, err := uc.Read(buf)
	uc.Close()
	if err != nil || string(buf[:n]) != "dns query" {
		t.Errorf("UDP through the NLB: %q %v", buf[:n], err)
	}

	// node-1 stops answering: unhealthy, and no new connection goes there.
	stop1()
	vnet.unroute("tcp", ip(i1)+":30080")
	waitHealth(t, c, tgARN, map[string]elbtypes.TargetHealthStateEnum{i1 + ":30080": "unhealthy", i2 + ":30080": "healthy"})
	testutil.Consistently(t, time.Second, "connections go to the healthy node only", func() error {
		s, err := tcpAsk(lbAddr+":80", "x")
		if err != nil || !strings.HasPrefix(s, "node-2 ") {
			return fmt.Errorf("%q %v", s, err)
		}
		return nil
	})

	// Restart on the same data dir: the load balancer, its address, listeners, targets
	// and their health come back.
	r.stop(t)
	if _, err := net.DialTimeout("tcp", lbAddr+":80", time.Second); err == nil {
		t.Errorf("the stopped cloud's load balancer still answers")
	}
	if b, _ := os.ReadFile(hosts); strings.Contains(string(b), *lb.DNSName) {
		t.Errorf("the stopped cloud's names stay in the hosts file:\n%s", b)
	}
	r2 := startCloud(t, Config{Hollow: true, Dial: vnet.dial, DataDir: dir, HostsFile: hosts})
	c2 := newELBClient(t, r2.Cloud)
	d, err := c2.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{LoadBalancerArns: []string{*lb.LoadBalancerArn}})
	if err != nil || *d.LoadBalancers[0].AvailabilityZones[0].LoadBalancerAddresses[0].IpAddress != lbAddr || d.LoadBalancers[0].State.Code != "active" {
		t.Fatalf("after restart: %+v %v", d, err)
	}
	waitHealth(t, c2, tgARN, map[string]elbtypes.TargetHealthStateEnum{i1 + ":30080": "unhealthy", i2 + ":30080": "healthy"})
	if s, err := tcpAsk(lbAddr+":80", "again"); err != nil || s != "node-2 again" {
		t.Errorf("through the NLB after restart: %q %v", s, err)
	}
	if b, _ := os.ReadFile(hosts); !strings.Contains(string(b), lbAddr+"\t"+*lb.DNSName) {
		t.Errorf("hosts file after restart:\n%s", b)
	}

	// Deregistering drains the target, then it is gone.
	if _, err := c2.DeregisterTargets(ctx, &elb.DeregisterTargetsInput{TargetGroupArn: aws.String(tgARN),
		Targets: []elbtypes.TargetDescription{{Id: aws.String(i2)}}}); err != nil {
		t.Fatal(err)
	}
	th, _ := c2.DescribeTargetHealth(ctx, &elb.DescribeTargetHealthInput{TargetGroupArn: aws.String(tgARN),
		Targets: []elbtypes.TargetDescription{{Id: aws.String(i2), Port: aws.Int32(30080)}}})
	if th.TargetHealthDescriptions[0].TargetHealth.State != "draining" || th.TargetHealthDescriptions[0].TargetHealth.Reason != "Target.DeregistrationInProgress" {
		t.Errorf("deregistered target %+v", th.TargetHealthDescriptions[0].TargetHealth)
	}
}

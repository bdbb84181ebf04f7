package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strings"
	"time"

	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	elbtypes "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2/types"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/cloud/cloudtest"
	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// getFrom GETs path from addr:80 in the machine's namespace with the Host header host
// (empty: addr), without keep-alive.
func getFrom(addr, host, path string) (string, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+net.JoinHostPort(addr, "80")+path, nil)
	if err != nil {
		return "", err
	}
	if host != "" {
		req.Host = host
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", errors.New(resp.Status)
	}
	return strings.TrimSpace(string(b)), err
}

// assertServiceLoadBalancer exposes a Deployment of two web pods as `kubectl expose
// --type=LoadBalancer --port=80` does and checks the cloud-controller-manager's load
// balancers from the machine's namespace: the Service's address answers from both pods;
// the same Service with externalTrafficPolicy Local has healthy targets only where a pod
// runs (its health check node port served by the node's proxy); an Ingress of class alb routes two hosts and paths to the Service webSvc and to it;
// scaled to 0, the targets go unhealthy and a request fails at once; deleted, the
// Service's load balancer is gone from the ELB API and its address no longer answers.
func (tc *testCluster) assertServiceLoadBalancer(ns, webSvc, webWant string) {
	t := tc.T
	t.Helper()
	ctx := context.Background()
	c := cloudtest.ELBClient(t, tc.Cluster.CloudEndpoint(), tc.Cluster.CloudConfigFile(), tc.Cluster.CloudCredentialsFile())
	labels := map[string]string{"app": "lb"}
	pod := webPod(ns, "", "")
	pod.Spec.Containers[0].Command[2] = "mkdir -p /www/lb && hostname > /www/index.html && hostname > /www/lb/index.html && exec httpd -f -p 80 -h /www"
	pod.Spec.Containers[0].ReadinessProbe = nil
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "lb"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2),
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod.Spec}}}
	dep.Spec.Template.Spec.NodeName = ""
	if _, err := tc.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// As kubectl expose makes it, with health checks short enough for a test.
	hc := "service.beta.kubernetes.io/aws-load-balancer-healthcheck-"
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "lb", Labels: labels, Annotations: map[string]string{
		hc + "interval": "5", hc + "timeout": "2", hc + "healthy-threshold": "2", hc + "unhealthy-threshold": "2"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: labels, Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80}}}}
	created := time.Now()
	if _, err := tc.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ingress corev1.LoadBalancerIngress
	testutil.EventuallyWithin(t, clustertest.Timeout, "the Service's EXTERNAL-IP", func() (bool, error) {
		s, err := tc.Client.CoreV1().Services(ns).Get(ctx, "lb", metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return false, err
		}
		ingress = s.Status.LoadBalancer.Ingress[0]
		return ingress.IP != "" && ingress.Hostname != "", nil
	})
	t.Logf("LoadBalancer Service: %s (%s) after %v", ingress.IP, ingress.Hostname, time.Since(created).Round(time.Millisecond))
	seen := map[string]bool{}
	testutil.EventuallyWithin(t, clustertest.Timeout, "requests to the load balancer to reach both pods", func() (bool, error) {
		out, err := getFrom(ingress.IP, "", "/")
		if err == nil && strings.HasPrefix(out, "lb-") {
			seen[out] = true
		}
		return len(seen) == 2, nil
	})

	lbName := strings.SplitN(ingress.Hostname, "-", 2)[0]
	testutil.EventuallyWithin(t, clustertest.Timeout, "the targets healthy", func() (bool, error) {
		return targetsIn(c, lbName, elbtypes.TargetHealthStateEnumHealthy)
	})

	// externalTrafficPolicy Local: the load balancer checks each node's health check node
	// port, which its proxy answers 200 only where a pod of the Service runs.
	local := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "lb-local", Labels: labels, Annotations: svc.Annotations},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: labels, ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
			Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80}}}}
	if _, err := tc.Client.CoreV1().Services(ns).Create(ctx, local, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, err := tc.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=lb"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]elbtypes.TargetHealthStateEnum{}
	for _, n := range tc.Nodes() {
		want[n.InstanceID] = elbtypes.TargetHealthStateEnumUnhealthy
		for _, p := range pods.Items {
			if p.Spec.NodeName == n.Name {
				want[n.InstanceID] = elbtypes.TargetHealthStateEnumHealthy
			}
		}
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, fmt.Sprintf("the Local Service's targets %v (the nodes with a pod healthy)", want), func() (bool, error) {
		s, err := tc.Client.CoreV1().Services(ns).Get(ctx, "lb-local", metav1.GetOptions{})
		if err != nil || len(s.Status.LoadBalancer.Ingress) == 0 {
			return false, err
		}
		return targetStates(c, strings.SplitN(s.Status.LoadBalancer.Ingress[0].Hostname, "-", 2)[0], want)
	})
	if err := tc.Client.CoreV1().Services(ns).Delete(ctx, "lb-local", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// An Ingress of class alb: two hosts, two paths, two Services.
	prefix := networkingv1.PathTypePrefix
	path := func(p, svc string) networkingv1.HTTPIngressPath {
		return networkingv1.HTTPIngressPath{Path: p, PathType: &prefix, Backend: networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: svc, Port: networkingv1.ServiceBackendPort{Number: 80}}}}
	}
	rule := func(host string, p networkingv1.HTTPIngressPath) networkingv1.IngressRule {
		return networkingv1.IngressRule{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{p}}}}
	}
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: "shop", Annotations: map[string]string{"alb.ingress.kubernetes.io/scheme": "internet-facing"}},
		Spec: networkingv1.IngressSpec{IngressClassName: ptr.To("alb"), Rules: []networkingv1.IngressRule{
			rule("web.example.com", path("/", webSvc)), rule("lb.example.com", path("/lb", "lb"))}}}
	if _, err := tc.Client.NetworkingV1().Ingresses(ns).Create(ctx, ing, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var albAddr string
	testutil.EventuallyWithin(t, clustertest.Timeout, "the Ingress's ALB", func() (bool, error) {
		i, err := tc.Client.NetworkingV1().Ingresses(ns).Get(ctx, "shop", metav1.GetOptions{})
		if err != nil || len(i.Status.LoadBalancer.Ingress) == 0 {
			return false, err
		}
		albAddr = tc.loadBalancerAddress(c, i.Status.LoadBalancer.Ingress[0].Hostname)
		return albAddr != "", nil
	})
	for _, r := range []struct{ host, path, want string }{
		{"web.example.com", "/", webWant}, {"lb.example.com", "/lb/", "lb-"}} {
		testutil.EventuallyWithin(t, clustertest.Timeout, "the ALB: "+r.host+r.path, func() (bool, error) {
			out, err := getFrom(albAddr, r.host, r.path)
			return err == nil && strings.HasPrefix(out, r.want), nil
		})
	}
	if _, err := getFrom(albAddr, "other.example.com", "/"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("the ALB for an unknown host: %v, want 404", err)
	}
	if err := tc.Client.NetworkingV1().Ingresses(ns).Delete(ctx, "shop", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// Scaled to 0: the targets go unhealthy, a request fails at once.
	if _, err := tc.Client.AppsV1().Deployments(ns).UpdateScale(ctx, "lb", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "lb", Namespace: ns},
		Spec: autoscalingv1.ScaleSpec{Replicas: 0}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "the Deployment's pods gone", func() (bool, error) {
		pods, err := tc.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=lb"})
		return err == nil && len(pods.Items) == 0, err
	})
	testutil.EventuallyWithin(t, clustertest.Timeout, "the targets unhealthy", func() (bool, error) {
		return targetsIn(c, lbName, elbtypes.TargetHealthStateEnumUnhealthy)
	})
	testutil.EventuallyWithin(t, clustertest.Timeout, "a request to fail at once", func() (bool, error) {
		start := time.Now()
		out, err := getFrom(ingress.IP, "", "/")
		if err == nil {
			return false, fmt.Errorf("with no pods the load balancer answered %q", out)
		}
		return time.Since(start) < 4*time.Second, fmt.Errorf("after %v: %w", time.Since(start), err)
	})

	// Deleted: the load balancer goes (the finalizer holds the Service until then).
	if err := tc.Client.CoreV1().Services(ns).Delete(ctx, "lb", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "the Service gone", func() (bool, error) {
		_, err := tc.Client.CoreV1().Services(ns).Get(ctx, "lb", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if _, err := c.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{Names: []string{lbName}}); !strings.Contains(errString(err), "LoadBalancerNotFound") {
		t.Errorf("the deleted Service's load balancer: %v, want LoadBalancerNotFound", err)
	}
	if conn, err := net.DialTimeout("tcp", net.JoinHostPort(ingress.IP, "80"), time.Second); err == nil {
		conn.Close()
		t.Errorf("the deleted Service's load balancer address %s still answers", ingress.IP)
	}
}

// targetStates is whether the targets of the load balancer name's one target group are
// in the states want gives (by instance id).
func targetStates(c *elb.Client, name string, want map[string]elbtypes.TargetHealthStateEnum) (bool, error) {
	ctx := context.Background()
	lbs, err := c.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{Names: []string{name}})
	if err != nil {
		return false, err
	}
	tgs, err := c.DescribeTargetGroups(ctx, &elb.DescribeTargetGroupsInput{LoadBalancerArn: lbs.LoadBalancers[0].LoadBalancerArn})
	if err != nil || len(tgs.TargetGroups) != 1 {
		return false, err
	}
	h, err := c.DescribeTargetHealth(ctx, &elb.DescribeTargetHealthInput{TargetGroupArn: tgs.TargetGroups[0].TargetGroupArn})
	if err != nil {
		return false, err
	}
	got := map[string]elbtypes.TargetHealthStateEnum{}
	for _, d := range h.TargetHealthDescriptions {
		got[*d.Target.Id] = d.TargetHealth.State
	}
	return maps.Equal(got, want), fmt.Errorf("targets %v", got)
}

// targetsIn is whether every target of the load balancer name's one target group is in
// state.
func targetsIn(c *elb.Client, name string, state elbtypes.TargetHealthStateEnum) (bool, error) {
	ctx := context.Background()
	lbs, err := c.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{Names: []string{name}})
	if err != nil {
		return false, err
	}
	tgs, err := c.DescribeTargetGroups(ctx, &elb.DescribeTargetGroupsInput{LoadBalancerArn: lbs.LoadBalancers[0].LoadBalancerArn})
	if err != nil || len(tgs.TargetGroups) != 1 {
		return false, err
	}
	h, err := c.DescribeTargetHealth(ctx, &elb.DescribeTargetHealthInput{TargetGroupArn: tgs.TargetGroups[0].TargetGroupArn})
	if err != nil || len(h.TargetHealthDescriptions) == 0 {
		return false, err
	}
	for _, d := range h.TargetHealthDescriptions {
		if d.TargetHealth.State != state {
			return false, fmt.Errorf("target %s: %s %s", *d.Target.Id, d.TargetHealth.State, d.TargetHealth.Reason)
		}
	}
	return true, nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// loadBalancerAddress is the address of the load balancer of DNS name dns ("" while
// there is none).
func (tc *testCluster) loadBalancerAddress(c *elb.Client, dns string) string {
	out, err := c.DescribeLoadBalancers(context.Background(), &elb.DescribeLoadBalancersInput{})
	if err != nil {
		return ""
	}
	for _, lb := range out.LoadBalancers {
		if *lb.DNSName != dns || lb.State == nil || lb.State.Code != elbtypes.LoadBalancerStateEnumActive {
			continue
		}
		for _, z := range lb.AvailabilityZones {
			for _, a := range z.LoadBalancerAddresses {
				if a.IpAddress != nil {
					return *a.IpAddress
				}
			}
		}
	}
	return ""
}

package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/natgateway"
	"github.com/kubelab/kubelab/internal/overlay"
	"github.com/kubelab/kubelab/internal/overlay/overlaytest"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/vpc"
)

// webPod is a busybox httpd on node answering with its own name, ready while /tmp/ready
// exists.
func webPod(ns, name, node string) *corev1.Pod {
	p := busyboxPod(ns, name, corev1.RestartPolicyAlways,
		"mkdir -p /www && hostname > /www/index.html && touch /tmp/ready && exec httpd -f -p 80 -h /www")
	p.Labels = map[string]string{"app": "web"}
	p.Spec.NodeName = node
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 80}}
	p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: execAction("cat", "/tmp/ready"), PeriodSeconds: 1}
	return p
}

// httpVia GETs url from inside the network namespace at netns.
func httpVia(netns, url string) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: vpc.DialContext(netns)}}
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}

// imdsV2Via reads the instance metadata at path inside network namespace netns as
// IMDSv2 has it: a session token (PUT /latest/api/token), then the path with it.
func imdsV2Via(netns, path string) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: vpc.DialContext(netns)}}
	req, _ := http.NewRequest(http.MethodPut, "http://169.254.169.254/latest/api/token", nil)
	req.Header.Set("X-aws-ec2-metadata-token-ttl-seconds", "60")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	token, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("token: %d %q %v", resp.StatusCode, token, err)
	}
	req, _ = http.NewRequest(http.MethodGet, "http://169.254.169.254/latest/meta-data/"+path, nil)
	req.Header.Set("X-aws-ec2-metadata-token", string(token))
	if resp, err = client.Do(req); err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", path, resp.Status)
	}
	return strings.TrimSpace(string(b)), err
}

// imdsV2Script is a shell line for busybox reading instance-id with IMDSv2: the token by
// a raw PUT (busybox's wget has none) that waits at most 3s for the answer, then wget.
const imdsV2Script = `T=$(printf 'PUT /latest/api/token HTTP/1.0\r\nHost: 169.254.169.254\r\nX-aws-ec2-metadata-token-ttl-seconds: 60\r\n\r\n' | ` +
	`nc -w 3 169.254.169.254 80 | tail -n 1); echo "token:${#T}"; ` +
	`timeout 5 wget -qO- --header "X-aws-ec2-metadata-token: $T" http://169.254.169.254/latest/meta-data/instance-id`

// assertENIFabric attaches a second interface to n1's instance and checks what the
// fabric makes of it: links lists n1's links.
func assertENIFabric(t *testing.T, tc *testCluster, n0, n1 cluster.Node, links func() (string, error)) {
	t.Helper()
	ctx := context.Background()
	d, err := tc.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{n1.InstanceID}})
	if err != nil {
		t.Fatal(err)
	}
	created, err := tc.EC2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId: d.Reservations[0].Instances[0].SubnetId, SecondaryPrivateIpAddressCount: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	eni := created.NetworkInterface
	mac, secondary := aws.ToString(eni.MacAddress), aws.ToString(eni.PrivateIpAddresses[1].PrivateIpAddress)
	att, err := tc.EC2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: eni.NetworkInterfaceId,
		InstanceId: aws.String(n1.InstanceID), DeviceIndex: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "eth1 of "+n1.Name+" with the interface's MAC", func() bool {
		out, err := links()
		return err == nil && strings.Contains(out, " eth1") && strings.Contains(out, mac)
	})
	n0ns := filepath.Base(tc.VPC().NodePath(n0.Name))
	testutil.Eventually(t, n0.Name+" maps "+secondary+" to "+mac, func() bool {
		out, err := exec.Command("ip", "-n", n0ns, "neigh", "show", secondary).CombinedOutput()
		return err == nil && strings.Contains(string(out), mac)
	})
	if _, err := tc.EC2.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: att.AttachmentId}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "eth1 of "+n1.Name+" gone after the detach", func() bool {
		out, err := links()
		return err == nil && !strings.Contains(out, " eth1")
	})
	testutil.Eventually(t, "the interface available again", func() error {
		_, err := tc.EC2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: eni.NetworkInterfaceId})
		return err
	})
}

// TestRealNetwork runs pods on two real nodes and checks their network as a user of
// Kubernetes sees it: two containers of a pod talk over localhost, pods on one node over
// its bridge, pods on two nodes over the VXLAN overlay (the encapsulated packets seen on
// the VPC bridge), a ClusterIP Service spreads requests over pods on both nodes and stops
// sending to a pod whose readiness fails, a NodePort answers from another node's
// namespace and through a load balancer of the cloud, a LoadBalancer Service and an
// Ingress of class alb answer from the machine's namespace through the load balancers the
// cloud-controller-manager makes, Services resolve through the cluster DNS, the instance metadata service
// answers in each node's namespace and in its pods, the API server and the EC2 endpoint
// are reachable from a pod, a pod and a node reach the outside (the test's own, through
// the VPC's NAT gateway and the cluster DNS's upstream) while the machine's namespace
// gets no route, rule or sysctl for it, and a NetworkPolicy denies, then allows.
func TestRealNetwork(t *testing.T) {
	t.Parallel()
	internet := newInternet(t)
	forwarding := hostForwarding(t)
	tc := startRealClusterWith(t, func(c *cluster.Config) {
		c.Offline, c.EgressDial, c.UpstreamDNS = false, internet.dial, []netip.AddrPort{netip.MustParseAddrPort(internetDNS)}
	}, 2, "us-east-1a", "us-east-1b")
	ctx := context.Background()
	ns := tc.Namespace("net")
	nodes := tc.Nodes()
	n0, n1 := nodes[0], nodes[1]
	kexec := func(pod string, args ...string) (string, error) {
		cmd := testutil.KubectlCommand(t, tc.Kubeconfig(), append([]string{"-n", ns, "exec", pod, "--"}, args...)...)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	create := func(p *corev1.Pod) {
		t.Helper()
		if _, err := tc.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create(webPod(ns, "web-0", n0.Name))
	create(webPod(ns, "web-1", n1.Name))
	client := busyboxPod(ns, "client", corev1.RestartPolicyAlways, "sleep 3600")
	client.Labels = map[string]string{"role": "client"}
	client.Spec.NodeName = n0.Name
	create(client)
	duo := busyboxPod(ns, "duo", corev1.RestartPolicyAlways, "sleep 3600")
	duo.Spec.NodeName = n1.Name
	duo.Spec.Containers = append(duo.Spec.Containers, corev1.Container{Name: "nginx", Image: "nginx"})
	create(duo)
	svc, err := tc.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, Type: corev1.ServiceTypeNodePort,
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tc.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web-headless"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"}, ClusterIP: corev1.ClusterIPNone,
			Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web0, web1 := tc.WaitPodRunning(ns, "web-0"), tc.WaitPodRunning(ns, "web-1")
	cl := tc.WaitPodRunning(ns, "client")
	tc.WaitPodRunning(ns, "duo")
	for _, p := range []*corev1.Pod{web0, web1, cl} {
		ip := net.ParseIP(p.Status.PodIP)
		node, err := tc.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, cidr, err := net.ParseCIDR(node.Spec.PodCIDR); err != nil || ip == nil || !cidr.Contains(ip) {
			t.Errorf("pod %s has IP %q, not in its node's podCIDR %s", p.Name, p.Status.PodIP, node.Spec.PodCIDR)
		}
	}

	// Q1: two containers of one pod share its network namespace.
	if out, err := kexec("duo", "timeout", "5", "wget", "-qO-", "http://127.0.0.1/"); err != nil || !strings.Contains(out, "nginx") {
		t.Errorf("duo's busybox → its nginx on localhost: %v %q", err, out)
	}
	// Q2: two pods on one node, over its bridge.
	if out, err := kexec("client", "timeout", "5", "wget", "-qO-", "http://"+web0.Status.PodIP+"/"); err != nil || out != "web-0" {
		t.Errorf("client → web-0 on the same node: %v %q", err, out)
	}
	// Q3: pods on two nodes, over the overlay.
	tc.assertOverlay(n0.Name, func() {
		if out, err := kexec("client", "timeout", "5", "wget", "-qO-", "http://"+web1.Status.PodIP+"/"); err != nil || out != "web-1" {
			t.Errorf("client → web-1 on the other node: %v %q", err, out)
		}
	}, cl.Status.PodIP, web1.Status.PodIP)

	// Q4: the Service by its name, through the cluster DNS, spreads over both nodes' pods.
	spread := func() map[string]int {
		t.Helper()
		out, _ := kexec("client", "sh", "-c", "for i in $(seq 30); do timeout 3 wget -qO- http://web 2>/dev/null; done")
		seen := map[string]int{}
		for _, l := range strings.Fields(out) {
			seen[l]++
		}
		return seen
	}
	var seen map[string]int
	testutil.EventuallyWithin(t, time.Minute, "30 requests to the Service to reach both web-0 and web-1", func() (bool, error) {
		seen = spread()
		return seen["web-0"] > 0 && seen["web-1"] > 0 && seen["web-0"]+seen["web-1"] == 30, nil
	})
	// A pod whose readiness fails leaves the Service.
	if out, err := kexec("web-1", "rm", "/tmp/ready"); err != nil {
		t.Fatalf("rm /tmp/ready in web-1: %v %s", err, out)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "web-1 not ready in the Service's EndpointSlice", func() (bool, error) {
		r := tc.endpointReady(ns, "web", "web-1")
		return r != nil && !*r, nil
	})
	testutil.EventuallyWithin(t, clustertest.Timeout, "the proxies to stop sending to web-1", func() (bool, error) {
		seen := spread()
		return seen["web-1"] == 0 && seen["web-0"] == 30, nil
	})
	// NodePort: node 0 reaches it on node 1's address; node 1 sends it to web-0 on node 0.
	url := "http://" + net.JoinHostPort(n1.IP, strconv.Itoa(int(svc.Spec.Ports[0].NodePort))) + "/"
	if out, err := httpVia(tc.VPC().NodePath(n0.Name), url); err != nil || out != "web-0" {
		t.Errorf("NodePort %s from node %s: %v %q", url, n0.Name, err, out)
	}
	// A load balancer of the cloud carries the machine's connections to the NodePort on
	// both nodes and to web-0's address.
	tc.assertLoadBalancer(int(svc.Spec.Ports[0].NodePort), web0.Status.PodIP, "web-0")
	// The cloud-controller-manager's: a LoadBalancer Service's NLB, an Ingress's ALB.
	tc.assertServiceLoadBalancer(ns, "web", "web-0")

	// The API server, in the machine's namespace, reaches pods and Services through a
	// node's namespace: pods/proxy to either node's pod, services/proxy to the ready one;
	// nodes/proxy reaches the kubelet.
	rawGet := func(path string) (string, error) {
		b, err := tc.Client.CoreV1().RESTClient().Get().AbsPath(path).DoRaw(ctx)
		return strings.TrimSpace(string(b)), err
	}
	for path, want := range map[string]string{
		"/api/v1/namespaces/" + ns + "/pods/web-0:80/proxy/": "web-0",
		"/api/v1/namespaces/" + ns + "/pods/web-1/proxy/":    "web-1",
		"/api/v1/namespaces/" + ns + "/services/web/proxy/":  "web-0",
	} {
		if out, err := rawGet(path); err != nil || out != want {
			t.Errorf("GET %s: %v %q, want %q", path, err, out, want)
		}
	}
	if out, err := rawGet("/api/v1/nodes/" + n0.Name + "/proxy/pods"); err != nil || !strings.Contains(out, `"name":"web-0"`) {
		t.Errorf("GET nodes/%s/proxy/pods: %v %.300s; want a PodList with web-0", n0.Name, err, out)
	}

	// DNS: the Service's ClusterIP, the headless Service's ready pods.
	fqdn := "web." + ns + ".svc.cluster.local"
	if out, err := kexec("client", "nslookup", fqdn); err != nil || !strings.Contains(out, svc.Spec.ClusterIP) {
		t.Errorf("nslookup %s: %v\n%s\nwant %s", fqdn, err, out, svc.Spec.ClusterIP)
	}
	if out, err := kexec("client", "nslookup", "web-headless."+ns+".svc.cluster.local"); err != nil ||
		!strings.Contains(out, web0.Status.PodIP) || strings.Contains(out, web1.Status.PodIP) {
		t.Errorf("nslookup of the headless Service: %v\n%s\nwant the ready web-0 (%s) only", err, out, web0.Status.PodIP)
	}
	if out, err := kexec("client", "cat", "/etc/resolv.conf"); err != nil || !strings.Contains(out, "nameserver 10.96.0.10") ||
		!strings.Contains(out, "search "+ns+".svc.cluster.local svc.cluster.local cluster.local") {
		t.Errorf("the pod's resolv.conf: %v\n%s", err, out)
	}

	// IMDS, as EKS's nodes have it (IMDSv2 required, hop limit 1): in each node's
	// namespace, with a token, as that node's instance, with the nodes' role as its
	// instance profile's; IMDSv1 refused (401). A pod gets no token (the answer dies one
	// hop away) and IMDSv1 refused.
	for _, n := range nodes {
		for path, want := range map[string]string{"instance-id": n.InstanceID, "placement/availability-zone": n.Zone, "local-ipv4": n.IP,
			"iam/security-credentials/": cluster.NodeRole} {
			if out, err := imdsV2Via(tc.VPC().NodePath(n.Name), path); err != nil || out != want {
				t.Errorf("IMDSv2 %s in node %s: %v %q, want %q", path, n.Name, err, out, want)
			}
		}
		if out, err := httpVia(tc.VPC().NodePath(n.Name), "http://169.254.169.254/latest/meta-data/instance-id"); err != nil || out != "Unauthorized" {
			t.Errorf("IMDSv1 in node %s: %v %q, want it refused (401 Unauthorized)", n.Name, err, out)
		}
	}
	if out, err := kexec("client", "sh", "-c", imdsV2Script); err == nil || !strings.Contains(out, "token:0") || strings.Contains(out, n0.InstanceID) {
		t.Errorf("IMDSv2 from a pod on %s: %v %q, want no token and no metadata", n0.Name, err, out)
	}
	if out, err := kexec("client", "timeout", "5", "wget", "-qO-", "http://169.254.169.254/latest/meta-data/instance-id"); err == nil || !strings.Contains(out, "401") {
		t.Errorf("IMDSv1 from a pod on %s: %v %q, want 401", n0.Name, err, out)
	}
	// A host-network pod is on its node's network, not the machine's: the node's eth0 and
	// address, the node's IMDS.
	hostnet := busyboxPod(ns, "hostnet", corev1.RestartPolicyAlways, "sleep 3600")
	hostnet.Spec.NodeName, hostnet.Spec.HostNetwork = n1.Name, true
	create(hostnet)
	if p := tc.WaitPodRunning(ns, "hostnet"); p.Status.PodIP != n1.IP {
		t.Errorf("host-network pod on %s has IP %q, want the node's %s", n1.Name, p.Status.PodIP, n1.IP)
	}
	if out, err := kexec("hostnet", "ip", "-4", "addr", "show", "eth0"); err != nil || !strings.Contains(out, "inet "+n1.IP+"/") {
		t.Errorf("eth0 of a host-network pod on %s: %v\n%s\nwant the node's %s", n1.Name, err, out, n1.IP)
	}
	if out, err := kexec("hostnet", "sh", "-c", imdsV2Script); err != nil || !strings.HasSuffix(out, n1.InstanceID) || strings.Contains(out, "token:0") {
		t.Errorf("IMDSv2 from a host-network pod on %s: %v %q, want %s", n1.Name, err, out, n1.InstanceID)
	}
	// The cloud's network interfaces on the VPC's fabric: a second interface attached to
	// n1's instance is eth1 of n1, with its MAC; n0 maps its secondary address to that MAC;
	// detached, eth1 goes.
	assertENIFabric(t, tc, n0, n1, func() (string, error) { return kexec("hostnet", "ip", "-o", "link", "show") })
	// The API server through the kubernetes Service, and the EC2 endpoint on the VPC.
	if out, err := kexec("client", "sh", "-c", `printf 'GET /version HTTP/1.0\r\n\r\n' | nc -w 5 172.31.0.2 80`); err != nil || !strings.HasPrefix(out, "HTTP/1.") {
		t.Errorf("EC2 endpoint from a pod: %v %q", err, out)
	}
	if out, err := kexec("client", "sh", "-c", "nc -w 3 10.96.0.1 443 </dev/null && echo open"); err != nil || out != "open" {
		t.Errorf("TCP to the kubernetes Service from a pod: %v %q", err, out)
	}
	// A client in a node's namespace, as an in-cluster one: https://10.96.0.1 with the
	// cluster's CA, through that node's proxy to the API server on the VPC.
	inCluster, err := tc.RestConfig("test", cluster.ServiceAccountIdentity("default", "default"))
	if err != nil {
		t.Fatal(err)
	}
	inCluster.Host, inCluster.Dial = "https://10.96.0.1", vpc.DialContext(tc.VPC().NodePath(n1.Name))
	if cs, err := kubernetes.NewForConfig(inCluster); err != nil {
		t.Fatal(err)
	} else if v, err := cs.Discovery().ServerVersion(); err != nil || v.GitVersion == "" {
		t.Errorf("API server at https://10.96.0.1 from node %s: %v %+v", n1.Name, err, v)
	}
	// The service account issuer is the API server's URL on the VPC: its discovery
	// document, read there without credentials (as the cloud's STS reads it), names it
	// exactly, and the key set answers at its jwks_uri.
	issuer := "https://" + vpc.ControlPlaneIP
	anon := &rest.Config{Host: issuer, Dial: inCluster.Dial,
		TLSClientConfig: rest.TLSClientConfig{CAData: inCluster.CAData}}
	if rt, err := rest.TransportFor(anon); err != nil {
		t.Fatal(err)
	} else {
		hc := &http.Client{Transport: rt, Timeout: 20 * time.Second}
		get := func(url string) []byte {
			res, err := hc.Get(url)
			if err != nil {
				t.Errorf("anonymous GET %s from node %s: %v", url, n1.Name, err)
				return nil
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != http.StatusOK {
				t.Errorf("anonymous GET %s from node %s: %s %s", url, n1.Name, res.Status, b)
				return nil
			}
			return b
		}
		var doc struct {
			Issuer  string `json:"issuer"`
			JWKSURI string `json:"jwks_uri"`
		}
		if b := get(issuer + "/.well-known/openid-configuration"); b != nil {
			if err := json.Unmarshal(b, &doc); err != nil || doc.Issuer != issuer || doc.JWKSURI != issuer+"/openid/v1/jwks" {
				t.Errorf("discovery document %s (%v), want issuer %s", b, err, issuer)
			} else if keys := get(doc.JWKSURI); !strings.Contains(string(keys), `"kid"`) {
				t.Errorf("key set %s", keys)
			}
		}
	}
	// IAM Roles for Service Accounts, end to end: a pod of a service account annotated
	// with a role gets (from the pod identity webhook) the projected token of the issuer
	// above for sts.amazonaws.com; the AWS SDK's default chain in it trades the token
	// with STS (by its regional name at the cloud's endpoint, over TLS with the cluster
	// CA; STS reads the issuer's keys on the VPC) for the role's credentials, with which
	// EC2 answers what the role allows and refuses the rest.
	roleARN := irsaRole(t, tc, issuer, ns, "irsa", "irsa-network", "ec2:DescribeVolumes")
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "irsa",
		Annotations: map[string]string{"eks.amazonaws.com/role-arn": roleARN}}}
	if _, err := tc.Client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	awsClientImage(t, tc)
	create(irsaPod(ns, "irsa", n1.Name, sa.Name, "-timeout", "30s", "-create-volume"))
	tc.waitContainer(ns, "irsa", "terminated", func(cs corev1.ContainerStatus) bool { return cs.State.Terminated != nil })
	irsa := parseIRSAOutput(t, tc.Kubectl("logs", "-n", ns, "irsa"))
	if c := irsa.Claims; c.Issuer != issuer || len(c.Audience) != 1 || c.Audience[0] != "sts.amazonaws.com" ||
		c.Subject != "system:serviceaccount:"+ns+":irsa" {
		t.Errorf("the IRSA pod's token claims %+v", c)
	}
	got, _ := json.Marshal(irsa.Result)
	for _, want := range []string{`"source":"WebIdentityCredentials"`, `:assumed-role/irsa-network/`, `"volumes":[`,
		`"ec2:CreateVolume":{"code":"UnauthorizedOperation"`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("the IRSA pod's program: %s\nlacks %s", got, want)
		}
	}
	if errs, _ := irsa.Result["errors"].(map[string]any); len(errs) != 1 {
		t.Errorf("the IRSA pod's program failed at %v, want only CreateVolume refused", errs)
	}
	// A pod of a service account without the annotation: the pod identity webhook
	// leaves it as it is, and the SDK's default chain finds no credentials (no keys, no
	// token, and the node's metadata service gives a pod none; the SDK waits for a token
	// answer until the program's deadline).
	plain := irsaPod(ns, "irsa-none", n1.Name, "")
	plain.Spec.Containers[0].Command = []string{"/awsclient", "-timeout", "8s"}
	create(plain)
	tc.waitContainer(ns, plain.Name, "terminated", func(cs corev1.ContainerStatus) bool { return cs.State.Terminated != nil })
	var none map[string]any
	if log := tc.Kubectl("logs", "-n", ns, plain.Name); json.Unmarshal([]byte(strings.TrimSpace(log)), &none) != nil {
		t.Errorf("the unannotated pod's program printed %q, want its JSON", log)
	} else if errs, _ := none["errors"].(map[string]any); errs["credentials"] == nil || none["credentials"] != nil || none["identity"] != nil {
		t.Errorf("the unannotated pod's program: %s\nwant no credentials (the SDK's error)", log)
	} else {
		t.Logf("a pod of an unannotated service account: %s", strings.TrimSpace(log))
	}
	if eps, err := tc.Client.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{}); err != nil ||
		len(eps.Endpoints) != 1 || eps.Endpoints[0].Addresses[0] != vpc.ControlPlaneIP || *eps.Ports[0].Port != 443 {
		t.Errorf("the kubernetes EndpointSlice: %v %+v; want %s:443", err, eps, vpc.ControlPlaneIP)
	}

	// The outside: a pod fetches a page by name (the name through the cluster DNS's
	// upstream, the connection through the NAT gateway), a node by address.
	if out, err := kexec("client", "timeout", "20", "wget", "-qO-", "http://"+internetName+"/"); err != nil || out != internetPage {
		t.Errorf("a pod → http://%s/: %v %q, want %q", internetName, err, out, internetPage)
	}
	if out, err := httpVia(tc.VPC().NodePath(n1.Name), "http://"+internetWeb+"/"); err != nil || out != internetPage {
		t.Errorf("node %s → http://%s/: %v %q", n1.Name, internetWeb, err, out)
	}
	// The cloud endpoint's names (EC2, ELB, STS, IAM) are the VPC's own: answered by the cluster
	// DNS, not upstream.
	for _, name := range []string{"ec2.us-east-1.amazonaws.com", "elasticloadbalancing.us-east-1.amazonaws.com",
		"sts.us-east-1.amazonaws.com", "iam.amazonaws.com"} {
		if out, err := kexec("client", "nslookup", name); err != nil || !strings.Contains(out, vpc.EC2EndpointIP) {
			t.Errorf("nslookup %s in a pod: %v\n%s\nwant %s", name, err, out, vpc.EC2EndpointIP)
		}
	}
	internet.assertDialed("udp "+internetDNS, "tcp "+internetWeb+":80")
	if tables := vpcTables(t, tc); !strings.Contains(tables, natgateway.TableName) {
		t.Errorf("the VPC's namespace has no NAT gateway table:\n%s", tables)
	}
	assertHostUntouched(t, forwarding)

	// NetworkPolicy: web pods accept no ingress, then only from pods with role=client.
	np, err := tc.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reaches := func(pod, container, ip string) bool {
		args := []string{"timeout", "3", "wget", "-qO-", "http://" + ip + "/"}
		if container != "" {
			args = append([]string{"-c", container, "--"}, args...)
			out, err := testutil.KubectlCommand(t, tc.Kubeconfig(), append([]string{"-n", ns, "exec", pod}, args...)...).CombinedOutput()
			return err == nil && len(out) > 0
		}
		out, err := kexec(pod, args...)
		return err == nil && out != ""
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "the policy to deny client → web-0", func() (bool, error) { return !reaches("client", "", web0.Status.PodIP), nil })
	np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
		{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}}}}
	if _, err := tc.Client.NetworkingV1().NetworkPolicies(ns).Update(ctx, np, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "the policy to allow client → web-0", func() (bool, error) { return reaches("client", "", web0.Status.PodIP), nil })
	if reaches("duo", "main", web0.Status.PodIP) {
		t.Errorf("duo (no role=client) reached web-0 through a policy that allows only role=client")
	}
}

// assertOverlay captures on the VPC bridge's port of node from while talk runs, and checks
// that a packet from the pod at src to the pod at dst crossed it inside VXLAN (VNI 1)
// between the nodes' addresses.
func (tc *testCluster) assertOverlay(from string, talk func(), src, dst string) {
	tc.T.Helper()
	capture, err := overlaytest.Capture(tc.VPC().Path(), tc.VPC().Port(from))
	if err != nil {
		tc.T.Fatal(err)
	}
	defer capture.Close()
	talk()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := capture.WaitFor(ctx, func(p overlaytest.Packet) bool {
		return p.VXLAN && p.Inner != nil && p.Inner.Src.String() == src && p.Inner.Dst.String() == dst
	})
	if err != nil {
		tc.T.Fatalf("no VXLAN packet %s → %s on the VPC bridge: %v", src, dst, err)
	}
	if p.VNI != 1 || !strings.HasPrefix(p.Src.String(), "172.31.") || !strings.HasPrefix(p.Dst.String(), "172.31.") {
		tc.T.Errorf("overlay packet %s: want VNI 1 between node addresses", p)
	}
}

// logNetwork logs, for a failure's diagnosis, node's nftables rules and namespace ns's
// EndpointSlices.
func (tc *testCluster) logNetwork(ns, node string) {
	out, err := exec.Command("ip", "netns", "exec", tc.VPC().NodeName(node), "nft", "list", "ruleset").CombinedOutput()
	tc.T.Logf("nft list ruleset in node %s: %v\n%s", node, err, out)
	slices, err := tc.Client.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{})
	if err == nil {
		for _, s := range slices.Items {
			tc.T.Logf("EndpointSlice %s: ports %+v endpoints %+v", s.Name, s.Ports, s.Endpoints)
		}
	}
}

// TestRealNetworkDirectRoutes runs two real nodes whose pod subnets are routed through
// their VPC addresses instead of the VXLAN overlay: a pod reaches a pod on the other node,
// and its packets cross the VPC bridge unencapsulated, with the pods' own addresses. The
// cluster is offline: a pod's fetch from the outside fails at the name, and the VPC has
// no NAT gateway.
func TestRealNetworkDirectRoutes(t *testing.T) {
	t.Parallel()
	// Offline, as clustertest's clusters are, with the way out's stand-ins plugged: they
	// must stay unused.
	internet := newInternet(t)
	tc := startRealClusterWith(t, func(c *cluster.Config) {
		c.OverlayMode = overlay.ModeDirect
		c.EgressDial, c.UpstreamDNS = internet.dial, []netip.AddrPort{netip.MustParseAddrPort(internetDNS)}
	}, 2, "us-east-1a", "us-east-1b")
	ctx := context.Background()
	ns := tc.Namespace("direct")
	n0, n1 := tc.Nodes()[0], tc.Nodes()[1]
	client := busyboxPod(ns, "client", corev1.RestartPolicyAlways, "sleep 3600")
	client.Spec.NodeName = n0.Name
	for _, p := range []*corev1.Pod{client, webPod(ns, "web", n1.Name)} {
		if _, err := tc.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cl, web := tc.WaitPodRunning(ns, "client"), tc.WaitPodRunning(ns, "web")
	capture, err := overlaytest.Capture(tc.VPC().Path(), tc.VPC().Port(n0.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer capture.Close()
	pid := tc.containerPID(cl, "main")
	out, err := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-n", "busybox", "wget", "-qO-", "http://"+web.Status.PodIP+"/").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "web" {
		t.Fatalf("client → web on the other node: %v %q", err, out)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	p, err := capture.WaitFor(waitCtx, func(p overlaytest.Packet) bool {
		return p.Src.String() == cl.Status.PodIP && p.Dst.String() == web.Status.PodIP
	})
	if err != nil {
		t.Fatalf("no packet %s → %s on the VPC bridge: %v", cl.Status.PodIP, web.Status.PodIP, err)
	}
	if p.VXLAN {
		t.Errorf("packet %s crossed the VPC in VXLAN; want it routed as it is", p)
	}
	for _, p := range capture.Packets() {
		if p.VXLAN {
			t.Errorf("a VXLAN packet on the VPC with direct routes: %s", p)
		}
	}

	// Offline: the name outside the cluster is refused, so wget fails at once.
	out, err = testutil.KubectlCommand(t, tc.Kubeconfig(), "-n", ns, "exec", "client", "--",
		"timeout", "20", "wget", "-qO-", "http://"+internetName+"/").CombinedOutput()
	if err == nil || strings.Contains(string(out), internetPage) || !strings.Contains(string(out), "bad address") {
		t.Errorf("offline, a pod → http://%s/: %v %q, want wget's bad address", internetName, err, out)
	}
	if tables := vpcTables(t, tc); strings.Contains(tables, natgateway.TableName) {
		t.Errorf("offline, the VPC's namespace holds the NAT gateway's table:\n%s", tables)
	}
	internet.assertDialed()
}

package cluster_test

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/trace"
)

// TestRealVPCNetwork runs the VPC pod network (--pod-network vpc) on two real nodes of
// t3.small instances (three ENIs of four addresses: max pods 3 × (4 − 1) + 2 = 11): pods get
// secondary private IPs of their node's subnet, which describe-network-interfaces lists on
// the node's ENIs; pods reach each other on one node and across nodes, and a Service
// through the cluster DNS; a pod on a secondary ENI reaches pods, a Service and the
// outside; a NetworkPolicy denies; the nodes' allocatable pods are 11 and
// the pod past them stays Pending with the scheduler's "Too many pods", and the trace of a
// pod whose address aws-node got from EC2 for it shows the calls; and a restart of a
// node's aws-node and kubelet keeps every pod's address, none given back.
func TestRealVPCNetwork(t *testing.T) {
	t.Parallel()
	internet := newInternet(t)
	tc := startRealClusterWith(t, func(c *cluster.Config) {
		c.PodNetwork, c.InstanceType = cluster.PodNetworkVPC, "t3.small"
		c.Offline, c.EgressDial, c.UpstreamDNS = false, internet.dial, []netip.AddrPort{netip.MustParseAddrPort(internetDNS)}
	}, 2, "us-east-1a", "us-east-1b")
	ctx := context.Background()
	ns := tc.Namespace("vpc")
	nodes := tc.Nodes()
	n0, n1 := nodes[0], nodes[1]
	// kexec is the command's output; kubectl's own messages (its websocket's "Unknown
	// stream id" warnings, say) go to its stderr, which only an error carries.
	kexec := func(pod string, args ...string) (string, error) {
		cmd := testutil.KubectlCommand(t, tc.Kubeconfig(), append([]string{"-n", ns, "exec", pod, "--"}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, stderr.String())
		}
		return strings.TrimSpace(string(out)), err
	}
	create := func(p *corev1.Pod) {
		t.Helper()
		if _, err := tc.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes {
		node, err := tc.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := node.Status.Allocatable.Pods().Value(); got != 11 {
			t.Errorf("node %s allocatable pods %d, want 11 (t3.small: 3 ENIs × (4 − 1) + 2)", n.Name, got)
		}
	}

	// As on EKS, aws-node and kube-proxy are host-network pods of every node (mirror pods
	// of kubelab's processes), the "+ 2" of max pods.
	for _, app := range []string{"aws-node", "kube-proxy"} {
		testutil.EventuallyWithin(t, clustertest.Timeout, app+" running on both nodes", func() error {
			list, err := tc.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=" + app})
			if err != nil {
				return err
			}
			on := map[string]bool{}
			for _, p := range list.Items {
				if clustertest.PodRunning(&p) && p.Spec.HostNetwork {
					on[p.Spec.NodeName] = true
				}
			}
			if !on[n0.Name] || !on[n1.Name] {
				return fmt.Errorf("running host-network %s pods on %v", app, on)
			}
			return nil
		})
	}
	if out := tc.Kubectl("logs", "-n", "kube-system", "-l", "k8s-app=aws-node", "--tail", "50"); !strings.Contains(out, "ipamd started") {
		t.Errorf("kubectl logs -l k8s-app=aws-node:\n%s\nwant the IP address manager's log", out)
	}

	create(webPod(ns, "web-0", n0.Name))
	create(webPod(ns, "web-1", n1.Name))
	client := busyboxPod(ns, "client", corev1.RestartPolicyAlways, "sleep 3600")
	client.Labels = map[string]string{"role": "client"}
	client.Spec.NodeName = n0.Name
	create(client)
	if _, err := tc.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	web0, web1, cl := tc.WaitPodRunning(ns, "web-0"), tc.WaitPodRunning(ns, "web-1"), tc.WaitPodRunning(ns, "client")

	// Every pod's address is a secondary IP of an ENI of its node's instance, in the
	// instance's subnet.
	tc.assertPodIPsOnENIs(ns)
	for _, p := range []*corev1.Pod{web0, web1, cl} {
		subnet := tc.instanceSubnet(tc.instanceOf(p.Spec.NodeName))
		if ip, err := netip.ParseAddr(p.Status.PodIP); err != nil || !subnet.Contains(ip) {
			t.Errorf("pod %s has IP %q, not in its node's subnet %s", p.Name, p.Status.PodIP, subnet)
		}
	}

	// Q2: two pods on one node; Q3: pods on two nodes; Q4: the Service by its name.
	if out, err := kexec("client", "timeout", "5", "wget", "-qO-", "http://"+web0.Status.PodIP+"/"); err != nil || out != "web-0" {
		t.Errorf("client → web-0 on the same node: %v %q", err, out)
	}
	if out, err := kexec("client", "timeout", "5", "wget", "-qO-", "http://"+web1.Status.PodIP+"/"); err != nil || out != "web-1" {
		t.Errorf("client → web-1 on the other node: %v %q", err, out)
	}
	testutil.EventuallyWithin(t, time.Minute, "20 requests to the Service to reach both web-0 and web-1", func() (bool, error) {
		out, _ := kexec("client", "sh", "-c", "for i in $(seq 20); do timeout 3 wget -qO- http://web 2>/dev/null; done")
		seen := map[string]int{}
		for _, l := range strings.Fields(out) {
			seen[l]++
		}
		return seen["web-0"] > 0 && seen["web-1"] > 0 && seen["web-0"]+seen["web-1"] == 20, nil
	})
	// Restart node 0's aws-node and kubelet, as after a kill -9 of `kubelab up` (the pods'
	// sandboxes outlive it): its pods keep their addresses, and the cloud keeps them
	// assigned.
	before := map[string]string{"web-0": web0.Status.PodIP, "client": cl.Status.PodIP}
	units := []string{"kubelet/" + n0.Name, "aws-node/" + n0.Name}
	for _, u := range units {
		if err := tc.Stop(ctx, u); err != nil {
			t.Fatalf("stop %s: %v", u, err)
		}
	}
	for i := len(units) - 1; i >= 0; i-- {
		if err := tc.Start(ctx, units[i]); err != nil {
			t.Fatalf("start %s: %v", units[i], err)
		}
	}
	for name, ip := range before {
		// The restarted kubelet knows the pod again once exec reaches it; its eth0 has
		// the address it had.
		var out string
		testutil.EventuallyWithin(t, clustertest.Timeout, "exec in "+name+" after the restart", func() error {
			var err error
			out, err = kexec(name, "ip", "-4", "addr", "show", "eth0")
			return err
		})
		if !strings.Contains(out, "inet "+ip+"/32") {
			t.Errorf("after the restart %s's eth0:\n%s\nwant %s/32", name, out, ip)
		}
		if p := tc.WaitPodRunning(ns, name); p.Status.PodIP != ip {
			t.Errorf("after the restart %s has %s, want %s", name, p.Status.PodIP, ip)
		}
	}
	tc.assertPodIPsOnENIs(ns)
	ckpt, err := os.ReadFile(filepath.Join(tc.DataDir(), "nodes", n0.Name, "aws-node", "ipam.json"))
	if err != nil || !strings.Contains(string(ckpt), before["web-0"]) || !strings.Contains(string(ckpt), before["client"]) {
		t.Errorf("node %s's checkpoint %s (%v) lacks its pods' addresses %v", n0.Name, ckpt, err, before)
	}
	if out, err := kexec("client", "timeout", "5", "wget", "-qO-", "http://"+web0.Status.PodIP+"/"); err != nil || out != "web-0" {
		t.Errorf("client → web-0 after the restart: %v %q", err, out)
	}

	// Max pods: fill node 1 up to its 11 pods; the next one stays Pending.
	pods, err := tc.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n1.Name})
	if err != nil {
		t.Fatal(err)
	}
	onNode := 0
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			onNode++
		}
	}
	filler := func(i int) *corev1.Pod {
		p := webPod(ns, fmt.Sprintf("filler-%d", i), "")
		p.Labels = map[string]string{"app": "filler"}
		p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: n1.Name}
		return p
	}
	for i := onNode; i < 11; i++ {
		create(filler(i))
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "the fillers scheduled to "+n1.Name, func() error {
		for i := onNode; i < 11; i++ {
			p, err := tc.Client.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("filler-%d", i), metav1.GetOptions{})
			if err != nil || p.Spec.NodeName != n1.Name {
				return fmt.Errorf("filler-%d not on %s yet (%v)", i, n1.Name, err)
			}
		}
		return nil
	})
	// With the node's host-network pods counted, its addresses suffice for the rest.
	testutil.EventuallyWithin(t, clustertest.Timeout, "the fillers running", func() error {
		for i := onNode; i < 11; i++ {
			p, err := tc.Client.CoreV1().Pods(ns).Get(ctx, fmt.Sprintf("filler-%d", i), metav1.GetOptions{})
			if err != nil || !clustertest.PodRunning(p) || p.Status.PodIP == "" {
				return fmt.Errorf("filler-%d not running with an address (%v)", i, err)
			}
		}
		return nil
	})
	// Node 1's third ENI (device 2) was attached for the fillers: its addresses came from
	// calls aws-node made after they were created, which the trace of a filler holding one
	// shows, after its CNI ADD.
	var late *corev1.Pod
	testutil.EventuallyWithin(t, clustertest.Timeout, "a filler with an address of device 2", func() error {
		devices := tc.eniDevices()
		list, err := tc.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=filler"})
		if err != nil {
			return err
		}
		for i := range list.Items {
			if p := &list.Items[i]; clustertest.PodRunning(p) && devices[p.Status.PodIP] == 2 {
				late = p
				return nil
			}
		}
		return fmt.Errorf("no running filler on device 2; devices %v", devices)
	})
	snap, err := trace.Collect(ctx, trace.Sources{Client: tc.Client, EC2: tc.EC2}, trace.Target{Kind: "pod", Namespace: ns, Name: late.Name})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := trace.WriteText(&text, trace.Build(snap)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ADD (VPC mode)", "assign pod address", late.Status.PodIP, "CreateNetworkInterface", "AttachNetworkInterface", "AssignPrivateIpAddresses"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("kubelab trace pod/%s (%s on device 2):\n%s\nwant %q", late.Name, late.Status.PodIP, text.String(), want)
		}
	}

	create(filler(11))
	testutil.EventuallyWithin(t, clustertest.Timeout, "filler-11 Pending for too many pods", func() error {
		p, err := tc.Client.CoreV1().Pods(ns).Get(ctx, "filler-11", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && strings.Contains(c.Message, "Too many pods") {
				return nil
			}
		}
		return fmt.Errorf("pod %s on %q, conditions %+v", p.Status.Phase, p.Spec.NodeName, p.Status.Conditions)
	})
	tc.assertPodIPsOnENIs(ns)

	// A pod whose address is on a secondary ENI (its traffic leaves by that ENI through
	// the VPC's router, by its own route table) reaches and is reached by a pod on the
	// other node, reaches a Service by name, and the outside (SNATed to its node's
	// address, through the NAT gateway).
	var second *corev1.Pod
	testutil.EventuallyWithin(t, clustertest.Timeout, "a filler running on a secondary ENI", func() error {
		devices := tc.eniDevices()
		list, err := tc.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=filler"})
		if err != nil {
			return err
		}
		for i := range list.Items {
			if p := &list.Items[i]; clustertest.PodRunning(p) && devices[p.Status.PodIP] > 0 {
				second = p
				return nil
			}
		}
		return fmt.Errorf("no running filler on a secondary ENI; devices %v", devices)
	})
	if out, err := kexec("client", "timeout", "5", "wget", "-qO-", "http://"+second.Status.PodIP+"/"); err != nil || out != second.Name {
		t.Errorf("client → %s (%s, a secondary ENI of the other node): %v %q", second.Name, second.Status.PodIP, err, out)
	}
	for url, want := range map[string]string{
		"http://" + web0.Status.PodIP + "/": "web-0",
		"http://web/":                       "web-",
		"http://" + internetName + "/":      internetPage,
	} {
		if out, err := kexec(second.Name, "timeout", "20", "wget", "-qO-", url); err != nil || !strings.HasPrefix(out, want) {
			t.Errorf("%s (secondary ENI) → %s: %v %q, want %q", second.Name, url, err, out, want)
		}
	}

	// NetworkPolicy: the web pods accept no ingress, from another node either.
	if _, err := tc.Client.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "deny-web-0"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "the policy to deny client → web-1", func() bool {
		_, err := kexec("client", "timeout", "3", "wget", "-qO-", "http://"+web1.Status.PodIP+"/")
		return err != nil
	})
}

// eniDevices maps every secondary address of an attached ENI to its device index.
func (tc *testCluster) eniDevices() map[string]int32 {
	tc.T.Helper()
	out, err := tc.EC2.DescribeNetworkInterfaces(context.Background(), &ec2.DescribeNetworkInterfacesInput{})
	if err != nil {
		tc.T.Fatal(err)
	}
	devices := map[string]int32{}
	for _, n := range out.NetworkInterfaces {
		if n.Attachment == nil {
			continue
		}
		for _, a := range n.PrivateIpAddresses {
			if !aws.ToBool(a.Primary) {
				devices[aws.ToString(a.PrivateIpAddress)] = aws.ToInt32(n.Attachment.DeviceIndex)
			}
		}
	}
	return devices
}

// instanceSubnet is the range of instance id's subnet.
func (tc *testCluster) instanceSubnet(id string) netip.Prefix {
	tc.T.Helper()
	ctx := context.Background()
	out, err := tc.EC2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil || len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		tc.T.Fatalf("describe instance %s: %v", id, err)
	}
	sn, err := tc.EC2.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{aws.ToString(out.Reservations[0].Instances[0].SubnetId)}})
	if err != nil || len(sn.Subnets) != 1 {
		tc.T.Fatalf("describe subnet of %s: %v", id, err)
	}
	return netip.MustParsePrefix(aws.ToString(sn.Subnets[0].CidrBlock))
}

// assertPodIPsOnENIs checks that describe-network-interfaces lists the address of every
// running pod of ns that is not on the host network as a secondary private IP of an ENI
// attached to its node's instance.
func (tc *testCluster) assertPodIPsOnENIs(ns string) {
	tc.T.Helper()
	ctx := context.Background()
	out, err := tc.EC2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{})
	if err != nil {
		tc.T.Fatal(err)
	}
	owner := map[string]string{} // secondary address → instance
	for _, n := range out.NetworkInterfaces {
		if n.Attachment == nil {
			continue
		}
		for _, a := range n.PrivateIpAddresses {
			if !aws.ToBool(a.Primary) {
				owner[aws.ToString(a.PrivateIpAddress)] = aws.ToString(n.Attachment.InstanceId)
			}
		}
	}
	pods, err := tc.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		tc.T.Fatal(err)
	}
	for _, p := range pods.Items {
		if p.Spec.HostNetwork || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
			continue
		}
		if got, want := owner[p.Status.PodIP], tc.instanceOf(p.Spec.NodeName); got != want {
			tc.T.Errorf("pod %s's address %s: on an ENI of %q, want one of its node's instance %s", p.Name, p.Status.PodIP, got, want)
		}
	}
}

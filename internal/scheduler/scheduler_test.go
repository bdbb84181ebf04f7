package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/testutil"
)

func TestSchedulesPodsAndReportsScheduled(t *testing.T) {
	c := startCluster(t, Config{})
	for _, n := range []string{"node-a", "node-b", "node-c"} {
		c.createNode(makeNode(n, "4"))
	}
	for i := 0; i < 6; i++ {
		c.createPod(makePod(fmt.Sprintf("web-%d", i), cpu("500m")))
	}
	counts := map[string]int{}
	for i := 0; i < 6; i++ {
		name := fmt.Sprintf("web-%d", i)
		node := c.waitScheduled(name)
		counts[node]++
		ev := c.waitEvent(name, "Scheduled", "Successfully assigned default/"+name+" to "+node)
		if ev.Source.Component != "default-scheduler" || ev.Type != corev1.EventTypeNormal {
			t.Errorf("event source %q type %q, want default-scheduler Normal", ev.Source.Component, ev.Type)
		}
	}
	// LeastAllocated spreads equal pods over equal nodes.
	for n, k := range counts {
		if k != 2 {
			t.Errorf("node %s got %d pods, want 2 each: %v", n, k, counts)
		}
	}
	p, err := c.client.CoreV1().Pods("default").Get(context.Background(), "web-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !hasCondition(p, corev1.PodScheduled, corev1.ConditionTrue, "") {
		t.Errorf("web-0 conditions %+v, want PodScheduled=True", p.Status.Conditions)
	}
}

func TestOtherSchedulerNamesAreLeftAlone(t *testing.T) {
	c := startCluster(t, Config{})
	c.createNode(makeNode("node-a", "4"))
	p := makePod("custom")
	p.Spec.SchedulerName = "my-scheduler"
	c.createPod(p)
	c.createPod(makePod("normal"))
	c.waitScheduled("normal")
	got, err := c.client.CoreV1().Pods("default").Get(context.Background(), "custom", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.NodeName != "" {
		t.Errorf("pod for my-scheduler was bound to %s", got.Spec.NodeName)
	}
}

func hasCondition(p *corev1.Pod, typ corev1.PodConditionType, status corev1.ConditionStatus, reason string) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == typ && c.Status == status && (reason == "" || c.Reason == reason) {
			return true
		}
	}
	return false
}

// waitCondition waits for the pod's PodScheduled=False condition with reason Unschedulable.
func (c *testCluster) waitUnschedulable(name, wantMsg string) {
	c.t.Helper()
	testutil.Eventually(c.t, fmt.Sprintf("pod %s PodScheduled=False/Unschedulable %q", name, wantMsg), func() error {
		p, err := c.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cd := range p.Status.Conditions {
			if cd.Type == corev1.PodScheduled && cd.Status == corev1.ConditionFalse && cd.Reason == corev1.PodReasonUnschedulable && cd.Message == wantMsg {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", p.Status.Conditions)
	})
}

func TestInsufficientCPUThenNewNode(t *testing.T) {
	c := startCluster(t, Config{})
	for _, n := range []string{"node-a", "node-b", "node-c"} {
		c.createNode(makeNode(n, "1"))
	}
	c.createPod(makePod("big", cpu("2")))
	want := "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
	ev := c.waitEvent("big", "FailedScheduling", want)
	if ev.Type != corev1.EventTypeWarning || ev.Message != want {
		t.Errorf("event %s %q, want Warning %q", ev.Type, ev.Message, want)
	}
	c.waitUnschedulable("big", want)
	c.createNode(makeNode("node-d", "4"))
	if node := c.waitScheduled("big"); node != "node-d" {
		t.Errorf("big on %s, want node-d", node)
	}
}

func TestUntoleratedTaintThenRemoved(t *testing.T) {
	c := startCluster(t, Config{})
	for _, n := range []string{"node-a", "node-b"} {
		c.createNode(makeNode(n, "4", taint("dedicated", "infra")))
	}
	c.createPod(makePod("app"))
	want := "0/2 nodes are available: 2 node(s) had untolerated taint {dedicated: infra}. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
	c.waitEvent("app", "FailedScheduling", want)
	c.waitUnschedulable("app", want)
	n, err := c.client.CoreV1().Nodes().Get(context.Background(), "node-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.Taints = nil
	if _, err := c.client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if node := c.waitScheduled("app"); node != "node-b" {
		t.Errorf("app on %s, want node-b", node)
	}
}

func TestVolumeNodeAffinityConflict(t *testing.T) {
	c := startCluster(t, Config{})
	c.createNode(makeNode("node-a", "1", zoneLabel("us-east-1a")))
	c.createNode(makeNode("node-b", "4", zoneLabel("us-east-1b")))
	c.createNode(makeNode("node-c", "4", zoneLabel("us-east-1c")))
	c.createClass("gp2-immediate", storagev1.VolumeBindingImmediate)
	pvc := c.createClaim("data", "gp2-immediate")
	c.bindClaim(pvc, "pv-data", corev1.LabelTopologyZone, "us-east-1a")
	c.createPod(makePod("db", cpu("2"), withClaim("data")))
	want := "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) had volume node affinity conflict. " +
		"preemption: 0/3 nodes are available: 1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
	c.waitEvent("db", "FailedScheduling", want)
	c.waitUnschedulable("db", want)
	// The cause goes away: a node with room in the volume's zone.
	c.createNode(makeNode("node-d", "4", zoneLabel("us-east-1a")))
	if node := c.waitScheduled("db"); node != "node-d" {
		t.Errorf("db on %s, want node-d", node)
	}
}

func TestWaitForFirstConsumerSelectsNodeAndWaitsForBinding(t *testing.T) {
	c := startCluster(t, Config{})
	c.createNode(makeNode("node-a", "4", zoneLabel("us-east-1a"), func(n *corev1.Node) { n.Labels["topology.ebs.csi.aws.com/zone"] = "us-east-1a" }))
	c.createNode(makeNode("node-b", "4", zoneLabel("us-east-1b"), func(n *corev1.Node) { n.Labels["topology.ebs.csi.aws.com/zone"] = "us-east-1b" }))
	c.createNode(makeNode("node-c", "4", zoneLabel("us-east-1c"), func(n *corev1.Node) { n.Labels["topology.ebs.csi.aws.com/zone"] = "us-east-1c" }))
	c.createClass("gp2", storagev1.VolumeBindingWaitForFirstConsumer, "us-east-1b")
	pvc := c.createClaim("data", "gp2")
	c.createPod(makePod("app", withClaim("data")))

	// The scheduler picks node-b (the only zone the class allows) and says so on the claim.
	var selected string
	testutil.Eventually(t, "a selected-node on the claim", func() (bool, error) {
		cur, err := c.client.CoreV1().PersistentVolumeClaims("default").Get(context.Background(), "data", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		selected = cur.Annotations["volume.kubernetes.io/selected-node"]
		return selected != "", nil
	})
	if selected != "node-b" {
		t.Fatalf("selected-node %q, want node-b", selected)
	}
	// Until the claim is bound the pod waits in PreBind, unbound.
	testutil.Consistently(t, time.Second, "the pod unbound until its claim is bound", func() error {
		p, err := c.client.CoreV1().Pods("default").Get(context.Background(), "app", metav1.GetOptions{})
		if err == nil && p.Spec.NodeName != "" {
			err = fmt.Errorf("pod bound to %s before its claim was bound", p.Spec.NodeName)
		}
		return err
	})
	// Play the provisioner and the PV controller.
	c.bindClaim(pvc, "pvc-"+string(pvc.UID), "topology.ebs.csi.aws.com/zone", "us-east-1b")
	if node := c.waitScheduled("app"); node != "node-b" {
		t.Errorf("app on %s, want node-b", node)
	}
	c.waitEvent("app", "Scheduled", "Successfully assigned default/app to node-b")
}

func TestWaitForFirstConsumerNoZoneServed(t *testing.T) {
	c := startCluster(t, Config{})
	c.createNode(makeNode("node-a", "4", zoneLabel("us-east-1a"), func(n *corev1.Node) { n.Labels["topology.ebs.csi.aws.com/zone"] = "us-east-1a" }))
	c.createClass("gp2-d", storagev1.VolumeBindingWaitForFirstConsumer, "us-east-1d")
	c.createClaim("data", "gp2-d")
	c.createPod(makePod("app", withClaim("data")))
	c.waitEvent("app", "FailedScheduling",
		"0/1 nodes are available: 1 node(s) didn't find available persistent volumes to bind. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.")
}

func TestPreemptionEvictsLowerPriority(t *testing.T) {
	c := startCluster(t, Config{})
	c.createNode(makeNode("node-a", "2"))
	c.createPod(makePod("low", cpu("1500m"), priority(0)))
	c.waitScheduled("low")
	c.createPod(makePod("high", cpu("1500m"), priorityClass("system-cluster-critical")))
	c.waitEvent("high", "FailedScheduling", "0/1 nodes are available: 1 Insufficient cpu.")
	c.waitEvent("low", "Preempted", "Preempted by pod ")
	// The victim is only marked for deletion (it has a node); complete it as a kubelet would.
	var victim *corev1.Pod
	testutil.Eventually(t, "the victim marked for deletion", func() (bool, error) {
		p, err := c.client.CoreV1().Pods("default").Get(context.Background(), "low", metav1.GetOptions{})
		victim = p
		return err == nil && p.DeletionTimestamp != nil, err
	})
	if !hasCondition(victim, corev1.DisruptionTarget, corev1.ConditionTrue, corev1.PodReasonPreemptionByScheduler) {
		t.Errorf("victim conditions %+v, want DisruptionTarget", victim.Status.Conditions)
	}
	if err := c.client.CoreV1().Pods("default").Delete(context.Background(), "low", *metav1.NewDeleteOptions(0)); err != nil {
		t.Fatal(err)
	}
	p, err := c.client.CoreV1().Pods("default").Get(context.Background(), "high", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Status.NominatedNodeName != "node-a" && p.Spec.NodeName == "" {
		t.Errorf("high: nominatedNodeName %q, want node-a", p.Status.NominatedNodeName)
	}
	if node := c.waitScheduled("high"); node != "node-a" {
		t.Errorf("high on %s", node)
	}
}

// After a scheduler restart, a claim may already name a node; the scheduler keeps it so
// that the provisioner is not sent to a second zone.
func TestWaitForFirstConsumerKeepsSelectedNode(t *testing.T) {
	c := startCluster(t, Config{})
	for _, z := range []string{"a", "b", "c"} {
		c.createNode(makeNode("node-"+z, "4", zoneLabel("us-east-1"+z)))
	}
	c.createClass("gp3", storagev1.VolumeBindingWaitForFirstConsumer)
	pvc := c.createClaim("data", "gp3")
	pvc.Annotations = map[string]string{"volume.kubernetes.io/selected-node": "node-c"}
	pvc, err := c.client.CoreV1().PersistentVolumeClaims("default").Update(context.Background(), pvc, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.createPod(makePod("app", withClaim("data")))
	testutil.Consistently(t, time.Second, "the claim's selected-node kept", func() error {
		cur, err := c.client.CoreV1().PersistentVolumeClaims("default").Get(context.Background(), "data", metav1.GetOptions{})
		if err == nil && cur.Annotations["volume.kubernetes.io/selected-node"] != "node-c" {
			err = fmt.Errorf("selected-node changed to %q", cur.Annotations["volume.kubernetes.io/selected-node"])
		}
		return err
	})
	c.bindClaim(pvc, "pvc-"+string(pvc.UID), corev1.LabelTopologyZone, "us-east-1c")
	if node := c.waitScheduled("app"); node != "node-c" {
		t.Errorf("app on %s, want node-c", node)
	}
}

func TestNoNodesThenNodeAdded(t *testing.T) {
	c := startCluster(t, Config{})
	c.createPod(makePod("early"))
	c.waitEvent("early", "FailedScheduling", "no nodes available to schedule pods")
	c.waitUnschedulable("early", "no nodes available to schedule pods")
	c.createNode(makeNode("node-a", "4"))
	if node := c.waitScheduled("early"); node != "node-a" {
		t.Errorf("early on %s", node)
	}
}

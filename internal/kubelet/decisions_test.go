package kubelet

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/kubelab/kubelab/internal/hollow"
)

func TestConfigValidate(t *testing.T) {
	ok := Config{NodeName: "n1", Zone: "us-east-1a", InstanceID: "i-1", Hollow: true}
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"valid", func(*Config) {}, ""},
		{"no name", func(c *Config) { c.NodeName = "" }, "node name is required"},
		{"bad name", func(c *Config) { c.NodeName = "Node_1" }, `node name "Node_1"`},
		{"no zone", func(c *Config) { c.Zone = "" }, "zone is required"},
		{"no instance", func(c *Config) { c.InstanceID = "" }, "instance id is required"},
		{"zero cpu", func(c *Config) { c.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0")} }, "capacity cpu=0 must be positive"},
		{"lease", func(c *Config) { c.LeaseDuration, c.LeaseRenewInterval = time.Second, 2*time.Second }, "must be shorter than the lease duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			err := c.validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("validate: %v, want %q", err, tc.want)
			}
		})
	}
	c := ok
	c.defaults()
	if c.Region != "us-east-1" || c.CSIDriverName != "ebs.csi.aws.com" || c.Capacity.Cpu().String() != "2" {
		t.Errorf("defaults: region %q driver %q cpu %s", c.Region, c.CSIDriverName, c.Capacity.Cpu())
	}
}

func TestApplyNodeStatusIgnoresHeartbeats(t *testing.T) {
	cfg := &Config{NodeName: "n1", Zone: "us-east-1a", InstanceID: "i-1", Hollow: true}
	cfg.defaults()
	n := &corev1.Node{}
	t0 := metav1.NewTime(time.Unix(1000, 0))
	if !applyNodeStatus(n, cfg, nil, "containerd://1.6.20", nil, t0) {
		t.Fatal("first status not a change")
	}
	t1 := metav1.NewTime(time.Unix(1010, 0))
	if applyNodeStatus(n, cfg, nil, "", nil, t1) {
		t.Error("a heartbeat alone counted as a change")
	}
	if v := n.Status.NodeInfo.ContainerRuntimeVersion; v != "containerd://1.6.20" {
		t.Errorf("containerRuntimeVersion %q, want the runtime's last answer kept", v)
	}
	for _, c := range n.Status.Conditions {
		if !c.LastHeartbeatTime.Equal(&t1) || !c.LastTransitionTime.Equal(&t0) {
			t.Errorf("%s: heartbeat %v transition %v", c.Type, c.LastHeartbeatTime, c.LastTransitionTime)
		}
	}
	if !applyNodeStatus(n, cfg, []corev1.UniqueVolumeName{"kubernetes.io/csi/ebs.csi.aws.com^vol-1"}, "containerd://1.6.20", nil, t1) {
		t.Error("volumesInUse change not seen")
	}
}

// An extended resource patched into the node's capacity stays there and becomes
// allocatable; the kubelet's own resources are its own.
func TestApplyNodeStatusKeepsExtendedResources(t *testing.T) {
	cfg := &Config{NodeName: "n1", Zone: "us-east-1a", InstanceID: "i-1", Hollow: true}
	cfg.defaults()
	n := &corev1.Node{}
	now := metav1.NewTime(time.Unix(1000, 0))
	applyNodeStatus(n, cfg, nil, "containerd://1.6.20", nil, now)
	const foo = corev1.ResourceName("example.com/foo")
	n.Status.Capacity[foo] = resource.MustParse("5")
	n.Status.Capacity[corev1.ResourceCPU] = resource.MustParse("64")
	if !applyNodeStatus(n, cfg, nil, "containerd://1.6.20", nil, now) {
		t.Error("allocatable of the new resource not a change")
	}
	for name, l := range map[string]corev1.ResourceList{"capacity": n.Status.Capacity, "allocatable": n.Status.Allocatable} {
		if q := l[foo]; q.Cmp(resource.MustParse("5")) != 0 {
			t.Errorf("%s %s = %s, want 5 kept", name, foo, q.String())
		}
		if q := l[corev1.ResourceCPU]; q.Cmp(*cfg.Capacity.Cpu()) != 0 {
			t.Errorf("%s cpu = %s, want the kubelet's %s", name, q.String(), cfg.Capacity.Cpu())
		}
	}
}

func TestMergeNodeMetaKeepsOthers(t *testing.T) {
	cfg := &Config{NodeName: "n1", Zone: "us-east-1a", InstanceID: "i-1"}
	cfg.defaults()
	want := desiredNode(cfg)
	existing := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"team": "a", corev1.LabelTopologyZone: "old"}},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.0.0/24"}}
	if !mergeNodeMeta(existing, want) {
		t.Fatal("no change reported")
	}
	if existing.Labels["team"] != "a" || existing.Labels[corev1.LabelTopologyZone] != "us-east-1a" || existing.Spec.PodCIDR != "10.244.0.0/24" {
		t.Errorf("merged %v %v", existing.Labels, existing.Spec)
	}
	if mergeNodeMeta(existing, want) {
		t.Error("second merge reported a change")
	}
}

// TestExternalCloudProvider: a kubelet of an external cloud registers its node tainted
// uninitialized, with its address in the provided-node-ip annotation and without the
// cloud's facts; it reports its own addresses only until the node has some.
func TestExternalCloudProvider(t *testing.T) {
	cfg := &Config{NodeName: "ip-10-0-1-5.ec2.internal", Zone: "us-east-1a", InstanceID: "i-1", NodeIP: "10.0.1.5", ExternalCloudProvider: true}
	cfg.defaults()
	n := desiredNode(cfg)
	if n.Spec.ProviderID != "" || len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != taintUninitialized || n.Spec.Taints[0].Effect != corev1.TaintEffectNoSchedule {
		t.Errorf("spec %+v, want no providerID and the uninitialized taint", n.Spec)
	}
	if n.Annotations[annProvidedNodeIP] != "10.0.1.5" {
		t.Errorf("annotations %v", n.Annotations)
	}
	for _, l := range []string{corev1.LabelTopologyZone, corev1.LabelTopologyRegion, corev1.LabelInstanceTypeStable} {
		if _, ok := n.Labels[l]; ok {
			t.Errorf("label %s set by the kubelet of an external cloud", l)
		}
	}
	if n.Labels[labelEBSZone] != "us-east-1a" {
		t.Errorf("the CSI topology label: %v", n.Labels)
	}
	if got := nodeAddresses(cfg, nil); len(got) != 2 || got[0].Address != "10.0.1.5" {
		t.Errorf("first addresses %+v", got)
	}
	cloud := []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.1.5"}, {Type: corev1.NodeInternalDNS, Address: cfg.NodeName}}
	if got := nodeAddresses(cfg, cloud); len(got) != 2 || got[1].Type != corev1.NodeInternalDNS {
		t.Errorf("addresses after the cloud's %+v, want them kept", got)
	}
}

func TestMergeCSIDriver(t *testing.T) {
	cfg := &Config{NodeName: "n1", Zone: "us-east-1a", InstanceID: "i-1"}
	cfg.defaults()
	d := desiredCSIDriver(cfg)
	other := storagev1.CSINodeDriver{Name: "hostpath.csi.k8s.io", NodeID: "n1"}
	out, changed := mergeCSIDriver([]storagev1.CSINodeDriver{other}, d)
	if !changed || len(out) != 2 || out[0].Name != other.Name {
		t.Fatalf("add: %v %+v", changed, out)
	}
	if _, changed := mergeCSIDriver(out, d); changed {
		t.Error("same driver reported as a change")
	}
	d2 := d
	d2.NodeID = "i-2"
	out2, changed := mergeCSIDriver(out, d2)
	if !changed || out2[1].NodeID != "i-2" || out[1].NodeID != "i-1" {
		t.Errorf("replace: %v %+v (input mutated: %v)", changed, out2, out[1].NodeID != "i-1")
	}
}

func TestNextFreeAddress(t *testing.T) {
	p := netip.MustParsePrefix("10.244.1.0/30") // .0 network, .1 gateway, .2 pod, .3 broadcast
	used := map[netip.Addr]types.UID{}
	a, err := nextFree(p, used)
	if err != nil || a.String() != "10.244.1.2" {
		t.Fatalf("first: %v %v", a, err)
	}
	used[a] = "x"
	if _, err := nextFree(p, used); err == nil || !strings.Contains(err.Error(), "exhausted") {
		t.Errorf("full /30: %v", err)
	}
	ips := newPodIPs()
	ips.setCIDR("10.244.2.0/24")
	a1, _ := ips.allocate("a")
	a2, _ := ips.allocate("b")
	again, _ := ips.allocate("a")
	ips.release("a")
	a3, _ := ips.allocate("c")
	if a1 != "10.244.2.2" || a2 != "10.244.2.3" || again != a1 || a3 != a1 {
		t.Errorf("allocations %s %s %s %s", a1, a2, again, a3)
	}
}

func TestPodStatuses(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}}
	now := metav1.NewTime(time.Unix(2000, 0))
	pending := pendingStatus(pod, "172.31.0.1", now)
	if pending.Phase != corev1.PodPending || pending.ContainerStatuses[0].State.Waiting.Reason != "ContainerCreating" || pending.HostIP != "172.31.0.1" {
		t.Errorf("pending %+v", pending)
	}
	started := time.Unix(2001, 0)
	states := []ContainerState{{Name: "app", Image: "nginx", ImageID: "nginx@sha256:1", ContainerID: hollow.ContainerIDPrefix + "1", StartedAt: started}}
	pod.Status = pending
	running := runningStatus(pod, states, "172.31.0.1", "10.244.0.2", metav1.NewTime(time.Unix(2002, 0)))
	if running.Phase != corev1.PodRunning || running.PodIP != "10.244.0.2" || len(running.PodIPs) != 1 || !running.ContainerStatuses[0].Ready ||
		running.StartTime == nil || !running.StartTime.Equal(&now) {
		t.Errorf("running %+v", running)
	}
	kinds := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, c := range running.Conditions {
		kinds[c.Type] = c.Status
	}
	for _, ct := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodReady, corev1.ContainersReady, corev1.PodInitialized, corev1.PodReadyToStartContainers} {
		if kinds[ct] != corev1.ConditionTrue {
			t.Errorf("condition %s = %q in %v", ct, kinds[ct], kinds)
		}
	}
	// Same inputs later: same status (no needless write).
	pod.Status = running
	if again := runningStatus(pod, states, "172.31.0.1", "10.244.0.2", metav1.NewTime(time.Unix(3000, 0))); !statusEqual(&again, &running) {
		t.Error("running status not stable")
	}
	if got := adoptedStates(pod); len(got) != 1 || got[0].ContainerID != hollow.ContainerIDPrefix+"1" || !got[0].StartedAt.Equal(started) {
		t.Errorf("adopted %+v", got)
	}
	killed := []ContainerState{{Name: "app", Terminated: true, ExitCode: 0, Reason: "Completed", StartedAt: started, FinishedAt: time.Unix(2010, 0)}}
	done := terminatedStatus(pod, killed, metav1.NewTime(time.Unix(2010, 0)))
	if done.Phase != corev1.PodSucceeded || done.ContainerStatuses[0].State.Terminated == nil || done.ContainerStatuses[0].Ready {
		t.Errorf("terminated %+v", done)
	}
	killed[0].ExitCode = 137
	if terminatedStatus(pod, killed, now).Phase != corev1.PodFailed {
		t.Error("exit 137 not Failed")
	}
}

func TestVolumePaths(t *testing.T) {
	if got := stagingPath("/r", "pvc-1"); got != "/r/plugins/kubernetes.io/csi/pv/pvc-1/globalmount" {
		t.Errorf("staging %q", got)
	}
	if got := targetPath("/r", "uid-1", "pvc-1"); got != "/r/pods/uid-1/volumes/kubernetes.io~csi/pvc-1/mount" {
		t.Errorf("target %q", got)
	}
}

// The status patch takes the base status to the new one exactly (conditions merged by
// type, container states replaced, fields dropped), and carries the pod's UID.
func TestStatusPatch(t *testing.T) {
	now := metav1.NewTime(time.Now().Truncate(time.Second)) // as JSON carries it
	base := corev1.PodStatus{Phase: corev1.PodPending,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{
			Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}},
	}
	running := corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.5",
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Ready: true, State: corev1.ContainerState{
			Running: &corev1.ContainerStateRunning{StartedAt: now}}}},
	}
	for name, tc := range map[string]struct{ from, to corev1.PodStatus }{
		"pending to running": {base, running},
		"running to pending": {running, base},
	} {
		t.Run(name, func(t *testing.T) {
			patch, err := statusPatch("uid-1", tc.from, tc.to)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(patch, &m); err != nil {
				t.Fatal(err)
			}
			if md, _ := m["metadata"].(map[string]any); md["uid"] != "uid-1" {
				t.Errorf("patch %s lacks metadata.uid", patch)
			}
			from, _ := json.Marshal(corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-1"}, Status: tc.from})
			merged, err := strategicpatch.StrategicMergePatch(from, patch, corev1.Pod{})
			if err != nil {
				t.Fatal(err)
			}
			var got corev1.Pod
			if err := json.Unmarshal(merged, &got); err != nil {
				t.Fatal(err)
			}
			if !apiequality.Semantic.DeepEqual(got.Status, tc.to) {
				t.Errorf("patched status:\n%+v\nwant\n%+v", got.Status, tc.to)
			}
		})
	}
}

// TestQueueName: a real node's work queue is named after it in the workqueue metrics; a
// hollow node's has no name, so no metrics series and no goroutine updating them.
func TestQueueName(t *testing.T) {
	if got := queueName(Config{NodeName: "n1"}); got != "kubelet-n1" {
		t.Errorf("real node: %q, want kubelet-n1", got)
	}
	if got := queueName(Config{NodeName: "n1", Hollow: true}); got != "" {
		t.Errorf("hollow node: %q, want none", got)
	}
}

// TestNodeStatusGet: the node status reads the Node from the API server's cache first,
// and from etcd after a conflict.
func TestNodeStatusGet(t *testing.T) {
	if rv := nodeStatusGet(1).ResourceVersion; rv != "0" {
		t.Errorf("first try: resourceVersion %q, want 0 (the cache)", rv)
	}
	if rv := nodeStatusGet(2).ResourceVersion; rv != "" {
		t.Errorf("second try: resourceVersion %q, want none (etcd)", rv)
	}
}

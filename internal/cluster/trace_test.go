package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/cloud"
	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/trace"
	"github.com/kubelab/kubelab/internal/trace/tracetest"
)

// keyStateTransitions are the rows of the storage flow's key state transitions, in the
// order they happen, as object kind, before, event, after.
var keyStateTransitions = [][4]string{
	{"PVC", "Pending", "PV provisioned", "Bound"},
	{"PV", "Available", "PVC bound", "Bound"},
	{"VolumeAttachment", "(created)", "ControllerPublishVolume", "status.attached: true"},
	{"PVC", "Bound", "Pod terminated", "Bound (volume kept)"},
	{"PV", "Bound", "PVC deleted (Retain)", "Released"},
}

// traceExampleFlow runs the claim of examples/seed (of a WaitForFirstConsumer class that retains its
// volumes, gp2-retain-<ns>) and pod in ns under a trace --watch started before them,
// through the pod's and the claim's deletion, and returns the trace it ends with, the one
// it made once the pod ran (live), and the trace of the running pod taken by a plain trace.
func (tc *testCluster) traceExampleFlow(ns string) (watched, live, running trace.Trace) {
	t := tc.T
	t.Helper()
	class := "gp2-retain-" + ns
	retain, wffc := corev1.PersistentVolumeReclaimRetain, storagev1.VolumeBindingWaitForFirstConsumer
	if _, err := tc.Client.StorageV1().StorageClasses().Create(context.Background(), &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: class}, Provisioner: cluster.DriverName,
		ReclaimPolicy: &retain, VolumeBindingMode: &wffc,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	src := trace.Sources{Client: tc.Client, EC2: tc.EC2}
	target := trace.Target{Kind: "pod", Namespace: ns, Name: "my-app-pod"}
	ctx, stop := context.WithCancel(context.Background())
	var streamed bytes.Buffer
	type result struct {
		s   *trace.Snapshot
		err error
	}
	done := make(chan result, 1)
	ended := make(chan struct{}) // closed when the watch has returned
	started := make(chan struct{})
	var (
		mu     sync.Mutex
		latest trace.Trace
	)
	go func() {
		defer close(ended)
		printed := map[string]bool{}
		var once bool
		s, err := trace.Watch(ctx, src, target, func(tr trace.Trace) {
			if !once {
				once = true
				close(started)
			}
			mu.Lock()
			defer mu.Unlock()
			latest = tr
			trace.WriteNewSteps(&streamed, tr, printed)
		})
		done <- result{s, err}
	}()
	t.Cleanup(func() {
		stop()
		select {
		case <-ended: // its final trace is taken
		case <-time.After(time.Minute):
			t.Error("trace --watch did not end a minute after it was stopped")
		}
	})
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("trace --watch made no first trace in a minute")
	}
	tc.seedPair(ns, "my-app-pvc", "my-app-pod", class)
	tc.WaitPodRunning(ns, "my-app-pod")
	s, err := trace.Collect(context.Background(), src, target)
	if err != nil {
		t.Fatal(err)
	}
	running = trace.Build(s)
	testutil.EventuallyWithin(t, clustertest.Timeout, "trace --watch sees the pod running", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		live = latest
		for _, st := range live.Steps {
			if strings.HasPrefix(st.What, "PATCH pod status: Running") {
				return true, nil
			}
		}
		return false, nil
	})
	pvc, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Get(context.Background(), "my-app-pvc", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tc.deletePodAndWait(ns, "my-app-pod")
	if err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Delete(context.Background(), "my-app-pvc", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "volume "+pvc.Spec.VolumeName+" Released", func() (bool, error) {
		pv, err := tc.Client.CoreV1().PersistentVolumes().Get(context.Background(), pvc.Spec.VolumeName, metav1.GetOptions{})
		return err == nil && pv.Status.Phase == corev1.VolumeReleased, nil
	})
	testutil.EventuallyWithin(t, clustertest.Timeout, "trace --watch sees the volume Released", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range latest.Transitions {
			if r.After == "Released" {
				return true, nil
			}
		}
		return false, nil
	})
	stop()
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Logf("streamed:\n%s", streamed.String())
	return trace.Build(r.s), live, running
}

// assertKeyTransitions checks that tr lists every key state transition, in order, each
// with a duration.
func assertKeyTransitions(t testing.TB, tr trace.Trace) {
	t.Helper()
	i := 0
	for _, row := range tr.Transitions {
		if i < len(keyStateTransitions) {
			want := keyStateTransitions[i]
			if strings.HasPrefix(row.Object, want[0]+" ") && row.Before == want[1] && row.Event == want[2] && row.After == want[3] {
				if row.Took <= 0 {
					t.Errorf("transition %v has no duration", want)
				}
				i++
			}
		}
	}
	if i < len(keyStateTransitions) {
		t.Errorf("trace lists the key state transitions up to %v only; it has %+v", keyStateTransitions[i], tr.Transitions)
	}
}

// assertStepsInOrder checks that tr's steps hold each of whats (a substring of
// From→To: What), in that order.
func assertStepsInOrder(t testing.TB, tr trace.Trace, whats ...string) {
	t.Helper()
	i := 0
	for _, s := range tr.Steps {
		if i < len(whats) && strings.Contains(s.From+"→"+s.To+": "+s.What, whats[i]) {
			i++
		}
	}
	if i < len(whats) {
		var b bytes.Buffer
		_ = trace.WriteText(&b, tr)
		t.Errorf("trace steps lack %q (in order after %q):\n%s", whats[i], whats[:i], b.String())
	}
}

// TestTrace: `kubelab trace --watch` of examples/seed's pod on a hollow cluster, from before
// `kubectl apply` until the claim is deleted, lists the flow's steps in causal order and
// every key state transition with its duration; a trace of the running pod names no
// stuck stage.
func TestTrace(t *testing.T) {
	tc := startCluster(t, nil)
	ns := tc.Namespace("trace")
	watched, live, running := tc.traceExampleFlow(ns)
	if running.Diagnosis.Stage != trace.StageNone {
		t.Errorf("running pod diagnosed stuck: %+v", running.Diagnosis)
	}
	flow := []string{
		"kubectl→API server: POST PersistentVolumeClaim my-app-pvc",
		"kubectl→API server: POST Pod my-app-pod",
		"scheduler→scheduler: select node",
		"csi-provisioner→ebs-plugin (controller): CreateVolume",
		"ebs-plugin (controller)→EC2: CreateVolume",
		"csi-provisioner→API server: CREATE PersistentVolume",
		"PV controller→API server: bind claim my-app-pvc",
		"attach/detach→API server: CREATE VolumeAttachment",
		"csi-attacher→ebs-plugin (controller): ControllerPublishVolume",
		"ebs-plugin (controller)→EC2: AttachVolume",
		"csi-attacher→API server: PATCH VolumeAttachment status.attached=true",
		"kubelet→ebs-plugin (node): NodeStageVolume",
		"kubelet→ebs-plugin (node): NodePublishVolume",
		"kubelet→API server: PATCH pod status: Running",
	}
	assertStepsInOrder(t, running, flow...)
	assertStepsInOrder(t, live, flow...)
	assertStepsInOrder(t, watched, append(flow, "kubectl→API server: DELETE Pod", "kubectl→API server: DELETE PersistentVolumeClaim")...)
	assertKeyTransitions(t, watched)
	var b bytes.Buffer
	if err := trace.WriteText(&b, watched); err != nil {
		t.Fatal(err)
	}
	t.Logf("trace:\n%s", b.String())
}

// expectWhy waits until `kubelab why pod/NAME` names stage, with text in its reason or
// evidence.
func (tc *testCluster) expectWhy(ns, pod, stage, text string) trace.Diagnosis {
	tc.T.Helper()
	var d trace.Diagnosis
	testutil.EventuallyWithin(tc.T, 2*time.Minute, fmt.Sprintf("why pod/%s: %s (%q)", pod, stage, text), func() (bool, error) {
		s, err := trace.Collect(context.Background(), trace.Sources{Client: tc.Client, EC2: tc.EC2},
			trace.Target{Kind: "pod", Namespace: ns, Name: pod})
		if err != nil {
			return false, err
		}
		d = trace.Diagnose(s)
		if d.Stage == stage && strings.Contains(d.Reason+"\n"+d.Evidence, text) {
			return true, nil
		}
		return false, fmt.Errorf("diagnosis %+v", d)
	})
	return d
}

// TestWhy: failures made on purpose on a hollow cluster of two nodes in one zone are named
// by `kubelab why` at their stage: the cloud refusing CreateVolume (with its error code), a
// claim bound to a volume in a zone without nodes, a Deployment whose pods admission
// refuses, a volume attached to the other node (multi-attach), a pod on a node whose
// podCIDR (a /29: five pod addresses) is full, and a deleted pod held by a finalizer.
func TestWhy(t *testing.T) {
	tc := startCluster(t, func(c *cluster.Config) { c.NodeCIDRMaskSize, c.Nodes, c.Zones = 29, 2, []string{"us-east-1a"} })
	ctx := context.Background()
	ns := tc.Namespace("why")

	fault, err := tc.Cloud().InjectFault(cloud.Fault{Action: "CreateVolume", Mode: "fail", Code: "InsufficientVolumeCapacity",
		Message: "There is not enough capacity to fulfill your EBS volume provision request."})
	if err != nil {
		t.Fatal(err)
	}
	tc.seedPair(ns, "no-capacity", "no-capacity", "gp2")
	d := tc.expectWhy(ns, "no-capacity", trace.StageProvisioning, "InsufficientVolumeCapacity")
	if !strings.Contains(d.Command, "kubectl describe pvc no-capacity -n "+ns) {
		t.Errorf("provisioning diagnosis command %q does not describe the claim", d.Command)
	}
	// Gone before the fault is: it takes no pod address later.
	tc.deletePodAndWait(ns, "no-capacity")
	tc.Cloud().ClearFaults(fault)

	// A volume in us-east-1d, where no node is.
	mode := corev1.PersistentVolumeFilesystem
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "why-zone-d"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeMode: &mode,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: cluster.DriverName, VolumeHandle: "vol-0123456789abcdef0"}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"us-east-1d"}}},
			}}}},
		},
	}
	if _, err := tc.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claim := clustertest.SeedObject[*corev1.PersistentVolumeClaim](t, "10-pvc.yaml")
	claim.Name, claim.Namespace, claim.Spec.StorageClassName, claim.Spec.VolumeName = "zone-d", ns, ptr.To(""), pv.Name
	if _, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	zoned := clustertest.SeedObject[*corev1.Pod](t, "20-pod.yaml")
	zoned.Name, zoned.Namespace = "zone-d", ns
	zoned.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = "zone-d"
	if _, err := tc.Client.CoreV1().Pods(ns).Create(ctx, zoned, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tc.expectWhy(ns, "zone-d", trace.StageScheduling, "us-east-1d")

	// Admission refuses the Deployment's pods: their PriorityClass does not exist.
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "refused", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "refused"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "refused"}},
				Spec: corev1.PodSpec{PriorityClassName: "no-such-class",
					Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
			},
		},
	}
	if _, err := tc.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// A claim's volume attached to one node, wanted by a pod on the other.
	nodes := tc.Nodes()
	shared := clustertest.SeedObject[*corev1.PersistentVolumeClaim](t, "10-pvc.yaml")
	shared.Name, shared.Namespace = "shared", ns
	if _, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, shared, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, node := range []string{nodes[1].Name, nodes[0].Name} {
		p := clustertest.SeedObject[*corev1.Pod](t, "20-pod.yaml")
		p.Name, p.Namespace = fmt.Sprintf("ma-%d", i), ns
		p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = "shared"
		p.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
		if _, err := tc.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			tc.WaitPodRunning(ns, p.Name)
		}
	}
	tc.expectWhy(ns, "ma-1", trace.StageAttach, "Multi-Attach")
	tc.deletePodAndWait(ns, "ma-1") // its address on the first node goes with it

	// A deleted pod held by a finalizer.
	held := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "held", Namespace: ns, Finalizers: []string{"kubelab.dev/test-hold"}},
		Spec: corev1.PodSpec{NodeName: nodes[1].Name, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
	if _, err := tc.Client.CoreV1().Pods(ns).Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tc.WaitPodRunning(ns, "held")
	if err := tc.Client.CoreV1().Pods(ns).Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tc.expectWhy(ns, "held", trace.StageTerminating, "kubelab.dev/test-hold")

	// Six pods on a node with five pod addresses.
	node := nodes[0].Name
	for i := range 6 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cidr-%d", i), Namespace: ns},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}}}
		if _, err := tc.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if i < 5 {
			tc.WaitPodRunning(ns, p.Name)
		}
	}
	tc.expectWhy(ns, "cidr-5", trace.StageNetwork, "podCIDR")

	var got trace.Diagnosis
	testutil.EventuallyWithin(t, clustertest.Timeout, "why deployment/refused: admission", func() (bool, error) {
		s, err := trace.Collect(ctx, trace.Sources{Client: tc.Client}, trace.Target{Kind: "Deployment", Namespace: ns, Name: "refused"})
		if err != nil {
			return false, err
		}
		got = trace.Diagnose(s)
		return got.Stage == trace.StageAdmission && strings.Contains(got.Reason, "no-such-class"), fmt.Errorf("diagnosis %+v", got)
	})
}

// assertRealTrace runs examples/seed's flow again on the real nodes under `kubelab trace
// --watch`, with a Retain class: the trace of the running pod shows every step in causal
// order, the node plugin's NodeStageVolume and NodePublishVolume with their durations;
// the watched trace lists every key state transition with its duration; the running
// pod's trace drawn as SVG renders in a real browser. With KUBELAB_WRITE_DOCS=1 that
// picture becomes docs/trace-example.svg.
func (tc *testCluster) assertRealTrace() {
	t := tc.T
	t.Helper()
	ns := tc.Namespace("real-trace")
	watched, live, running := tc.traceExampleFlow(ns)
	realFlow := []string{
		"kubectl→API server: POST PersistentVolumeClaim my-app-pvc",
		"scheduler→scheduler: select node",
		"csi-provisioner→ebs-plugin (controller): CreateVolume",
		"ebs-plugin (controller)→EC2: CreateVolume",
		"attach/detach→API server: CREATE VolumeAttachment",
		"csi-attacher→ebs-plugin (controller): ControllerPublishVolume",
		"ebs-plugin (controller)→EC2: AttachVolume",
		"kubelet→ebs-plugin (node): NodeStageVolume",
		"kubelet→ebs-plugin (node): NodePublishVolume",
		"kubelet→API server: PATCH pod status: Running"}
	assertStepsInOrder(t, running, realFlow...)
	assertStepsInOrder(t, live, realFlow...)
	for _, s := range running.Steps {
		if strings.HasPrefix(s.What, "Node") && s.Took <= 0 {
			t.Errorf("step %s has no duration", s.What)
		}
	}
	assertKeyTransitions(t, watched)
	if running.Diagnosis.Stage != trace.StageNone {
		t.Errorf("running pod diagnosed stuck: %+v", running.Diagnosis)
	}
	svg := filepath.Join(t.TempDir(), "trace.svg")
	var b bytes.Buffer
	if err := trace.WriteSVG(&b, live); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(svg, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	tracetest.AssertRendersInBrowser(t, svg)
	if os.Getenv("KUBELAB_WRITE_DOCS") == "1" {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "trace-example.svg"), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		var txt bytes.Buffer
		_ = trace.WriteText(&txt, watched)
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "trace-example.txt"), txt.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

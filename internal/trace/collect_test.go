package trace

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The fixtures: pod shop/my-app-pod on node n1, made by ReplicaSet my-app-x of
// Deployment my-app, uses claim my-app-pvc, bound to PV pvc-1 (EBS volume vol-1) of class
// gp2 and attached by va-1. The EBS CSI driver's pods run in kube-system.

const (
	colNS     = "shop"
	colPod    = "my-app-pod"
	colClaim  = "my-app-pvc"
	colPV     = "pvc-1"
	colVolume = "vol-1"
	colNode   = "n1"
	colRS     = "my-app-x"
	colDeploy = "my-app"
)

var colT0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func colAt(sec int) metav1.Time { return metav1.NewTime(colT0.Add(time.Duration(sec) * time.Second)) }

func colController(kind, name string) []metav1.OwnerReference {
	yes := true
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID("u-" + name), Controller: &yes}}
}

// colPodUsing is a pod on n1 made at second sec that mounts claims.
func colPodUsing(name string, sec int, claims ...string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: colNS, Name: name, CreationTimestamp: colAt(sec)},
		Spec:       corev1.PodSpec{NodeName: colNode, Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending},
	}
	for _, c := range claims {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: c, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	return p
}

// colOwnedPod is a pod of ReplicaSet rs.
func colOwnedPod(name, rs string, sec int, claims ...string) *corev1.Pod {
	p := colPodUsing(name, sec, claims...)
	p.OwnerReferences = colController("ReplicaSet", rs)
	return p
}

// colReady makes the pod Running and Ready.
func colReady(p *corev1.Pod) *corev1.Pod {
	p.Status.Phase = corev1.PodRunning
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: colAt(30)}}
	return p
}

func colReplicaSet(name, deployment string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: colNS, Name: name,
		OwnerReferences: colController("Deployment", deployment)}}
}

func colDeployment(name string) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: colNS, Name: name}}
}

func colClaimOf(name, pv string) *corev1.PersistentVolumeClaim {
	class := "gp2"
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: colNS, Name: name},
		Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: &class, VolumeName: pv},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
}

func colVolumeOf(name, claim, handle string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: handle}},
			ClaimRef:               &corev1.ObjectReference{Namespace: colNS, Name: claim},
			StorageClassName:       "gp2",
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
}

func colClass(name string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "ebs.csi.aws.com"}
}

func colAttachment(name, pv, node string) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
		Status: storagev1.VolumeAttachmentStatus{Attached: true},
	}
}

func colNodeNamed(name string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelTopologyZone: "us-east-1a"}}}
}

// colEvent is an Event stored in ns about kind/name (about a namespaced object in ns,
// about a cluster-scoped one when ns is default).
func colEvent(ns, kind, name, reason string) *corev1.Event {
	objNS := ns
	if kind == "PersistentVolume" || kind == "Node" || kind == "VolumeAttachment" {
		objNS = ""
	}
	return &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: ns, Name: strings.ToLower(kind + "." + name + "." + reason), CreationTimestamp: colAt(1)},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: objNS, Name: name},
		Reason:         reason,
		Message:        reason + " " + name,
		FirstTimestamp: colAt(1), LastTimestamp: colAt(1), Count: 1,
	}
}

// colAddonPod is a pod of the EBS CSI driver in kube-system, labelled app.
func colAddonPod(name, app, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: name, Labels: map[string]string{"app": app}},
		Spec:       corev1.PodSpec{NodeName: node},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// colCluster is the whole flow's objects, with objects of another flow beside them.
func colCluster() []runtime.Object {
	return []runtime.Object{
		colOwnedPod(colPod, colRS, 0, colClaim),
		colReplicaSet(colRS, colDeploy),
		colDeployment(colDeploy),
		colClaimOf(colClaim, colPV),
		colVolumeOf(colPV, colClaim, colVolume),
		colClass("gp2"),
		colClass("io2"),
		colAttachment("va-1", colPV, colNode),
		colNodeNamed(colNode),
		colNodeNamed("n2"),
		colAddonPod("ebs-csi-controller-x", "ebs-csi-controller", "n2"),
		colAddonPod("ebs-csi-node-y", "ebs-csi-node", colNode),
		// Another flow: its pod, claim, volume and attachment.
		colPodUsing("other-pod", 0, "other-pvc"),
		colClaimOf("other-pvc", "pvc-2"),
		colVolumeOf("pvc-2", "other-pvc", "vol-2"),
		colAttachment("va-2", "pvc-2", "n2"),
	}
}

// colEvents are Events about the traced objects and, suffixed "-unrelated", others.
func colEvents() []runtime.Object {
	return []runtime.Object{
		colEvent(colNS, "Pod", colPod, "Scheduled"),
		colEvent(colNS, "PersistentVolumeClaim", colClaim, "ProvisioningSucceeded"),
		colEvent(metav1.NamespaceDefault, "PersistentVolume", colPV, "VolumeReady"),
		colEvent(metav1.NamespaceDefault, "VolumeAttachment", "va-1", "Attached"),
		colEvent(metav1.NamespaceDefault, "Node", colNode, "NodeReady"),
		colEvent(colNS, "ReplicaSet", colRS, "SuccessfulCreate"),
		colEvent(colNS, "Deployment", colDeploy, "ScalingReplicaSet"),
		colEvent(colNS, "Pod", "other-pod", "Scheduled-unrelated"),
		colEvent(colNS, "PersistentVolumeClaim", "other-pvc", "ProvisioningSucceeded-unrelated"),
		colEvent(metav1.NamespaceDefault, "PersistentVolume", "pvc-2", "VolumeReady-unrelated"),
		colEvent(metav1.NamespaceDefault, "Node", "n2", "NodeReady-unrelated"),
		colEvent(metav1.NamespaceSystem, "Pod", colPod, "Scheduled-unrelated"),
	}
}

func colCollect(t *testing.T, client *fake.Clientset, target Target) *Snapshot {
	t.Helper()
	s, err := Collect(context.Background(), Sources{Client: client, Now: func() time.Time { return colT0.Add(time.Hour) }}, target)
	if err != nil {
		t.Fatalf("Collect(%+v): %v", target, err)
	}
	return s
}

func colTarget(t *testing.T, arg string) Target {
	t.Helper()
	target, err := ParseTarget(arg, colNS)
	if err != nil {
		t.Fatal(err)
	}
	return target
}

func colNames[T metav1.Object](objs []T) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetName())
	}
	return out
}

// colEventKeys are the Events as "namespace kind/name reason", sorted.
func colEventKeys(events []corev1.Event) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		out = append(out, e.Namespace+" "+e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name+" "+e.Reason)
	}
	slices.Sort(out)
	return out
}

func colSame(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s = %q, want %q", what, got, want)
	}
}

func TestCollectPod(t *testing.T) {
	client := fake.NewClientset(append(colCluster(), colEvents()...)...)
	s := colCollect(t, client, colTarget(t, "pod/"+colPod))
	if s.Pod == nil || s.Pod.Name != colPod || s.Namespace != colNS || s.Name != colPod {
		t.Fatalf("Pod, Namespace, Name = %v, %q, %q; want %s/%s", s.Pod, s.Namespace, s.Name, colNS, colPod)
	}
	if !s.Now.Equal(colT0.Add(time.Hour)) {
		t.Errorf("Now = %s, want the injected clock's", s.Now)
	}
	colSame(t, "Claims", colNames(s.Claims), []string{colClaim})
	colSame(t, "MissingClaims", s.MissingClaims, nil)
	colSame(t, "Volumes", colNames(s.Volumes), []string{colPV})
	colSame(t, "Classes", colNames(s.Classes), []string{"gp2"})
	colSame(t, "Attachments", colNames(s.Attachments), []string{"va-1"})
	if s.Node == nil || s.Node.Name != colNode || len(s.Nodes) != 2 {
		t.Errorf("Node, Nodes = %v, %d; want n1 of 2", s.Node, len(s.Nodes))
	}
	colSame(t, "Owners", s.Owners, []string{"ReplicaSet/" + colRS, "Deployment/" + colDeploy})
	colSame(t, "Events", colEventKeys(s.Events), []string{
		"default Node/n1 NodeReady",
		"default PersistentVolume/pvc-1 VolumeReady",
		"default VolumeAttachment/va-1 Attached",
		"shop Deployment/my-app ScalingReplicaSet",
		"shop PersistentVolumeClaim/my-app-pvc ProvisioningSucceeded",
		"shop Pod/my-app-pod Scheduled",
		"shop ReplicaSet/my-app-x SuccessfulCreate",
	})
}

// TestCollectMissingClaim: a claim the pod names that does not exist is listed, and its
// Events (they outlive it) are kept.
func TestCollectMissingClaim(t *testing.T) {
	objs := append(colCluster(), colEvent(colNS, "PersistentVolumeClaim", "gone-pvc", "ProvisioningFailed"))
	objs[0] = colOwnedPod(colPod, colRS, 0, colClaim, "gone-pvc")
	s := colCollect(t, fake.NewClientset(objs...), colTarget(t, "pod/"+colPod))
	colSame(t, "Claims", colNames(s.Claims), []string{colClaim})
	colSame(t, "MissingClaims", s.MissingClaims, []string{"gone-pvc"})
	colSame(t, "Events", colEventKeys(s.Events), []string{"shop PersistentVolumeClaim/gone-pvc ProvisioningFailed"})
}

// TestCollectPodGone: a pod that does not exist is no error; the claims the target knows
// it used are read.
func TestCollectPodGone(t *testing.T) {
	target := colTarget(t, "pod/gone-pod")
	target.Claims = []string{colClaim}
	s := colCollect(t, fake.NewClientset(colCluster()...), target)
	if s.Pod != nil || s.Name != "gone-pod" || s.Node != nil {
		t.Errorf("Pod, Name, Node = %v, %q, %v; want nil, gone-pod, nil", s.Pod, s.Name, s.Node)
	}
	colSame(t, "Claims", colNames(s.Claims), []string{colClaim})
	colSame(t, "Volumes", colNames(s.Volumes), []string{colPV})
	colSame(t, "Owners", s.Owners, nil)
}

// TestCollectClaim: a claim is traced through the newest pod that uses it.
func TestCollectClaim(t *testing.T) {
	objs := append(colCluster(),
		colPodUsing("old-pod", -60, colClaim),
		colPodUsing("newest-pod-of-another-claim", 120, "other-pvc"),
		colPodUsing("new-pod", 60, colClaim),
	)
	s := colCollect(t, fake.NewClientset(objs...), colTarget(t, "pvc/"+colClaim))
	if s.Pod == nil || s.Pod.Name != "new-pod" || s.Name != "new-pod" {
		t.Fatalf("Pod, Name = %v, %q; want new-pod", s.Pod, s.Name)
	}
	colSame(t, "Claims", colNames(s.Claims), []string{colClaim})
	colSame(t, "Attachments", colNames(s.Attachments), []string{"va-1"})
}

func TestCollectClaimWithoutPod(t *testing.T) {
	objs := []runtime.Object{colClaimOf(colClaim, colPV), colVolumeOf(colPV, colClaim, colVolume), colClass("gp2"),
		colEvent(colNS, "PersistentVolumeClaim", colClaim, "ProvisioningSucceeded")}
	s := colCollect(t, fake.NewClientset(objs...), colTarget(t, "persistentvolumeclaim/"+colClaim))
	if s.Pod != nil || s.Name != "" {
		t.Errorf("Pod, Name = %v, %q; want none", s.Pod, s.Name)
	}
	colSame(t, "Claims", colNames(s.Claims), []string{colClaim})
	colSame(t, "Volumes", colNames(s.Volumes), []string{colPV})
	colSame(t, "Events", colEventKeys(s.Events), []string{"shop PersistentVolumeClaim/my-app-pvc ProvisioningSucceeded"})
}

// TestCollectDeploymentWithoutPods: a Deployment whose pods the API server refuses has
// its ReplicaSets' Events, which say why.
func TestCollectDeploymentWithoutPods(t *testing.T) {
	refused := colEvent(colNS, "ReplicaSet", colRS, "FailedCreate")
	refused.Message = `pods "my-app-x-abcde" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=4, limited: pods=4`
	objs := []runtime.Object{
		colDeployment(colDeploy),
		colReplicaSet(colRS, colDeploy),
		colReplicaSet("my-app-y", colDeploy),
		colReplicaSet("other-z", "other"),
		refused,
		colEvent(colNS, "ReplicaSet", "other-z", "FailedCreate-unrelated"),
		colEvent(colNS, "Deployment", colDeploy, "ScalingReplicaSet"),
		colNodeNamed(colNode),
	}
	s := colCollect(t, fake.NewClientset(objs...), colTarget(t, "deploy/"+colDeploy))
	if s.Pod != nil || s.Name != "" {
		t.Errorf("Pod, Name = %v, %q; want none", s.Pod, s.Name)
	}
	if len(s.Owners) == 0 || s.Owners[0] != "Deployment/"+colDeploy {
		t.Fatalf("Owners = %q, want Deployment/my-app first", s.Owners)
	}
	sets := slices.Sorted(slices.Values(s.Owners[1:]))
	colSame(t, "Owners' ReplicaSets", sets, []string{"ReplicaSet/my-app-x", "ReplicaSet/my-app-y"})
	colSame(t, "Events", colEventKeys(s.Events), []string{
		"shop Deployment/my-app ScalingReplicaSet",
		"shop ReplicaSet/my-app-x FailedCreate",
	})
	if d := Diagnose(s); d.Stage != StageAdmission || !strings.Contains(d.Reason, "exceeded quota") {
		t.Errorf("Diagnose = %+v, want admission with the quota message", d)
	}
}

// TestCollectDeploymentPicksStuckPod: of a Deployment's pods, the newest that is not
// Ready is the one to trace.
func TestCollectDeploymentPicksStuckPod(t *testing.T) {
	objs := append(colCluster(),
		colOwnedPod("stuck-old", colRS, 10, colClaim),
		colOwnedPod("stuck-new", colRS, 20, colClaim),
		colReady(colOwnedPod("ready-newest", colRS, 30, colClaim)),
		colOwnedPod("another-deployments", "other-z", 40),
		colReplicaSet("other-z", "other"),
	)
	objs[0] = colReady(colOwnedPod(colPod, colRS, 0, colClaim))
	s := colCollect(t, fake.NewClientset(objs...), colTarget(t, "deployment/"+colDeploy))
	if s.Pod == nil || s.Pod.Name != "stuck-new" || s.Name != "stuck-new" {
		t.Fatalf("Pod, Name = %v, %q; want stuck-new", s.Pod, s.Name)
	}
	colSame(t, "Owners", s.Owners, []string{"Deployment/" + colDeploy, "ReplicaSet/" + colRS})
	colSame(t, "Claims", colNames(s.Claims), []string{colClaim})
}

// TestCollectDeploymentIgnoresPodOfItsName: a pod named like the Deployment, not made by
// it, is not the Deployment's.
func TestCollectDeploymentIgnoresPodOfItsName(t *testing.T) {
	objs := []runtime.Object{colDeployment(colDeploy), colReplicaSet(colRS, colDeploy), colPodUsing(colDeploy, 0)}
	s := colCollect(t, fake.NewClientset(objs...), colTarget(t, "deploy/"+colDeploy))
	if s.Pod != nil {
		t.Errorf("Pod = %s, want none: the Deployment has no pod", s.Pod.Name)
	}
}

// TestCollectEventsOfTheNamespace: an Event in default about a pod of the same name in
// default is not about the traced pod in shop.
func TestCollectEventsOfTheNamespace(t *testing.T) {
	objs := append(colCluster(), colEvent(metav1.NamespaceDefault, "Pod", colPod, "Scheduled-unrelated"))
	s := colCollect(t, fake.NewClientset(objs...), colTarget(t, "pod/"+colPod))
	colSame(t, "Events", colEventKeys(s.Events), []string{})
}

// colLogActions are the containers whose logs were read, sorted.
func colLogActions(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "pods" && a.GetSubresource() == "log" {
			opts, _ := a.(k8stesting.GenericAction).GetValue().(*corev1.PodLogOptions)
			if opts != nil && opts.Timestamps {
				out = append(out, a.GetNamespace()+" "+opts.Container)
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestCollectFakeLogs: the fake client's logs have no timestamps: the driver's containers
// are read, and no line is kept.
func TestCollectFakeLogs(t *testing.T) {
	client := fake.NewClientset(colCluster()...)
	s := colCollect(t, client, colTarget(t, "pod/"+colPod))
	if len(s.Logs) != 0 {
		t.Errorf("Logs = %+v, want none", s.Logs)
	}
	colSame(t, "logs read", colLogActions(client), []string{"kube-system csi-attacher", "kube-system ebs-plugin", "kube-system ebs-plugin"})
}

// TestCollectLogs: the lines of the driver's logs that name the traced volume are kept,
// with the pod and container they come from.
func TestCollectLogs(t *testing.T) {
	client := fake.NewClientset(colCluster()...)
	client.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "log" {
			return false, nil, nil
		}
		raw := "2025-03-01T12:00:03.5Z msg=\"CreateVolume: done\" volume=vol-1 duration=1.2s\n" +
			"2025-03-01T12:00:04Z msg=\"CreateVolume: done\" volume=vol-2 duration=1s\n"
		return true, &runtime.Unknown{Raw: []byte(raw)}, nil
	})
	s := colCollect(t, client, colTarget(t, "pod/"+colPod))
	var got []string
	for _, l := range s.Logs {
		if !l.Time.Equal(colT0.Add(3500*time.Millisecond)) || !strings.Contains(l.Text, colVolume) {
			t.Errorf("line %+v, want vol-1's at 12:00:03.5", l)
		}
		got = append(got, l.Pod+"/"+l.Container)
	}
	slices.Sort(got)
	colSame(t, "Logs", got, []string{"ebs-csi-controller-x/csi-attacher", "ebs-csi-controller-x/ebs-plugin", "ebs-csi-node-y/ebs-plugin"})
}

// TestCollectNoVolumeNoLogs: without a CSI volume there is nothing to look for in the
// driver's logs: they are not read.
func TestCollectNoVolumeNoLogs(t *testing.T) {
	objs := []runtime.Object{colPodUsing(colPod, 0), colNodeNamed(colNode),
		colAddonPod("ebs-csi-controller-x", "ebs-csi-controller", "n2")}
	client := fake.NewClientset(objs...)
	colCollect(t, client, colTarget(t, "pod/"+colPod))
	colSame(t, "logs read", colLogActions(client), nil)
}

func TestLogLines(t *testing.T) {
	raw := strings.Join([]string{
		`2025-03-01T12:00:03.123456789Z level=INFO msg="CreateVolume: done" volume=vol-1 duration=12ms`,
		`2025-03-01T12:00:03.2Z level=INFO msg="ControllerPublishVolume: called" volume=vol-2 node=i-1`,
		`2025-03-01T12:00:04Z level=INFO msg="NodeStageVolume: called" volume=vol-3 node=i-1`,
		`2025-03-01 12:00:05 msg="NodeStageVolume: done" volume=vol-1`, // not RFC 3339
		`volume=vol-1`, // no timestamp
		``,
		`2025-03-01T12:00:06.5+02:00 msg="NodePublishVolume: done" volume=vol-1 duration=3ms`,
	}, "\n") + "\n"
	got := logLines("ebs-csi-node-y", "ebs-plugin", []byte(raw), namesAny([]string{"vol-1", "vol-3"}))
	want := []LogLine{
		{Pod: "ebs-csi-node-y", Container: "ebs-plugin", Time: time.Date(2025, 3, 1, 12, 0, 3, 123456789, time.UTC),
			Text: `level=INFO msg="CreateVolume: done" volume=vol-1 duration=12ms`},
		{Pod: "ebs-csi-node-y", Container: "ebs-plugin", Time: time.Date(2025, 3, 1, 12, 0, 4, 0, time.UTC),
			Text: `level=INFO msg="NodeStageVolume: called" volume=vol-3 node=i-1`},
		{Pod: "ebs-csi-node-y", Container: "ebs-plugin", Time: time.Date(2025, 3, 1, 10, 0, 6, 500_000_000, time.UTC),
			Text: `msg="NodePublishVolume: done" volume=vol-1 duration=3ms`},
	}
	if len(got) != len(want) {
		t.Fatalf("logLines = %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Pod != w.Pod || g.Container != w.Container || g.Text != w.Text || !g.Time.Equal(w.Time) {
			t.Errorf("line %d = %+v, want %+v", i, g, w)
		}
	}
	if none := logLines("p", "c", []byte(raw), namesAny(nil)); len(none) != 0 {
		t.Errorf("logLines without ids = %+v, want none", none)
	}
}

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		arg, kind, name string
	}{
		{"pod/x", "pod", "x"},
		{"pods/x", "pod", "x"},
		{"po/x", "pod", "x"},
		{"pvc/x", "pvc", "x"},
		{"persistentvolumeclaim/x", "pvc", "x"},
		{"deploy/x", "Deployment", "x"},
		{"Deployment/x", "Deployment", "x"},
		{"rs/x", "ReplicaSet", "x"},
		{"sts/x", "StatefulSet", "x"},
		{"ds/x", "DaemonSet", "x"},
		{"job/x", "Job", "x"},
		{"svc/x", "Service", "x"},
		{"ingress/x", "Ingress", "x"},
	} {
		got, err := ParseTarget(tc.arg, colNS)
		if err != nil || got.Kind != tc.kind || got.Name != tc.name || got.Namespace != colNS || got.Claims != nil {
			t.Errorf("ParseTarget(%q) = %+v, %v; want %s %s/%s", tc.arg, got, err, tc.kind, colNS, tc.name)
		}
	}
	for _, tc := range []struct {
		arg  string
		says []string // what the error names
	}{
		{"cm/x", []string{`"cm"`, "pod", "pvc", "svc"}},
		{"x", []string{`"x"`, "KIND/NAME"}},
		{"pod/", []string{`"pod/"`, "KIND/NAME"}},
	} {
		_, err := ParseTarget(tc.arg, colNS)
		if err == nil {
			t.Errorf("ParseTarget(%q): no error", tc.arg)
			continue
		}
		for _, s := range tc.says {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("ParseTarget(%q) error %q does not say %s", tc.arg, err, s)
			}
		}
	}
}

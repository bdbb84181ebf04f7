package trace

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/csi/calllog"
	"github.com/kubelab/kubelab/internal/util/logging"
)

// The fixtures: pod default/my-app-pod uses claim my-app-pvc (class gp2,
// WaitForFirstConsumer), provisioned as PV pvc-1 (EBS volume vol-1), attached to node n1
// (instance i-1 in us-east-1a) by VolumeAttachment va-1. Times are milliseconds after
// bldT0.

const (
	bldNS       = "default"
	bldPodName  = "my-app-pod"
	bldClaimNm  = "my-app-pvc"
	bldPVName   = "pvc-1"
	bldVolume   = "vol-1"
	bldVAName   = "va-1"
	bldNodeName = "n1"
	bldZone     = "us-east-1a"
	bldInstance = "i-1"
	bldCtrlPod  = "ebs-csi-controller-x"
	bldNodePod  = "ebs-csi-node-y"
	bldCSITook  = 12 * time.Millisecond
)

var bldT0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func bldAt(ms int) time.Time { return bldT0.Add(time.Duration(ms) * time.Millisecond) }

func bldMeta(ms int) metav1.Time { return metav1.NewTime(bldAt(ms)) }

// bldTimes are the moments of the flow, in ms after bldT0.
type bldTimes struct {
	claimCreated, waitForConsumer, podCreated, scheduled, provisioning int
	createVolume, ec2Created, pvCreated, provisioned, claimBound       int
	vaCreated, publish, ec2Attached, vaAttached, stage, nodePublish    int
	pulled, created, started, ready                                    int
}

// bldInOrder are the moments of a flow whose clocks agree: each step after the one it
// depends on.
func bldInOrder() bldTimes {
	return bldTimes{
		claimCreated: 0, waitForConsumer: 10, podCreated: 2000, scheduled: 2100, provisioning: 2200,
		createVolume: 2300, ec2Created: 2400, pvCreated: 3500, provisioned: 3500, claimBound: 4000,
		vaCreated: 5000, publish: 5100, ec2Attached: 5200, vaAttached: 6000, stage: 7000, nodePublish: 8000,
		pulled: 9000, created: 9100, started: 9200, ready: 10000,
	}
}

// bldShuffled are moments out of causal order, as clocks of different machines and
// timestamps kept to the second give: many later steps have earlier times. The kubelet's
// container Events keep their own order.
func bldShuffled() bldTimes {
	return bldTimes{
		claimCreated: 5000, waitForConsumer: 5000, podCreated: 2000, scheduled: 1000, provisioning: 9000,
		createVolume: 3000, ec2Created: 500, pvCreated: 8000, provisioned: 8000, claimBound: 4000,
		vaCreated: 100, publish: 7000, ec2Attached: 6000, vaAttached: 200, stage: 12000, nodePublish: 11000,
		pulled: 300, created: 400, started: 600, ready: 150,
	}
}

func bldClass() *storagev1.StorageClass {
	mode := storagev1.VolumeBindingWaitForFirstConsumer
	return &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: "gp2"},
		Provisioner:       "ebs.csi.aws.com",
		VolumeBindingMode: &mode,
	}
}

// bldClaim is the claim, Bound to pvc-1 (bound false: Pending, no volume yet).
func bldClaim(t bldTimes, bound bool) *corev1.PersistentVolumeClaim {
	class := "gp2"
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: bldNS, Name: bldClaimNm, UID: "u-pvc", CreationTimestamp: bldMeta(t.claimCreated)},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &class,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending},
	}
	if bound {
		c.Annotations = map[string]string{diagAnnSelectedNode: bldNodeName}
		c.Spec.VolumeName = bldPVName
		c.Status.Phase = corev1.ClaimBound
		c.ManagedFields = []metav1.ManagedFieldsEntry{
			bldManaged("kubectl-client-side-apply", "", t.claimCreated),
			bldManaged("kube-scheduler", "", t.scheduled),
			bldManaged("kube-controller-manager", "status", t.claimBound-1000), // an earlier status write
			bldManaged("kube-controller-manager", "status", t.claimBound),
		}
	}
	return c
}

func bldManaged(manager, subresource string, ms int) metav1.ManagedFieldsEntry {
	at := bldMeta(ms)
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: metav1.ManagedFieldsOperationUpdate, Subresource: subresource, Time: &at}
}

// bldPod is the pod: Running and Ready on n1 (node "": Pending, not scheduled).
func bldPod(t bldTimes, node string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: bldNS, Name: bldPodName, UID: "u-pod", CreationTimestamp: bldMeta(t.podCreated)},
		Spec: corev1.PodSpec{
			NodeName:   node,
			Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: bldClaimNm}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	if node == "" {
		return p
	}
	p.Status = corev1.PodStatus{
		Phase: corev1.PodRunning,
		PodIP: "10.0.1.7",
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: bldMeta(t.scheduled)},
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: bldMeta(t.stage)},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: bldMeta(t.ready)},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: bldMeta(t.started)}}}},
	}
	return p
}

// bldStuckAtAttach makes the pod wait for its volume: Pending, no container started.
func bldStuckAtAttach(p *corev1.Pod) {
	p.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: p.Status.Conditions[:1]}
}

func bldNode() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: bldNodeName, Labels: map[string]string{corev1.LabelTopologyZone: bldZone}},
		Spec:       corev1.NodeSpec{ProviderID: "aws:///" + bldZone + "/" + bldInstance},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

func bldPV(t bldTimes) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: bldPVName, CreationTimestamp: bldMeta(t.pvCreated)},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: bldVolume}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: bldNS, Name: bldClaimNm, UID: "u-pvc"},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              "gp2",
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
}

// bldVA is the attachment of pvc-1 to n1; attachError, when not "", is why it is not
// attached.
func bldVA(t bldTimes, attached bool, attachError string) *storagev1.VolumeAttachment {
	pv := bldPVName
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: bldVAName, CreationTimestamp: bldMeta(t.vaCreated)},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: bldNodeName,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
		Status: storagev1.VolumeAttachmentStatus{Attached: attached},
	}
	if attached {
		va.ManagedFields = []metav1.ManagedFieldsEntry{
			bldManaged("kube-controller-manager", "", t.vaCreated),
			bldManaged("csi-attacher", "status", t.vaAttached),
		}
	}
	if attachError != "" {
		va.Status.AttachError = &storagev1.VolumeError{Message: attachError, Time: bldMeta(t.vaAttached)}
	}
	return va
}

func bldEvent(kind, name, reason, msg string, ms int) corev1.Event {
	return corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: bldNS, Name: fmt.Sprintf("%s.%d", name, ms), CreationTimestamp: bldMeta(ms)},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: bldNS, Name: name},
		Reason:         reason, Message: msg,
		FirstTimestamp: bldMeta(ms), LastTimestamp: bldMeta(ms), Count: 1,
	}
}

// bldClaimEvents are the PV controller's and the provisioner's Events on the claim.
func bldClaimEvents(t bldTimes) []corev1.Event {
	return []corev1.Event{
		bldEvent("PersistentVolumeClaim", bldClaimNm, "WaitForFirstConsumer", "waiting for first consumer to be created before binding", t.waitForConsumer),
		bldEvent("PersistentVolumeClaim", bldClaimNm, "Provisioning", "External provisioner is provisioning volume for claim \"default/my-app-pvc\"", t.provisioning),
		bldEvent("PersistentVolumeClaim", bldClaimNm, "ProvisioningSucceeded", "Successfully provisioned volume pvc-1", t.provisioned),
	}
}

// bldPodEvents are the scheduler's and the kubelet's Events on the pod.
func bldPodEvents(t bldTimes) []corev1.Event {
	return []corev1.Event{
		bldEvent("Pod", bldPodName, "Scheduled", "Successfully assigned default/my-app-pod to n1", t.scheduled),
		bldEvent("Pod", bldPodName, "Pulled", "Container image \"nginx:1.27\" already present on machine", t.pulled),
		bldEvent("Pod", bldPodName, "Created", "Created container: app", t.created),
		bldEvent("Pod", bldPodName, "Started", "Started container app", t.started),
	}
}

// bldCloud is vol-1 as DescribeVolumes reports it, attached to i-1 or not.
func bldCloud(t bldTimes, attached bool) CloudVolume {
	v := CloudVolume{ID: bldVolume, State: "available", Zone: bldZone, Type: "gp2", SizeGiB: 1, CreateTime: bldAt(t.ec2Created)}
	if attached {
		v.State = "in-use"
		v.Attachments = []CloudAttachment{{InstanceID: bldInstance, Device: "/dev/xvdaa", State: "attached", AttachTime: bldAt(t.ec2Attached)}}
	}
	return v
}

// bldLog is a line of pod's ebs-plugin container.
func bldLog(pod string, ms int, text string) LogLine {
	return LogLine{Pod: pod, Container: "ebs-plugin", Time: bldAt(ms), Text: text}
}

// bldCall is a CSI call's "called" line at ms and its "done" line 50ms later, which says
// the call took 12ms (the handler's time, not the gap between the two lines). The lines
// are what the driver writes (calllog's, in the commands' default format: klog's text),
// so that what trace reads is what it gets.
func bldCall(pod, method string, ms int) []LogLine {
	var buf bytes.Buffer
	log := logging.New(&buf, logging.Text, slog.LevelInfo).With("method", method)
	calllog.LogCalled(log, method, "volume", bldVolume, "node", bldInstance)
	called := strings.TrimSpace(buf.String())
	buf.Reset()
	calllog.LogDone(log, method, bldCSITook, "volume", bldVolume, "node", bldInstance)
	done := strings.TrimSpace(buf.String())
	return []LogLine{bldLog(pod, ms, called), bldLog(pod, ms+50, done)}
}

// bldLogs are the driver's lines about vol-1: the controller's CreateVolume and
// ControllerPublishVolume, the node plugin's NodeStageVolume and NodePublishVolume.
func bldLogs(t bldTimes) []LogLine {
	var out []LogLine
	out = append(out, bldCall(bldCtrlPod, "CreateVolume", t.createVolume)...)
	out = append(out, bldCall(bldCtrlPod, "ControllerPublishVolume", t.publish)...)
	out = append(out, bldCall(bldNodePod, "NodeStageVolume", t.stage)...)
	out = append(out, bldCall(bldNodePod, "NodePublishVolume", t.nodePublish)...)
	return out
}

// bldSnapshot is the whole flow, done: the pod Running and Ready.
func bldSnapshot(t bldTimes) *Snapshot {
	node := bldNode()
	return &Snapshot{
		Now:       bldAt(60_000),
		Namespace: bldNS, Name: bldPodName,
		Pod:         bldPod(t, bldNodeName),
		Claims:      []*corev1.PersistentVolumeClaim{bldClaim(t, true)},
		Volumes:     []*corev1.PersistentVolume{bldPV(t)},
		Classes:     []*storagev1.StorageClass{bldClass()},
		Attachments: []*storagev1.VolumeAttachment{bldVA(t, true, "")},
		Node:        node,
		Nodes:       []*corev1.Node{node},
		Events:      append(bldClaimEvents(t), bldPodEvents(t)...),
		Cloud:       []CloudVolume{bldCloud(t, true)},
		Logs:        bldLogs(t),
	}
}

// bldStuckSnapshot is the flow stopped at the attach: the attacher reports an error.
func bldStuckSnapshot(t bldTimes) *Snapshot {
	s := bldSnapshot(t)
	bldStuckAtAttach(s.Pod)
	s.Attachments = []*storagev1.VolumeAttachment{bldVA(t, false, "rpc error: code = Internal desc = could not attach volume \"vol-1\" to node \"i-1\": AttachVolume timed out")}
	s.Cloud = []CloudVolume{bldCloud(t, false)}
	s.Events = append(bldClaimEvents(t), bldPodEvents(t)[0]) // Scheduled only
	s.Logs = bldCall(bldCtrlPod, "CreateVolume", t.createVolume)
	return s
}

func bldArrow(from, to, what string) string { return from + "→" + to + ": " + what }

// bldArrows are the steps as "From→To: What".
func bldArrows(steps []Step) []string {
	out := make([]string, 0, len(steps))
	for _, st := range steps {
		out = append(out, bldArrow(st.From, st.To, st.What))
	}
	return out
}

func bldFind(t *testing.T, steps []Step, from, to, what string) Step {
	t.Helper()
	for _, st := range steps {
		if st.From == from && st.To == to && st.What == what {
			return st
		}
	}
	t.Fatalf("no step %s in:\n%s", bldArrow(from, to, what), strings.Join(bldArrows(steps), "\n"))
	return Step{}
}

func bldHas(steps []Step, what string) bool {
	for _, st := range steps {
		if strings.Contains(st.What, what) {
			return true
		}
	}
	return false
}

func bldWaiting(steps []Step) []Step {
	var out []Step
	for _, st := range steps {
		if st.Waiting {
			out = append(out, st)
		}
	}
	return out
}

func bldSameSteps(t *testing.T, got []Step, want []string) {
	t.Helper()
	arrows := bldArrows(got)
	if strings.Join(arrows, "\n") != strings.Join(want, "\n") {
		t.Errorf("steps:\n%s\nwant:\n%s", strings.Join(arrows, "\n"), strings.Join(want, "\n"))
	}
}

// bldFlow is the whole flow's steps, in causal order.
var bldFlow = []string{
	bldArrow(Kubectl, APIServer, "POST PersistentVolumeClaim my-app-pvc"),
	bldArrow(APIServer, Etcd, "WRITE claim (Pending)"),
	bldArrow(PVController, PVController, "WaitForFirstConsumer: wait for the pod to be scheduled"),
	bldArrow(Kubectl, APIServer, "POST Pod my-app-pod"),
	bldArrow(APIServer, Etcd, "WRITE pod"),
	bldArrow(Scheduler, Scheduler, "select node n1"),
	bldArrow(Scheduler, APIServer, "POST pods/binding"),
	bldArrow(Provisioner, CSIController, "CreateVolume"),
	bldArrow(CSIController, Cloud, "CreateVolume"),
	bldArrow(Provisioner, APIServer, "CREATE PersistentVolume pvc-1"),
	bldArrow(PVController, APIServer, "bind claim my-app-pvc to pvc-1"),
	bldArrow(ADController, APIServer, "CREATE VolumeAttachment va-1"),
	bldArrow(Attacher, CSIController, "ControllerPublishVolume"),
	bldArrow(CSIController, Cloud, "AttachVolume"),
	bldArrow(Attacher, APIServer, "PATCH VolumeAttachment status.attached=true"),
	bldArrow(Kubelet, CSINode, "NodeStageVolume"),
	bldArrow(Kubelet, CSINode, "NodePublishVolume"),
	bldArrow(Kubelet, Runtime, "Pulled"),
	bldArrow(Kubelet, Runtime, "Created"),
	bldArrow(Kubelet, Runtime, "Started"),
	bldArrow(Kubelet, APIServer, "PATCH pod status: Running, Ready"),
}

func TestBuildStepsInCausalOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		times bldTimes
		edit  func(*Snapshot)
		start int
	}{
		{"clocks agree", bldInOrder(), func(*Snapshot) {}, 0},
		{"timestamps shuffled", bldShuffled(), func(*Snapshot) {}, 100},
		{"Events listed newest first", bldInOrder(), func(s *Snapshot) { slices.Reverse(s.Events) }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := bldSnapshot(tc.times)
			tc.edit(s)
			tr := Build(s)
			bldSameSteps(t, tr.Steps, bldFlow)
			if got, want := tr.Start, bldAt(tc.start); !got.Equal(want) {
				t.Errorf("Start = %s, want the earliest step's time %s", got, want)
			}
			if tr.Pod != "default/my-app-pod" || tr.Node != bldNodeName || tr.Zone != bldZone || tr.Phase != "Running" {
				t.Errorf("Pod, Node, Zone, Phase = %q, %q, %q, %q", tr.Pod, tr.Node, tr.Zone, tr.Phase)
			}
		})
	}
}

// TestBuildStepDetails: each step says what it carried, with the time its source gives.
func TestBuildStepDetails(t *testing.T) {
	tm := bldShuffled()
	steps := Build(bldSnapshot(tm)).Steps
	for _, tc := range []struct {
		from, to, what string
		detail, source string
		at             int
	}{
		{Kubectl, APIServer, "POST PersistentVolumeClaim my-app-pvc", "class gp2, 1Gi", "creationTimestamp", tm.claimCreated},
		{PVController, PVController, "WaitForFirstConsumer: wait for the pod to be scheduled", "", "Event WaitForFirstConsumer", tm.waitForConsumer},
		{Scheduler, Scheduler, "select node n1", bldZone, "Event Scheduled", tm.scheduled},
		{Scheduler, APIServer, "POST pods/binding", "spec.nodeName=n1", "Event Scheduled", tm.scheduled},
		{CSIController, Cloud, "CreateVolume", "us-east-1a gp2 1GiB vol-1", "EC2 CreateTime", tm.ec2Created},
		{Provisioner, APIServer, "CREATE PersistentVolume pvc-1", bldVolume, "creationTimestamp", tm.pvCreated},
		{PVController, APIServer, "bind claim my-app-pvc to pvc-1", "claim Bound, volume claimRef", "managedFields (status)", tm.claimBound},
		{ADController, APIServer, "CREATE VolumeAttachment va-1", "pvc-1 on n1", "creationTimestamp", tm.vaCreated},
		{CSIController, Cloud, "AttachVolume", "i-1 /dev/xvdaa", "EC2 AttachTime", tm.ec2Attached},
		{Attacher, APIServer, "PATCH VolumeAttachment status.attached=true", "", "managedFields (status)", tm.vaAttached},
		{Kubelet, Runtime, "Started", "Started container app", "Event Started", tm.started},
		{Kubelet, APIServer, "PATCH pod status: Running, Ready", "podIP 10.0.1.7", "condition Ready", tm.ready},
	} {
		st := bldFind(t, steps, tc.from, tc.to, tc.what)
		if st.Detail != tc.detail || st.Source != tc.source || !st.At.Equal(bldAt(tc.at)) {
			t.Errorf("%s: Detail, Source, At = %q, %q, %s; want %q, %q, %s",
				bldArrow(tc.from, tc.to, tc.what), st.Detail, st.Source, st.At, tc.detail, tc.source, bldAt(tc.at))
		}
	}
}

// TestBuildCSIStepsFromLogs: the CSI calls take their start from the "called" line and
// their length from the "done" line's duration.
func TestBuildCSIStepsFromLogs(t *testing.T) {
	tm := bldInOrder()
	noisy := func(s *Snapshot) {
		// Lines that must not count: another volume's, another container's and, for the
		// controller's calls, the node plugin's. They come last: the last call counts.
		s.Logs = append(s.Logs, []LogLine{
			{Pod: bldCtrlPod, Container: "ebs-plugin", Time: bldAt(100), Text: `msg="CreateVolume: done" volume=vol-2 duration=5s`},
			{Pod: bldCtrlPod, Container: "csi-attacher", Time: bldAt(200), Text: `msg="ControllerPublishVolume: done" volume=vol-1 duration=7s`},
			{Pod: bldNodePod, Container: "ebs-plugin", Time: bldAt(300), Text: `msg="ControllerPublishVolume: done" volume=vol-1 duration=9s`},
			{Pod: bldCtrlPod, Container: "ebs-plugin", Time: bldAt(400), Text: `msg="NodeStageVolume: done" volume=vol-1 duration=3s`},
		}...)
	}
	for _, tc := range []struct {
		name  string
		edit  func(*Snapshot)
		at    map[string]int // method: At in ms
		took  time.Duration
		where string
	}{
		{
			name: "called and done lines",
			edit: func(*Snapshot) {},
			at:   map[string]int{"CreateVolume": tm.createVolume, "ControllerPublishVolume": tm.publish, "NodeStageVolume": tm.stage, "NodePublishVolume": tm.nodePublish},
			took: bldCSITook,
		},
		{
			name: "other lines about other things",
			edit: noisy,
			at:   map[string]int{"CreateVolume": tm.createVolume, "ControllerPublishVolume": tm.publish, "NodeStageVolume": tm.stage, "NodePublishVolume": tm.nodePublish},
			took: bldCSITook,
		},
		{
			// The CreateVolume request names no volume id yet: only its done line does.
			name: "done lines only: started duration before",
			edit: func(s *Snapshot) {
				var done []LogLine
				for _, l := range s.Logs {
					if strings.Contains(l.Text, ": done") {
						done = append(done, l)
					}
				}
				s.Logs = done
			},
			at: map[string]int{"CreateVolume": tm.createVolume + 50 - 12, "ControllerPublishVolume": tm.publish + 50 - 12,
				"NodeStageVolume": tm.stage + 50 - 12, "NodePublishVolume": tm.nodePublish + 50 - 12},
			took: bldCSITook,
		},
		{
			// A first attempt failed; the retry that completed counts.
			name: "retried call",
			edit: func(s *Snapshot) {
				s.Logs = append([]LogLine{
					bldLog(bldNodePod, tm.stage-3000, `msg="NodeStageVolume: called" volume=vol-1`),
					bldLog(bldNodePod, tm.stage-2000, `msg="NodeStageVolume: failed" volume=vol-1 code=Internal duration=1s`),
				}, s.Logs...)
			},
			at:   map[string]int{"CreateVolume": tm.createVolume, "ControllerPublishVolume": tm.publish, "NodeStageVolume": tm.stage, "NodePublishVolume": tm.nodePublish},
			took: bldCSITook,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := bldSnapshot(tm)
			tc.edit(s)
			steps := Build(s).Steps
			for _, c := range []struct{ from, to, method string }{
				{Provisioner, CSIController, "CreateVolume"},
				{Attacher, CSIController, "ControllerPublishVolume"},
				{Kubelet, CSINode, "NodeStageVolume"},
				{Kubelet, CSINode, "NodePublishVolume"},
			} {
				st := bldFind(t, steps, c.from, c.to, c.method)
				if want := bldAt(tc.at[c.method]); !st.At.Equal(want) || st.Took != tc.took || st.Source != "ebs-plugin log" {
					t.Errorf("%s: At, Took, Source = %s, %s, %q; want %s, %s, %q",
						c.method, st.At, st.Took, st.Source, want, tc.took, "ebs-plugin log")
				}
			}
		})
	}
}

// TestBuildCSIStepsWithoutLogs: without the driver's log, the controller's calls take the
// Events' and objects' times, and the node's calls are not shown.
func TestBuildCSIStepsWithoutLogs(t *testing.T) {
	tm := bldInOrder()
	s := bldSnapshot(tm)
	s.Logs = nil
	steps := Build(s).Steps
	for _, c := range []struct {
		from, method, source string
		at                   int
	}{
		{Provisioner, "CreateVolume", "Event Provisioning", tm.provisioning},
		{Attacher, "ControllerPublishVolume", "creationTimestamp", tm.vaCreated},
	} {
		st := bldFind(t, steps, c.from, CSIController, c.method)
		if !st.At.Equal(bldAt(c.at)) || st.Took != 0 || st.Source != c.source {
			t.Errorf("%s: At, Took, Source = %s, %s, %q; want %s, 0, %q", c.method, st.At, st.Took, st.Source, bldAt(c.at), c.source)
		}
	}
	if bldHas(steps, "NodeStageVolume") || bldHas(steps, "NodePublishVolume") {
		t.Errorf("node calls shown without their log lines:\n%s", strings.Join(bldArrows(steps), "\n"))
	}
}

// bldObserved is what a Watcher saw of the flow, from each object's creation to the
// claim's deletion; volume is the PV's last state ("Released" or "deleted").
func bldObserved(volume ...string) []Observation {
	obs := []Observation{
		{Kind: "pvc", Name: bldClaimNm, State: "Pending", At: bldAt(30)},
		{Kind: "pod", Name: bldPodName, State: "Pending", At: bldAt(2040)},
		{Kind: "pv", Name: bldPVName, State: "Pending", At: bldAt(3520)},
		{Kind: "pv", Name: bldPVName, State: "claim=" + bldClaimNm, At: bldAt(3520)},
		{Kind: "pv", Name: bldPVName, State: "Bound", At: bldAt(3580)},
		{Kind: "pvc", Name: bldClaimNm, State: "Bound", At: bldAt(3600)},
		{Kind: "va", Name: bldVAName, State: "attached=false", At: bldAt(5010)},
		{Kind: "va", Name: bldVAName, State: "attached=true", At: bldAt(5900)},
		{Kind: "pod", Name: bldPodName, State: "Running+ready", At: bldAt(10_050)},
		{Kind: "pod", Name: bldPodName, State: "deleted", At: bldAt(60_000)},
		{Kind: "pvc", Name: bldClaimNm, State: "deleted", At: bldAt(61_000)},
	}
	for i, state := range volume {
		obs = append(obs, Observation{Kind: "pv", Name: bldPVName, State: state, At: bldAt(61_200 + 300*i)})
	}
	return obs
}

// bldRow is a transition as "Object: Before -(Event)-> After @at took".
func bldRow(object, before, event, after string, at int, took time.Duration) string {
	return fmt.Sprintf("%s: %s -(%s)-> %s @%dms took %s", object, before, event, after, at, took)
}

func bldRows(rows []Transition) []string {
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, bldRow(r.Object, r.Before, r.Event, r.After, int(r.At.Sub(bldT0)/time.Millisecond), r.Took))
	}
	return out
}

func TestBuildTransitions(t *testing.T) {
	ms := time.Millisecond
	first := []string{
		bldRow("PVC my-app-pvc", "Pending", "PV provisioned", "Bound", 3600, 3570*ms),
		bldRow("PV pvc-1", "Available", "PVC bound", "Bound", 3580, 60*ms),
		bldRow("VolumeAttachment va-1", "(created)", "ControllerPublishVolume", "status.attached: true", 5900, 890*ms),
		bldRow("PVC my-app-pvc", "Bound", "Pod terminated", "Bound (volume kept)", 60_000, 56_400*ms),
	}
	for _, tc := range []struct {
		name   string
		volume []string
		last   string
	}{
		{"Retain: the volume is released", []string{"Released"},
			bldRow("PV pvc-1", "Bound", "PVC deleted (Retain)", "Released", 61_200, 200*ms)},
		{"Delete: the volume is deleted", []string{"deleted"},
			bldRow("PV pvc-1", "Bound", "PVC deleted (Delete)", "deleted", 61_200, 200*ms)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := bldSnapshot(bldInOrder())
			s.Observed = bldObserved(tc.volume...)
			tr := Build(s)
			got, want := bldRows(tr.Transitions), append(append([]string(nil), first...), tc.last)
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("transitions:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			for _, r := range tr.Transitions {
				if r.Took <= 0 {
					t.Errorf("%s: Took %s, want > 0", r.Object, r.Took)
				}
			}
		})
	}
}

// TestBuildWatchedFlow: the watched times replace the API's, and the deletions end the
// flow.
func TestBuildWatchedFlow(t *testing.T) {
	s := bldSnapshot(bldInOrder())
	s.Observed = bldObserved("Released")
	tr := Build(s)
	if tr.Phase != "deleted" || tr.Diagnosis != (Diagnosis{}) {
		t.Errorf("Phase, Diagnosis = %q, %+v; want deleted and none", tr.Phase, tr.Diagnosis)
	}
	bldSameSteps(t, tr.Steps, append(append([]string(nil), bldFlow...),
		bldArrow(Kubectl, APIServer, "DELETE Pod my-app-pod"),
		bldArrow(Kubectl, APIServer, "DELETE PersistentVolumeClaim my-app-pvc")))
	for _, c := range []struct {
		from, what string
		at         int
	}{
		{PVController, "bind claim my-app-pvc to pvc-1", 3600},
		{Attacher, "PATCH VolumeAttachment status.attached=true", 5900},
		{Kubectl, "DELETE Pod my-app-pod", 60_000},
		{Kubectl, "DELETE PersistentVolumeClaim my-app-pvc", 61_000},
	} {
		if st := bldFind(t, tr.Steps, c.from, APIServer, c.what); !st.At.Equal(bldAt(c.at)) || st.Source != "watched" {
			t.Errorf("%s: At, Source = %s, %q; want %s, watched", c.what, st.At, st.Source, bldAt(c.at))
		}
	}
}

// TestBuildWatchedFlowAfterTheEnd: once the pod is deleted its last state is no longer
// Ready and its volume is detached; what the Watcher saw still gives the attach and the
// Running steps.
func TestBuildWatchedFlowAfterTheEnd(t *testing.T) {
	s := bldSnapshot(bldInOrder())
	s.Observed = bldObserved("Released")
	for i, c := range s.Pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			s.Pod.Status.Conditions[i].Status = corev1.ConditionFalse
		}
	}
	s.Pod.Status.Phase = corev1.PodSucceeded
	s.Attachments[0].Status.Attached = false
	tr := Build(s)
	for _, c := range []struct {
		from, what string
		at         int
	}{
		{Attacher, "PATCH VolumeAttachment status.attached=true", 5900},
		{Kubelet, "PATCH pod status: Running, Ready", 10_050},
	} {
		if st := bldFind(t, tr.Steps, c.from, APIServer, c.what); !st.At.Equal(bldAt(c.at)) || st.Source != "watched" {
			t.Errorf("%s: At, Source = %s, %q; want %s, watched", c.what, st.At, st.Source, bldAt(c.at))
		}
	}
}

// TestBuildTransitionsOfObjectsMadeBeforeTheWatch: a Watcher records no state of the
// objects that exist when it starts (the first list), so an object's first observation
// may be a later state, not its creation. The time from creation to Bound must still be
// counted from its creationTimestamp.
func TestBuildTransitionsOfObjectsMadeBeforeTheWatch(t *testing.T) {
	s := bldSnapshot(bldInOrder())
	s.Observed = []Observation{
		{Kind: "pv", Name: bldPVName, State: "claim=" + bldClaimNm, At: bldAt(3520)},
		{Kind: "pv", Name: bldPVName, State: "Bound", At: bldAt(3580)},
		{Kind: "pvc", Name: bldClaimNm, State: "Bound", At: bldAt(3600)},
		{Kind: "va", Name: bldVAName, State: "attached=true", At: bldAt(5900)},
		{Kind: "pod", Name: bldPodName, State: "deleted", At: bldAt(60_000)},
		{Kind: "pvc", Name: bldClaimNm, State: "deleted", At: bldAt(61_000)},
		{Kind: "pv", Name: bldPVName, State: "Released", At: bldAt(61_200)},
	}
	rows := Build(s).Transitions
	if len(rows) != 5 {
		t.Fatalf("transitions:\n%s\nwant 5", strings.Join(bldRows(rows), "\n"))
	}
	for _, r := range rows {
		if r.Took <= 0 {
			t.Errorf("%s %s → %s: Took %s, want > 0", r.Object, r.Before, r.After, r.Took)
		}
	}
}

// TestBuildTransitionsDeleteSeenReleased: with reclaimPolicy Delete the PV controller
// marks the volume Released before the provisioner deletes it, so a Watcher sees Bound,
// Released, deleted. That is the Delete policy, not Retain.
func TestBuildTransitionsDeleteSeenReleased(t *testing.T) {
	s := bldSnapshot(bldInOrder())
	s.Observed = bldObserved("Released", "deleted")
	rows := bldRows(Build(s).Transitions)
	want := bldRow("PV pvc-1", "Bound", "PVC deleted (Delete)", "deleted", 61_500, 500*time.Millisecond)
	if len(rows) == 0 || rows[len(rows)-1] != want {
		t.Errorf("transitions:\n%s\nwant last row %s", strings.Join(rows, "\n"), want)
	}
}

func TestBuildDiagnosis(t *testing.T) {
	tm := bldInOrder()
	t.Run("running and ready", func(t *testing.T) {
		tr := Build(bldSnapshot(tm))
		if tr.Diagnosis.Stage != StageNone {
			t.Errorf("Stage = %q, want none", tr.Diagnosis.Stage)
		}
		if w := bldWaiting(tr.Steps); len(w) != 0 {
			t.Errorf("waiting steps %v, want none", bldArrows(w))
		}
	})
	t.Run("stuck at the attach", func(t *testing.T) {
		tr := Build(bldStuckSnapshot(tm))
		if tr.Diagnosis.Stage != StageAttach || !strings.Contains(tr.Diagnosis.Reason, "AttachVolume timed out") {
			t.Errorf("Diagnosis = %+v, want stage attach with the attach error", tr.Diagnosis)
		}
		if tr.Phase != "Pending" {
			t.Errorf("Phase = %q, want Pending", tr.Phase)
		}
		bldSameSteps(t, tr.Steps, append(append([]string(nil), bldFlow[:13]...), bldArrow(Attacher, Attacher, "stuck: attach")))
		w := bldWaiting(tr.Steps)
		if len(w) != 1 || w[0] != tr.Steps[len(tr.Steps)-1] || w[0].Detail != tr.Diagnosis.Reason {
			t.Errorf("waiting steps %+v, want one, last, with the diagnosis' reason", w)
		}
	})
}

// TestBuildUnfinishedFlow: a flow that has not got far shows only what happened, then
// where it waits.
func TestBuildUnfinishedFlow(t *testing.T) {
	tm := bldInOrder()
	claimPart := bldFlow[:3]
	podPart := bldFlow[3:5]
	for _, tc := range []struct {
		name  string
		snap  func() *Snapshot
		steps []string
		stage string
	}{
		{
			name: "not scheduled",
			snap: func() *Snapshot {
				return &Snapshot{
					Now: bldAt(30_000), Namespace: bldNS, Name: bldPodName,
					Pod:     bldPod(tm, ""),
					Claims:  []*corev1.PersistentVolumeClaim{bldClaim(tm, false)},
					Classes: []*storagev1.StorageClass{bldClass()},
					Nodes:   []*corev1.Node{bldNode()},
					Events:  bldClaimEvents(tm)[:1],
				}
			},
			steps: append(append(append([]string(nil), claimPart...), podPart...), bldArrow(Scheduler, Scheduler, "stuck: scheduling")),
			stage: StageScheduling,
		},
		{
			name: "scheduled, volume being made",
			snap: func() *Snapshot {
				p := bldPod(tm, bldNodeName)
				bldStuckAtAttach(p)
				c := bldClaim(tm, false)
				c.Annotations = map[string]string{diagAnnSelectedNode: bldNodeName}
				return &Snapshot{
					Now: bldAt(30_000), Namespace: bldNS, Name: bldPodName,
					Pod:     p,
					Claims:  []*corev1.PersistentVolumeClaim{c},
					Classes: []*storagev1.StorageClass{bldClass()},
					Node:    bldNode(),
					Nodes:   []*corev1.Node{bldNode()},
					Events:  append(bldClaimEvents(tm)[:2], bldPodEvents(tm)[0]),
				}
			},
			steps: append(append([]string(nil), bldFlow[:8]...), bldArrow(Provisioner, Provisioner, "stuck: binding")),
			stage: StageBinding,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := Build(tc.snap())
			bldSameSteps(t, tr.Steps, tc.steps)
			if tr.Diagnosis.Stage != tc.stage {
				t.Errorf("Stage = %q, want %q", tr.Diagnosis.Stage, tc.stage)
			}
			if len(tr.Transitions) != 0 {
				t.Errorf("transitions %v, want none", bldRows(tr.Transitions))
			}
		})
	}
}

func TestBuildPodGone(t *testing.T) {
	tm := bldInOrder()
	t.Run("seen deleted", func(t *testing.T) {
		s := &Snapshot{Now: bldAt(70_000), Namespace: bldNS, Name: bldPodName,
			Observed: []Observation{{Kind: "pod", Name: bldPodName, State: "deleted", At: bldAt(60_000)}}}
		tr := Build(s)
		if tr.Phase != "deleted" || tr.Diagnosis != (Diagnosis{}) || tr.Pod != "default/my-app-pod" {
			t.Errorf("Pod, Phase, Diagnosis = %q, %q, %+v; want default/my-app-pod, deleted, none", tr.Pod, tr.Phase, tr.Diagnosis)
		}
		bldSameSteps(t, tr.Steps, []string{bldArrow(Kubectl, APIServer, "DELETE Pod my-app-pod")})
	})
	t.Run("not found", func(t *testing.T) {
		s := &Snapshot{Now: bldAt(70_000), Namespace: bldNS, Name: bldPodName,
			Claims: []*corev1.PersistentVolumeClaim{bldClaim(tm, false)}}
		tr := Build(s)
		if tr.Phase != "" || tr.Diagnosis.Stage != StageNone || tr.Diagnosis.Reason != "pod not found" {
			t.Errorf("Phase, Diagnosis = %q, %+v; want none and pod not found", tr.Phase, tr.Diagnosis)
		}
		bldSameSteps(t, tr.Steps, bldFlow[:2])
	})
}

// TestBuildPodRecreated: a pod deleted and made again under the same name (a
// StatefulSet's) is traced as the new pod, not as deleted.
func TestBuildPodRecreated(t *testing.T) {
	tm := bldInOrder()
	s := bldStuckSnapshot(tm)
	s.Pod.CreationTimestamp = bldMeta(70_000)
	s.Now = bldAt(90_000)
	s.Observed = []Observation{{Kind: "pod", Name: bldPodName, State: "deleted", At: bldAt(65_000)}}
	tr := Build(s)
	if tr.Phase != "Pending" || tr.Diagnosis.Stage != StageAttach {
		t.Errorf("Phase, Stage = %q, %q; want Pending, attach", tr.Phase, tr.Diagnosis.Stage)
	}
}

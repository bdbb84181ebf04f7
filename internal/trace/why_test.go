package trace

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// The fixtures: pod shop/web-0 with container app and volume data (claim data), nodes
// node-a (us-east-1a) and node-b (us-east-1b), a snapshot taken 600s after whyT0.

const (
	whyNS      = "shop"
	whyPodName = "web-0"
	whyPodUID  = types.UID("u-web-0")
)

var whyT0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func whyAt(sec int) metav1.Time { return metav1.NewTime(whyT0.Add(time.Duration(sec) * time.Second)) }

type whyPodOpt func(*corev1.Pod)

func whyPod(phase corev1.PodPhase, node string, opts ...whyPodOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: whyNS, Name: whyPodName, UID: whyPodUID, CreationTimestamp: whyAt(0)},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name: "app", Image: "nginx:1.27",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
		},
		Status: corev1.PodStatus{Phase: phase},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func whyImage(image string) whyPodOpt {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Image = image }
}

func whyCondition(t corev1.PodConditionType, status corev1.ConditionStatus, reason, msg string) whyPodOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: t, Status: status, Reason: reason, Message: msg})
	}
}

func whyStatus(cs corev1.ContainerStatus) whyPodOpt {
	return func(p *corev1.Pod) { p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, cs) }
}

func whyFailed(reason, msg string) whyPodOpt {
	return func(p *corev1.Pod) { p.Status.Reason, p.Status.Message = reason, msg }
}

func whyDeleted(sec int, finalizers ...string) whyPodOpt {
	return func(p *corev1.Pod) {
		at := whyAt(sec)
		p.DeletionTimestamp, p.Finalizers = &at, finalizers
	}
}

// Container states of container app.

func whyRunning(ready bool, restarts int32, since int) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "app", Ready: ready, RestartCount: restarts,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: whyAt(since)}}}
}

func whyWaiting(reason, msg string, restarts int32, last *corev1.ContainerStateTerminated) corev1.ContainerStatus {
	cs := corev1.ContainerStatus{Name: "app", RestartCount: restarts,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}
	if last != nil {
		cs.LastTerminationState.Terminated = last
	}
	return cs
}

func whyExited(t *corev1.ContainerStateTerminated) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: "app", State: corev1.ContainerState{Terminated: t}}
}

func whyTerminated(reason string, code int32, started int) *corev1.ContainerStateTerminated {
	return &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code, StartedAt: whyAt(started), FinishedAt: whyAt(started + 5)}
}

// Storage.

func whyClaim(phase corev1.PersistentVolumeClaimPhase, pv string, opts ...func(*corev1.PersistentVolumeClaim)) *corev1.PersistentVolumeClaim {
	c := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: whyNS, Name: "data", UID: "u-data"},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: pv},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: phase},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

func whySelectedNode(node string) func(*corev1.PersistentVolumeClaim) {
	return func(c *corev1.PersistentVolumeClaim) {
		c.Annotations = map[string]string{"volume.kubernetes.io/selected-node": node}
	}
}

func whyClaimDeleted(c *corev1.PersistentVolumeClaim) {
	at := whyAt(300)
	c.DeletionTimestamp, c.Finalizers = &at, []string{"kubernetes.io/pvc-protection"}
}

func whyPV(name, zone string) *corev1.PersistentVolume {
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeSpec{
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-0abc"}},
			ClaimRef:               &corev1.ObjectReference{Namespace: whyNS, Name: "data"},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.ebs.csi.aws.com/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}},
			}}}},
		},
		Status: corev1.PersistentVolumeStatus{Phase: corev1.VolumeBound},
	}
}

func whyVA(name, pv, node string, attached bool, attachErr string) *storagev1.VolumeAttachment {
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: node,
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
		Status: storagev1.VolumeAttachmentStatus{Attached: attached},
	}
	if attachErr != "" {
		va.Status.AttachError = &storagev1.VolumeError{Time: whyAt(60), Message: attachErr}
	}
	return va
}

func whyNode(name, zone string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"topology.kubernetes.io/zone": zone}},
		Spec:       corev1.NodeSpec{PodCIDR: "10.244.1.0/24"},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
}

// whyEvent is an Event about kind/name in namespace shop (none for cluster objects) last
// seen at sec.
func whyEvent(kind, name, reason, msg string, sec int, opts ...func(*corev1.Event)) corev1.Event {
	ns := whyNS
	if kind == "PersistentVolume" || kind == "VolumeAttachment" || kind == "Node" {
		ns = ""
	}
	e := corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Namespace: diagOr(ns, "default"), Name: name + "." + reason},
		InvolvedObject: corev1.ObjectReference{Kind: kind, Namespace: ns, Name: name},
		Reason:         reason, Message: msg,
		FirstTimestamp: whyAt(sec), LastTimestamp: whyAt(sec),
	}
	for _, o := range opts {
		o(&e)
	}
	return e
}

func whyFieldPath(path string) func(*corev1.Event) {
	return func(e *corev1.Event) { e.InvolvedObject.FieldPath = path }
}

// The snapshot.

type whySnapOpt func(*Snapshot)

func whySnap(pod *corev1.Pod, opts ...whySnapOpt) *Snapshot {
	s := &Snapshot{Now: whyT0.Add(600 * time.Second), Namespace: whyNS, Name: whyPodName, Pod: pod,
		Nodes: []*corev1.Node{whyNode("node-a", "us-east-1a"), whyNode("node-b", "us-east-1b")}}
	for _, o := range opts {
		o(s)
	}
	if pod != nil {
		for _, n := range s.Nodes {
			if n.Name == pod.Spec.NodeName {
				s.Node = n
			}
		}
	}
	return s
}

func whyClaims(c ...*corev1.PersistentVolumeClaim) whySnapOpt {
	return func(s *Snapshot) { s.Claims = c }
}
func whyMissing(names ...string) whySnapOpt {
	return func(s *Snapshot) { s.MissingClaims = names }
}
func whyPVs(pv ...*corev1.PersistentVolume) whySnapOpt {
	return func(s *Snapshot) { s.Volumes = pv }
}
func whyVAs(va ...*storagev1.VolumeAttachment) whySnapOpt {
	return func(s *Snapshot) { s.Attachments = va }
}
func whyNodes(n ...*corev1.Node) whySnapOpt {
	return func(s *Snapshot) { s.Nodes = n }
}
func whyEvents(e ...corev1.Event) whySnapOpt {
	return func(s *Snapshot) { s.Events = e }
}
func whyOwners(o ...string) whySnapOpt {
	return func(s *Snapshot) { s.Owners = o }
}

// whyBoundVolume is claim data bound to pvc-1 in us-east-1a.
func whyBoundVolume() whySnapOpt {
	return func(s *Snapshot) {
		s.Claims = []*corev1.PersistentVolumeClaim{whyClaim(corev1.ClaimBound, "pvc-1")}
		s.Volumes = []*corev1.PersistentVolume{whyPV("pvc-1", "us-east-1a")}
	}
}

// Messages as the components write them.
const (
	whyMsgQuota        = `Error creating: pods "web-7d9f8-x2x4k" is forbidden: exceeded quota: compute, requested: limits.cpu=2, used: limits.cpu=4, limited: limits.cpu=4`
	whyMsgCPU          = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
	whyMsgZone         = "0/2 nodes are available: 2 node(s) had volume node affinity conflict. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
	whyMsgUnbound      = "0/2 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
	whyMsgNoClaim      = `persistentvolumeclaim "data" not found`
	whyMsgClaimGoing   = `persistentvolumeclaim "data" is being deleted`
	whyMsgProvision    = `failed to provision volume with StorageClass "gp2": rpc error: code = Internal desc = Could not create volume "pvc-1": operation error EC2: CreateVolume, https response error StatusCode: 500, RequestID: x, api error InsufficientVolumeCapacity: There is not enough capacity`
	whyMsgWFFC         = "waiting for first consumer to be created before binding"
	whyMsgExternal     = "Waiting for a volume to be created either by the external provisioner 'ebs.csi.aws.com' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."
	whyMsgProvisioning = `External provisioner is provisioning volume for claim "shop/data"`
	whyMsgAttach       = `rpc error: code = Internal desc = Could not attach volume "vol-0abc" to node "i-0123": operation error EC2: AttachVolume, https response error StatusCode: 500, RequestID: y, api error InternalError: An internal error has occurred (injected fault f-1).`
	whyMsgMultiAttach  = `Multi-Attach error for volume "pvc-1" Volume is already exclusively attached to one node and can't be attached to another`
	whyMsgMount        = `MountVolume.MountDevice failed for volume "pvc-1" : rpc error: code = Internal desc = could not format "/dev/nvme1n1" and mount it at "/var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.aws.com/abc/globalmount": exit status 1`
	whyMsgSandbox      = `Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox "4f1c": plugin type="host-local" failed (add): failed to allocate for range 0: no IP addresses available in range set: 10.244.1.1-10.244.1.254`
	whyMsgBackOffPull  = `Back-off pulling image "nginx:nope"`
	whyMsgCreate       = `failed to reserve container name "app_web-0_shop_u-web-0_0": name "app_web-0_shop_u-web-0_0" is reserved for "4f1c"`
	whyMsgCrashLoop    = "back-off 40s restarting failed container=app pod=web-0_shop(u-web-0)"
	whyMsgReadiness    = "Readiness probe failed: HTTP probe failed with statuscode: 503"
	whyMsgLiveness     = `Liveness probe failed: Get "http://10.244.1.5:8080/healthz": dial tcp 10.244.1.5:8080: connect: connection refused`
	whyMsgEvicted      = "The node was low on resource: memory. Threshold quantity: 100Mi, available: 51200Ki."
)

func TestDiagnose(t *testing.T) {
	const describePod = "kubectl describe pod web-0 -n shop"
	unscheduled := func(msg string) whyPodOpt {
		return whyCondition(corev1.PodScheduled, corev1.ConditionFalse, corev1.PodReasonUnschedulable, msg)
	}
	sandboxReady := whyCondition(corev1.PodReadyToStartContainers, corev1.ConditionTrue, "", "")
	creating := whyStatus(whyWaiting("ContainerCreating", "", 0, nil))
	for _, tc := range []struct {
		name     string
		snap     *Snapshot
		stage    string
		reason   string // a substring of Reason
		evidence string // all of Evidence
		command  string // a substring of Command
	}{
		{
			name: "admission rejected",
			snap: whySnap(nil, whyOwners("ReplicaSet/web-7d9f8", "Deployment/web"),
				whyEvents(whyEvent("ReplicaSet", "web-7d9f8", "FailedCreate", whyMsgQuota, 30))),
			stage: StageAdmission, reason: "the API server refused the pod: Error creating", evidence: whyMsgQuota,
			command: "kubectl describe replicaset web-7d9f8 -n shop",
		},
		{
			name:   "pod not found",
			snap:   whySnap(nil, whyOwners("ReplicaSet/web-7d9f8")),
			stage:  StageNone,
			reason: "pod not found", command: "kubectl get pod web-0 -n shop",
		},
		{
			name:  "pending for cpu",
			snap:  whySnap(whyPod(corev1.PodPending, "", unscheduled(whyMsgCPU))),
			stage: StageScheduling, reason: "3 Insufficient cpu", evidence: whyMsgCPU, command: describePod,
		},
		{
			name: "zone-mismatched volume",
			snap: whySnap(whyPod(corev1.PodPending, ""), whyBoundVolume(),
				whyNodes(whyNode("node-b", "us-east-1b"), whyNode("node-c", "us-east-1c")),
				whyEvents(whyEvent("Pod", whyPodName, "FailedScheduling", whyMsgZone, 40))),
			stage:    StageScheduling,
			reason:   "claim data is bound to PV pvc-1 in us-east-1a, but the nodes are in us-east-1b, us-east-1c (2 node(s) had volume node affinity conflict)",
			evidence: whyMsgZone, command: describePod,
		},
		{
			name: "unbound immediate claim",
			snap: whySnap(whyPod(corev1.PodPending, "", unscheduled(whyMsgUnbound)),
				whyClaims(whyClaim(corev1.ClaimPending, ""))),
			stage: StageScheduling, reason: "claim(s) data not bound", evidence: whyMsgUnbound, command: "kubectl describe pvc data -n shop",
		},
		{
			name:  "missing claim",
			snap:  whySnap(whyPod(corev1.PodPending, "", unscheduled(whyMsgNoClaim)), whyMissing("data")),
			stage: StageScheduling, reason: whyMsgNoClaim, evidence: whyMsgNoClaim, command: describePod,
		},
		{
			name:  "waiting for the scheduler",
			snap:  whySnap(whyPod(corev1.PodPending, "")),
			stage: StageScheduling, reason: "waiting for the scheduler", command: describePod,
			evidence: "spec.nodeName is empty and the pod has no PodScheduled condition yet",
		},
		{
			name: "provisioning failed before binding to a node",
			snap: whySnap(whyPod(corev1.PodPending, ""),
				whyClaims(whyClaim(corev1.ClaimPending, "", whySelectedNode("node-a"))),
				whyEvents(
					whyEvent("PersistentVolumeClaim", "data", "WaitForFirstConsumer", whyMsgWFFC, 1),
					whyEvent("PersistentVolumeClaim", "data", "ProvisioningFailed", whyMsgProvision, 20))),
			stage: StageProvisioning, reason: "InsufficientVolumeCapacity", evidence: whyMsgProvision,
			command: "kubectl describe pvc data -n shop; kubectl logs -n kube-system -l app=ebs-csi-controller -c csi-provisioner --tail=50",
		},
		{
			name: "provisioning failed, pod scheduled",
			snap: whySnap(whyPod(corev1.PodPending, "node-a"),
				whyClaims(whyClaim(corev1.ClaimPending, "")),
				whyEvents(whyEvent("PersistentVolumeClaim", "data", "ProvisioningFailed", whyMsgProvision, 20))),
			stage: StageProvisioning, reason: "the volume for claim data cannot be created: InsufficientVolumeCapacity (gRPC Internal)",
			evidence: whyMsgProvision, command: "kubectl describe pvc data -n shop",
		},
		{
			name: "waiting for the provisioner",
			snap: whySnap(whyPod(corev1.PodPending, ""),
				whyClaims(whyClaim(corev1.ClaimPending, "", whySelectedNode("node-a"))),
				whyEvents(
					whyEvent("PersistentVolumeClaim", "data", "WaitForFirstConsumer", whyMsgWFFC, 1),
					whyEvent("PersistentVolumeClaim", "data", "ExternalProvisioning", whyMsgExternal, 5))),
			stage: StageBinding, reason: "waiting for the provisioner to create the volume for claim data",
			evidence: whyMsgExternal, command: "kubectl describe pvc data -n shop",
		},
		{
			name: "provisioning, pod scheduled",
			snap: whySnap(whyPod(corev1.PodPending, "node-a"),
				whyClaims(whyClaim(corev1.ClaimPending, "")),
				whyEvents(whyEvent("PersistentVolumeClaim", "data", "Provisioning", whyMsgProvisioning, 5))),
			stage: StageBinding, reason: "waiting for the provisioner to create the volume for claim data",
			evidence: whyMsgProvisioning, command: "kubectl describe pvc data -n shop",
		},
		{
			name: "attach failed",
			snap: whySnap(whyPod(corev1.PodPending, "node-a", creating), whyBoundVolume(),
				whyVAs(whyVA("csi-abc", "pvc-1", "node-a", false, whyMsgAttach))),
			stage: StageAttach, reason: "injected fault f-1", evidence: whyMsgAttach,
			command: "kubectl describe volumeattachment csi-abc; kubectl logs -n kube-system -l app=ebs-csi-controller -c csi-attacher --tail=50",
		},
		{
			name: "multi-attach",
			snap: whySnap(whyPod(corev1.PodPending, "node-b", creating), whyBoundVolume(),
				whyVAs(whyVA("csi-old", "pvc-1", "node-a", true, "")),
				whyEvents(whyEvent("Pod", whyPodName, "FailedAttachVolume", whyMsgMultiAttach, 30))),
			stage: StageAttach, reason: "multi-attach: volume pvc-1 is attached to another node (node-a", evidence: whyMsgMultiAttach,
			command: "kubectl describe volumeattachment csi-old",
		},
		{
			name: "attach pending",
			snap: whySnap(whyPod(corev1.PodPending, "node-a", creating), whyBoundVolume(),
				whyVAs(whyVA("csi-abc", "pvc-1", "node-a", false, ""))),
			stage: StageAttach, reason: "attach not done yet (VolumeAttachment csi-abc)", evidence: "attached: false",
			command: "kubectl describe volumeattachment csi-abc",
		},
		{
			name:  "no VolumeAttachment yet",
			snap:  whySnap(whyPod(corev1.PodPending, "node-a", creating), whyBoundVolume()),
			stage: StageAttach, reason: "no VolumeAttachment yet for volume pvc-1 on node node-a",
			evidence: "no VolumeAttachment has spec.source.persistentVolumeName=pvc-1 and spec.nodeName=node-a",
			command:  "kubectl get volumeattachment",
		},
		{
			name: "mount failed",
			snap: whySnap(whyPod(corev1.PodPending, "node-a", creating), whyBoundVolume(),
				whyVAs(whyVA("csi-abc", "pvc-1", "node-a", true, "")),
				whyEvents(whyEvent("Pod", whyPodName, "FailedMount", whyMsgMount, 90))),
			stage: StageMount, reason: "MountVolume.MountDevice failed", evidence: whyMsgMount,
			command: "--field-selector spec.nodeName=node-a -o jsonpath='{.items[0].metadata.name}') -c ebs-plugin --tail=100",
		},
		{
			name: "volumes not set up yet",
			snap: whySnap(whyPod(corev1.PodPending, "node-a", creating), whyBoundVolume(),
				whyVAs(whyVA("csi-abc", "pvc-1", "node-a", true, ""))),
			stage: StageMount, reason: "volumes not set up yet", evidence: "container app: waiting: ContainerCreating",
			command: "spec.nodeName=node-a",
		},
		{
			name: "podCIDR full",
			snap: whySnap(whyPod(corev1.PodPending, "node-a", creating),
				whyEvents(whyEvent("Pod", whyPodName, "FailedCreatePodSandBox", whyMsgSandbox, 50))),
			stage: StageNetwork, reason: "the node's podCIDR (10.244.1.0/24) is full", evidence: whyMsgSandbox,
			command: "kubectl get node node-a -o jsonpath='{.spec.podCIDR}'",
		},
		{
			name: "image pull back-off",
			snap: whySnap(whyPod(corev1.PodPending, "node-a", whyImage("nginx:nope"), sandboxReady,
				whyStatus(whyWaiting("ImagePullBackOff", whyMsgBackOffPull, 0, nil)))),
			stage: StageImage, reason: `image "nginx:nope" of container app cannot be pulled (ImagePullBackOff)`,
			evidence: whyMsgBackOffPull, command: describePod,
		},
		{
			name: "create container error",
			snap: whySnap(whyPod(corev1.PodPending, "node-a", sandboxReady,
				whyStatus(whyWaiting("CreateContainerError", whyMsgCreate, 0, nil)))),
			stage: StageCreate, reason: "container app cannot be created (CreateContainerError)", evidence: whyMsgCreate,
			command: describePod,
		},
		{
			name: "crash loop",
			snap: whySnap(whyPod(corev1.PodRunning, "node-a",
				whyStatus(whyWaiting("CrashLoopBackOff", whyMsgCrashLoop, 3, whyTerminated("Error", 1, 500))))),
			stage: StageCrash, reason: "container app exits with code 1 (Error)", evidence: whyMsgCrashLoop,
			command: "kubectl logs web-0 -n shop -c app --previous",
		},
		{
			name: "crash loop of a container that never started",
			snap: whySnap(whyPod(corev1.PodRunning, "node-a",
				whyStatus(whyWaiting("CrashLoopBackOff", whyMsgCrashLoop, 2, whyTerminated("StartError", 128, 500))))),
			stage: StageCreate, reason: "container app cannot be started (StartError)",
			evidence: "Terminated: StartError, exit code 128", command: describePod,
		},
		{
			name: "OOMKilled, restarting",
			snap: whySnap(whyPod(corev1.PodRunning, "node-a",
				whyStatus(whyWaiting("CrashLoopBackOff", whyMsgCrashLoop, 2, whyTerminated("OOMKilled", 137, 500))))),
			stage: StageOOM, reason: "container app was OOMKilled: it used more than its memory limit of 128Mi",
			evidence: "Terminated: OOMKilled, exit code 137", command: describePod,
		},
		{
			name:  "OOMKilled, not restarted",
			snap:  whySnap(whyPod(corev1.PodFailed, "node-a", whyStatus(whyExited(whyTerminated("OOMKilled", 137, 500))))),
			stage: StageOOM, reason: "OOMKilled", evidence: "Terminated: OOMKilled, exit code 137", command: describePod,
		},
		{
			name: "readiness probe failing",
			snap: whySnap(whyPod(corev1.PodRunning, "node-a", whyStatus(whyRunning(false, 0, 100))),
				whyEvents(whyEvent("Pod", whyPodName, "Unhealthy", whyMsgReadiness, 200, whyFieldPath("spec.containers{app}")))),
			stage: StageProbe, reason: "readiness probe of container app fails", evidence: whyMsgReadiness, command: describePod,
		},
		{
			name: "liveness probe failing",
			snap: whySnap(whyPod(corev1.PodRunning, "node-a", whyStatus(whyRunning(false, 4, 550))),
				whyEvents(
					whyEvent("Pod", whyPodName, "Unhealthy", whyMsgReadiness, 100, whyFieldPath("spec.containers{app}")),
					whyEvent("Pod", whyPodName, "Unhealthy", whyMsgLiveness, 540, whyFieldPath("spec.containers{app}")))),
			stage: StageProbe, reason: "liveness probe of container app fails (4 restarts)", evidence: whyMsgLiveness, command: describePod,
		},
		{
			name:  "not ready, no probe failure",
			snap:  whySnap(whyPod(corev1.PodRunning, "node-a", whyStatus(whyRunning(false, 0, 590)))),
			stage: StageProbe, reason: "container app not ready yet", evidence: "container app: ready: false", command: describePod,
		},
		{
			name:  "terminating with a finalizer",
			snap:  whySnap(whyPod(corev1.PodRunning, "node-a", whyDeleted(500, "example.com/hold"), whyStatus(whyRunning(true, 0, 100)))),
			stage: StageTerminating, reason: "held by finalizer(s) example.com/hold", evidence: `["example.com/hold"]`,
			command: "kubectl get pod web-0 -n shop -o jsonpath='{.metadata.finalizers}'",
		},
		{
			name:  "container running past its grace period",
			snap:  whySnap(whyPod(corev1.PodRunning, "node-a", whyDeleted(500), whyStatus(whyRunning(true, 0, 100)))),
			stage: StageTerminating, reason: "container(s) app still running 1m40s past the grace period",
			evidence: "deletionTimestamp: 2025-03-01T12:08:20Z", command: describePod,
		},
		{
			name: "claim held by pvc-protection",
			snap: whySnap(whyPod(corev1.PodPending, "", unscheduled(whyMsgClaimGoing)),
				whyClaims(whyClaim(corev1.ClaimBound, "pvc-1", whyClaimDeleted)), whyPVs(whyPV("pvc-1", "us-east-1a"))),
			stage: StageTerminating, reason: "claim data is being deleted; kubernetes.io/pvc-protection keeps it while pod web-0 uses it",
			evidence: whyMsgClaimGoing, command: "kubectl get pvc data -n shop -o jsonpath='{.metadata.finalizers}'",
		},
		{
			name:  "failed",
			snap:  whySnap(whyPod(corev1.PodFailed, "node-a", whyFailed("Evicted", whyMsgEvicted))),
			stage: StageFailed, reason: "the pod failed: Evicted: The node was low on resource: memory.", evidence: whyMsgEvicted,
			command: describePod,
		},
		{
			name:  "healthy",
			snap:  whySnap(whyPod(corev1.PodRunning, "node-a", whyStatus(whyRunning(true, 0, 100))), whyBoundVolume()),
			stage: StageNone,
		},
		{
			name:  "succeeded",
			snap:  whySnap(whyPod(corev1.PodSucceeded, "node-a", whyStatus(whyExited(whyTerminated("Completed", 0, 100))))),
			stage: StageNone,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Diagnose(tc.snap)
			if tc.stage == StageNone && tc.reason == "" {
				if got != (Diagnosis{}) {
					t.Fatalf("Diagnose = %+v, want Diagnosis{}", got)
				}
				return
			}
			if got.Stage != tc.stage {
				t.Errorf("Stage = %q, want %q (reason %q)", got.Stage, tc.stage, got.Reason)
			}
			if !strings.Contains(got.Reason, tc.reason) {
				t.Errorf("Reason = %q, want it to contain %q", got.Reason, tc.reason)
			}
			if got.Evidence != tc.evidence {
				t.Errorf("Evidence = %q, want %q", got.Evidence, tc.evidence)
			}
			if !strings.Contains(got.Command, tc.command) {
				t.Errorf("Command = %q, want it to contain %q", got.Command, tc.command)
			}
			if strings.Contains(got.Reason, "\n") {
				t.Errorf("Reason %q is more than one line", got.Reason)
			}
		})
	}
}

// Events that are about something else, or older than what the pod has got past, do not count.
func TestDiagnoseIgnoresOtherEvents(t *testing.T) {
	running := whyPod(corev1.PodRunning, "node-a", whyStatus(whyRunning(false, 0, 100)))
	for _, tc := range []struct {
		name  string
		event corev1.Event
	}{
		{"mount failure before the container started", whyEvent("Pod", whyPodName, "FailedMount", whyMsgMount, 90)},
		{"sandbox failure before the container started", whyEvent("Pod", whyPodName, "FailedCreatePodSandBox", whyMsgSandbox, 90)},
		{"probe failure of an earlier pod of the same name", whyEvent("Pod", whyPodName, "Unhealthy", whyMsgReadiness, 200,
			func(e *corev1.Event) { e.InvolvedObject.UID = "u-earlier" })},
		{"probe failure of another kind of object", whyEvent("Service", whyPodName, "Unhealthy", whyMsgReadiness, 200)},
		{"probe failure in another namespace", whyEvent("Pod", whyPodName, "Unhealthy", whyMsgReadiness, 200,
			func(e *corev1.Event) { e.InvolvedObject.Namespace = "other" })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Diagnose(whySnap(running, whyEvents(tc.event)))
			if got.Stage != StageProbe || got.Reason != "container app not ready yet" {
				t.Errorf("Diagnose = %+v, want probe stage, container app not ready yet", got)
			}
		})
	}
}

// The newest Event wins: LastTimestamp, else EventTime, else FirstTimestamp.
func TestDiagnoseNewestEvent(t *testing.T) {
	const limit = `failed to provision volume with StorageClass "gp3": rpc error: code = ResourceExhausted desc = Could not create volume "pvc-1": operation error EC2: CreateVolume, https response error StatusCode: 400, RequestID: z, api error VolumeLimitExceeded: You have exceeded your maximum gp3 storage limit`
	older := whyEvent("PersistentVolumeClaim", "data", "ProvisioningFailed", whyMsgProvision, 100,
		func(e *corev1.Event) { e.FirstTimestamp = whyAt(400) }) // first seen later, last seen earlier
	series := whyEvent("PersistentVolumeClaim", "data", "ProvisioningFailed", limit, 0, func(e *corev1.Event) {
		e.FirstTimestamp, e.LastTimestamp = metav1.Time{}, metav1.Time{}
		e.EventTime = metav1.NewMicroTime(whyT0.Add(200 * time.Second))
	})
	snap := whySnap(whyPod(corev1.PodPending, "node-a"), whyClaims(whyClaim(corev1.ClaimPending, "")), whyEvents(older, series))
	got := Diagnose(snap)
	if got.Stage != StageProvisioning || !strings.Contains(got.Reason, "VolumeLimitExceeded (gRPC ResourceExhausted)") || got.Evidence != limit {
		t.Errorf("Diagnose = %+v, want the VolumeLimitExceeded event", got)
	}
}

func TestDiagnoseSchedulerFilters(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{whyMsgCPU, "3 Insufficient cpu"},
		{"0/3 nodes are available: 1 node(s) had volume node affinity conflict, 2 Insufficient cpu. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.",
			"1 node(s) had volume node affinity conflict|2 Insufficient cpu"},
		{"0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }.",
			"1 Insufficient nvidia.com/gpu|1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }"},
		{whyMsgUnbound, "pod has unbound immediate PersistentVolumeClaims"},
		{whyMsgNoClaim, ""},
	} {
		if got := strings.Join(diagSchedulerFilters(tc.msg), "|"); got != tc.want {
			t.Errorf("diagSchedulerFilters(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}

func TestDiagnoseCloudErrorCode(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{whyMsgProvision, "InsufficientVolumeCapacity (gRPC Internal)"},
		{"operation error EC2: CreateVolume, https response error StatusCode: 400, RequestID: r, api error InvalidParameterValue: bad size", "InvalidParameterValue"},
		{"rpc error: code = DeadlineExceeded desc = context deadline exceeded", "gRPC DeadlineExceeded: rpc error: code = DeadlineExceeded desc = context deadline exceeded"},
		{`storageclass.storage.k8s.io "gp9" not found`, ""},
	} {
		if got := diagCloudErrorCode(tc.msg); got != tc.want {
			t.Errorf("diagCloudErrorCode(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}

package trace

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
)

// The participants of the flow: the columns of the sequence diagram, left to right.
const (
	Kubectl       = "kubectl"
	APIServer     = "API server"
	Etcd          = "etcd"
	Scheduler     = "scheduler"
	PVController  = "PV controller"
	ADController  = "attach/detach"
	Provisioner   = "csi-provisioner"
	Attacher      = "csi-attacher"
	CSIController = "ebs-plugin (controller)"
	Cloud         = "EC2"
	Kubelet       = "kubelet"
	CSINode       = "ebs-plugin (node)"
	Runtime       = "containerd"
	CNI           = "kubelab-cni"
	AWSNode       = "aws-node"
)

// Participants is the order of the diagram's columns.
var Participants = []string{Kubectl, APIServer, Etcd, Scheduler, PVController, ADController,
	Provisioner, Attacher, CSIController, Cloud, Kubelet, CSINode, Runtime, CNI, AWSNode}

// Snapshot is everything a trace is made from, as read from the API server, the cloud's
// EC2 API and the add-on pods' logs (Collect), or as seen while it happened (Watcher).
// Build and Diagnose read only this: they do no I/O.
type Snapshot struct {
	// Now is when the snapshot was taken: how long a stuck stage has been waiting.
	Now time.Time
	// Namespace and Name name the pod traced (it may be gone: Pod nil).
	Namespace, Name string
	Pod             *corev1.Pod
	// Claims are the claims the pod's volumes name that exist; MissingClaims those that
	// do not.
	Claims        []*corev1.PersistentVolumeClaim
	MissingClaims []string
	// Volumes are the PersistentVolumes bound to those claims; Classes their classes.
	Volumes []*corev1.PersistentVolume
	Classes []*storagev1.StorageClass
	// Attachments are the VolumeAttachments of those volumes.
	Attachments []*storagev1.VolumeAttachment
	// Node is the pod's node (nil: not scheduled, or gone); Nodes all nodes.
	Node  *corev1.Node
	Nodes []*corev1.Node
	// Owners are the pod's controllers, up the chain (ReplicaSet, Deployment, Job...), as
	// kind/name; their Events are in Events too.
	Owners []string
	// Events are the Events about the pod, its claims, volumes, attachments, node and owners.
	Events []corev1.Event
	// Cloud is what the EC2 API says of the volumes (DescribeVolumes).
	Cloud []CloudVolume
	// Logs are the add-on pods' log lines that name the traced volumes, and in the VPC pod
	// network the lines of the aws-node pod of the pod's node about the pod's address.
	Logs []LogLine
	// Observed are state changes seen live by a Watcher, with the time they were seen.
	Observed []Observation
}

// CloudVolume is an EBS volume as DescribeVolumes reports it.
type CloudVolume struct {
	ID, State, Zone, Type string
	SizeGiB               int32
	CreateTime            time.Time
	Attachments           []CloudAttachment
}

// CloudAttachment is one attachment of a CloudVolume.
type CloudAttachment struct {
	InstanceID, Device, State string
	AttachTime                time.Time
}

// LogLine is one line of an add-on pod's container log.
type LogLine struct {
	Pod, Container string
	Time           time.Time
	Text           string
}

// Observation is a state an object was seen in by a Watcher.
type Observation struct {
	// Kind is "pod", "pvc", "pv" or "va"; Name the object's name.
	Kind, Name string
	// State is its state: the phase (pvc, pv, pod), "attached=true|false" (va),
	// "deleted" once it is gone.
	State string
	At    time.Time
}

// Step is one arrow of the sequence diagram: From asks To to do What.
type Step struct {
	From, To string
	// What is the request ("POST PersistentVolumeClaim my-app-pvc", "CreateVolume");
	// Detail what it carried or returned ("gp2, 1Gi", "vol-0abc…").
	What, Detail string
	// At is when it started; Took how long it took (0: a single moment or unknown).
	At   time.Time
	Took time.Duration
	// Source is where the times come from ("Event ProvisioningSucceeded", "managedFields
	// kube-scheduler", "EC2 CreateTime", "ebs-plugin log").
	Source string
	// Waiting marks the step the flow waits at now (not done yet).
	Waiting bool
}

// Transition is one row of the objects' state transitions: Object went from Before to
// After on Event, Took after it entered Before.
type Transition struct {
	Object, Before, Event, After string
	At                           time.Time
	Took                         time.Duration
}

// Diagnosis names where a pod that is not Running (or not Ready) is stuck, and why.
type Diagnosis struct {
	// Stage is the step of the flow that does not go on (one of the Stage* constants).
	Stage string
	// Reason says what is wrong, in one line.
	Reason string
	// Evidence is the status, condition or Event message that shows it.
	Evidence string
	// Command shows the evidence.
	Command string
}

// The stages a pod can be stuck at.
const (
	StageNone         = ""                 // not stuck: Running and Ready, or Succeeded
	StageAdmission    = "admission"        // the API server refused the pod
	StageScheduling   = "scheduling"       // Pending: no node passes the filters
	StageProvisioning = "provisioning"     // the claim's volume cannot be created
	StageBinding      = "binding"          // the claim waits for a volume or its first consumer
	StageAttach       = "attach"           // the volume is not attached to the node
	StageMount        = "mount"            // NodeStage/NodePublish or another volume fails
	StageNetwork      = "network"          // the sandbox gets no network (CNI)
	StageImage        = "image"            // ErrImagePull, ImagePullBackOff
	StageCreate       = "create-container" // CreateContainerError, CreateContainerConfigError
	StageProbe        = "probe"            // running, but a probe fails
	StageCrash        = "crash"            // CrashLoopBackOff, Error exits
	StageOOM          = "oom"              // OOMKilled
	StageTerminating  = "terminating"      // deleted, held by a finalizer or a container
	StageFailed       = "failed"           // the pod failed (phase Failed)
)

// Trace is one pod's flow, reconstructed: the arrows in causal order, the objects' state
// transitions and, when the pod is stuck, where.
type Trace struct {
	// Pod is namespace/name; Node and Zone where it runs; Phase its phase ("" when gone).
	Pod, Node, Zone, Phase string
	// Start is the first moment of the flow (the first object's creation).
	Start       time.Time
	Steps       []Step
	Transitions []Transition
	Diagnosis   Diagnosis
}

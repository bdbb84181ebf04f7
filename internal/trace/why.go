package trace

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Reasons and messages of the components whose Events and conditions Diagnose reads.
const (
	// Controllers (ReplicaSet, Job, StatefulSet...) when the API server refuses a pod.
	diagReasonFailedCreate = "FailedCreate"
	// Scheduler.
	diagReasonFailedScheduling = "FailedScheduling"
	// PV controller and external-provisioner, on the claim.
	diagReasonProvisioningFailed     = "ProvisioningFailed"
	diagReasonWaitForFirstConsumer   = "WaitForFirstConsumer"
	diagReasonExternalProvisioning   = "ExternalProvisioning"
	diagReasonProvisioning           = "Provisioning"
	diagReasonFailedBinding          = "FailedBinding"
	diagAnnSelectedNode              = "volume.kubernetes.io/selected-node"
	diagPVCProtectionFinalizer       = "kubernetes.io/pvc-protection"
	diagMsgMultiAttach               = "Multi-Attach error"
	diagMsgVolumeNodeAffinity        = "volume node affinity conflict"
	diagMsgNoVolumeZone              = "had no available volume zone"
	diagMsgUnboundImmediate          = "pod has unbound immediate PersistentVolumeClaims"
	diagMsgNoPersistentVolumesToBind = "didn't find available persistent volumes to bind"
	// Attach/detach controller and kubelet, on the pod.
	diagReasonFailedAttach  = "FailedAttachVolume"
	diagReasonFailedMount   = "FailedMount"
	diagReasonFailedSandbox = "FailedCreatePodSandBox"
	diagReasonUnhealthy     = "Unhealthy"
	diagReasonPulling       = "Pulling"
	diagReasonPulled        = "Pulled"
	diagReasonFailed        = "Failed"
	diagReasonOOMKilled     = "OOMKilled"
	diagReasonCrashLoop     = "CrashLoopBackOff"
)

// The commands that show the add-ons' side of a failure.
const (
	diagProvisionerLogs = "kubectl logs -n kube-system -l app=ebs-csi-controller -c csi-provisioner --tail=50"
	diagAttacherLogs    = "kubectl logs -n kube-system -l app=ebs-csi-controller -c csi-attacher --tail=50"
)

// The labels and topology keys that name a zone.
var (
	diagNodeZoneLabels = []string{"topology.kubernetes.io/zone", "topology.ebs.csi.aws.com/zone", "failure-domain.beta.kubernetes.io/zone"}
	diagPVZoneKeys     = []string{"topology.ebs.csi.aws.com/zone", "topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone"}
)

// Waiting reasons of a container, grouped by the stage they stop at.
var (
	diagImageReasons  = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
	diagCreateReasons = []string{"CreateContainerError", "CreateContainerConfigError", "RunContainerError", "PreStartHookError"}
	// diagStartErrors are the termination reasons of a container the runtime could not
	// start (containerd's, and dockershim's of old).
	diagStartErrors = []string{"StartError", "ContainerCannotRun"}
	// Messages of a CNI plugin whose IPAM has no address left in the node's podCIDR.
	diagCIDRFull = []string{"no IP addresses available", "range is full", "range set is full", "exhausted", "no free address in"}
)

var (
	// aws-sdk-go-v2's smithy error: "operation error EC2: CreateVolume, ..., api error CODE: message".
	diagAPIErrorCode = regexp.MustCompile(`api error ([A-Za-z0-9.]+):`)
	// A gRPC status as text: "rpc error: code = Internal desc = ...".
	diagGRPCCode = regexp.MustCompile(`code = ([A-Za-z]+)`)
	// The volume a kubelet or attach/detach message is about: `for volume "pvc-1"`.
	diagForVolume = regexp.MustCompile(`for volume "([^"]+)"`)
)

// Diagnose names the stage at which a pod that is not Running and Ready (or that is
// terminating) stops, why, the status or Event message that shows it and the command that
// shows that message. It returns Diagnosis{} for a pod that is Running with all its
// containers ready, or Succeeded. It does no I/O: it reads only s.
func Diagnose(s *Snapshot) Diagnosis {
	d := newDiagnoser(s)
	if s.Pod == nil {
		return d.podGone()
	}
	for _, check := range []func() (Diagnosis, bool){
		d.podTerminating,   // deleted, held by finalizers or by containers
		d.notStuck,         // Running and Ready, or Succeeded
		d.claimTerminating, // a claim it uses is being deleted
		d.unscheduled,      // no node yet
		d.claimUnbound,     // scheduled, a claim without its volume
		d.attach,           // a volume not attached to the node
		d.mount,            // the kubelet cannot mount a volume
		d.sandbox,          // no sandbox: CNI
		d.containers,       // image, create, crash, OOM
		d.podFailed,        // phase Failed
		d.probes,           // Running, a container not ready
	} {
		if dg, ok := check(); ok {
			return dg
		}
	}
	return d.furthest()
}

// diagnoser holds the snapshot and what the checks compute from it once.
type diagnoser struct {
	s    *Snapshot
	pod  *corev1.Pod
	ns   string
	name string
	node string
	// started is when the pod's newest container started (zero: none has).
	started time.Time
}

func newDiagnoser(s *Snapshot) *diagnoser {
	d := &diagnoser{s: s, pod: s.Pod, ns: s.Namespace, name: s.Name}
	if d.pod != nil {
		if d.ns == "" {
			d.ns = d.pod.Namespace
		}
		if d.name == "" {
			d.name = d.pod.Name
		}
		d.node = d.pod.Spec.NodeName
		for _, cs := range d.statuses() {
			if r := cs.State.Running; r != nil && r.StartedAt.After(d.started) {
				d.started = r.StartedAt.Time
			}
			if t := cs.State.Terminated; t != nil && t.StartedAt.After(d.started) {
				d.started = t.StartedAt.Time
			}
			if t := cs.LastTerminationState.Terminated; t != nil && t.StartedAt.After(d.started) {
				d.started = t.StartedAt.Time
			}
		}
	}
	return d
}

// 1. The pod is gone or was never created.

func (d *diagnoser) podGone() Diagnosis {
	var newest *corev1.Event
	var kind, name string
	for _, owner := range d.s.Owners {
		k, n, ok := strings.Cut(owner, "/")
		if !ok {
			continue
		}
		e := d.newestEvent(k, d.ns, n, "", func(e *corev1.Event) bool { return e.Reason == diagReasonFailedCreate })
		if e != nil && (newest == nil || diagEventTime(e).After(diagEventTime(newest))) {
			newest, kind, name = e, k, n
		}
	}
	if newest == nil {
		return Diagnosis{Reason: "pod not found", Command: fmt.Sprintf("kubectl get pod %s -n %s", d.name, d.ns)}
	}
	return Diagnosis{
		Stage:    StageAdmission,
		Reason:   "the API server refused the pod: " + diagLine(newest.Message),
		Evidence: newest.Message,
		Command:  fmt.Sprintf("kubectl describe %s %s -n %s", strings.ToLower(kind), name, d.ns),
	}
}

// 2. Deleted: finalizers, containers past their grace period, a claim being deleted.

func (d *diagnoser) podTerminating() (Diagnosis, bool) {
	del := d.pod.DeletionTimestamp
	if del == nil {
		return Diagnosis{}, false
	}
	if len(d.pod.Finalizers) > 0 {
		return Diagnosis{
			Stage: StageTerminating,
			Reason: fmt.Sprintf("pod deleted at %s but held by finalizer(s) %s: the controller that owns them has not removed them",
				del.UTC().Format(time.RFC3339), strings.Join(d.pod.Finalizers, ", ")),
			Evidence: diagJSON(d.pod.Finalizers),
			Command:  fmt.Sprintf("kubectl get pod %s -n %s -o jsonpath='{.metadata.finalizers}'", d.name, d.ns),
		}, true
	}
	var running []string
	for _, cs := range d.statuses() {
		if cs.State.Running != nil {
			running = append(running, cs.Name)
		}
	}
	describe := fmt.Sprintf("kubectl describe pod %s -n %s", d.name, d.ns)
	evidence := fmt.Sprintf("deletionTimestamp: %s", del.UTC().Format(time.RFC3339))
	if !d.s.Now.After(del.Time) {
		return Diagnosis{
			Stage:    StageTerminating,
			Reason:   fmt.Sprintf("pod is terminating; its grace period ends in %s", del.Sub(d.s.Now).Round(time.Second)),
			Evidence: evidence,
			Command:  describe,
		}, true
	}
	reason := fmt.Sprintf("the kubelet on %s has not confirmed the containers stopped, %s past the grace period",
		d.node, d.s.Now.Sub(del.Time).Round(time.Second))
	if len(running) > 0 {
		reason = fmt.Sprintf("container(s) %s still running %s past the grace period",
			strings.Join(running, ", "), d.s.Now.Sub(del.Time).Round(time.Second))
	}
	if n := d.s.Node; n != nil && !diagNodeReady(n) {
		reason += fmt.Sprintf("; node %s is not Ready", n.Name)
	}
	return Diagnosis{Stage: StageTerminating, Reason: reason, Evidence: evidence, Command: describe}, true
}

func (d *diagnoser) claimTerminating() (Diagnosis, bool) {
	for _, c := range d.s.Claims {
		if c.DeletionTimestamp == nil || !slices.Contains(c.Finalizers, diagPVCProtectionFinalizer) {
			continue
		}
		evidence := diagJSON(c.Finalizers)
		if msg := d.schedulingMessage(); strings.Contains(msg, "is being deleted") {
			evidence = msg
		}
		return Diagnosis{
			Stage: StageTerminating,
			Reason: fmt.Sprintf("claim %s is being deleted; %s keeps it while pod %s uses it",
				c.Name, diagPVCProtectionFinalizer, d.name),
			Evidence: evidence,
			Command:  fmt.Sprintf("kubectl get pvc %s -n %s -o jsonpath='{.metadata.finalizers}'", c.Name, d.ns),
		}, true
	}
	return Diagnosis{}, false
}

// notStuck is true of a Succeeded pod and of a Running one whose containers are all ready.
func (d *diagnoser) notStuck() (Diagnosis, bool) {
	switch d.pod.Status.Phase {
	case corev1.PodSucceeded:
		return Diagnosis{}, true
	case corev1.PodRunning:
		cs := d.pod.Status.ContainerStatuses
		if len(cs) == 0 {
			return Diagnosis{}, false
		}
		for _, c := range cs {
			if !c.Ready {
				return Diagnosis{}, false
			}
		}
		return Diagnosis{}, true
	}
	return Diagnosis{}, false
}

// 3. Not scheduled.

func (d *diagnoser) unscheduled() (Diagnosis, bool) {
	if d.node != "" {
		return Diagnosis{}, false
	}
	for _, check := range []func() (Diagnosis, bool){
		d.missingClaim,
		d.filtersRefused,
		d.provisioningFailed,
		d.waitingForProvisioner,
		d.schedulerError,
	} {
		if dg, ok := check(); ok {
			return dg, true
		}
	}
	return Diagnosis{
		Stage:    StageScheduling,
		Reason:   "waiting for the scheduler",
		Evidence: "spec.nodeName is empty and the pod has no PodScheduled condition yet",
		Command:  fmt.Sprintf("kubectl describe pod %s -n %s", d.name, d.ns),
	}, true
}

func (d *diagnoser) missingClaim() (Diagnosis, bool) {
	if len(d.s.MissingClaims) == 0 {
		return Diagnosis{}, false
	}
	claim := d.s.MissingClaims[0]
	reason := fmt.Sprintf("persistentvolumeclaim %q not found", claim)
	dg := Diagnosis{
		Stage:    StageScheduling,
		Reason:   reason,
		Evidence: reason,
		Command:  fmt.Sprintf("kubectl get pvc %s -n %s", claim, d.ns),
	}
	if msg := d.schedulingMessage(); strings.Contains(msg, reason) {
		dg.Evidence = msg
		dg.Command = fmt.Sprintf("kubectl describe pod %s -n %s", d.name, d.ns)
	}
	return dg, true
}

// filtersRefused reads the scheduler's "0/3 nodes are available: ..." message.
func (d *diagnoser) filtersRefused() (Diagnosis, bool) {
	msg, ok := d.unschedulableMessage()
	if !ok {
		return Diagnosis{}, false
	}
	filters := diagSchedulerFilters(msg)
	summary := strings.Join(filters, ", ")
	if summary == "" {
		summary = diagLine(msg)
	}
	reason := "no node passes the scheduler's filters: " + summary
	var extra []string
	switch {
	case strings.Contains(msg, diagMsgVolumeNodeAffinity) || strings.Contains(msg, diagMsgNoVolumeZone):
		if why, pvs := d.zoneMismatch(); why != "" {
			reason = why + " (" + summary + ")"
			for _, pv := range pvs {
				extra = append(extra, fmt.Sprintf("kubectl get pv %s -o jsonpath='{.spec.nodeAffinity}'", pv))
			}
			extra = append(extra, "kubectl get nodes -L topology.kubernetes.io/zone")
		}
	case strings.Contains(msg, diagMsgUnboundImmediate) || strings.Contains(msg, diagMsgNoPersistentVolumesToBind):
		if names := d.unboundClaims(); len(names) > 0 {
			reason = fmt.Sprintf("claim(s) %s not bound (%s)", strings.Join(names, ", "), summary)
			for _, n := range names {
				extra = append(extra, fmt.Sprintf("kubectl describe pvc %s -n %s", n, d.ns))
			}
		}
	}
	return Diagnosis{
		Stage:    StageScheduling,
		Reason:   reason,
		Evidence: msg,
		Command:  strings.Join(append([]string{fmt.Sprintf("kubectl describe pod %s -n %s", d.name, d.ns)}, extra...), "; "),
	}, true
}

// zoneMismatch names the claims whose volume is in a zone no node is in, and those volumes.
func (d *diagnoser) zoneMismatch() (string, []string) {
	nodeZones := map[string]bool{}
	for _, n := range d.s.Nodes {
		if z := diagNodeZone(n); z != "" {
			nodeZones[z] = true
		}
	}
	var parts, pvs []string
	for _, c := range d.s.Claims {
		pv := d.volume(c.Spec.VolumeName)
		if pv == nil {
			continue
		}
		zones := diagPVZones(pv)
		if len(zones) == 0 || slices.ContainsFunc(zones, func(z string) bool { return nodeZones[z] }) {
			continue
		}
		parts = append(parts, fmt.Sprintf("claim %s is bound to PV %s in %s", c.Name, pv.Name, strings.Join(zones, ", ")))
		pvs = append(pvs, pv.Name)
	}
	if len(parts) == 0 {
		return "", nil
	}
	zones := make([]string, 0, len(nodeZones))
	for z := range nodeZones {
		zones = append(zones, z)
	}
	slices.Sort(zones)
	where := "no node has a zone label"
	if len(zones) > 0 {
		where = "the nodes are in " + strings.Join(zones, ", ")
	}
	return strings.Join(parts, "; ") + ", but " + where, pvs
}

func (d *diagnoser) schedulerError() (Diagnosis, bool) {
	msg := d.schedulingMessage()
	if msg == "" {
		return Diagnosis{}, false
	}
	return Diagnosis{
		Stage:    StageScheduling,
		Reason:   "the scheduler cannot bind the pod: " + diagLine(msg),
		Evidence: msg,
		Command:  fmt.Sprintf("kubectl describe pod %s -n %s", d.name, d.ns),
	}, true
}

// 3 and 4. Claims without their volume.

func (d *diagnoser) claimUnbound() (Diagnosis, bool) {
	if dg, ok := d.provisioningFailed(); ok {
		return dg, true
	}
	return d.waitingForProvisioner()
}

func (d *diagnoser) provisioningFailed() (Diagnosis, bool) {
	var newest *corev1.Event
	var claim string
	for _, c := range d.s.Claims {
		if c.Status.Phase == corev1.ClaimBound {
			continue
		}
		e := d.newestEvent("PersistentVolumeClaim", d.ns, c.Name, c.UID, func(e *corev1.Event) bool {
			return e.Reason == diagReasonProvisioningFailed
		})
		if e != nil && (newest == nil || diagEventTime(e).After(diagEventTime(newest))) {
			newest, claim = e, c.Name
		}
	}
	if newest == nil {
		return Diagnosis{}, false
	}
	why := diagCloudErrorCode(newest.Message)
	if why == "" {
		why = diagLine(newest.Message)
	}
	return Diagnosis{
		Stage:    StageProvisioning,
		Reason:   fmt.Sprintf("the volume for claim %s cannot be created: %s", claim, why),
		Evidence: newest.Message,
		Command:  fmt.Sprintf("kubectl describe pvc %s -n %s; %s", claim, d.ns, diagProvisionerLogs),
	}, true
}

// waitingForProvisioner is a claim not bound yet, with no failure: its volume is being
// made, or (scheduled pods only) it waits for its first consumer.
func (d *diagnoser) waitingForProvisioner() (Diagnosis, bool) {
	for _, c := range d.s.Claims {
		if c.Status.Phase == corev1.ClaimBound {
			continue
		}
		describe := fmt.Sprintf("kubectl describe pvc %s -n %s", c.Name, d.ns)
		if c.Status.Phase == corev1.ClaimLost {
			return Diagnosis{
				Stage:    StageBinding,
				Reason:   fmt.Sprintf("claim %s lost its volume %s", c.Name, c.Spec.VolumeName),
				Evidence: "status.phase: Lost",
				Command:  describe,
			}, true
		}
		e := d.newestEvent("PersistentVolumeClaim", d.ns, c.Name, c.UID, func(e *corev1.Event) bool {
			switch e.Reason {
			case diagReasonWaitForFirstConsumer, diagReasonExternalProvisioning, diagReasonProvisioning, diagReasonFailedBinding:
				return true
			}
			return false
		})
		selected := c.Annotations[diagAnnSelectedNode] != ""
		if d.node == "" && !selected && (e == nil || e.Reason == diagReasonWaitForFirstConsumer) {
			continue // the scheduler has not chosen a node for it yet
		}
		dg := Diagnosis{
			Stage:    StageBinding,
			Reason:   "waiting for the provisioner to create the volume for claim " + c.Name,
			Evidence: fmt.Sprintf("status.phase: %s", diagOr(string(c.Status.Phase), string(corev1.ClaimPending))),
			Command:  describe,
		}
		if e != nil {
			dg.Evidence = e.Message
			if e.Reason == diagReasonFailedBinding {
				dg.Reason = fmt.Sprintf("no PersistentVolume matches claim %s and none is being provisioned", c.Name)
			} else {
				dg.Command += "; " + diagProvisionerLogs
			}
		}
		return dg, true
	}
	return Diagnosis{}, false
}

// 5. Attach.

func (d *diagnoser) attach() (Diagnosis, bool) {
	if !d.started.IsZero() || d.node == "" {
		return Diagnosis{}, false // containers started: the volumes were attached
	}
	for _, check := range []func() (Diagnosis, bool){
		d.attachError,
		d.multiAttach,
		d.attachPending,
		d.attachMissing,
	} {
		if dg, ok := check(); ok {
			return dg, true
		}
	}
	return Diagnosis{}, false
}

func (d *diagnoser) attachError() (Diagnosis, bool) {
	for _, pv := range d.attachable() {
		va := d.attachment(pv.Name, d.node)
		if va == nil || va.Status.Attached || va.Status.AttachError == nil {
			continue
		}
		msg := va.Status.AttachError.Message
		return Diagnosis{
			Stage:    StageAttach,
			Reason:   fmt.Sprintf("volume %s cannot be attached to node %s: %s", pv.Name, d.node, diagLine(msg)),
			Evidence: msg,
			Command:  fmt.Sprintf("kubectl describe volumeattachment %s; %s", va.Name, diagAttacherLogs),
		}, true
	}
	return Diagnosis{}, false
}

func (d *diagnoser) multiAttach() (Diagnosis, bool) {
	e := d.podEvent(func(e *corev1.Event) bool {
		return e.Reason == diagReasonFailedAttach && strings.Contains(e.Message, diagMsgMultiAttach)
	})
	if e == nil {
		return Diagnosis{}, false
	}
	volume := ""
	if m := diagForVolume.FindStringSubmatch(e.Message); m != nil {
		volume = m[1]
	}
	if va := d.attachment(volume, d.node); va != nil && va.Status.Attached {
		return Diagnosis{}, false // the other node let go since
	}
	dg := Diagnosis{
		Stage:    StageAttach,
		Reason:   fmt.Sprintf("multi-attach: volume %s is attached to another node and can be attached to one node at a time", volume),
		Evidence: e.Message,
		Command:  fmt.Sprintf("kubectl describe pod %s -n %s; %s", d.name, d.ns, diagAttacherLogs),
	}
	for _, va := range d.s.Attachments {
		if diagAttachmentPV(va) == volume && va.Spec.NodeName != d.node {
			dg.Reason = fmt.Sprintf("multi-attach: volume %s is attached to another node (%s, VolumeAttachment %s); it can be attached to one node at a time",
				volume, va.Spec.NodeName, va.Name)
			dg.Command = fmt.Sprintf("kubectl describe volumeattachment %s; %s", va.Name, diagAttacherLogs)
			break
		}
	}
	return dg, true
}

func (d *diagnoser) attachPending() (Diagnosis, bool) {
	for _, pv := range d.attachable() {
		va := d.attachment(pv.Name, d.node)
		if va == nil || va.Status.Attached {
			continue
		}
		return Diagnosis{
			Stage:    StageAttach,
			Reason:   fmt.Sprintf("attach not done yet (VolumeAttachment %s)", va.Name),
			Evidence: "attached: false",
			Command:  fmt.Sprintf("kubectl describe volumeattachment %s; %s", va.Name, diagAttacherLogs),
		}, true
	}
	return Diagnosis{}, false
}

func (d *diagnoser) attachMissing() (Diagnosis, bool) {
	for _, pv := range d.attachable() {
		if d.attachment(pv.Name, d.node) != nil {
			continue
		}
		return Diagnosis{
			Stage:  StageAttach,
			Reason: fmt.Sprintf("no VolumeAttachment yet for volume %s on node %s", pv.Name, d.node),
			Evidence: fmt.Sprintf("no VolumeAttachment has spec.source.persistentVolumeName=%s and spec.nodeName=%s",
				pv.Name, d.node),
			Command: "kubectl get volumeattachment -o custom-columns=NAME:.metadata.name,PV:.spec.source.persistentVolumeName,NODE:.spec.nodeName,ATTACHED:.status.attached",
		}, true
	}
	return Diagnosis{}, false
}

// 6. Mount.

func (d *diagnoser) mount() (Diagnosis, bool) {
	e := d.currentPodEvent(diagReasonFailedMount)
	if e == nil {
		return Diagnosis{}, false
	}
	dg := Diagnosis{
		Stage:    StageMount,
		Reason:   fmt.Sprintf("the kubelet on %s cannot mount a volume: %s", d.node, diagLine(e.Message)),
		Evidence: e.Message,
		Command:  fmt.Sprintf("kubectl describe pod %s -n %s", d.name, d.ns),
	}
	if d.mentionsPersistentVolume(e.Message) {
		dg.Command = d.csiNodeLogs()
	}
	return dg, true
}

// mentionsPersistentVolume is true of a mount message about a PV (not a ConfigMap or
// Secret): the CSI node plugin's log says more.
func (d *diagnoser) mentionsPersistentVolume(msg string) bool {
	if strings.Contains(msg, "MountDevice") {
		return true
	}
	for _, pv := range d.s.Volumes {
		if strings.Contains(msg, pv.Name) {
			return true
		}
	}
	for _, v := range d.pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil && strings.Contains(msg, "unmounted volumes=[") &&
			regexp.MustCompile(`[\[ ,]`+regexp.QuoteMeta(v.Name)+`[\] ,]`).MatchString(msg) {
			return true
		}
	}
	return false
}

func (d *diagnoser) csiNodeLogs() string {
	return fmt.Sprintf("kubectl logs -n kube-system $(kubectl get pod -n kube-system -l app=ebs-csi-node --field-selector spec.nodeName=%s -o jsonpath='{.items[0].metadata.name}') -c ebs-plugin --tail=100", d.node)
}

// 7. Sandbox network.

func (d *diagnoser) sandbox() (Diagnosis, bool) {
	e := d.currentPodEvent(diagReasonFailedSandbox)
	if e == nil {
		return Diagnosis{}, false
	}
	dg := Diagnosis{
		Stage:    StageNetwork,
		Reason:   fmt.Sprintf("the pod's sandbox cannot be created on node %s: %s", d.node, diagLine(e.Message)),
		Evidence: e.Message,
		Command:  fmt.Sprintf("kubectl describe pod %s -n %s", d.name, d.ns),
	}
	if slices.ContainsFunc(diagCIDRFull, func(s string) bool { return strings.Contains(e.Message, s) }) {
		cidr := ""
		if d.s.Node != nil && d.s.Node.Spec.PodCIDR != "" {
			cidr = " (" + d.s.Node.Spec.PodCIDR + ")"
		}
		dg.Reason = fmt.Sprintf("the node's podCIDR%s is full: node %s has no IP address left for the pod", cidr, d.node)
		dg.Command += fmt.Sprintf("; kubectl get node %s -o jsonpath='{.spec.podCIDR}'", d.node)
	}
	return dg, true
}

// 8. Containers: init containers first.

func (d *diagnoser) containers() (Diagnosis, bool) {
	for _, cs := range d.statuses() {
		if dg, ok := d.container(cs); ok {
			return dg, true
		}
	}
	return Diagnosis{}, false
}

func (d *diagnoser) container(cs corev1.ContainerStatus) (Diagnosis, bool) {
	describe := fmt.Sprintf("kubectl describe pod %s -n %s", d.name, d.ns)
	if w := cs.State.Waiting; w != nil {
		switch {
		case slices.Contains(diagImageReasons, w.Reason):
			return Diagnosis{
				Stage:    StageImage,
				Reason:   fmt.Sprintf("image %q of container %s cannot be pulled (%s)", d.image(cs), cs.Name, w.Reason),
				Evidence: diagOr(w.Message, d.pullFailure(cs.Name)),
				Command:  describe,
			}, true
		case slices.Contains(diagCreateReasons, w.Reason):
			return Diagnosis{
				Stage:    StageCreate,
				Reason:   fmt.Sprintf("container %s cannot be created (%s): %s", cs.Name, w.Reason, diagLine(w.Message)),
				Evidence: w.Message,
				Command:  describe,
			}, true
		case w.Reason == diagReasonCrashLoop:
			last := cs.LastTerminationState.Terminated
			if last != nil && last.Reason == diagReasonOOMKilled {
				return d.oomKilled(cs, last), true
			}
			if last != nil && slices.Contains(diagStartErrors, last.Reason) {
				// The runtime could not start the process (a missing binary, say): it never ran.
				return Diagnosis{
					Stage:    StageCreate,
					Reason:   fmt.Sprintf("container %s cannot be started (%s): %s", cs.Name, last.Reason, diagLine(last.Message)),
					Evidence: diagTerminated(last),
					Command:  describe,
				}, true
			}
			why := "exits"
			if last != nil {
				why = fmt.Sprintf("exits with code %d (%s)", last.ExitCode, diagOr(last.Reason, "Error"))
			}
			return Diagnosis{
				Stage:    StageCrash,
				Reason:   fmt.Sprintf("container %s %s and is restarted in a loop (%d restarts)", cs.Name, why, cs.RestartCount),
				Evidence: diagOr(w.Message, diagTerminated(last)),
				Command:  fmt.Sprintf("kubectl logs %s -n %s -c %s --previous", d.name, d.ns, cs.Name),
			}, true
		}
	}
	if t := cs.State.Terminated; t != nil {
		if t.Reason == diagReasonOOMKilled {
			return d.oomKilled(cs, t), true
		}
		if t.ExitCode != 0 && d.pod.Status.Phase != corev1.PodFailed {
			return Diagnosis{
				Stage:    StageCrash,
				Reason:   fmt.Sprintf("container %s exited with code %d (%s)", cs.Name, t.ExitCode, diagOr(t.Reason, "Error")),
				Evidence: diagTerminated(t),
				Command:  fmt.Sprintf("kubectl logs %s -n %s -c %s", d.name, d.ns, cs.Name),
			}, true
		}
	}
	return Diagnosis{}, false
}

func (d *diagnoser) oomKilled(cs corev1.ContainerStatus, t *corev1.ContainerStateTerminated) Diagnosis {
	limit := ""
	for _, c := range slices.Concat(d.pod.Spec.InitContainers, d.pod.Spec.Containers) {
		if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && c.Name == cs.Name {
			limit = " of " + q.String()
		}
	}
	return Diagnosis{
		Stage:    StageOOM,
		Reason:   fmt.Sprintf("container %s was OOMKilled: it used more than its memory limit%s (%d restarts)", cs.Name, limit, cs.RestartCount),
		Evidence: diagTerminated(t),
		Command:  fmt.Sprintf("kubectl describe pod %s -n %s", d.name, d.ns),
	}
}

// 9. Failed.

func (d *diagnoser) podFailed() (Diagnosis, bool) {
	st := d.pod.Status
	if st.Phase != corev1.PodFailed {
		return Diagnosis{}, false
	}
	dg := Diagnosis{
		Stage:    StageFailed,
		Reason:   "the pod failed",
		Evidence: st.Message,
		Command:  fmt.Sprintf("kubectl describe pod %s -n %s", d.name, d.ns),
	}
	if st.Reason != "" || st.Message != "" {
		dg.Reason = fmt.Sprintf("the pod failed: %s", strings.TrimPrefix(diagLine(st.Reason+": "+st.Message), ": "))
	}
	for _, cs := range d.statuses() {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			if st.Reason == "" && st.Message == "" {
				dg.Reason = fmt.Sprintf("the pod failed: container %s exited with code %d (%s)", cs.Name, t.ExitCode, diagOr(t.Reason, "Error"))
				dg.Evidence = diagTerminated(t)
			}
			break
		}
	}
	return dg, true
}

// 10. Probes.

func (d *diagnoser) probes() (Diagnosis, bool) {
	if d.pod.Status.Phase != corev1.PodRunning {
		return Diagnosis{}, false
	}
	describe := fmt.Sprintf("kubectl describe pod %s -n %s", d.name, d.ns)
	for _, cs := range d.pod.Status.ContainerStatuses {
		if cs.Ready {
			continue
		}
		field := fmt.Sprintf("spec.containers{%s}", cs.Name)
		e := d.podEvent(func(e *corev1.Event) bool {
			return e.Reason == diagReasonUnhealthy && (e.InvolvedObject.FieldPath == field || e.InvolvedObject.FieldPath == "")
		})
		if e == nil {
			continue
		}
		kind, _, _ := strings.Cut(e.Message, " probe")
		restarts := ""
		if cs.RestartCount > 0 {
			restarts = fmt.Sprintf(" (%d restarts)", cs.RestartCount)
		}
		return Diagnosis{
			Stage: StageProbe,
			Reason: fmt.Sprintf("%s probe of container %s fails%s: %s",
				strings.ToLower(kind), cs.Name, restarts, diagLine(e.Message)),
			Evidence: e.Message,
			Command:  describe,
		}, true
	}
	for _, cs := range d.pod.Status.ContainerStatuses {
		if !cs.Ready {
			return Diagnosis{
				Stage:    StageProbe,
				Reason:   fmt.Sprintf("container %s not ready yet", cs.Name),
				Evidence: fmt.Sprintf("container %s: ready: false", cs.Name),
				Command:  describe,
			}, true
		}
	}
	return Diagnosis{}, false
}

// 11. Nothing failed: the furthest step not done yet.

func (d *diagnoser) furthest() Diagnosis {
	describe := fmt.Sprintf("kubectl describe pod %s -n %s", d.name, d.ns)
	waiting := "no container status yet"
	for _, cs := range d.statuses() {
		if w := cs.State.Waiting; w != nil {
			waiting = fmt.Sprintf("container %s: waiting: %s", cs.Name, w.Reason)
			break
		}
	}
	if d.pod.Status.Phase != corev1.PodPending && d.pod.Status.Phase != "" {
		return Diagnosis{}
	}
	for _, cs := range d.pod.Status.InitContainerStatuses {
		if cs.State.Running != nil {
			return Diagnosis{
				Stage:    StageCreate,
				Reason:   fmt.Sprintf("init container %s is still running; the containers start after it completes", cs.Name),
				Evidence: fmt.Sprintf("init container %s: running since %s", cs.Name, cs.State.Running.StartedAt.UTC().Format(time.RFC3339)),
				Command:  fmt.Sprintf("kubectl logs %s -n %s -c %s", d.name, d.ns, cs.Name),
			}
		}
	}
	if d.started.IsZero() && len(d.attachable()) > 0 {
		return Diagnosis{
			Stage:    StageMount,
			Reason:   fmt.Sprintf("volumes not set up yet: the kubelet on %s has not mounted them", d.node),
			Evidence: waiting,
			Command:  d.csiNodeLogs(),
		}
	}
	if c := diagPodCondition(d.pod, corev1.PodReadyToStartContainers); c == nil || c.Status != corev1.ConditionTrue {
		return Diagnosis{
			Stage:    StageNetwork,
			Reason:   fmt.Sprintf("the pod's sandbox is not ready yet on node %s", d.node),
			Evidence: waiting,
			Command:  describe,
		}
	}
	if e := d.podEvent(func(e *corev1.Event) bool {
		return e.Reason == diagReasonPulling || e.Reason == diagReasonPulled
	}); e != nil && e.Reason == diagReasonPulling {
		return Diagnosis{Stage: StageImage, Reason: "pulling the image", Evidence: e.Message, Command: describe}
	}
	return Diagnosis{Stage: StageCreate, Reason: "containers not started yet", Evidence: waiting, Command: describe}
}

// Helpers over the snapshot.

// statuses are the pod's init containers' statuses, then its containers'.
func (d *diagnoser) statuses() []corev1.ContainerStatus {
	return slices.Concat(d.pod.Status.InitContainerStatuses, d.pod.Status.ContainerStatuses)
}

// newestEvent is the newest Event about the object kind ns/name (ns "" for cluster
// objects; uid "" for any incarnation) that match accepts.
func (d *diagnoser) newestEvent(kind, ns, name string, uid types.UID, match func(*corev1.Event) bool) *corev1.Event {
	var newest *corev1.Event
	for i := range d.s.Events {
		e := &d.s.Events[i]
		o := e.InvolvedObject
		if o.Kind != kind || o.Name != name || o.Namespace != ns {
			continue
		}
		if uid != "" && o.UID != "" && o.UID != uid {
			continue // about an earlier object of the same name
		}
		if !match(e) {
			continue
		}
		if newest == nil || diagEventTime(e).After(diagEventTime(newest)) {
			newest = e
		}
	}
	return newest
}

func (d *diagnoser) podEvent(match func(*corev1.Event) bool) *corev1.Event {
	return d.newestEvent("Pod", d.ns, d.name, d.pod.UID, match)
}

// currentPodEvent is the newest pod Event of reason not older than the newest container
// start: older ones were about an attempt that got past them.
func (d *diagnoser) currentPodEvent(reason string) *corev1.Event {
	return d.podEvent(func(e *corev1.Event) bool {
		return e.Reason == reason && !diagEventTime(e).Before(d.started)
	})
}

// unschedulableMessage is the scheduler's message of a pod no node fits: its PodScheduled
// condition's, or the newest FailedScheduling Event's.
func (d *diagnoser) unschedulableMessage() (string, bool) {
	if c := diagPodCondition(d.pod, corev1.PodScheduled); c != nil {
		ok := c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && c.Message != ""
		return c.Message, ok
	}
	if e := d.schedulingEvent(); e != nil && strings.Contains(e.Message, "nodes are available") {
		return e.Message, true
	}
	return "", false
}

// schedulingMessage is the scheduler's latest word on a pod it has not bound, if any.
func (d *diagnoser) schedulingMessage() string {
	if c := diagPodCondition(d.pod, corev1.PodScheduled); c != nil {
		if c.Status == corev1.ConditionFalse {
			return c.Message
		}
		return ""
	}
	if e := d.schedulingEvent(); e != nil {
		return e.Message
	}
	return ""
}

func (d *diagnoser) schedulingEvent() *corev1.Event {
	return d.podEvent(func(e *corev1.Event) bool { return e.Reason == diagReasonFailedScheduling })
}

func (d *diagnoser) unboundClaims() []string {
	var names []string
	for _, c := range d.s.Claims {
		if c.Status.Phase != corev1.ClaimBound {
			names = append(names, c.Name)
		}
	}
	return names
}

func (d *diagnoser) volume(name string) *corev1.PersistentVolume {
	if name == "" {
		return nil
	}
	for _, pv := range d.s.Volumes {
		if pv.Name == name {
			return pv
		}
	}
	return nil
}

// attachable are the PVs bound to the pod's claims that a driver attaches to a node.
func (d *diagnoser) attachable() []*corev1.PersistentVolume {
	var out []*corev1.PersistentVolume
	for _, c := range d.s.Claims {
		if c.Status.Phase != corev1.ClaimBound {
			continue
		}
		if pv := d.volume(c.Spec.VolumeName); pv != nil && (pv.Spec.CSI != nil || pv.Spec.AWSElasticBlockStore != nil) {
			out = append(out, pv)
		}
	}
	return out
}

func (d *diagnoser) attachment(pv, node string) *storagev1.VolumeAttachment {
	for _, va := range d.s.Attachments {
		if diagAttachmentPV(va) == pv && va.Spec.NodeName == node {
			return va
		}
	}
	return nil
}

func (d *diagnoser) image(cs corev1.ContainerStatus) string {
	for _, c := range slices.Concat(d.pod.Spec.InitContainers, d.pod.Spec.Containers) {
		if c.Name == cs.Name {
			return c.Image
		}
	}
	return cs.Image
}

// pullFailure is the message of the kubelet's newest Failed Event about the container.
func (d *diagnoser) pullFailure(container string) string {
	field := fmt.Sprintf("{%s}", container)
	e := d.podEvent(func(e *corev1.Event) bool {
		return e.Reason == diagReasonFailed && strings.HasSuffix(e.InvolvedObject.FieldPath, field)
	})
	if e == nil {
		return ""
	}
	return e.Message
}

// Pure helpers.

// diagEventTime is when an Event was last seen.
func diagEventTime(e *corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.FirstTimestamp.IsZero():
		return e.FirstTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

// diagSchedulerFilters are the "N node(s) ..." parts of the scheduler's "0/3 nodes are
// available: 1 node(s) had volume node affinity conflict, 2 Insufficient cpu. preemption:
// ..." message.
func diagSchedulerFilters(msg string) []string {
	_, rest, ok := strings.Cut(msg, "nodes are available: ")
	if !ok {
		return nil
	}
	if i := strings.Index(rest, ". "); i >= 0 {
		rest = rest[:i]
	}
	rest = strings.TrimSuffix(strings.TrimSpace(rest), ".")
	var out []string
	for _, p := range strings.Split(rest, ", ") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// diagCloudErrorCode is the EC2 error code in a provisioner's or attacher's message, with
// the gRPC code around it: "InsufficientVolumeCapacity (gRPC Internal)". "" when neither.
func diagCloudErrorCode(msg string) string {
	ec2, grpc := "", ""
	if m := diagAPIErrorCode.FindStringSubmatch(msg); m != nil {
		ec2 = m[1]
	}
	if m := diagGRPCCode.FindStringSubmatch(msg); m != nil {
		grpc = m[1]
	}
	switch {
	case ec2 != "" && grpc != "":
		return fmt.Sprintf("%s (gRPC %s)", ec2, grpc)
	case ec2 != "":
		return ec2
	case grpc != "":
		return "gRPC " + grpc + ": " + diagLine(msg)
	}
	return ""
}

func diagPodCondition(pod *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range pod.Status.Conditions {
		if pod.Status.Conditions[i].Type == t {
			return &pod.Status.Conditions[i]
		}
	}
	return nil
}

func diagNodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func diagNodeZone(n *corev1.Node) string {
	for _, k := range diagNodeZoneLabels {
		if z := n.Labels[k]; z != "" {
			return z
		}
	}
	return ""
}

// diagPVZones are the zones a PV's node affinity (or zone label) allows.
func diagPVZones(pv *corev1.PersistentVolume) []string {
	var zones []string
	if na := pv.Spec.NodeAffinity; na != nil && na.Required != nil {
		for _, term := range na.Required.NodeSelectorTerms {
			for _, r := range term.MatchExpressions {
				if slices.Contains(diagPVZoneKeys, r.Key) && r.Operator == corev1.NodeSelectorOpIn {
					zones = append(zones, r.Values...)
				}
			}
		}
	}
	if len(zones) == 0 {
		if z := pv.Labels["topology.kubernetes.io/zone"]; z != "" {
			zones = strings.Split(z, "__")
		}
	}
	slices.Sort(zones)
	return slices.Compact(zones)
}

func diagAttachmentPV(va *storagev1.VolumeAttachment) string {
	if va.Spec.Source.PersistentVolumeName == nil {
		return ""
	}
	return *va.Spec.Source.PersistentVolumeName
}

// diagTerminated says a terminated state as kubectl describe does.
func diagTerminated(t *corev1.ContainerStateTerminated) string {
	if t == nil {
		return ""
	}
	s := fmt.Sprintf("Terminated: %s, exit code %d", diagOr(t.Reason, "Error"), t.ExitCode)
	if t.Message != "" {
		s += ": " + t.Message
	}
	return s
}

func diagJSON(v []string) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// diagLine is s on one line.
func diagLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

func diagOr(s, fallback string) string {
	if s != "" {
		return s
	}
	return fallback
}

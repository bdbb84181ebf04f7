package trace

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/csi/calllog"
	"github.com/kubelab/kubelab/internal/util/podutil"
)

// Build reconstructs the pod's flow from s: the arrows of the sequence in causal order
// (the order the flow's steps depend on each other, not the order of their timestamps,
// which the API keeps to the second), the objects' state transitions and the diagnosis.
func Build(s *Snapshot) Trace {
	t := Trace{Pod: s.Namespace + "/" + s.Name}
	b := &builder{s: s}
	if s.Pod != nil {
		t.Phase = string(s.Pod.Status.Phase)
		if s.Pod.DeletionTimestamp != nil {
			t.Phase += " (terminating)"
		}
		t.Node = s.Pod.Spec.NodeName
	}
	if b.podGone() != nil {
		t.Phase = "deleted"
	}
	if s.Node != nil {
		t.Zone = s.Node.Labels[corev1.LabelTopologyZone]
	}
	b.claims()
	b.pod()
	for _, c := range s.Claims {
		b.volume(c)
	}
	b.network()
	b.containers()
	b.end()
	t.Steps = b.steps
	t.Transitions = transitions(s, b)
	t.Start = b.start()
	if t.Phase != "deleted" {
		t.Diagnosis = Diagnose(s)
	}
	if t.Diagnosis.Stage != StageNone && len(t.Steps) > 0 {
		t.Steps = append(t.Steps, Step{From: stuckAt(t.Diagnosis.Stage), To: stuckAt(t.Diagnosis.Stage),
			What: "stuck: " + t.Diagnosis.Stage, Detail: t.Diagnosis.Reason, Waiting: true})
	}
	return t
}

// builder collects the steps, in the order they are added.
type builder struct {
	s     *Snapshot
	steps []Step
}

func (b *builder) add(st Step) { b.steps = append(b.steps, st) }

// start is the first known moment of the flow.
func (b *builder) start() time.Time {
	var first time.Time
	for _, st := range b.steps {
		if !st.At.IsZero() && (first.IsZero() || st.At.Before(first)) {
			first = st.At
		}
	}
	return first
}

// claims: kubectl creates each claim (stored in etcd as Pending).
func (b *builder) claims() {
	for _, c := range b.s.Claims {
		var details []string
		if c.Spec.StorageClassName != nil && *c.Spec.StorageClassName != "" {
			details = append(details, "class "+*c.Spec.StorageClassName)
		}
		if q, ok := c.Spec.Resources.Requests[corev1.ResourceStorage]; ok {
			details = append(details, q.String())
		}
		detail := strings.Join(details, ", ")
		at := c.CreationTimestamp.Time
		b.add(Step{From: Kubectl, To: APIServer, What: "POST PersistentVolumeClaim " + c.Name, Detail: detail, At: at, Source: "creationTimestamp"})
		b.add(Step{From: APIServer, To: Etcd, What: "WRITE claim (Pending)", At: at, Source: "creationTimestamp"})
		if ev := b.event("PersistentVolumeClaim", c.Name, "WaitForFirstConsumer"); ev != nil {
			b.add(Step{From: PVController, To: PVController, What: "WaitForFirstConsumer: wait for the pod to be scheduled", At: eventFirst(ev), Source: "Event WaitForFirstConsumer"})
		}
	}
}

// pod: kubectl creates the pod, the scheduler binds it.
func (b *builder) pod() {
	p := b.s.Pod
	if p == nil {
		return
	}
	at := p.CreationTimestamp.Time
	b.add(Step{From: Kubectl, To: APIServer, What: "POST Pod " + p.Name, At: at, Source: "creationTimestamp"})
	b.add(Step{From: APIServer, To: Etcd, What: "WRITE pod", At: at, Source: "creationTimestamp"})
	if p.Spec.NodeName == "" {
		return
	}
	scheduled := condTime(p.Status.Conditions, corev1.PodScheduled)
	source := "condition PodScheduled"
	if ev := b.event("Pod", p.Name, "Scheduled"); ev != nil {
		scheduled, source = eventFirst(ev), "Event Scheduled"
	}
	zone := ""
	if b.s.Node != nil {
		zone = b.s.Node.Labels[corev1.LabelTopologyZone]
	}
	b.add(Step{From: Scheduler, To: Scheduler, What: "select node " + p.Spec.NodeName, Detail: zone, At: scheduled, Source: source})
	b.add(Step{From: Scheduler, To: APIServer, What: "POST pods/binding", Detail: "spec.nodeName=" + p.Spec.NodeName, At: scheduled, Source: source})
}

// volume: the claim's volume is provisioned, bound and attached, then staged and
// published by the kubelet.
func (b *builder) volume(c *corev1.PersistentVolumeClaim) {
	pv := b.pvOf(c)
	handle := ""
	if pv != nil && pv.Spec.CSI != nil {
		handle = pv.Spec.CSI.VolumeHandle
	}
	cloud := b.cloud(handle)
	// Provisioning (dynamic claims only: the provisioner's Events are on the claim).
	if ev := b.event("PersistentVolumeClaim", c.Name, "Provisioning"); ev != nil {
		start := eventFirst(ev)
		call := b.call(handle, "CreateVolume", "")
		st := Step{From: Provisioner, To: CSIController, What: "CreateVolume", Detail: c.Name, At: start, Source: "Event Provisioning"}
		if !call.at.IsZero() {
			st.At, st.Took, st.Source = call.at, call.took, "ebs-plugin log"
		}
		b.add(st)
		if cloud != nil {
			b.add(Step{From: CSIController, To: Cloud, What: "CreateVolume", Detail: fmt.Sprintf("%s %s %dGiB %s", cloud.Zone, cloud.Type, cloud.SizeGiB, cloud.ID),
				At: cloud.CreateTime, Source: "EC2 CreateTime"})
		}
		if done := b.event("PersistentVolumeClaim", c.Name, "ProvisioningSucceeded"); done != nil && pv != nil {
			b.add(Step{From: Provisioner, To: APIServer, What: "CREATE PersistentVolume " + pv.Name, Detail: handle,
				At: pv.CreationTimestamp.Time, Source: "creationTimestamp"})
		}
	}
	if pv == nil {
		return
	}
	if c.Status.Phase == corev1.ClaimBound {
		at, source := statusTime(&c.ObjectMeta, b.s.Observed, "pvc", c.Name, string(corev1.ClaimBound))
		b.add(Step{From: PVController, To: APIServer, What: "bind claim " + c.Name + " to " + pv.Name, Detail: "claim Bound, volume claimRef", At: at, Source: source})
	}
	node := ""
	if b.s.Pod != nil {
		node = b.s.Pod.Spec.NodeName
	}
	va := b.attachment(pv.Name, node)
	if va == nil {
		return
	}
	b.add(Step{From: ADController, To: APIServer, What: "CREATE VolumeAttachment " + va.Name, Detail: pv.Name + " on " + node,
		At: va.CreationTimestamp.Time, Source: "creationTimestamp"})
	call := b.call(handle, "ControllerPublishVolume", "")
	st := Step{From: Attacher, To: CSIController, What: "ControllerPublishVolume", Detail: handle + " → " + node, At: va.CreationTimestamp.Time, Source: "creationTimestamp"}
	if !call.at.IsZero() {
		st.At, st.Took, st.Source = call.at, call.took, "ebs-plugin log"
	}
	b.add(st)
	if a := cloudAttachment(cloud, b.instanceOf()); a != nil {
		b.add(Step{From: CSIController, To: Cloud, What: "AttachVolume", Detail: a.InstanceID + " " + a.Device, At: a.AttachTime, Source: "EC2 AttachTime"})
	}
	// Attached now, or seen attached by a Watcher (the attachment of a deleted pod's volume
	// is detached by the time the trace is built).
	if va.Status.Attached || b.observed("va", va.Name, "attached=true") != nil {
		at, source := statusTime(&va.ObjectMeta, b.s.Observed, "va", va.Name, "attached=true")
		b.add(Step{From: Attacher, To: APIServer, What: "PATCH VolumeAttachment status.attached=true", At: at, Source: source})
	}
	for _, m := range []struct{ method, what string }{
		{"NodeStageVolume", "format and mount at globalmount"},
		{"NodePublishVolume", "bind-mount into the pod"},
	} {
		if call := b.call(handle, m.method, "node"); !call.at.IsZero() {
			b.add(Step{From: Kubelet, To: CSINode, What: m.method, Detail: m.what, At: call.at, Took: call.took, Source: "ebs-plugin log"})
		}
	}
}

// containers: the kubelet has the runtime start the containers, and the pod runs.
func (b *builder) containers() {
	p := b.s.Pod
	if p == nil || p.Spec.NodeName == "" {
		return
	}
	for _, ev := range b.events("Pod", p.Name) {
		switch ev.Reason {
		case "Pulled", "Created", "Started":
			b.add(Step{From: Kubelet, To: Runtime, What: ev.Reason, Detail: ev.Message, At: eventFirst(&ev), Source: "Event " + ev.Reason})
		}
	}
	// Running and Ready now, or seen so by a Watcher (a deleted pod's last state is not).
	seen := b.observed("pod", p.Name, string(corev1.PodRunning)+"+ready")
	if seen != nil && seen.At.Before(p.CreationTimestamp.Time) {
		seen = nil // an earlier pod of the same name
	}
	if at := condTime(p.Status.Conditions, corev1.PodReady); seen != nil || !at.IsZero() && podReady(p) {
		source := "condition Ready"
		if seen != nil {
			at, source = seen.At, "watched"
		}
		b.add(Step{From: Kubelet, To: APIServer, What: "PATCH pod status: Running, Ready", Detail: "podIP " + p.Status.PodIP, At: at, Source: source})
	}
}

// end: the pod deleted and the claim deleted, as seen by a Watcher.
func (b *builder) end() {
	if o := b.podGone(); o != nil {
		b.add(Step{From: Kubectl, To: APIServer, What: "DELETE Pod " + b.s.Name, At: o.At, Source: "watched"})
	}
	for _, c := range b.claimNames() {
		if o := b.observed("pvc", c, "deleted"); o != nil {
			b.add(Step{From: Kubectl, To: APIServer, What: "DELETE PersistentVolumeClaim " + c, At: o.At, Source: "watched"})
		}
	}
}

// claimNames are the names of the pod's claims, those still there and those seen.
func (b *builder) claimNames() []string {
	var names []string
	for _, c := range b.s.Claims {
		names = append(names, c.Name)
	}
	for _, o := range b.s.Observed {
		if o.Kind == "pvc" && !slices.Contains(names, o.Name) {
			names = append(names, o.Name)
		}
	}
	return names
}

// transitions are the rows of the claim's, the volume's and the attachment's state
// transitions that have happened, each with the time it took.
func transitions(s *Snapshot, b *builder) []Transition {
	var rows []Transition
	row := func(object, before, event, after string, from, to time.Time) {
		if to.IsZero() {
			return
		}
		r := Transition{Object: object, Before: before, Event: event, After: after, At: to}
		if !from.IsZero() && to.After(from) {
			r.Took = to.Sub(from)
		}
		rows = append(rows, r)
	}
	for _, c := range s.Claims {
		pv := b.pvOf(c)
		pvcBound, _ := statusTime(&c.ObjectMeta, s.Observed, "pvc", c.Name, string(corev1.ClaimBound))
		if c.Status.Phase != corev1.ClaimBound && b.observed("pvc", c.Name, string(corev1.ClaimBound)) == nil {
			pvcBound = time.Time{}
		}
		row("PVC "+c.Name, "Pending", "PV provisioned", "Bound", b.created("pvc", &c.ObjectMeta), pvcBound)
		if pv == nil {
			continue
		}
		pvBound := pvcBound
		if o := b.observed("pv", pv.Name, string(corev1.VolumeBound)); o != nil {
			pvBound = o.At
		}
		row("PV "+pv.Name, "Available", "PVC bound", "Bound", b.created("pv", &pv.ObjectMeta), pvBound)
	}
	for _, va := range s.Attachments {
		if va.Status.Attached || b.observed("va", va.Name, "attached=true") != nil {
			at, _ := statusTime(&va.ObjectMeta, s.Observed, "va", va.Name, "attached=true")
			row("VolumeAttachment "+va.Name, "(created)", "ControllerPublishVolume", "status.attached: true", b.created("va", &va.ObjectMeta), at)
		}
	}
	// After the pod: the claim stays Bound when the pod goes; the volume is Released
	// (Retain) or deleted (Delete) when the claim goes.
	podGone := b.podGone()
	for _, name := range b.claimNames() {
		bound := b.observed("pvc", name, string(corev1.ClaimBound))
		if podGone != nil && (bound != nil || claimBound(s, name)) {
			from := time.Time{}
			if bound != nil {
				from = bound.At
			}
			row("PVC "+name, "Bound", "Pod terminated", "Bound (volume kept)", from, podGone.At)
		}
		gone := b.observed("pvc", name, "deleted")
		if gone == nil {
			continue
		}
		for _, o := range s.Observed {
			if o.Kind != "pv" || !strings.HasPrefix(o.State, "claim="+name) {
				continue
			}
			// Under Delete the volume passes through Released on its way out: what it
			// ends as is what counts.
			if deleted := b.observed("pv", o.Name, "deleted"); deleted != nil && b.reclaim(o.Name) != corev1.PersistentVolumeReclaimRetain {
				row("PV "+o.Name, "Bound", "PVC deleted (Delete)", "deleted", gone.At, deleted.At)
			} else if released := b.observed("pv", o.Name, string(corev1.VolumeReleased)); released != nil {
				row("PV "+o.Name, "Bound", "PVC deleted (Retain)", "Released", gone.At, released.At)
			}
			break
		}
	}
	return rows
}

// reclaim is the reclaim policy of the volume named pv ("" when the snapshot does not have it).
func (b *builder) reclaim(pv string) corev1.PersistentVolumeReclaimPolicy {
	for _, v := range b.s.Volumes {
		if v.Name == pv {
			return v.Spec.PersistentVolumeReclaimPolicy
		}
	}
	return ""
}

func claimBound(s *Snapshot, name string) bool {
	for _, c := range s.Claims {
		if c.Name == name {
			return c.Status.Phase == corev1.ClaimBound
		}
	}
	return false
}

// created is when the object was made: when a Watcher saw it made (in the state objects
// of its kind are made in, within two seconds of its creationTimestamp), to the
// millisecond; else its creationTimestamp, to the second.
func (b *builder) created(kind string, obj *metav1.ObjectMeta) time.Time {
	made := obj.CreationTimestamp.Time
	for _, o := range b.s.Observed {
		if o.Kind != kind || o.Name != obj.Name || strings.HasPrefix(o.State, "claim=") {
			continue
		}
		if d := o.At.Sub(made); d >= 0 && d < 2*time.Second && slices.Contains(creationStates[kind], o.State) {
			return o.At
		}
		break // the first state seen is a later one: the Watcher started after it was made
	}
	return made
}

// creationStates are the states objects of a kind are made in.
var creationStates = map[string][]string{
	"pvc": {string(corev1.ClaimPending)},
	"pv":  {"", string(corev1.VolumePending), string(corev1.VolumeAvailable)},
	"va":  {"attached=false"},
}

// podGone is the traced pod's deletion as a Watcher saw it: its last observation, when
// that is its deletion and no newer pod of its name is in the snapshot (nil otherwise).
func (b *builder) podGone() *Observation {
	var last *Observation
	for i, o := range b.s.Observed {
		if o.Kind == "pod" && o.Name == b.s.Name {
			last = &b.s.Observed[i]
		}
	}
	if last == nil || last.State != "deleted" {
		return nil
	}
	if p := b.s.Pod; p != nil && p.DeletionTimestamp == nil && p.CreationTimestamp.After(last.At) {
		return nil // a pod of the same name made since
	}
	return last
}

// observed is the first observation of kind/name in state (nil: none).
func (b *builder) observed(kind, name, state string) *Observation {
	for i, o := range b.s.Observed {
		if o.Kind == kind && o.Name == name && o.State == state {
			return &b.s.Observed[i]
		}
	}
	return nil
}

// statusTime is when obj's status reached state: when a Watcher saw it, else the time of
// the last status write its managedFields record (the API keeps it to the second).
func statusTime(obj *metav1.ObjectMeta, observed []Observation, kind, name, state string) (time.Time, string) {
	for _, o := range observed {
		if o.Kind == kind && o.Name == name && o.State == state {
			return o.At, "watched"
		}
	}
	var last time.Time
	for _, mf := range obj.ManagedFields {
		if mf.Subresource == "status" && mf.Time != nil && mf.Time.After(last) {
			last = mf.Time.Time
		}
	}
	if last.IsZero() {
		return obj.CreationTimestamp.Time, "creationTimestamp"
	}
	return last, "managedFields (status)"
}

func (b *builder) pvOf(c *corev1.PersistentVolumeClaim) *corev1.PersistentVolume {
	for _, pv := range b.s.Volumes {
		if pv.Name == c.Spec.VolumeName {
			return pv
		}
	}
	return nil
}

func (b *builder) attachment(pv, node string) *storagev1.VolumeAttachment {
	for _, va := range b.s.Attachments {
		if va.Spec.Source.PersistentVolumeName != nil && *va.Spec.Source.PersistentVolumeName == pv && va.Spec.NodeName == node {
			return va
		}
	}
	return nil
}

func (b *builder) cloud(id string) *CloudVolume {
	for i := range b.s.Cloud {
		if b.s.Cloud[i].ID == id && id != "" {
			return &b.s.Cloud[i]
		}
	}
	return nil
}

// instanceOf is the pod's node's instance id (from its providerID aws:///zone/i-…).
func (b *builder) instanceOf() string {
	if b.s.Node == nil {
		return ""
	}
	id := b.s.Node.Spec.ProviderID
	return id[strings.LastIndex(id, "/")+1:]
}

func cloudAttachment(v *CloudVolume, instance string) *CloudAttachment {
	if v == nil {
		return nil
	}
	for i := range v.Attachments {
		if v.Attachments[i].InstanceID == instance || instance == "" {
			return &v.Attachments[i]
		}
	}
	return nil
}

// events are the Events about kind/name, oldest first.
func (b *builder) events(kind, name string) []corev1.Event {
	var out []corev1.Event
	for _, ev := range b.s.Events {
		if ev.InvolvedObject.Kind == kind && ev.InvolvedObject.Name == name && inNamespace(ev, b.s.Namespace) {
			out = append(out, ev)
		}
	}
	slices.SortStableFunc(out, func(a, b corev1.Event) int { return eventFirst(&a).Compare(eventFirst(&b)) })
	return out
}

// event is the first Event about kind/name with reason (nil: none).
func (b *builder) event(kind, name, reason string) *corev1.Event {
	for _, ev := range b.events(kind, name) {
		if ev.Reason == reason {
			return &ev
		}
	}
	return nil
}

// eventFirst is when the Event first happened.
func eventFirst(ev *corev1.Event) time.Time {
	switch {
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	case !ev.FirstTimestamp.IsZero():
		return ev.FirstTimestamp.Time
	}
	return ev.CreationTimestamp.Time
}

func condTime(conds []corev1.PodCondition, typ corev1.PodConditionType) time.Time {
	for _, c := range conds {
		if c.Type == typ && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}

// podReady says whether the pod runs and is ready, with a time for its readiness.
func podReady(p *corev1.Pod) bool {
	return podutil.IsRunningAndReady(p) && !podutil.ReadySince(p).IsZero()
}

// csiCall is one CSI call read from the driver's log: when it started and how long it took.
type csiCall struct {
	at   time.Time
	took time.Duration
}

// call finds method's call about volume in the driver's log lines (the node plugin's
// when side is "node", the controller's otherwise): the "called" line's time and the
// "done" line's duration. The last complete call counts.
func (b *builder) call(volume, method, side string) csiCall {
	var c csiCall
	if volume == "" {
		return c
	}
	var start time.Time
	for _, l := range b.s.Logs {
		if l.Container != "ebs-plugin" || !strings.Contains(l.Text, volume) || (side == "node") != strings.HasPrefix(l.Pod, "ebs-csi-node") {
			continue
		}
		e, ok := calllog.Parse(l.Text)
		if !ok || e.Method != method {
			continue
		}
		switch e.Phase {
		case calllog.Called:
			start = l.Time
		case calllog.Done:
			c.at = start
			if e.HasDuration {
				c.took = e.Duration
				if c.at.IsZero() {
					c.at = l.Time.Add(-e.Duration)
				}
			}
		}
	}
	return c
}

// stuckAt is the participant a stage waits on.
func stuckAt(stage string) string {
	switch stage {
	case StageAdmission:
		return APIServer
	case StageScheduling:
		return Scheduler
	case StageProvisioning, StageBinding:
		return Provisioner
	case StageAttach:
		return Attacher
	case StageMount:
		return CSINode
	case StageNetwork, StageImage, StageCreate, StageCrash, StageOOM:
		return Runtime
	}
	return Kubelet
}

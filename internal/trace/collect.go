package trace

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// Sources are where a trace reads from.
type Sources struct {
	// Client reads the objects, the Events and the add-on pods' logs.
	Client kubernetes.Interface
	// EC2 reads the volumes from the cloud (nil: the trace has no cloud rows).
	EC2 *ec2.Client
	// ELB reads the load balancers of Services and Ingresses (nil: not read).
	ELB *elb.Client
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Target is what to trace: a pod, or a claim (traced through the pod that uses it).
type Target struct {
	Kind, Namespace, Name string
	// Claims are the pod's claims when it is known to use them (its trace then shows
	// them after it is gone).
	Claims []string
}

// ParseTarget reads "pod/NAME" or "pvc/NAME" (also "pods", "persistentvolumeclaim"...).
func ParseTarget(arg, namespace string) (Target, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok || name == "" {
		return Target{}, fmt.Errorf("trace: %q is not KIND/NAME (pod/NAME or pvc/NAME)", arg)
	}
	switch strings.ToLower(kind) {
	case "pod", "pods", "po":
		kind = "pod"
	case "pvc", "pvcs", "persistentvolumeclaim", "persistentvolumeclaims":
		kind = "pvc"
	case "deployment", "deployments", "deploy":
		kind = "Deployment"
	case "replicaset", "replicasets", "rs":
		kind = "ReplicaSet"
	case "statefulset", "statefulsets", "sts":
		kind = "StatefulSet"
	case "daemonset", "daemonsets", "ds":
		kind = "DaemonSet"
	case "job", "jobs":
		kind = "Job"
	case "svc", "service", "services":
		kind = "Service"
	case "ing", "ingress", "ingresses":
		kind = "Ingress"
	default:
		return Target{}, fmt.Errorf("trace: kind %q: pod, pvc, deployment, replicaset, statefulset, daemonset, job, svc or ingress", kind)
	}
	return Target{Kind: kind, Namespace: namespace, Name: name}, nil
}

// Collect reads, from the API server, the cloud and the add-on pods' logs, everything
// that shows target's flow. A pod that does not exist (yet, or any more) is no error: the
// snapshot then has what is left of it (its Events, its claim).
func Collect(ctx context.Context, src Sources, target Target) (*Snapshot, error) {
	now := time.Now
	if src.Now != nil {
		now = src.Now
	}
	c := &collector{src: src, s: &Snapshot{Now: now(), Namespace: target.Namespace, Name: target.Name}}
	if err := c.collect(ctx, target); err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	return c.s, nil
}

type collector struct {
	src Sources
	s   *Snapshot
}

func (c *collector) collect(ctx context.Context, target Target) error {
	core := c.src.Client.CoreV1()
	ns := target.Namespace
	claimNames := target.Claims
	switch target.Kind {
	case "pod", "pvc":
	default:
		pod, err := c.workload(ctx, target)
		if err != nil {
			return err
		}
		c.s.Name = ""
		if pod != nil {
			c.s.Pod, c.s.Name = pod, pod.Name
		}
	}
	if target.Kind == "pvc" {
		claimNames = []string{target.Name}
		pod, err := c.podUsing(ctx, ns, target.Name)
		if err != nil {
			return err
		}
		c.s.Name = ""
		if pod != nil {
			c.s.Pod, c.s.Name = pod, pod.Name
		}
	} else if target.Kind == "pod" {
		pod, err := core.Pods(ns).Get(ctx, target.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return err
		default:
			c.s.Pod = pod
		}
	}
	if p := c.s.Pod; p != nil {
		claimNames = podClaims(p)
		if len(c.s.Owners) == 0 {
			if err := c.owners(ctx, p); err != nil {
				return err
			}
		}
	}
	for _, name := range claimNames {
		pvc, err := core.PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			c.s.MissingClaims = append(c.s.MissingClaims, name)
			continue
		}
		if err != nil {
			return err
		}
		c.s.Claims = append(c.s.Claims, pvc)
	}
	if err := c.storage(ctx); err != nil {
		return err
	}
	nodes, err := core.Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		c.s.Nodes = append(c.s.Nodes, n)
		if c.s.Pod != nil && n.Name == c.s.Pod.Spec.NodeName {
			c.s.Node = n
		}
	}
	if err := c.events(ctx); err != nil {
		return err
	}
	c.cloud(ctx)
	c.logs(ctx)
	return nil
}

// podClaims are the claims the pod's volumes name.
func podClaims(p *corev1.Pod) []string {
	var names []string
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			names = append(names, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return names
}

// podUsing is the newest pod in ns that uses claim (nil: none).
func (c *collector) podUsing(ctx context.Context, ns, claim string) (*corev1.Pod, error) {
	pods, err := c.src.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var found *corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == claim &&
				(found == nil || p.CreationTimestamp.After(found.CreationTimestamp.Time)) {
				found = p
			}
		}
	}
	return found, nil
}

// workload finds the owners of a workload target (a Deployment's ReplicaSets too) and its
// pod to diagnose: the newest that is not Ready, else the newest (nil: it has none, as when
// admission refuses them).
func (c *collector) workload(ctx context.Context, target Target) (*corev1.Pod, error) {
	owners := map[string]bool{target.Kind + "/" + target.Name: true}
	c.s.Owners = append(c.s.Owners, target.Kind+"/"+target.Name)
	if target.Kind == "Deployment" {
		sets, err := c.src.Client.AppsV1().ReplicaSets(target.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, rs := range sets.Items {
			if ref := metav1.GetControllerOf(&rs); ref != nil && ref.Kind == "Deployment" && ref.Name == target.Name {
				owners["ReplicaSet/"+rs.Name] = true
				c.s.Owners = append(c.s.Owners, "ReplicaSet/"+rs.Name)
			}
		}
	}
	pods, err := c.src.Client.CoreV1().Pods(target.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var found *corev1.Pod
	better := func(p *corev1.Pod) bool {
		if found == nil {
			return true
		}
		if ready, was := podReady(p), podReady(found); ready != was {
			return !ready
		}
		return p.CreationTimestamp.After(found.CreationTimestamp.Time)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if ref := metav1.GetControllerOf(p); ref != nil && owners[ref.Kind+"/"+ref.Name] && better(p) {
			found = p
		}
	}
	return found, nil
}

// owners follows the pod's controller references up (ReplicaSet → Deployment...).
func (c *collector) owners(ctx context.Context, p *corev1.Pod) error {
	ref := metav1.GetControllerOf(p)
	for depth := 0; ref != nil && depth < 3; depth++ {
		c.s.Owners = append(c.s.Owners, ref.Kind+"/"+ref.Name)
		if ref.Kind != "ReplicaSet" {
			return nil
		}
		rs, err := c.src.Client.AppsV1().ReplicaSets(p.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		ref = metav1.GetControllerOf(rs)
	}
	return nil
}

// storage reads the claims' volumes, classes and attachments.
func (c *collector) storage(ctx context.Context) error {
	storage := c.src.Client.StorageV1()
	pvs := map[string]bool{}
	classes := map[string]bool{}
	for _, pvc := range c.s.Claims {
		if pvc.Spec.StorageClassName != nil && *pvc.Spec.StorageClassName != "" && !classes[*pvc.Spec.StorageClassName] {
			classes[*pvc.Spec.StorageClassName] = true
			sc, err := storage.StorageClasses().Get(ctx, *pvc.Spec.StorageClassName, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if err == nil {
				c.s.Classes = append(c.s.Classes, sc)
			}
		}
		if pvc.Spec.VolumeName == "" {
			continue
		}
		pv, err := c.src.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		c.s.Volumes = append(c.s.Volumes, pv)
		pvs[pv.Name] = true
	}
	if len(pvs) == 0 {
		return nil
	}
	vas, err := storage.VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range vas.Items {
		va := &vas.Items[i]
		if va.Spec.Source.PersistentVolumeName != nil && pvs[*va.Spec.Source.PersistentVolumeName] {
			c.s.Attachments = append(c.s.Attachments, va)
		}
	}
	return nil
}

// about is the set of objects whose Events count, as kind/name.
func (c *collector) about() map[string]bool {
	m := map[string]bool{"Pod/" + c.s.Name: c.s.Name != ""}
	for _, pvc := range c.s.Claims {
		m["PersistentVolumeClaim/"+pvc.Name] = true
	}
	for _, name := range c.s.MissingClaims { // their Events outlive them
		m["PersistentVolumeClaim/"+name] = true
	}
	for _, pv := range c.s.Volumes {
		m["PersistentVolume/"+pv.Name] = true
	}
	for _, va := range c.s.Attachments {
		m["VolumeAttachment/"+va.Name] = true
	}
	if c.s.Node != nil {
		m["Node/"+c.s.Node.Name] = true
	}
	for _, o := range c.s.Owners {
		m[o] = true
	}
	return m
}

// events reads the Events about the traced objects: the namespaced ones from the pod's
// namespace, the cluster-scoped ones from default, where they are recorded.
func (c *collector) events(ctx context.Context) error {
	about := c.about()
	for _, ns := range uniq(c.s.Namespace, metav1.NamespaceDefault) {
		list, err := c.src.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, ev := range list.Items {
			if about[ev.InvolvedObject.Kind+"/"+ev.InvolvedObject.Name] && inNamespace(ev, c.s.Namespace) {
				c.s.Events = append(c.s.Events, ev)
			}
		}
	}
	return nil
}

// clusterScoped are the kinds a trace reads Events of that have no namespace.
var clusterScoped = map[string]bool{"PersistentVolume": true, "VolumeAttachment": true, "Node": true, "StorageClass": true}

// inNamespace tells whether ev is about an object of namespace ns (or a cluster-scoped
// one): an Event about another namespace's object of the same name does not count.
func inNamespace(ev corev1.Event, ns string) bool {
	if clusterScoped[ev.InvolvedObject.Kind] {
		return ev.InvolvedObject.Namespace == ""
	}
	return ev.InvolvedObject.Namespace == ns
}

func uniq(ss ...string) []string {
	var out []string
	for _, s := range ss {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// handles are the traced volumes' ids in the cloud.
func (c *collector) handles() []string {
	var ids []string
	for _, pv := range c.s.Volumes {
		if pv.Spec.CSI != nil && pv.Spec.CSI.VolumeHandle != "" {
			ids = append(ids, pv.Spec.CSI.VolumeHandle)
		}
	}
	return ids
}

// cloud reads the volumes from the EC2 API; a cloud that cannot be reached leaves the
// trace without its rows.
func (c *collector) cloud(ctx context.Context) {
	ids := c.handles()
	if c.src.EC2 == nil || len(ids) == 0 {
		return
	}
	out, err := c.src.EC2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: ids})
	if err != nil {
		return
	}
	for _, v := range out.Volumes {
		cv := CloudVolume{ID: aws.ToString(v.VolumeId), State: string(v.State), Zone: aws.ToString(v.AvailabilityZone),
			Type: string(v.VolumeType), SizeGiB: aws.ToInt32(v.Size), CreateTime: aws.ToTime(v.CreateTime)}
		for _, a := range v.Attachments {
			cv.Attachments = append(cv.Attachments, CloudAttachment{InstanceID: aws.ToString(a.InstanceId),
				Device: aws.ToString(a.Device), State: string(a.State), AttachTime: aws.ToTime(a.AttachTime)})
		}
		c.s.Cloud = append(c.s.Cloud, cv)
	}
}

// logs reads the lines about the traced volumes from the add-on pods' logs: the
// controller's ebs-plugin and csi-attacher, and the ebs-plugin of the node plugin on the
// pod's node. Pods or logs that cannot be read leave the trace without them.
func (c *collector) logs(ctx context.Context) {
	ids := c.handles()
	pods := c.src.Client.CoreV1().Pods(metav1.NamespaceSystem)
	// Only what was logged since the flow began: its first object's creation (kept to
	// the second, so a second earlier).
	var since *metav1.Time
	if first := c.firstCreated(); !first.IsZero() {
		since = &metav1.Time{Time: first.Add(-time.Second)}
	}
	read := func(opts metav1.ListOptions, match func(string) bool, containers ...string) {
		list, err := pods.List(ctx, opts)
		if err != nil {
			return
		}
		for _, p := range list.Items {
			for _, ctr := range containers {
				raw, err := pods.GetLogs(p.Name, &corev1.PodLogOptions{Container: ctr, Timestamps: true, SinceTime: since}).DoRaw(ctx)
				if err != nil {
					continue
				}
				c.s.Logs = append(c.s.Logs, logLines(p.Name, ctr, raw, match)...)
			}
		}
	}
	onNode := ""
	if c.s.Pod != nil && c.s.Pod.Spec.NodeName != "" {
		onNode = fields.OneTermEqualSelector("spec.nodeName", c.s.Pod.Spec.NodeName).String()
	}
	if len(ids) > 0 {
		names := namesAny(ids)
		read(metav1.ListOptions{LabelSelector: "app=ebs-csi-controller"}, names, "ebs-plugin", "csi-attacher")
		if onNode != "" {
			read(metav1.ListOptions{LabelSelector: "app=ebs-csi-node", FieldSelector: onNode}, names, "ebs-plugin")
		}
	}
	if onNode != "" && !c.s.Pod.Spec.HostNetwork {
		read(metav1.ListOptions{LabelSelector: "k8s-app=aws-node", FieldSelector: onNode},
			aboutPodAddress(c.s.Pod.Namespace+"/"+c.s.Pod.Name, c.s.Pod.Status.PodIP), awsNodeContainer)
	}
}

// namesAny matches the lines that name one of ids.
func namesAny(ids []string) func(string) bool {
	return func(text string) bool {
		return slices.ContainsFunc(ids, func(id string) bool { return strings.Contains(text, id) })
	}
}

// aboutPodAddress matches the aws-node log lines that may concern the address of the pod
// podKey (namespace/name) of address ip: those naming the pod or the address, and those
// of the ENIs attached (whether the pod's address is on one is known once its line is read).
func aboutPodAddress(podKey, ip string) func(string) bool {
	return func(text string) bool {
		return strings.Contains(text, `pod="`+podKey+`"`) || ip != "" && strings.Contains(text, `"`+ip+`"`) ||
			strings.Contains(text, `"attached ENI"`)
	}
}

// firstCreated is the creation time of the flow's first object: the pod or one of its
// claims (zero when there is none).
func (c *collector) firstCreated() time.Time {
	var first time.Time
	consider := func(t metav1.Time) {
		if !t.IsZero() && (first.IsZero() || t.Before(&metav1.Time{Time: first})) {
			first = t.Time
		}
	}
	if c.s.Pod != nil {
		consider(c.s.Pod.CreationTimestamp)
	}
	for _, pvc := range c.s.Claims {
		consider(pvc.CreationTimestamp)
	}
	return first
}

// logLines are the lines of a container's log (as `kubectl logs --timestamps` prints
// it) that match.
func logLines(pod, container string, raw []byte, match func(string) bool) []LogLine {
	var out []LogLine
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		ts, text, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err != nil {
			continue
		}
		if match(text) {
			out = append(out, LogLine{Pod: pod, Container: container, Time: at, Text: text})
		}
	}
	return out
}

// claimOfVolume names the claim a PersistentVolume is (or was) bound to.
func claimOfVolume(pv *corev1.PersistentVolume) string {
	if pv.Spec.ClaimRef == nil {
		return ""
	}
	return pv.Spec.ClaimRef.Name
}

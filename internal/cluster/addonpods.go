package cluster

import (
	"context"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/util/logging"
	"github.com/kubelab/kubelab/internal/version"
)

// The EBS CSI add-on's pods, as EKS names and labels them: the controller (a Deployment's
// pod) and the node plugin on every node (a DaemonSet's). kubelab runs their containers as
// components of its own process and shows them as mirror pods, so that the add-on's
// debugging commands work: `kubectl logs -n kube-system -l app=ebs-csi-controller -c
// csi-attacher`, `kubectl get pod -n kube-system -l app=ebs-csi-node --field-selector
// spec.nodeName=NODE`.
const (
	appCSIController = "ebs-csi-controller"
	appCSINode       = "ebs-csi-node"
	// annAddonPod marks kubelab's add-on mirror pods.
	annAddonPod = "kubelab.dev/addon"
	// addonLogLines is how many lines a container's log keeps in memory until its pod
	// exists.
	addonLogLines = 1000
)

// addonContainer is one container of an add-on pod: the component (unit) it is, and the
// name its log goes by.
type addonContainer struct {
	name string
	unit string // the unit that runs it (restarted when the pod is deleted; "": none)
	log  string // the key of its log (addonLogs)
}

// addonPod is one of the add-on's pods.
type addonPod struct {
	app        string
	node       Node
	containers []addonContainer

	// name and uid are the pod's now ("" before it is made).
	name string
	uid  types.UID
}

// addonPodsOf are the add-on's pods of a cluster of nodes: the controller on the first
// node and the node plugin on every node. On a hollow node the node plugin is the hollow
// kubelet's mounter, which stands in for it: its pod has the one container ebs-plugin,
// whose log is the mounter's, and no component of its own to restart.
func addonPodsOf(nodes []Node, hollow bool) []*addonPod {
	if len(nodes) == 0 {
		return nil
	}
	ctrl := &addonPod{app: appCSIController, node: nodes[0], containers: []addonContainer{
		{name: "ebs-plugin", unit: "csi-controller", log: "csi-controller"},
		{name: "csi-provisioner", unit: "csi-provisioner", log: "csi-provisioner"},
		{name: "csi-attacher", unit: "csi-attacher", log: "csi-attacher"},
		{name: "csi-resizer", unit: "csi-resizer", log: "csi-resizer"},
		{name: "csi-snapshotter", unit: "csi-snapshotter", log: "csi-snapshotter"},
		{name: "liveness-probe", unit: "liveness-probe", log: "liveness-probe"},
	}}
	pods := []*addonPod{ctrl}
	for _, n := range nodes {
		if hollow {
			pods = append(pods, &addonPod{app: appCSINode, node: n, containers: []addonContainer{
				{name: "ebs-plugin", log: "ebs-csi-node/" + n.Name},
			}})
			continue
		}
		unit := "ebs-csi-node/" + n.Name
		pods = append(pods, &addonPod{app: appCSINode, node: n, containers: []addonContainer{
			{name: "ebs-plugin", unit: unit, log: unit},
			{name: "node-driver-registrar", unit: unit, log: "node-driver-registrar/" + n.Name},
			{name: "liveness-probe", unit: unit, log: "liveness-probe/" + n.Name},
		}})
	}
	return pods
}

// The pod network's host processes as EKS runs them, the DaemonSets aws-node and
// kube-proxy of kube-system: in the vpc pod network kubelab shows its aws-node and
// kube-proxy of each real node as their host-network mirror pods, so that `kubectl logs
// -n kube-system -l k8s-app=aws-node` works and the node's max pods (whose "+ 2" is for
// them) counts them as on EKS.
const (
	appAWSNode   = "aws-node"
	appKubeProxy = "kube-proxy"
)

// networkPodsOf are the pod network's pods of a cluster of real nodes in the vpc pod
// network: aws-node and kube-proxy on every node.
func networkPodsOf(nodes []Node) []*addonPod {
	var pods []*addonPod
	for _, n := range nodes {
		for _, app := range []string{appAWSNode, appKubeProxy} {
			unit := app + "/" + n.Name
			pods = append(pods, &addonPod{app: app, node: n, containers: []addonContainer{{name: app, unit: unit, log: unit}}})
		}
	}
	return pods
}

// labels are the pod's labels: the add-on's, or EKS's k8s-app of the network's.
func (p *addonPod) labels() map[string]string {
	switch p.app {
	case appAWSNode, appKubeProxy:
		return map[string]string{"app": p.app, "k8s-app": p.app}
	}
	return podLabels(p.app)
}

// newName is a fresh name for the pod, of the form its controller would give it.
func (p *addonPod) newName() string {
	if p.app == appCSIController {
		h := fnv.New32a()
		h.Write([]byte(p.app))
		return p.app + "-" + utilrand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10)) + "-" + utilrand.String(5)
	}
	return p.app + "-" + utilrand.String(5)
}

// units are the units of the pod's containers, each once.
func (p *addonPod) units() []string {
	var us []string
	seen := map[string]bool{}
	for _, c := range p.containers {
		if c.unit != "" && !seen[c.unit] {
			seen[c.unit] = true
			us = append(us, c.unit)
		}
	}
	return us
}

// object is the mirror pod of p named name on node (whose UID owns it).
func (p *addonPod) object(name string, node *corev1.Node) *corev1.Pod {
	image := "kubelab:" + version.Info().GitVersion
	priority := "system-node-critical"
	if p.app == appCSIController {
		priority = "system-cluster-critical"
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: metav1.NamespaceSystem,
			Labels: p.labels(),
			Annotations: map[string]string{corev1.MirrorPodAnnotationKey: name, "kubernetes.io/config.source": "kubelab",
				annAddonPod: "the containers run in kubelab's own process; deleting the pod restarts them"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID, Controller: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{
			// A mirror pod names no service account: its containers' identities are the
			// components' own (ebs-csi-controller-sa, ebs-csi-node-sa).
			NodeName: p.node.Name, HostNetwork: true, PriorityClassName: priority,
			AutomountServiceAccountToken: ptr.To(false),
			Tolerations:                  []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
		},
	}
	for _, c := range p.containers {
		ctr := corev1.Container{Name: c.name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
			TerminationMessagePath: corev1.TerminationMessagePathDefault, TerminationMessagePolicy: corev1.TerminationMessageReadFile}
		if p.app == appCSINode && c.name == "ebs-plugin" {
			ctr.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}
		pod.Spec.Containers = append(pod.Spec.Containers, ctr)
	}
	return pod
}

// runningStatus is the status of the pod's containers, running since since.
func (p *addonPod) runningStatus(pod *corev1.Pod, since metav1.Time) corev1.PodStatus {
	st := corev1.PodStatus{Phase: corev1.PodRunning, HostIP: p.node.IP, PodIP: p.node.IP,
		HostIPs: []corev1.HostIP{{IP: p.node.IP}}, PodIPs: []corev1.PodIP{{IP: p.node.IP}},
		StartTime: &since, QOSClass: corev1.PodQOSBestEffort}
	for _, t := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		st.Conditions = append(st.Conditions, corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: since})
	}
	for _, c := range pod.Spec.Containers {
		st.ContainerStatuses = append(st.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, ImageID: c.Image, Ready: true, Started: ptr.To(true),
			ContainerID: "kubelab://" + string(pod.UID) + "-" + c.Name,
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: since}},
		})
	}
	return st
}

// containerLog is one add-on container's log: a CRI log file in its mirror pod's log
// directory, where the node's kubelet serves it from, once the pod exists; the last
// lines in memory until then.
type containerLog struct {
	mu   sync.Mutex
	f    *os.File
	held [][]byte
}

// Write takes one log line (a slog handler writes a whole record per call).
func (l *containerLog) Write(p []byte) (int, error) {
	line := criLogLine(time.Now(), p)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		if len(l.held) == addonLogLines {
			l.held = l.held[1:]
		}
		l.held = append(l.held, line)
		return len(p), nil
	}
	if _, err := l.f.Write(line); err != nil {
		return 0, err
	}
	return len(p), nil
}

// criLogLine is a log line in the CRI log format: time, stream, tag (F: full line), text.
func criLogLine(t time.Time, p []byte) []byte {
	if n := len(p); n > 0 && p[n-1] == '\n' {
		p = p[:n-1]
	}
	b := make([]byte, 0, len(p)+48)
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, " stderr F "...)
	b = append(b, p...)
	return append(b, '\n')
}

// openAt makes path the log's file; the lines held in memory go first.
func (l *containerLog) openAt(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.held {
		if _, err := f.Write(line); err != nil {
			f.Close()
			return err
		}
	}
	l.held = nil
	if l.f != nil {
		l.f.Close()
	}
	l.f = f
	return nil
}

// close stops writing to the file; lines are held in memory again.
func (l *containerLog) close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// addonLogs are the add-on containers' logs, by key.
type addonLogs struct {
	mu sync.Mutex
	m  map[string]*containerLog
}

func (a *addonLogs) get(key string) *containerLog {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.m == nil {
		a.m = map[string]*containerLog{}
	}
	l, ok := a.m[key]
	if !ok {
		l = &containerLog{}
		a.m[key] = l
	}
	return l
}

// componentLogger is the logger of component unit (with attrs): the cluster's log and,
// for an add-on container, also that container's log at Info, in klog's text format as
// upstream's containers write it.
func (c *Cluster) componentLogger(unit string, attrs ...any) *slog.Logger {
	text := logging.NewHandler(c.addonLogs.get(unit), logging.Text, slog.LevelInfo)
	return slog.New(teeHandler{c.cfg.Logger.Handler(), text}).With(attrs...)
}

// addonOnlyLogger is the logger of an add-on container that logs only to its pod's log,
// not to the cluster's (the hollow nodes' stand-in node plugin, one line per mount).
func (c *Cluster) addonOnlyLogger(key string, attrs ...any) *slog.Logger {
	return logging.New(c.addonLogs.get(key), logging.Text, slog.LevelInfo).With(attrs...)
}

// teeHandler hands each record to both handlers.
type teeHandler struct{ a, b slog.Handler }

func (h teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.a.Enabled(ctx, l) || h.b.Enabled(ctx, l)
}

func (h teeHandler) Handle(ctx context.Context, r slog.Record) error {
	var err error
	if h.a.Enabled(ctx, r.Level) {
		err = h.a.Handle(ctx, r.Clone())
	}
	if h.b.Enabled(ctx, r.Level) {
		if e := h.b.Handle(ctx, r); err == nil {
			err = e
		}
	}
	return err
}

func (h teeHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return teeHandler{h.a.WithAttrs(attrs), h.b.WithAttrs(attrs)}
}

func (h teeHandler) WithGroup(name string) slog.Handler {
	return teeHandler{h.a.WithGroup(name), h.b.WithGroup(name)}
}

// addonPodSelector selects the add-on's pods, mirror pods or not, and the pod network's.
const addonPodSelector = "app in (" + appCSIController + "," + appCSINode + "," + appAWSNode + "," + appKubeProxy + ")"

// removeAddonMirrorPods deletes the add-on's mirror pods of an earlier run, and their
// logs.
func (c *Cluster) removeAddonMirrorPods(ctx context.Context, admin kubernetes.Interface) error {
	old, err := admin.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: addonPodSelector})
	if err != nil {
		return fmt.Errorf("addon pods: %w", err)
	}
	for _, p := range old.Items {
		if _, ours := p.Annotations[annAddonPod]; !ours {
			continue
		}
		err := admin.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("addon pods: delete %s of an earlier run: %w", p.Name, err)
		}
		c.removeAddonLogs(p.Spec.NodeName, p.Name, p.UID)
	}
	return nil
}

// runAddonPods publishes the add-on's pods: each as a mirror pod of its node, made with the
// node's own credentials, Running with its containers' logs in the node's pod log
// directory. A pod that is deleted (`kubectl delete pod`) has its components restarted and
// is made again under a new name, as its controller would replace it. Pods of an earlier
// run are deleted first.
func (c *Cluster) runAddonPods(ctx context.Context) error {
	admin, err := c.adminClientset("addon-pods")
	if err != nil {
		return err
	}
	if err := c.removeAddonMirrorPods(ctx, admin); err != nil {
		return err
	}
	sel := metav1.ListOptions{LabelSelector: addonPodSelector}
	deleted := make(chan types.UID, 16)
	factory := informers.NewSharedInformerFactoryWithOptions(admin, 0, informers.WithNamespace(metav1.NamespaceSystem),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = sel.LabelSelector }))
	inf := factory.Core().V1().Pods().Informer()
	gone := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			select {
			case deleted <- p.UID:
			case <-ctx.Done():
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: gone, UpdateFunc: func(_, obj any) {
		if p, ok := obj.(*corev1.Pod); ok && p.DeletionTimestamp != nil {
			gone(p) // graceful deletion: nothing waits for a grace period here
		}
	}}); err != nil {
		return fmt.Errorf("addon pods: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	defer func() {
		for _, p := range c.addonPods {
			for _, ctr := range p.containers {
				c.addonLogs.get(ctr.log).close()
			}
		}
	}()
	for _, p := range c.addonPods {
		c.untilDone(ctx, "publish add-on pod "+p.app+" on "+p.node.Name, func(ctx context.Context) error { return c.publishAddonPod(ctx, p) })
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case uid := <-deleted:
			for _, p := range c.addonPods {
				if p.uid == uid {
					c.replaceAddonPod(ctx, p)
				}
			}
		}
	}
}

// replaceAddonPod removes p's pod (deleted by a user), restarts its components and
// publishes it again.
func (c *Cluster) replaceAddonPod(ctx context.Context, p *addonPod) {
	c.cfg.Logger.Info("add-on pod deleted: restarting its containers", "pod", p.name, "units", p.units())
	what := "replace add-on pod " + p.name
	c.untilDone(ctx, what, func(ctx context.Context) error { return c.removeAddonPod(ctx, p) })
	for _, u := range p.units() {
		c.untilDone(ctx, what, func(ctx context.Context) error { return c.Stop(ctx, u) })
		c.untilDone(ctx, what, func(ctx context.Context) error { return c.Start(ctx, u) })
	}
	c.untilDone(ctx, what, func(ctx context.Context) error { return c.publishAddonPod(ctx, p) })
}

// untilDone runs f until it succeeds or ctx ends, backing off between tries and logging
// why it tries again: the add-on pods are the API's view of components that run anyway,
// and a failure to show them must not stop the cluster.
func (c *Cluster) untilDone(ctx context.Context, what string, f func(context.Context) error) {
	backoff := wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: math.MaxInt32, Cap: 10 * time.Second}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		err := f(ctx)
		if err != nil && ctx.Err() == nil {
			c.cfg.Logger.Warn(what+": trying again", "err", err)
		}
		return err == nil, nil
	})
}

// publishAddonPod makes p's mirror pod under a new name (unless it made it already),
// points its containers' logs at the pod's log directory and reports it Running. A pod
// deleted in the meantime is forgotten, so that the next try makes a new one.
func (c *Cluster) publishAddonPod(ctx context.Context, p *addonPod) error {
	client, err := c.clientset("kubelet/"+p.node.Name+"/mirror-pods", nodeIdentity(p.node.Name))
	if err != nil {
		return err
	}
	pods := client.CoreV1().Pods(metav1.NamespaceSystem)
	var pod *corev1.Pod
	if p.uid == "" {
		node, err := client.CoreV1().Nodes().Get(ctx, p.node.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("addon pods: %w", err)
		}
		if pod, err = pods.Create(ctx, p.object(p.newName(), node), metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("addon pods: create %s pod: %w", p.app, err)
		}
		p.name, p.uid = pod.Name, pod.UID
	} else if pod, err = pods.Get(ctx, p.name, metav1.GetOptions{}); err != nil || pod.UID != p.uid {
		if err == nil || apierrors.IsNotFound(err) {
			c.forgetAddonPod(p)
			err = fmt.Errorf("addon pods: %s was deleted", p.name)
		}
		return err
	}
	dir := c.addonLogDir(p.node.Name, pod.Name, pod.UID)
	for _, ctr := range p.containers {
		if err := c.addonLogs.get(ctr.log).openAt(filepath.Join(dir, ctr.name, "0.log")); err != nil {
			return fmt.Errorf("addon pods: log of %s/%s: %w", pod.Name, ctr.name, err)
		}
	}
	pod.Status = p.runningStatus(pod, metav1.Now())
	if _, err = pods.UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsNotFound(err) {
			c.forgetAddonPod(p)
		}
		return fmt.Errorf("addon pods: status of %s: %w", pod.Name, err)
	}
	return nil
}

// removeAddonPod deletes p's pod at once (it may be terminating), as a kubelet deletes a
// mirror pod, and forgets it.
func (c *Cluster) removeAddonPod(ctx context.Context, p *addonPod) error {
	client, err := c.clientset("kubelet/"+p.node.Name+"/mirror-pods", nodeIdentity(p.node.Name))
	if err != nil {
		return err
	}
	err = client.CoreV1().Pods(metav1.NamespaceSystem).Delete(ctx, p.name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0), Preconditions: metav1.NewUIDPreconditions(string(p.uid))})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("addon pods: delete %s: %w", p.name, err)
	}
	c.forgetAddonPod(p)
	return nil
}

// forgetAddonPod closes p's logs (lines are held in memory again), removes its pod's log
// directory and forgets the pod.
func (c *Cluster) forgetAddonPod(p *addonPod) {
	for _, ctr := range p.containers {
		c.addonLogs.get(ctr.log).close()
	}
	c.removeAddonLogs(p.node.Name, p.name, p.uid)
	p.name, p.uid = "", ""
}

// addonLogDir is the log directory of the add-on pod name (uid) on node.
func (c *Cluster) addonLogDir(node, name string, uid types.UID) string {
	return filepath.Join(c.podLogsDir(Node{Name: node}), fmt.Sprintf("%s_%s_%s", metav1.NamespaceSystem, name, uid))
}

// removeAddonLogs removes the logs of an add-on pod that is gone, as a kubelet removes a
// deleted pod's.
func (c *Cluster) removeAddonLogs(node, name string, uid types.UID) {
	if err := os.RemoveAll(c.addonLogDir(node, name, uid)); err != nil {
		c.cfg.Logger.Warn("removing the logs of a deleted add-on pod", "pod", name, "err", err)
	}
}

// podLogsDir is node n's directory of pod logs, which its kubelet serves.
func (c *Cluster) podLogsDir(n Node) string { return filepath.Join(c.nodeDir(n), "pod-logs") }

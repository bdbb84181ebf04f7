package scheduler

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// testCluster is a real API server with this scheduler running against it.
type testCluster struct {
	t      *testing.T
	client kubernetes.Interface
	ctx    context.Context
	sched  *Scheduler
}

func startCluster(t *testing.T, cfg Config) *testCluster {
	t.Helper()
	api := apiservertest.Start(t, apiservertest.Options{})
	return startScheduler(t, api.Client, cfg)
}

func startScheduler(t *testing.T, client kubernetes.Interface, cfg Config) *testCluster {
	t.Helper()
	if cfg.PodInitialBackoff == 0 {
		cfg.PodInitialBackoff, cfg.PodMaxBackoff = 100*time.Millisecond, time.Second
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	s, err := New(cfg, client, factory)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() }) // after the scheduler stopped
	testutil.Start(t, "the scheduler", 0, s.Run, testutil.NoWait)
	return &testCluster{t: t, client: client, ctx: context.Background(), sched: s}
}

type nodeOpt func(*corev1.Node)

func zoneLabel(zone string) nodeOpt {
	return func(n *corev1.Node) { n.Labels[corev1.LabelTopologyZone] = zone }
}

func taint(key, value string) nodeOpt {
	return func(n *corev1.Node) {
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Value: value, Effect: corev1.TaintEffectNoSchedule})
	}
}

func makeNode(name, cpu string, opts ...nodeOpt) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("110")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	n.Status.Capacity = n.Status.Allocatable
	for _, o := range opts {
		o(n)
	}
	return n
}

func (c *testCluster) createNode(n *corev1.Node) *corev1.Node {
	c.t.Helper()
	status := n.Status
	out, err := c.client.CoreV1().Nodes().Create(c.ctx, n, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	out.Status = status
	out, err = c.client.CoreV1().Nodes().UpdateStatus(c.ctx, out, metav1.UpdateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

type podOpt func(*corev1.Pod)

func cpu(q string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}
	}
}

func withClaim(claim string) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	}
}

func priority(p int32) podOpt {
	return func(pod *corev1.Pod) { pod.Spec.Priority = &p }
}

// priorityClass asks for a PriorityClass; the API server's Priority admission sets
// spec.priority from it.
func priorityClass(name string) podOpt {
	return func(pod *corev1.Pod) { pod.Spec.PriorityClassName = name }
}

func makePod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"app": name}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func (c *testCluster) createPod(p *corev1.Pod) *corev1.Pod {
	c.t.Helper()
	out, err := c.client.CoreV1().Pods(p.Namespace).Create(c.ctx, p, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// waitScheduled waits for the pod to get a node and returns it.
func (c *testCluster) waitScheduled(name string) string {
	c.t.Helper()
	var node string
	testutil.Eventually(c.t, "pod "+name+" scheduled", func() (bool, error) {
		p, err := c.client.CoreV1().Pods("default").Get(c.ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		node = p.Spec.NodeName
		return node != "", nil
	})
	return node
}

// waitEvent waits for an event of reason about the pod whose message contains want.
func (c *testCluster) waitEvent(pod, reason, want string) *corev1.Event {
	c.t.Helper()
	var found *corev1.Event
	testutil.Eventually(c.t, fmt.Sprintf("a %s event for %s containing %q", reason, pod, want), func() error {
		evs, err := c.client.CoreV1().Events("default").List(c.ctx, metav1.ListOptions{
			FieldSelector: fmt.Sprintf("involvedObject.name=%s,reason=%s", pod, reason)})
		if err != nil {
			return err
		}
		last := ""
		for i, e := range evs.Items {
			last = e.Message
			if strings.Contains(e.Message, want) {
				found = &evs.Items[i]
				return nil
			}
		}
		return fmt.Errorf("last: %q", last)
	})
	return found
}

func (c *testCluster) createClass(name string, mode storagev1.VolumeBindingMode, zones ...string) {
	c.t.Helper()
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "ebs.csi.aws.com", VolumeBindingMode: &mode}
	if len(zones) > 0 {
		sc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
			{Key: "topology.ebs.csi.aws.com/zone", Values: zones}}}}
	}
	if _, err := c.client.StorageV1().StorageClasses().Create(c.ctx, sc, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *testCluster) createClaim(name, class string) *corev1.PersistentVolumeClaim {
	c.t.Helper()
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &class,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
		},
	}
	out, err := c.client.CoreV1().PersistentVolumeClaims("default").Create(c.ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// zoneAffinity is the node affinity the EBS driver's PVs carry.
func zoneAffinity(key, zone string) *corev1.VolumeNodeAffinity {
	return &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchExpressions: []corev1.NodeSelectorRequirement{{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{zone}}}}}}}
}

// bindClaim plays the provisioner and the PV controller: a PV in zone for the claim, and
// the claim bound to it.
func (c *testCluster) bindClaim(pvc *corev1.PersistentVolumeClaim, pvName, zoneKey, zone string) {
	c.t.Helper()
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName, Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com"}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              *pvc.Spec.StorageClassName,
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
			PersistentVolumeSource:        corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-" + pvName, FSType: "ext4"}},
			NodeAffinity:                  zoneAffinity(zoneKey, zone),
		},
	}
	if _, err := c.client.CoreV1().PersistentVolumes().Create(c.ctx, pv, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	cur, err := c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Get(c.ctx, pvc.Name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	cur.Spec.VolumeName = pvName
	metav1.SetMetaDataAnnotation(&cur.ObjectMeta, "pv.kubernetes.io/bind-completed", "yes")
	cur, err = c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(c.ctx, cur, metav1.UpdateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	cur.Status.Phase = corev1.ClaimBound
	if _, err := c.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).UpdateStatus(c.ctx, cur, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

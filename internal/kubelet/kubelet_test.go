package kubelet

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/util/volumeutil"
)

type hollowNode struct {
	k       *Kubelet
	mounter *hollowMounter
}

// startKubelet runs a hollow kubelet against client until the test ends.
func startKubelet(t *testing.T, client kubernetes.Interface, cfg Config) *hollowNode {
	t.Helper()
	cfg.Hollow = true
	if cfg.LeaseRenewInterval == 0 {
		cfg.LeaseDuration, cfg.LeaseRenewInterval = 4*time.Second, time.Second
	}
	if cfg.StatusUpdateInterval == 0 {
		cfg.StatusUpdateInterval = time.Second
	}
	m := newHollowMounter(nil)
	factory := informers.NewSharedInformerFactory(client, 0)
	k, err := New(cfg, client, factory, Deps{Mounter: m})
	if err != nil {
		t.Fatal(err)
	}
	startInformers(t, factory)
	testutil.Start(t, "the kubelet", 30*time.Second, k.Run, testutil.Closed(k.Registered()))
	return &hollowNode{k: k, mounter: m}
}

// startInformers starts factory's informers until the test ends, after what the test
// started later (cleanups run last first).
func startInformers(t *testing.T, factory informers.SharedInformerFactory) {
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
}

func TestHollowNodeRegistersNodeCSINodeAndLease(t *testing.T) {
	api := apiservertest.Start(t, apiservertest.Options{})
	c, ctx := api.Client, context.Background()
	startKubelet(t, c, Config{NodeName: "hollow-a", Zone: "us-east-1a", InstanceID: "i-0a1b2c3d4e5f60001",
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}})

	n, err := c.CoreV1().Nodes().Get(ctx, "hollow-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"kubernetes.io/hostname": "hollow-a", "kubernetes.io/os": "linux", "topology.kubernetes.io/zone": "us-east-1a",
		"topology.kubernetes.io/region": "us-east-1", "topology.ebs.csi.aws.com/zone": "us-east-1a",
		"node.kubernetes.io/instance-type": "m5.large",
	} {
		if n.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, n.Labels[k], v)
		}
	}
	if got := n.Annotations["csi.volume.kubernetes.io/nodeid"]; got != `{"ebs.csi.aws.com":"i-0a1b2c3d4e5f60001"}` {
		t.Errorf("nodeid annotation %q", got)
	}
	if n.Spec.ProviderID != "aws:///us-east-1a/i-0a1b2c3d4e5f60001" {
		t.Errorf("providerID %q", n.Spec.ProviderID)
	}
	if q := n.Status.Allocatable[corev1.ResourceCPU]; q.String() != "4" {
		t.Errorf("allocatable cpu %s, want 4", q.String())
	}
	if q := n.Status.Allocatable[corev1.ResourcePods]; q.String() != "110" {
		t.Errorf("allocatable pods %s, want 110", q.String())
	}
	ready := false
	for _, cd := range n.Status.Conditions {
		if cd.Type == corev1.NodeReady && cd.Status == corev1.ConditionTrue && cd.Reason == "KubeletReady" {
			ready = true
		}
	}
	if !ready {
		t.Errorf("conditions %+v, want Ready=True", n.Status.Conditions)
	}
	if !strings.HasPrefix(n.Status.NodeInfo.KubeletVersion, "v1.") {
		t.Errorf("kubeletVersion %q", n.Status.NodeInfo.KubeletVersion)
	}

	cn, err := c.StorageV1().CSINodes().Get(ctx, "hollow-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cn.Spec.Drivers) != 1 {
		t.Fatalf("CSINode drivers %+v", cn.Spec.Drivers)
	}
	d := cn.Spec.Drivers[0]
	if d.Name != "ebs.csi.aws.com" || d.NodeID != "i-0a1b2c3d4e5f60001" || d.Allocatable == nil || ptr.Deref(d.Allocatable.Count, 0) != 25 {
		t.Errorf("CSINode driver %+v", d)
	}
	if strings.Join(d.TopologyKeys, ",") != "kubernetes.io/os,topology.ebs.csi.aws.com/zone,topology.kubernetes.io/zone" {
		t.Errorf("topology keys %v", d.TopologyKeys)
	}
	if len(cn.OwnerReferences) != 1 || cn.OwnerReferences[0].UID != n.UID {
		t.Errorf("CSINode owners %+v, want the Node", cn.OwnerReferences)
	}

	var first time.Time
	testutil.Eventually(t, "lease", func() (bool, error) {
		l, err := c.CoordinationV1().Leases("kube-node-lease").Get(ctx, "hollow-a", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		if ptr.Deref(l.Spec.HolderIdentity, "") != "hollow-a" || ptr.Deref(l.Spec.LeaseDurationSeconds, 0) != 4 {
			t.Fatalf("lease spec %+v", l.Spec)
		}
		if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].UID != n.UID {
			t.Fatalf("lease owners %+v", l.OwnerReferences)
		}
		first = l.Spec.RenewTime.Time
		return true, nil
	})
	testutil.Eventually(t, "lease renewal", func() (bool, error) {
		l, err := c.CoordinationV1().Leases("kube-node-lease").Get(ctx, "hollow-a", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return l.Spec.RenewTime.Time.After(first), nil
	})
}

func TestHollowNodeTakesOverExistingNode(t *testing.T) {
	api := apiservertest.Start(t, apiservertest.Options{})
	c, ctx := api.Client, context.Background()
	_, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hollow-b", Labels: map[string]string{"team": "storage"}},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.7.0/24", PodCIDRs: []string{"10.244.7.0/24"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startKubelet(t, c, Config{NodeName: "hollow-b", Zone: "us-east-1b", InstanceID: "i-0b"})
	n, err := c.CoreV1().Nodes().Get(ctx, "hollow-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels["team"] != "storage" || n.Labels["topology.kubernetes.io/zone"] != "us-east-1b" || n.Spec.PodCIDR != "10.244.7.0/24" {
		t.Errorf("node after takeover: labels %v podCIDR %q", n.Labels, n.Spec.PodCIDR)
	}
}

func testPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
	}
}

func waitRunning(t *testing.T, c kubernetes.Interface, name string) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	testutil.Eventually(t, "pod "+name+" Running", func() (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return p.Status.Phase == corev1.PodRunning, nil
	})
	return pod
}

func waitGone(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	testutil.Eventually(t, "pod "+name+" gone", func() (bool, error) {
		_, err := c.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

func TestHollowPodRunsAndDeletionCompletes(t *testing.T) {
	api := apiservertest.Start(t, apiservertest.Options{})
	c, ctx := api.Client, context.Background()
	_, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "hollow-c"},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.3.0/24", PodCIDRs: []string{"10.244.3.0/24"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startKubelet(t, c, Config{NodeName: "hollow-c", Zone: "us-east-1c", InstanceID: "i-0c", NodeIP: "172.31.0.13", PodEvents: true})
	if _, err := c.CoreV1().Pods("default").Create(ctx, testPod("web", "hollow-c"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := waitRunning(t, c, "web")
	if p.Status.PodIP != "10.244.3.2" || !netip.MustParsePrefix("10.244.3.0/24").Contains(netip.MustParseAddr(p.Status.PodIP)) {
		t.Errorf("podIP %q, want 10.244.3.2", p.Status.PodIP)
	}
	if p.Status.HostIP != "172.31.0.13" {
		t.Errorf("hostIP %q", p.Status.HostIP)
	}
	if len(p.Status.ContainerStatuses) != 1 || !p.Status.ContainerStatuses[0].Ready || p.Status.ContainerStatuses[0].State.Running == nil ||
		p.Status.ContainerStatuses[0].ContainerID == "" || p.Status.ContainerStatuses[0].ImageID == "" {
		t.Errorf("container statuses %+v", p.Status.ContainerStatuses)
	}
	ready := false
	for _, cd := range p.Status.Conditions {
		if cd.Type == corev1.PodReady && cd.Status == corev1.ConditionTrue {
			ready = true
		}
	}
	if !ready || p.Status.QOSClass != corev1.PodQOSBurstable {
		t.Errorf("conditions %+v qos %s", p.Status.Conditions, p.Status.QOSClass)
	}
	testutil.Eventually(t, "Started event", func() (bool, error) {
		evs, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=web,reason=Started"})
		if err != nil {
			return false, err
		}
		return len(evs.Items) > 0 && evs.Items[0].Source.Component == "kubelet" && evs.Items[0].Source.Host == "hollow-c", nil
	})
	// A second pod gets the next address.
	if _, err := c.CoreV1().Pods("default").Create(ctx, testPod("web2", "hollow-c"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p2 := waitRunning(t, c, "web2"); p2.Status.PodIP != "10.244.3.3" {
		t.Errorf("web2 podIP %q, want 10.244.3.3", p2.Status.PodIP)
	}
	// A graceful delete only marks the pod; the kubelet finishes it.
	if err := c.CoreV1().Pods("default").Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, "web")

	// Pods bound to the node directly: the same hostPort on other addresses or with
	// another protocol is admitted; on 0.0.0.0 it conflicts, and the pod is rejected
	// until the pods holding the port are gone.
	hostPortPod := func(name, ip string, proto corev1.Protocol) *corev1.Pod {
		p := testPod(name, "hollow-c")
		p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 8080, HostPort: 54323, HostIP: ip, Protocol: proto}}
		return p
	}
	for _, p := range []*corev1.Pod{hostPortPod("hp1", "127.0.0.1", corev1.ProtocolTCP), hostPortPod("hp2", "172.31.0.13", corev1.ProtocolTCP),
		hostPortPod("hp3", "172.31.0.13", corev1.ProtocolUDP)} {
		if _, err := c.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitRunning(t, c, p.Name)
	}
	if _, err := c.CoreV1().Pods("default").Create(ctx, hostPortPod("hp4", "", corev1.ProtocolTCP), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "hp4 rejected", func() error {
		p, err := c.CoreV1().Pods("default").Get(ctx, "hp4", metav1.GetOptions{})
		if err != nil {
			return err
		}
		want := "Pod was rejected: Predicate NodePorts failed: node(s) didn't have free ports for the requested pod ports"
		if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "NodePorts" || p.Status.Message != want {
			return fmt.Errorf("phase %s reason %q message %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
		}
		evs, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=hp4,reason=NodePorts"})
		if err != nil || len(evs.Items) == 0 {
			return fmt.Errorf("no NodePorts event: %v", err)
		}
		return nil
	})
	for _, name := range []string{"hp1", "hp2"} {
		if err := c.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		waitGone(t, c, name)
	}
	if _, err := c.CoreV1().Pods("default").Create(ctx, hostPortPod("hp5", "0.0.0.0", corev1.ProtocolTCP), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, c, "hp5")

	// A running pod whose activeDeadlineSeconds is set is stopped once it has been active
	// that long.
	if _, err := c.CoreV1().Pods("default").Create(ctx, testPod("deadline", "hollow-c"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, c, "deadline")
	patch := []byte(`{"spec":{"activeDeadlineSeconds":2}}`)
	if _, err := c.CoreV1().Pods("default").Patch(ctx, "deadline", types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "deadline pod failed", func() error {
		p, err := c.CoreV1().Pods("default").Get(ctx, "deadline", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodFailed || p.Status.Reason != "DeadlineExceeded" ||
			p.Status.Message != "Pod was active on the node longer than the specified deadline" {
			return fmt.Errorf("phase %s reason %q message %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
		}
		if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil {
			return fmt.Errorf("container statuses %+v", cs)
		}
		evs, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=deadline,reason=DeadlineExceeded"})
		if err != nil || len(evs.Items) == 0 {
			return fmt.Errorf("no DeadlineExceeded event: %v", err)
		}
		return nil
	})
}

func TestHollowPodWaitsForAttachedVolume(t *testing.T) {
	api := apiservertest.Start(t, apiservertest.Options{})
	c, ctx := api.Client, context.Background()
	node := startKubelet(t, c, Config{NodeName: "hollow-d", Zone: "us-east-1a", InstanceID: "i-0d", RootDir: "/var/lib/kubelab/nodes/hollow-d/kubelet"})

	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-1111"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			ClaimRef:               &corev1.ObjectReference{Namespace: "default", Name: "data"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-0abc", FSType: "ext4"}},
		},
	}
	if _, err := c.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, VolumeName: "pvc-1111",
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}
	pvc, err := c.CoreV1().PersistentVolumeClaims("default").Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	if _, err := c.CoreV1().PersistentVolumeClaims("default").UpdateStatus(ctx, pvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := testPod("db", "hollow-d")
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod, err = c.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	const unique = "kubernetes.io/csi/ebs.csi.aws.com^vol-0abc"
	testutil.Eventually(t, "volumesInUse", func() (bool, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, "hollow-d", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(n.Status.VolumesInUse) == 1 && n.Status.VolumesInUse[0] == unique, nil
	})
	testutil.Eventually(t, "ContainerCreating", func() (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.Phase == corev1.PodPending && len(p.Status.ContainerStatuses) == 1 &&
			p.Status.ContainerStatuses[0].State.Waiting != nil && p.Status.ContainerStatuses[0].State.Waiting.Reason == "ContainerCreating", nil
	})
	// The attach/detach controller's part: a VolumeAttachment, not yet attached, under
	// the name the kubelet gets it by.
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: volumeutil.AttachmentName("vol-0abc", "ebs.csi.aws.com", "hollow-d")},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: "hollow-d",
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: ptr.To("pvc-1111")}},
	}
	va, err = c.StorageV1().VolumeAttachments().Create(ctx, va, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Consistently(t, time.Second, "the pod pending until its volume is attached", func() error {
		p, err := c.CoreV1().Pods("default").Get(ctx, "db", metav1.GetOptions{})
		if err == nil && p.Status.Phase != corev1.PodPending {
			err = fmt.Errorf("pod %s before the volume was attached", p.Status.Phase)
		}
		return err
	})
	// The attacher's part: attached, with the device path.
	va.Status = storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"devicePath": "/dev/xvdaa"}}
	if _, err := c.StorageV1().VolumeAttachments().UpdateStatus(ctx, va, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, c, "db")
	target := "/var/lib/kubelab/nodes/hollow-d/kubelet/pods/" + string(pod.UID) + "/volumes/kubernetes.io~csi/pvc-1111/mount"
	if got := node.mounter.Mounts()[target]; got != unique {
		t.Errorf("mounts %v, want %s at %s", node.mounter.Mounts(), unique, target)
	}

	if err := c.CoreV1().Pods("default").Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c, "db")
	if m := node.mounter.Mounts(); len(m) != 0 {
		t.Errorf("mounts left after delete: %v", m)
	}
	testutil.Eventually(t, "volumesInUse cleared", func() (bool, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, "hollow-d", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return len(n.Status.VolumesInUse) == 0, nil
	})
}

// A pod that started before the node had a podCIDR gets an address once it has one.
func TestHollowPodGetsIPWhenPodCIDRArrives(t *testing.T) {
	api := apiservertest.Start(t, apiservertest.Options{})
	c, ctx := api.Client, context.Background()
	startKubelet(t, c, Config{NodeName: "hollow-e", Zone: "us-east-1b", InstanceID: "i-0e"})
	if _, err := c.CoreV1().Pods("default").Create(ctx, testPod("early", "hollow-e"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p := waitRunning(t, c, "early"); p.Status.PodIP != "" {
		t.Fatalf("podIP %q without a podCIDR", p.Status.PodIP)
	}
	// What the nodeipam controller does.
	n, err := c.CoreV1().Nodes().Get(ctx, "hollow-e", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Spec.PodCIDR, n.Spec.PodCIDRs = "10.244.9.0/24", []string{"10.244.9.0/24"}
	if _, err := c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "pod IP", func() (bool, error) {
		p, err := c.CoreV1().Pods("default").Get(ctx, "early", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return p.Status.PodIP == "10.244.9.2", nil
	})
}

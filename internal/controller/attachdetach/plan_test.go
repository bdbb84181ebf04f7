package attachdetach

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/util/volumeutil"
)

const drv = "ebs.csi.aws.com"

func TestPodTerminated(t *testing.T) {
	now := metav1.Now()
	running := corev1.ContainerStatus{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	stopped := corev1.ContainerStatus{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}
	cases := []struct {
		name string
		pod  corev1.Pod
		want bool
	}{
		{"running", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{running}}}, false},
		{"succeeded", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, true},
		{"failed", corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}, true},
		{"deleting, container still running", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{running}}}, false},
		{"deleting, containers stopped", corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{stopped}}}, true},
	}
	for _, tc := range cases {
		if got := podTerminated(&tc.pod); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func pv(name, handle string, modes ...corev1.PersistentVolumeAccessMode) *corev1.PersistentVolume {
	if len(modes) == 0 {
		modes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
		AccessModes:            modes,
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: drv, VolumeHandle: handle}},
	}}
}

func va(v *corev1.PersistentVolume, node string, attached bool, deleting bool) *storagev1.VolumeAttachment {
	out := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: volumeutil.AttachmentName(v.Spec.CSI.VolumeHandle, drv, node)},
		Spec:       storagev1.VolumeAttachmentSpec{Attacher: drv, NodeName: node, Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &v.Name}},
		Status:     storagev1.VolumeAttachmentStatus{Attached: attached},
	}
	if deleting {
		now := metav1.Now()
		out.DeletionTimestamp = &now
	}
	return out
}

// foreign is a VolumeAttachment to node-b that the controller did not name.
func foreign(name, pvName, attacher string) *storagev1.VolumeAttachment {
	return &storagev1.VolumeAttachment{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: attacher, NodeName: "node-b", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pvName}}}
}

func node(ready bool, inUse []corev1.UniqueVolumeName, taints ...corev1.Taint) *corev1.Node {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b"},
		Spec:   corev1.NodeSpec{Taints: taints},
		Status: corev1.NodeStatus{VolumesInUse: inUse, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}}}}
}

func TestPlanNode(t *testing.T) {
	now := time.Now()
	v1, v2 := pv("pv1", "vol-1"), pv("pv2", "vol-2")
	rwx := pv("pv3", "vol-3", corev1.ReadWriteMany)
	want := func(v *corev1.PersistentVolume) map[string]wanted {
		n := volumeutil.AttachmentName(v.Spec.CSI.VolumeHandle, drv, "node-b")
		return map[string]wanted{n: {name: n, pv: v, driver: drv}}
	}
	u1 := volumeutil.UniqueVolumeName(drv, "vol-1")
	name1 := volumeutil.AttachmentName("vol-1", drv, "node-b")
	cases := []struct {
		name  string
		state nodeState
		// create, multi, detach, force, waiting as attachment names; attached as volume names
		create, multi, detach, force, waiting []string
		attached                              []corev1.UniqueVolumeName
	}{
		{name: "needed and missing: create",
			state:  nodeState{node: node(true, nil), desired: want(v1)},
			create: []string{name1}},
		{name: "needed and attached: report it",
			state:    nodeState{node: node(true, nil), desired: want(v1), actual: []*storagev1.VolumeAttachment{va(v1, "node-b", true, false)}, volumes: map[string]*corev1.PersistentVolume{"pv1": v1}},
			attached: []corev1.UniqueVolumeName{u1}},
		{name: "single-node volume attached elsewhere: multi-attach error",
			state: nodeState{node: node(true, nil), desired: want(v1), elsewhere: map[string][]string{"pv1": {"node-a"}}},
			multi: []string{name1}},
		{name: "ReadWriteMany volume attached elsewhere: create",
			state:  nodeState{node: node(true, nil), desired: want(rwx), elsewhere: map[string][]string{"pv3": {"node-a"}}},
			create: []string{volumeutil.AttachmentName("vol-3", drv, "node-b")}},
		{name: "unneeded and not in use: detach",
			state:    nodeState{node: node(true, nil), actual: []*storagev1.VolumeAttachment{va(v1, "node-b", true, false)}, volumes: map[string]*corev1.PersistentVolume{"pv1": v1}},
			detach:   []string{name1},
			attached: []corev1.UniqueVolumeName{u1}},
		{name: "unneeded but in use: wait",
			state:    nodeState{node: node(true, []corev1.UniqueVolumeName{u1}), actual: []*storagev1.VolumeAttachment{va(v1, "node-b", true, false)}, volumes: map[string]*corev1.PersistentVolume{"pv1": v1}},
			waiting:  []string{name1},
			attached: []corev1.UniqueVolumeName{u1}},
		{name: "in use on a healthy node past the wait: still wait",
			state: nodeState{node: node(true, []corev1.UniqueVolumeName{u1}), actual: []*storagev1.VolumeAttachment{va(v1, "node-b", true, false)}, volumes: map[string]*corev1.PersistentVolume{"pv1": v1},
				unneededSince: map[string]time.Time{name1: now.Add(-time.Hour)}, now: now, maxWait: 6 * time.Minute},
			waiting:  []string{name1},
			attached: []corev1.UniqueVolumeName{u1}},
		{name: "in use on an unhealthy node past the wait: force",
			state: nodeState{node: node(false, []corev1.UniqueVolumeName{u1}), actual: []*storagev1.VolumeAttachment{va(v1, "node-b", true, false)}, volumes: map[string]*corev1.PersistentVolume{"pv1": v1},
				unneededSince: map[string]time.Time{name1: now.Add(-7 * time.Minute)}, now: now, maxWait: 6 * time.Minute},
			detach: []string{name1}, force: []string{name1},
			attached: []corev1.UniqueVolumeName{u1}},
		{name: "in use on an unhealthy node within the wait: wait",
			state: nodeState{node: node(false, []corev1.UniqueVolumeName{u1}), actual: []*storagev1.VolumeAttachment{va(v1, "node-b", true, false)}, volumes: map[string]*corev1.PersistentVolume{"pv1": v1},
				unneededSince: map[string]time.Time{name1: now.Add(-time.Minute)}, now: now, maxWait: 6 * time.Minute},
			waiting:  []string{name1},
			attached: []corev1.UniqueVolumeName{u1}},
		{name: "out-of-service node: force at once",
			state:  nodeState{node: node(false, []corev1.UniqueVolumeName{u1}, corev1.Taint{Key: TaintOutOfService, Effect: corev1.TaintEffectNoExecute}), actual: []*storagev1.VolumeAttachment{va(v1, "node-b", true, false)}, volumes: map[string]*corev1.PersistentVolume{"pv1": v1}},
			detach: []string{name1}, force: []string{name1}, attached: []corev1.UniqueVolumeName{u1}},
		{name: "node gone: detach",
			state:  nodeState{actual: []*storagev1.VolumeAttachment{va(v1, "node-b", false, false)}, volumes: map[string]*corev1.PersistentVolume{"pv1": v1}},
			detach: []string{name1}},
		{name: "being detached: leave it to the attacher",
			state:    nodeState{node: node(true, nil), actual: []*storagev1.VolumeAttachment{va(v1, "node-b", true, true)}, volumes: map[string]*corev1.PersistentVolume{"pv1": v1}},
			attached: []corev1.UniqueVolumeName{u1}},
		{name: "needed again while being detached: wait until it is gone",
			state:    nodeState{node: node(true, nil), desired: want(v1), actual: []*storagev1.VolumeAttachment{va(v1, "node-b", true, true)}, volumes: map[string]*corev1.PersistentVolume{"pv1": v1}},
			attached: []corev1.UniqueVolumeName{u1}},
		{name: "someone else's attachment, its volume unknown: left alone",
			state: nodeState{node: node(true, nil), actual: []*storagev1.VolumeAttachment{foreign("va-e2e-x1", "pv-e2e-x1", "e2e-test.storage.k8s.io")},
				volumes: map[string]*corev1.PersistentVolume{}}},
		{name: "someone else's attachment of a known volume: left alone",
			state: nodeState{node: node(true, nil), actual: []*storagev1.VolumeAttachment{foreign("mine", "pv1", drv)},
				volumes: map[string]*corev1.PersistentVolume{"pv1": v1}}},
		{name: "the controller's attachment, its volume gone: detach",
			state:  nodeState{node: node(true, nil), actual: []*storagev1.VolumeAttachment{va(v1, "node-b", true, false)}, volumes: map[string]*corev1.PersistentVolume{}},
			detach: []string{name1}},
		{name: "one needed, one not, one not yet attached",
			state: nodeState{node: node(true, nil), desired: want(v2),
				actual:  []*storagev1.VolumeAttachment{va(v1, "node-b", true, false), va(v2, "node-b", false, false)},
				volumes: map[string]*corev1.PersistentVolume{"pv1": v1, "pv2": v2}},
			detach: []string{name1}, attached: []corev1.UniqueVolumeName{u1}},
	}
	names := func(ws []wanted) []string {
		var out []string
		for _, w := range ws {
			out = append(out, w.name)
		}
		return out
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.state.name = "node-b"
			p := planNode(tc.state)
			var attached []corev1.UniqueVolumeName
			for _, a := range p.attached {
				attached = append(attached, a.Name)
			}
			for _, c := range []struct {
				what      string
				got, want interface{}
			}{
				{"create", names(p.create), tc.create}, {"multiAttach", names(p.multiAttach), tc.multi},
				{"detach", p.detach, tc.detach}, {"force", p.force, tc.force}, {"waiting", p.waiting, tc.waiting},
				{"attached", attached, tc.attached},
			} {
				if !reflect.DeepEqual(c.got, c.want) {
					t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
				}
			}
		})
	}
}

func TestNodeManaged(t *testing.T) {
	for ann, want := range map[string]bool{"": true, "true": true, "false": false} {
		n := &corev1.Node{}
		if ann != "" {
			n.Annotations = map[string]string{AnnControllerManaged: ann}
		}
		if got := nodeManaged(n); got != want {
			t.Errorf("annotation %q: managed %v, want %v", ann, got, want)
		}
	}
}

func TestSameAttached(t *testing.T) {
	a := []corev1.AttachedVolume{{Name: "x"}, {Name: "y"}}
	b := []corev1.AttachedVolume{{Name: "y"}, {Name: "x"}}
	if !sameAttached(a, b) || sameAttached(a, a[:1]) || sameAttached(nil, a) || !sameAttached(nil, nil) {
		t.Fatal("sameAttached compares sets of names")
	}
}

package protection

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/util/volumeutil"
)

func TestDecide(t *testing.T) {
	cases := []struct {
		name       string
		finalizers []string
		deleting   bool
		want       step
	}{
		{"new object gets the finalizer", nil, false, stepAddFinalizer},
		{"object with the finalizer is left alone", []string{"x", volumeutil.PVCProtectionFinalizer}, false, stepNothing},
		{"deleted object with the finalizer is checked", []string{volumeutil.PVCProtectionFinalizer}, true, stepCheckRemove},
		{"deleted object without it is not ours", []string{"other"}, true, stepNothing},
	}
	for _, tc := range cases {
		if got := decide(tc.finalizers, tc.deleting, volumeutil.PVCProtectionFinalizer); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := string(addFinalizerPatch(volumeutil.PVProtectionFinalizer)); got != `{"metadata":{"finalizers":["kubernetes.io/pv-protection"]}}` {
		t.Errorf("add patch %s", got)
	}
	if got := string(removeFinalizerPatch(volumeutil.PVCProtectionFinalizer)); got != `{"metadata":{"$deleteFromPrimitiveList/finalizers":["kubernetes.io/pvc-protection"]}}` {
		t.Errorf("remove patch %s", got)
	}
}

func TestPodUsesClaim(t *testing.T) {
	now := metav1.Now()
	zero := int64(0)
	thirty := int64(30)
	pod := func(node string, mut ...func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: node, Volumes: []corev1.Volume{
			{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "claim"}}},
			{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
		}}}
		for _, m := range mut {
			m(p)
		}
		return p
	}
	deleting := func(grace *int64) func(*corev1.Pod) {
		return func(p *corev1.Pod) { p.DeletionTimestamp, p.DeletionGracePeriodSeconds = &now, grace }
	}
	cases := []struct {
		name  string
		pod   *corev1.Pod
		claim string
		want  bool
	}{
		{"scheduled pod using the claim", pod("node-b"), "claim", true},
		{"unscheduled pod does not hold it", pod(""), "claim", false},
		{"another claim", pod("node-b"), "other", false},
		{"pod being deleted gracefully still holds it", pod("node-b", deleting(&thirty)), "claim", true},
		{"shut-down pod still holds a named claim", pod("node-b", deleting(&zero)), "claim", true},
		{"ephemeral claim of a running pod", pod("node-b"), "web-scratch", true},
		{"ephemeral claim of a shut-down pod", pod("node-b", deleting(&zero)), "web-scratch", false},
	}
	for _, tc := range cases {
		if got := podUsesClaim(tc.pod, tc.claim); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestVolumeInUse(t *testing.T) {
	for phase, want := range map[corev1.PersistentVolumePhase]bool{
		corev1.VolumeBound: true, corev1.VolumeAvailable: false, corev1.VolumeReleased: false, corev1.VolumeFailed: false, corev1.VolumePending: false,
	} {
		if got := volumeInUse(&corev1.PersistentVolume{Status: corev1.PersistentVolumeStatus{Phase: phase}}); got != want {
			t.Errorf("%s: in use %v, want %v", phase, got, want)
		}
	}
}

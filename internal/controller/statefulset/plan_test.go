package statefulset

import (
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestPlan(t *testing.T) {
	ok := podState{exists: true, runningReady: true, revision: "r2"}
	old := podState{exists: true, runningReady: true, revision: "r1"}
	pending := podState{exists: true}
	going := podState{exists: true, terminating: true, revision: "r2"}
	failed := podState{exists: true, failed: true}
	r2 := "r2"
	for _, tc := range []struct {
		name       string
		start, end int
		pods       map[int]podState
		parallel   bool
		update     *string
		partition  int
		want       step
	}{
		{"first pod first", 0, 3, map[int]podState{}, false, &r2, 0, step{create: []int{0}}},
		{"wait for pod 0 ready", 0, 3, map[int]podState{0: pending}, false, &r2, 0, step{}},
		{"then pod 1", 0, 3, map[int]podState{0: ok}, false, &r2, 0, step{create: []int{1}}},
		{"parallel: all at once", 0, 3, map[int]podState{}, true, &r2, 0, step{create: []int{0, 1, 2}}},
		{"failed pod deleted", 0, 2, map[int]podState{0: failed, 1: ok}, false, &r2, 0, step{delete: []int{0}}},
		{"scale down: highest first", 0, 1, map[int]podState{0: ok, 1: ok, 2: ok}, false, &r2, 0, step{delete: []int{2}}},
		{"scale down: one at a time", 0, 1, map[int]podState{0: ok, 1: ok, 2: going}, false, &r2, 0, step{}},
		{"scale down waits for health", 0, 1, map[int]podState{0: pending, 1: ok, 2: ok}, false, &r2, 0, step{}},
		{"parallel scale down", 0, 1, map[int]podState{0: ok, 1: ok, 2: ok}, true, &r2, 0, step{delete: []int{2, 1}}},
		{"rolling update: highest first", 0, 3, map[int]podState{0: old, 1: old, 2: old}, false, &r2, 0, step{delete: []int{2}}},
		{"rolling update: next", 0, 3, map[int]podState{0: old, 1: old, 2: ok}, false, &r2, 0, step{delete: []int{1}}},
		{"rolling update waits while one is down", 0, 3, map[int]podState{0: old, 1: old, 2: pending}, false, &r2, 0, step{}},
		{"partition keeps low ordinals", 0, 3, map[int]podState{0: old, 1: old, 2: ok}, false, &r2, 2, step{}},
		{"OnDelete: no update", 0, 3, map[int]podState{0: old, 1: old, 2: old}, false, nil, 0, step{}},
		{"partition counts from the start ordinal", 5, 8, map[int]podState{5: old, 6: old, 7: ok}, false, &r2, 1, step{delete: []int{6}}},
		{"partition above the replicas: no update", 0, 3, map[int]podState{0: old, 1: old, 2: old}, false, &r2, 3, step{}},
		{"ordinals from 5", 5, 7, map[int]podState{5: ok}, false, &r2, 0, step{create: []int{6}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := plan(tc.start, tc.end, tc.pods, tc.parallel, tc.update, tc.partition); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("plan = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestIdentity(t *testing.T) {
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u"},
		Spec: appsv1.StatefulSetSpec{ServiceName: "nginx", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "nginx"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "nginx"}},
				Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "www"}}}},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "www"},
				Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("gp2"),
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{WhenDeleted: appsv1.DeletePersistentVolumeClaimRetentionPolicyType}}}
	p := newPod(set, 2, "web-abc")
	if p.Name != "web-2" || p.Spec.Hostname != "web-2" || p.Spec.Subdomain != "nginx" || p.Labels[PodNameLabel] != "web-2" ||
		p.Labels[PodIndexLabel] != "2" || p.Labels[RevisionHashLabel] != "web-abc" {
		t.Errorf("pod identity: %s %v hostname %s subdomain %s", p.Name, p.Labels, p.Spec.Hostname, p.Spec.Subdomain)
	}
	if len(p.Spec.Volumes) != 1 || p.Spec.Volumes[0].PersistentVolumeClaim == nil || p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "www-web-2" {
		t.Errorf("volumes %+v", p.Spec.Volumes)
	}
	if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != "u" || !*ref.BlockOwnerDeletion {
		t.Errorf("owner %+v", p.OwnerReferences)
	}
	claims := newClaims(set, 2)
	if len(claims) != 1 || claims[0].Name != "www-web-2" || claims[0].Labels["app"] != "nginx" || *claims[0].Spec.StorageClassName != "gp2" {
		t.Errorf("claims %+v", claims)
	}
	if len(claims[0].OwnerReferences) != 1 || claims[0].OwnerReferences[0].Controller != nil {
		t.Errorf("claim owners with whenDeleted=Delete: %+v", claims[0].OwnerReferences)
	}
	set.Spec.PersistentVolumeClaimRetentionPolicy.WhenDeleted = appsv1.RetainPersistentVolumeClaimRetentionPolicyType
	if c := newClaims(set, 0); len(c[0].OwnerReferences) != 0 {
		t.Errorf("retained claim has owners %+v", c[0].OwnerReferences)
	}
	for name, want := range map[string]int{"web-0": 0, "web-12": 12} {
		if got, ok := ordinalOf("web", name); !ok || got != want {
			t.Errorf("ordinalOf(%s) = %d, %v", name, got, ok)
		}
	}
	for _, name := range []string{"web", "webx-1", "web-a", "other-1"} {
		if _, ok := ordinalOf("web", name); ok {
			t.Errorf("ordinalOf(%s) accepted", name)
		}
	}
}

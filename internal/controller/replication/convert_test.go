package replication

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestConvertReplicationController(t *testing.T) {
	at := metav1.NewTime(time.Unix(1000, 0))
	rc := &corev1.ReplicationController{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u1", ResourceVersion: "7", Generation: 3,
			Labels: map[string]string{"tier": "front"}},
		Spec: corev1.ReplicationControllerSpec{
			Replicas: ptr.To[int32](4), MinReadySeconds: 10,
			Selector: map[string]string{"app": "web"},
			Template: &corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
			},
		},
		Status: corev1.ReplicationControllerStatus{Replicas: 4, FullyLabeledReplicas: 3, ReadyReplicas: 2, AvailableReplicas: 1,
			ObservedGeneration: 2, Conditions: []corev1.ReplicationControllerCondition{{Type: corev1.ReplicationControllerReplicaFailure,
				Status: corev1.ConditionTrue, LastTransitionTime: at, Reason: "FailedCreate", Message: "quota"}}},
	}
	rs := toReplicaSet(rc)
	want := appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](4), MinReadySeconds: 10,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, Template: *rc.Spec.Template}
	if !reflect.DeepEqual(rs.Spec, want) {
		t.Errorf("spec = %+v, want %+v", rs.Spec, want)
	}
	if !reflect.DeepEqual(rs.ObjectMeta, rc.ObjectMeta) {
		t.Errorf("metadata = %+v, want %+v", rs.ObjectMeta, rc.ObjectMeta)
	}
	wantCond := appsv1.ReplicaSetCondition{Type: appsv1.ReplicaSetReplicaFailure, Status: corev1.ConditionTrue,
		LastTransitionTime: at, Reason: "FailedCreate", Message: "quota"}
	if rs.Status.Replicas != 4 || rs.Status.FullyLabeledReplicas != 3 || rs.Status.ReadyReplicas != 2 ||
		rs.Status.AvailableReplicas != 1 || rs.Status.ObservedGeneration != 2 ||
		len(rs.Status.Conditions) != 1 || rs.Status.Conditions[0] != wantCond {
		t.Errorf("status = %+v", rs.Status)
	}
	// The copy shares nothing with the original.
	rs.Spec.Selector.MatchLabels["app"] = "changed"
	rs.Spec.Template.Labels["app"] = "changed"
	if rc.Spec.Selector["app"] != "web" || rc.Spec.Template.Labels["app"] != "web" {
		t.Error("toReplicaSet shares maps with the ReplicationController")
	}
	rs.Spec.Selector.MatchLabels["app"] = "web"
	rs.Spec.Template.Labels["app"] = "web"
	if back := toReplicationController(rs); !reflect.DeepEqual(back, rc) {
		t.Errorf("round trip = %+v\nwant %+v", back, rc)
	}
}

func TestConvertEmptyReplicationController(t *testing.T) {
	rs := toReplicaSet(&corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Name: "bare"}})
	if rs.Spec.Selector != nil || rs.Spec.Replicas != nil || len(rs.Status.Conditions) != 0 {
		t.Errorf("empty ReplicationController as %+v", rs)
	}
}

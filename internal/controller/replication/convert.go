package replication

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// toReplicaSet is rc seen as a ReplicaSet: the same metadata, spec and status, the
// selector map as matchLabels. It does not share memory with rc.
func toReplicaSet(rc *corev1.ReplicationController) *appsv1.ReplicaSet {
	rc = rc.DeepCopy()
	rs := &appsv1.ReplicaSet{
		ObjectMeta: rc.ObjectMeta,
		Spec: appsv1.ReplicaSetSpec{
			Replicas:        rc.Spec.Replicas,
			MinReadySeconds: rc.Spec.MinReadySeconds,
		},
		Status: appsv1.ReplicaSetStatus{
			Replicas:             rc.Status.Replicas,
			FullyLabeledReplicas: rc.Status.FullyLabeledReplicas,
			ReadyReplicas:        rc.Status.ReadyReplicas,
			AvailableReplicas:    rc.Status.AvailableReplicas,
			ObservedGeneration:   rc.Status.ObservedGeneration,
		},
	}
	if len(rc.Spec.Selector) > 0 {
		rs.Spec.Selector = &metav1.LabelSelector{MatchLabels: rc.Spec.Selector}
	}
	if rc.Spec.Template != nil {
		rs.Spec.Template = *rc.Spec.Template
	}
	for _, c := range rc.Status.Conditions {
		rs.Status.Conditions = append(rs.Status.Conditions, appsv1.ReplicaSetCondition{
			Type: appsv1.ReplicaSetConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return rs
}

// toReplicationController is the ReplicationController rs stands for. The controller
// only makes rs from toReplicaSet, so its selector is matchLabels only.
func toReplicationController(rs *appsv1.ReplicaSet) *corev1.ReplicationController {
	rs = rs.DeepCopy()
	rc := &corev1.ReplicationController{
		ObjectMeta: rs.ObjectMeta,
		Spec: corev1.ReplicationControllerSpec{
			Replicas:        rs.Spec.Replicas,
			MinReadySeconds: rs.Spec.MinReadySeconds,
			Template:        &rs.Spec.Template,
		},
		Status: corev1.ReplicationControllerStatus{
			Replicas:             rs.Status.Replicas,
			FullyLabeledReplicas: rs.Status.FullyLabeledReplicas,
			ReadyReplicas:        rs.Status.ReadyReplicas,
			AvailableReplicas:    rs.Status.AvailableReplicas,
			ObservedGeneration:   rs.Status.ObservedGeneration,
		},
	}
	if rs.Spec.Selector != nil {
		rc.Spec.Selector = rs.Spec.Selector.MatchLabels
	}
	for _, c := range rs.Status.Conditions {
		rc.Status.Conditions = append(rc.Status.Conditions, corev1.ReplicationControllerCondition{
			Type: corev1.ReplicationControllerConditionType(c.Type), Status: c.Status,
			LastTransitionTime: c.LastTransitionTime, Reason: c.Reason, Message: c.Message,
		})
	}
	return rc
}

package deployment

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Upstream condition reasons (kubectl rollout status reads ProgressDeadlineExceeded).
const (
	ReasonNewRSCreated         = "NewReplicaSetCreated"
	ReasonFoundNewRS           = "FoundNewReplicaSet"
	ReasonRSUpdated            = "ReplicaSetUpdated"
	ReasonNewRSAvailable       = "NewReplicaSetAvailable"
	ReasonTimedOut             = "ProgressDeadlineExceeded"
	ReasonPaused               = "DeploymentPaused"
	ReasonResumed              = "DeploymentResumed"
	ReasonMinimumAvailable     = "MinimumReplicasAvailable"
	ReasonMinimumUnavailable   = "MinimumReplicasUnavailable"
	ReasonFailedRSCreate       = "ReplicaSetCreateError"
	ReasonScalingReplicaSet    = "ScalingReplicaSet"
	ReasonReplicaFailureFromRS = "FailedCreate"
)

// computeStatus is the Deployment's status for its ReplicaSets, without the
// Progressing condition (which needs the old status and the clock).
func computeStatus(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, all []*appsv1.ReplicaSet, now time.Time) appsv1.DeploymentStatus {
	st := appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation,
		CollisionCount:     d.Status.CollisionCount,
		Conditions:         append([]appsv1.DeploymentCondition(nil), d.Status.Conditions...),
	}
	for _, rs := range all {
		st.Replicas += rs.Status.Replicas
		st.ReadyReplicas += rs.Status.ReadyReplicas
		st.AvailableReplicas += rs.Status.AvailableReplicas
	}
	if newRS != nil {
		st.UpdatedReplicas = newRS.Status.Replicas
	}
	st.UnavailableReplicas = max(0, sumSpec(all)-st.AvailableReplicas)
	if st.AvailableReplicas >= replicasOf(d)-maxUnavailableOf(d) {
		setCondition(&st, condition(appsv1.DeploymentAvailable, corev1.ConditionTrue, ReasonMinimumAvailable, "Deployment has minimum availability.", now))
	} else {
		setCondition(&st, condition(appsv1.DeploymentAvailable, corev1.ConditionFalse, ReasonMinimumUnavailable, "Deployment does not have minimum availability.", now))
	}
	var failure *appsv1.ReplicaSetCondition
	if newRS != nil {
		for i := range newRS.Status.Conditions {
			if c := newRS.Status.Conditions[i]; c.Type == appsv1.ReplicaSetReplicaFailure && c.Status == corev1.ConditionTrue {
				failure = &c
			}
		}
	}
	if failure != nil {
		setCondition(&st, condition(appsv1.DeploymentReplicaFailure, corev1.ConditionTrue, failure.Reason, failure.Message, now))
	} else {
		removeCondition(&st, appsv1.DeploymentReplicaFailure)
	}
	return st
}

// complete says whether the Deployment is fully rolled out according to st.
func complete(d *appsv1.Deployment, st *appsv1.DeploymentStatus) bool {
	r := replicasOf(d)
	return st.UpdatedReplicas == r && st.Replicas == r && st.AvailableReplicas == r && st.ObservedGeneration >= d.Generation
}

// progressed says whether st shows progress over the old status.
func progressed(old, st *appsv1.DeploymentStatus) bool {
	return st.UpdatedReplicas > old.UpdatedReplicas || st.Replicas < old.Replicas ||
		st.ReadyReplicas > old.ReadyReplicas || st.AvailableReplicas > old.AvailableReplicas
}

// progressing sets the Progressing condition on st as upstream's syncRolloutStatus
// does; it returns how soon the deadline must be checked again (0: no need).
func progressing(d *appsv1.Deployment, newRS *appsv1.ReplicaSet, st *appsv1.DeploymentStatus, now time.Time) time.Duration {
	if d.Spec.ProgressDeadlineSeconds == nil || d.Spec.Paused {
		return 0
	}
	cur := getCondition(st, appsv1.DeploymentProgressing)
	if cur != nil && cur.Reason == ReasonTimedOut && !complete(d, st) {
		return 0 // stays failed until a new rollout
	}
	deadline := time.Duration(*d.Spec.ProgressDeadlineSeconds) * time.Second
	rsName := ""
	if newRS != nil {
		rsName = newRS.Name
	}
	switch {
	case newRS != nil && complete(d, st):
		setCondition(st, condition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonNewRSAvailable,
			fmt.Sprintf("ReplicaSet %q has successfully progressed.", rsName), now))
		return 0
	case newRS != nil && progressed(&d.Status, st):
		// Progress moves lastUpdateTime, from which the deadline counts.
		c := condition(appsv1.DeploymentProgressing, corev1.ConditionTrue, ReasonRSUpdated, fmt.Sprintf("ReplicaSet %q is progressing.", rsName), now)
		if cur != nil {
			if cur.Status == corev1.ConditionTrue {
				c.LastTransitionTime = cur.LastTransitionTime
			}
			*cur = c
		} else {
			st.Conditions = append(st.Conditions, c)
		}
		return deadline
	case newRS != nil && cur != nil && cur.Status == corev1.ConditionTrue && cur.Reason != ReasonNewRSAvailable:
		if since := now.Sub(cur.LastUpdateTime.Time); since > deadline {
			setCondition(st, condition(appsv1.DeploymentProgressing, corev1.ConditionFalse, ReasonTimedOut,
				fmt.Sprintf("ReplicaSet %q has timed out progressing.", rsName), now))
			return 0
		} else {
			return deadline - since + time.Second
		}
	}
	return 0
}

func condition(t appsv1.DeploymentConditionType, s corev1.ConditionStatus, reason, msg string, now time.Time) appsv1.DeploymentCondition {
	ts := metav1.NewTime(now)
	return appsv1.DeploymentCondition{Type: t, Status: s, Reason: reason, Message: msg, LastUpdateTime: ts, LastTransitionTime: ts}
}

func getCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// setCondition puts c into st, keeping lastTransitionTime when the status is unchanged,
// and both times when nothing but the times would change.
func setCondition(st *appsv1.DeploymentStatus, c appsv1.DeploymentCondition) {
	cur := getCondition(st, c.Type)
	if cur != nil {
		if cur.Status == c.Status && cur.Reason == c.Reason && cur.Message == c.Message {
			return
		}
		if cur.Status == c.Status {
			c.LastTransitionTime = cur.LastTransitionTime
		}
		*cur = c
		return
	}
	st.Conditions = append(st.Conditions, c)
}

func removeCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) {
	var keep []appsv1.DeploymentCondition
	for _, c := range st.Conditions {
		if c.Type != t {
			keep = append(keep, c)
		}
	}
	st.Conditions = keep
}

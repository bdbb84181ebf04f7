package podautoscaler

import (
	"context"
	"fmt"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// recordInitialRecommendation makes the current size an autoscaler's first
// recommendation, so a first scale down is stabilized too.
func (c *Controller) recordInitialRecommendation(key string, current int32, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.recommendations[key] == nil {
		c.recommendations[key] = []recommendation{{replicas: current, at: now}}
	}
}

// normalizeLegacy stabilizes and bounds the desired replicas of an autoscaler without a
// behavior, setting AbleToScale and ScalingLimited.
func (c *Controller) normalizeLegacy(hpa *autoscalingv2.HorizontalPodAutoscaler, key string, current, desired, minReplicas int32, now time.Time) int32 {
	c.mu.Lock()
	stabilized, recs := stabilizeLegacy(c.recommendations[key], desired, c.cfg.DownscaleStabilizationWindow, now)
	c.recommendations[key] = recs
	c.mu.Unlock()
	if stabilized != desired {
		c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation")
	} else {
		c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size")
	}
	limited, reason, message := limitLegacy(current, stabilized, minReplicas, hpa.Spec.MaxReplicas)
	c.setLimited(hpa, limited != stabilized, reason, message)
	return limited
}

// normalizeWithBehavior stabilizes and bounds the desired replicas by the autoscaler's
// behavior, setting AbleToScale and ScalingLimited.
func (c *Controller) normalizeWithBehavior(hpa *autoscalingv2.HorizontalPodAutoscaler, b *autoscalingv2.HorizontalPodAutoscalerBehavior, key string,
	current, desired, minReplicas int32, now time.Time) int32 {
	c.mu.Lock()
	stabilized, reason, message, recs := stabilizeWithBehavior(c.recommendations[key], b, current, desired, now)
	c.recommendations[key] = recs
	ups, downs := c.ups[key], c.downs[key]
	c.mu.Unlock()
	if stabilized != desired {
		c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, reason, "%s", message)
	} else {
		c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "ReadyForNewScale", "recommended size matches current size")
	}
	limited, reason, message := limitWithBehavior(b, ups, downs, current, stabilized, minReplicas, hpa.Spec.MaxReplicas, now)
	c.setLimited(hpa, limited != stabilized, reason, message)
	return limited
}

func (c *Controller) setLimited(hpa *autoscalingv2.HorizontalPodAutoscaler, limited bool, reason, message string) {
	status := corev1.ConditionFalse
	if limited {
		status = corev1.ConditionTrue
	}
	c.setCondition(hpa, autoscalingv2.ScalingLimited, status, reason, "%s", message)
}

// recordScale remembers a rescale for the behavior's policies.
func (c *Controller) recordScale(b *autoscalingv2.HorizontalPodAutoscalerBehavior, key string, from, to int32, now time.Time) {
	if b == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if to > from {
		c.ups[key] = recordScaleEvent(c.ups[key], b.ScaleUp, to-from, now)
	} else {
		c.downs[key] = recordScaleEvent(c.downs[key], b.ScaleDown, from-to, now)
	}
}

// setStatus rewrites the status: replicas, metrics, the generation observed, and the
// last scale time on a rescale; the conditions are kept.
func (c *Controller) setStatus(hpa *autoscalingv2.HorizontalPodAutoscaler, current, desired int32, metrics []autoscalingv2.MetricStatus, rescale bool, now time.Time) {
	hpa.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
		ObservedGeneration: ptr.To(hpa.Generation),
		CurrentReplicas:    current,
		DesiredReplicas:    desired,
		LastScaleTime:      hpa.Status.LastScaleTime,
		CurrentMetrics:     metrics,
		Conditions:         hpa.Status.Conditions,
	}
	if rescale {
		t := metav1.NewTime(now)
		hpa.Status.LastScaleTime = &t
	}
}

// updateStatusIfNeeded writes the status through /status when it changed.
func (c *Controller) updateStatusIfNeeded(ctx context.Context, old *autoscalingv2.HorizontalPodAutoscalerStatus, hpa *autoscalingv2.HorizontalPodAutoscaler) error {
	if equality.Semantic.DeepEqual(old, &hpa.Status) {
		return nil
	}
	if _, err := c.clients.Kube.AutoscalingV2().HorizontalPodAutoscalers(hpa.Namespace).UpdateStatus(ctx, hpa, metav1.UpdateOptions{}); err != nil {
		c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedUpdateStatus", err.Error())
		return fmt.Errorf("failed to update status for %s: %w", hpa.Name, err)
	}
	return nil
}

// setCondition sets a condition of the autoscaler (message formatted with args); its
// transition time changes with its status.
func (c *Controller) setCondition(hpa *autoscalingv2.HorizontalPodAutoscaler, typ autoscalingv2.HorizontalPodAutoscalerConditionType, status corev1.ConditionStatus,
	reason, message string, args ...interface{}) {
	hpa.Status.Conditions = setCondition(hpa.Status.Conditions, typ, status, reason, fmt.Sprintf(message, args...), c.cfg.Clock.Now())
}

func setCondition(list []autoscalingv2.HorizontalPodAutoscalerCondition, typ autoscalingv2.HorizontalPodAutoscalerConditionType, status corev1.ConditionStatus,
	reason, message string, now time.Time) []autoscalingv2.HorizontalPodAutoscalerCondition {
	i := 0
	for i < len(list) && list[i].Type != typ {
		i++
	}
	if i == len(list) {
		list = append(list, autoscalingv2.HorizontalPodAutoscalerCondition{Type: typ})
	}
	if list[i].Status != status {
		list[i].LastTransitionTime = metav1.NewTime(now)
	}
	list[i].Status, list[i].Reason, list[i].Message = status, reason, message
	return list
}

func conditionTrue(hpa *autoscalingv2.HorizontalPodAutoscaler, typ autoscalingv2.HorizontalPodAutoscalerConditionType) bool {
	for _, c := range hpa.Status.Conditions {
		if c.Type == typ {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

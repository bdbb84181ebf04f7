package apiserver

import (
	"strings"
	"testing"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestAutoscalingStoredInV2: HorizontalPodAutoscalers are stored in autoscaling/v2, the
// version that holds all their fields (stored in v1, behavior and non-CPU metrics
// would be lost), and v1's CPU target survives a round trip through v2.
func TestAutoscalingStoredInV2(t *testing.T) {
	scheme, _, err := newScheme(allResources())
	if err != nil {
		t.Fatal(err)
	}
	if got := scheme.PrioritizedVersionsForGroup("autoscaling"); len(got) != 2 || got[0].Version != "v2" {
		t.Fatalf("autoscaling versions in order %v, want v2 first", got)
	}
	v1 := &autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "h"},
		Spec: autoscalingv1.HorizontalPodAutoscalerSpec{MaxReplicas: 3, TargetCPUUtilizationPercentage: ptr.To[int32](60),
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference{Kind: "Deployment", Name: "web"}}}
	v2 := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := scheme.Convert(v1, v2, nil); err != nil {
		t.Fatal(err)
	}
	if len(v2.Spec.Metrics) != 1 || v2.Spec.Metrics[0].Resource.Name != corev1.ResourceCPU ||
		ptr.Deref(v2.Spec.Metrics[0].Resource.Target.AverageUtilization, 0) != 60 {
		t.Fatalf("v2 metrics %+v, want cpu at 60%%", v2.Spec.Metrics)
	}
	v2.Status.Conditions = []autoscalingv2.HorizontalPodAutoscalerCondition{{Type: autoscalingv2.AbleToScale, Status: corev1.ConditionTrue}}
	back := &autoscalingv1.HorizontalPodAutoscaler{}
	if err := scheme.Convert(v2, back, nil); err != nil {
		t.Fatal(err)
	}
	if ptr.Deref(back.Spec.TargetCPUUtilizationPercentage, 0) != 60 || !strings.Contains(back.Annotations[hpaConditionsAnnotation], "AbleToScale") {
		t.Fatalf("back in v1: target %v, annotations %v", back.Spec.TargetCPUUtilizationPercentage, back.Annotations)
	}
}

func TestValidateHPA(t *testing.T) {
	valid := func() *autoscalingv2.HorizontalPodAutoscaler {
		return &autoscalingv2.HorizontalPodAutoscaler{Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 3,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}},
		}}
	}
	for _, c := range []struct {
		name   string
		change func(h *autoscalingv2.HorizontalPodAutoscaler)
		want   string // "" for valid, else a field path the errors name
	}{
		{"valid", func(*autoscalingv2.HorizontalPodAutoscaler) {}, ""},
		{"scale to zero needs an object or external metric", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = ptr.To[int32](0) }, "spec.metrics"},
		{"max below min", func(h *autoscalingv2.HorizontalPodAutoscaler) { h.Spec.MinReplicas = ptr.To[int32](4) }, "spec.maxReplicas"},
		{"unpopulated source", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics[0].Type = autoscalingv2.PodsMetricSourceType
		}, "spec.metrics[0].pods"},
		{"zero utilization", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Metrics[0].Resource.Target.AverageUtilization = ptr.To[int32](0)
		}, "spec.metrics[0].resource.target.averageUtilization"},
		{"window over an hour", func(h *autoscalingv2.HorizontalPodAutoscaler) {
			h.Spec.Behavior = &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](3601)}}
		}, "spec.behavior.scaleDown.stabilizationWindowSeconds"},
	} {
		h := valid()
		c.change(h)
		errs := validateHPA(h)
		switch {
		case c.want == "" && len(errs) > 0:
			t.Errorf("%s: %v", c.name, errs)
		case c.want != "" && !strings.Contains(errs.ToAggregate().Error(), c.want):
			t.Errorf("%s: %v, want an error at %s", c.name, errs, c.want)
		}
	}
}

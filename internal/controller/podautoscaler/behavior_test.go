package podautoscaler

import (
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
)

func policy(typ autoscalingv2.HPAScalingPolicyType, value, period int32) autoscalingv2.HPAScalingPolicy {
	return autoscalingv2.HPAScalingPolicy{Type: typ, Value: value, PeriodSeconds: period}
}

func TestNormalizeBehavior(t *testing.T) {
	defaultUp := &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0), SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{policy(autoscalingv2.PodsScalingPolicy, 4, 15), policy(autoscalingv2.PercentScalingPolicy, 100, 15)}}
	defaultDown := &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](300), SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{policy(autoscalingv2.PercentScalingPolicy, 100, 15)}}
	for _, tc := range []struct {
		name string
		in   *autoscalingv2.HorizontalPodAutoscalerBehavior
		want *autoscalingv2.HorizontalPodAutoscalerBehavior
	}{
		{name: "none stays none"},
		{name: "empty takes every default", in: &autoscalingv2.HorizontalPodAutoscalerBehavior{},
			want: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleUp: defaultUp, ScaleDown: defaultDown}},
		{name: "set fields are kept",
			in: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60), Tolerance: ptr.To(resource.MustParse("0.05"))},
				ScaleDown: &autoscalingv2.HPAScalingRules{SelectPolicy: ptr.To(autoscalingv2.DisabledPolicySelect),
					Policies: []autoscalingv2.HPAScalingPolicy{policy(autoscalingv2.PodsScalingPolicy, 1, 60)}}},
			want: &autoscalingv2.HorizontalPodAutoscalerBehavior{
				ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60), SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
					Policies: defaultUp.Policies, Tolerance: ptr.To(resource.MustParse("0.05"))},
				ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](300), SelectPolicy: ptr.To(autoscalingv2.DisabledPolicySelect),
					Policies: []autoscalingv2.HPAScalingPolicy{policy(autoscalingv2.PodsScalingPolicy, 1, 60)}}}},
	} {
		got := normalizeBehavior(tc.in, 5*time.Minute)
		if !equality.Semantic.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
	b := normalizeBehavior(&autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{Tolerance: ptr.To(resource.MustParse("0.05"))}}, 5*time.Minute)
	if got := hpaTolerances(b, 0.1); got != (tolerances{scaleDown: 0.1, scaleUp: 0.05}) {
		t.Errorf("tolerances %v", got)
	}
}

func TestStabilizeLegacy(t *testing.T) {
	recs := []recommendation{{replicas: 5, at: t0.Add(-6 * time.Minute)}, {replicas: 4, at: t0.Add(-2 * time.Minute)}}
	got, recs := stabilizeLegacy(recs, 2, 5*time.Minute, t0)
	if got != 4 || len(recs) != 2 || recs[0] != (recommendation{2, t0}) {
		t.Errorf("scale down within the window: %d %v", got, recs)
	}
	got, _ = stabilizeLegacy(recs, 6, 5*time.Minute, t0)
	if got != 6 {
		t.Errorf("scale up: %d", got)
	}
	got, _ = stabilizeLegacy([]recommendation{{replicas: 4, at: t0.Add(-6 * time.Minute)}}, 2, 5*time.Minute, t0)
	if got != 2 {
		t.Errorf("after the window: %d", got)
	}
}

func TestLimitLegacy(t *testing.T) {
	for _, tc := range []struct {
		current, desired, min, max int32
		want                       int32
		reason                     string
	}{
		{current: 3, desired: 5, min: 1, max: 10, want: 5, reason: "DesiredWithinRange"},
		{current: 1, desired: 10, min: 1, max: 20, want: 4, reason: "ScaleUpLimit"},
		{current: 3, desired: 10, min: 1, max: 20, want: 6, reason: "ScaleUpLimit"},
		{current: 3, desired: 10, min: 1, max: 5, want: 5, reason: "TooManyReplicas"},
		{current: 3, desired: 1, min: 2, max: 5, want: 2, reason: "TooFewReplicas"},
	} {
		got, reason, _ := limitLegacy(tc.current, tc.desired, tc.min, tc.max)
		if got != tc.want || reason != tc.reason {
			t.Errorf("%+v: %d %s", tc, got, reason)
		}
	}
}

func TestStabilizeWithBehavior(t *testing.T) {
	b := normalizeBehavior(&autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](60)}}, 5*time.Minute)
	recs := func() []recommendation {
		return []recommendation{{replicas: 8, at: t0.Add(-4 * time.Minute)}, {replicas: 3, at: t0.Add(-30 * time.Second)}}
	}
	for _, tc := range []struct {
		name             string
		current, desired int32
		want             int32
		reason           string
	}{
		// Up: the lowest recommendation of the last minute (3, and the new one).
		{name: "scale up held by the up window", current: 2, desired: 10, want: 3, reason: "ScaleUpStabilized"},
		// Down: the highest of the last 5 minutes (8): no lower than current.
		{name: "scale down held by the down window", current: 6, desired: 1, want: 6, reason: "ScaleDownStabilized"},
		{name: "between both", current: 5, desired: 5, want: 5, reason: "ScaleUpStabilized"},
	} {
		got, reason, _, out := stabilizeWithBehavior(recs(), b, tc.current, tc.desired, t0)
		if got != tc.want || reason != tc.reason || len(out) != 3 || out[2] != (recommendation{tc.desired, t0}) {
			t.Errorf("%s: %d %s %v", tc.name, got, reason, out)
		}
	}
	// A record older than both windows is reused.
	old := []recommendation{{replicas: 8, at: t0.Add(-10 * time.Minute)}}
	if _, _, _, out := stabilizeWithBehavior(old, b, 2, 4, t0); len(out) != 1 || out[0] != (recommendation{4, t0}) {
		t.Errorf("old record not reused: %v", out)
	}
}

func TestScaleLimits(t *testing.T) {
	b := normalizeBehavior(&autoscalingv2.HorizontalPodAutoscalerBehavior{}, 5*time.Minute)
	ups := []scaleEvent{{change: 3, at: t0.Add(-10 * time.Second)}, {change: 5, at: t0.Add(-time.Minute)}}
	downs := []scaleEvent{{change: 1, at: t0.Add(-5 * time.Second)}}
	for _, tc := range []struct {
		name        string
		rules       *autoscalingv2.HPAScalingRules
		up          bool
		current     int32
		ups, downs  []scaleEvent
		want        int32
		description string
	}{
		{name: "default up: max(4 pods, 100%)", rules: b.ScaleUp, up: true, current: 2, want: 6},
		{name: "default up, large", rules: b.ScaleUp, up: true, current: 10, want: 20},
		// Period start: 10 - 3 (added in 15s) + 1 (removed) = 8 → max(12, 16).
		{name: "default up with recent rescales", rules: b.ScaleUp, up: true, current: 10, ups: ups, downs: downs, want: 16},
		{name: "min change", up: true, current: 10, want: 11, rules: &autoscalingv2.HPAScalingRules{SelectPolicy: ptr.To(autoscalingv2.MinChangePolicySelect),
			Policies: []autoscalingv2.HPAScalingPolicy{policy(autoscalingv2.PodsScalingPolicy, 1, 60), policy(autoscalingv2.PercentScalingPolicy, 50, 60)}}},
		{name: "disabled up", up: true, current: 10, want: 10, rules: &autoscalingv2.HPAScalingRules{SelectPolicy: ptr.To(autoscalingv2.DisabledPolicySelect)}},
		{name: "default down: 100%", rules: b.ScaleDown, current: 10, want: 0},
		{name: "down 1 pod per minute after one", current: 10, downs: []scaleEvent{{change: 1, at: t0.Add(-30 * time.Second)}}, want: 10,
			rules: &autoscalingv2.HPAScalingRules{SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
				Policies: []autoscalingv2.HPAScalingPolicy{policy(autoscalingv2.PodsScalingPolicy, 1, 60)}}},
		{name: "down 10% rounds down", current: 15, want: 13, rules: &autoscalingv2.HPAScalingRules{SelectPolicy: ptr.To(autoscalingv2.MaxChangePolicySelect),
			Policies: []autoscalingv2.HPAScalingPolicy{policy(autoscalingv2.PercentScalingPolicy, 10, 60)}}},
		{name: "down min change", current: 10, want: 9, rules: &autoscalingv2.HPAScalingRules{SelectPolicy: ptr.To(autoscalingv2.MinChangePolicySelect),
			Policies: []autoscalingv2.HPAScalingPolicy{policy(autoscalingv2.PodsScalingPolicy, 1, 60), policy(autoscalingv2.PercentScalingPolicy, 50, 60)}}},
	} {
		var got int32
		if tc.up {
			got = scaleLimit(true, tc.current, tc.ups, tc.downs, tc.rules, t0)
		} else {
			got = scaleLimit(false, tc.current, tc.ups, tc.downs, tc.rules, t0)
		}
		if got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestLimitWithBehavior(t *testing.T) {
	b := normalizeBehavior(&autoscalingv2.HorizontalPodAutoscalerBehavior{
		ScaleUp:   &autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{policy(autoscalingv2.PodsScalingPolicy, 2, 60)}},
		ScaleDown: &autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{policy(autoscalingv2.PodsScalingPolicy, 1, 60)}},
	}, 5*time.Minute)
	for _, tc := range []struct {
		current, desired, min, max int32
		ups, downs                 []scaleEvent
		want                       int32
		reason                     string
	}{
		{current: 3, desired: 4, min: 1, max: 10, want: 4, reason: "DesiredWithinRange"},
		{current: 3, desired: 9, min: 1, max: 10, want: 5, reason: "ScaleUpLimit"},
		{current: 3, desired: 9, min: 1, max: 4, want: 4, reason: "TooManyReplicas"},
		// 2 added 30s ago: nothing more this minute.
		{current: 5, desired: 9, min: 1, max: 10, ups: []scaleEvent{{change: 2, at: t0.Add(-30 * time.Second)}}, want: 5, reason: "ScaleUpLimit"},
		{current: 5, desired: 1, min: 1, max: 10, want: 4, reason: "ScaleDownLimit"},
		{current: 5, desired: 1, min: 5, max: 10, want: 5, reason: "TooFewReplicas"},
	} {
		got, reason, _ := limitWithBehavior(b, tc.ups, tc.downs, tc.current, tc.desired, tc.min, tc.max, t0)
		if got != tc.want || reason != tc.reason {
			t.Errorf("%d → %d: %d %s, want %d %s", tc.current, tc.desired, got, reason, tc.want, tc.reason)
		}
	}
}

func TestRecordScaleEvent(t *testing.T) {
	rules := &autoscalingv2.HPAScalingRules{Policies: []autoscalingv2.HPAScalingPolicy{policy(autoscalingv2.PodsScalingPolicy, 1, 15),
		policy(autoscalingv2.PodsScalingPolicy, 1, 60)}}
	events := []scaleEvent{{change: 1, at: t0.Add(-90 * time.Second)}, {change: 2, at: t0.Add(-30 * time.Second)}}
	events = recordScaleEvent(events, rules, 3, t0)
	if len(events) != 2 || events[0] != (scaleEvent{change: 3, at: t0}) {
		t.Errorf("the event older than the longest period is not reused: %v", events)
	}
	events = recordScaleEvent(events, rules, 4, t0.Add(time.Second))
	if len(events) != 3 {
		t.Errorf("events within the period are kept: %v", events)
	}
}

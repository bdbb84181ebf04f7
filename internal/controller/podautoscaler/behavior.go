package podautoscaler

import (
	"math"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/utils/ptr"
)

// The legacy scale-up limit of autoscalers without a behavior: at most
// max(2 × current, 4) replicas.
const (
	scaleUpLimitFactor  = 2.0
	scaleUpLimitMinimum = 4.0
)

// recommendation is one unstabilized replica count the controller computed.
type recommendation struct {
	replicas int32
	at       time.Time
}

// scaleEvent is one rescale the controller made: how many replicas it added or removed.
type scaleEvent struct {
	change   int32
	at       time.Time
	outdated bool
}

// normalizeBehavior fills what a behavior leaves out with the API's defaults, as the API
// server's defaulting does: scale up with no stabilization, by the larger of 4 pods and
// 100% per 15s; scale down stabilized over downscaleWindow, by up to 100% per 15s. A nil
// behavior stays nil (the legacy rules apply).
func normalizeBehavior(b *autoscalingv2.HorizontalPodAutoscalerBehavior, downscaleWindow time.Duration) *autoscalingv2.HorizontalPodAutoscalerBehavior {
	if b == nil {
		return nil
	}
	out := b.DeepCopy()
	up := &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr.To[int32](0),
		SelectPolicy:               ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies: []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
			{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		},
	}
	down := &autoscalingv2.HPAScalingRules{
		StabilizationWindowSeconds: ptr.To(int32(downscaleWindow.Seconds())),
		SelectPolicy:               ptr.To(autoscalingv2.MaxChangePolicySelect),
		Policies:                   []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}},
	}
	out.ScaleUp = fillRules(out.ScaleUp, up)
	out.ScaleDown = fillRules(out.ScaleDown, down)
	return out
}

// fillRules takes what rules set over the defaults.
func fillRules(rules, defaults *autoscalingv2.HPAScalingRules) *autoscalingv2.HPAScalingRules {
	if rules == nil {
		return defaults
	}
	if rules.StabilizationWindowSeconds != nil {
		defaults.StabilizationWindowSeconds = rules.StabilizationWindowSeconds
	}
	if rules.SelectPolicy != nil {
		defaults.SelectPolicy = rules.SelectPolicy
	}
	if rules.Policies != nil {
		defaults.Policies = rules.Policies
	}
	if rules.Tolerance != nil {
		defaults.Tolerance = rules.Tolerance
	}
	return defaults
}

// hpaTolerances are the autoscaler's tolerances: its behavior's, else the controller's.
func hpaTolerances(b *autoscalingv2.HorizontalPodAutoscalerBehavior, tolerance float64) tolerances {
	t := tolerances{scaleDown: tolerance, scaleUp: tolerance}
	if b == nil {
		return t
	}
	if b.ScaleDown != nil && b.ScaleDown.Tolerance != nil {
		t.scaleDown = b.ScaleDown.Tolerance.AsApproximateFloat64()
	}
	if b.ScaleUp != nil && b.ScaleUp.Tolerance != nil {
		t.scaleUp = b.ScaleUp.Tolerance.AsApproximateFloat64()
	}
	return t
}

// stabilizeLegacy records desired and returns the highest recommendation of the last
// window (legacy scale-down stabilization); the oldest expired record is reused.
func stabilizeLegacy(recs []recommendation, desired int32, window time.Duration, now time.Time) (int32, []recommendation) {
	highest := desired
	cutoff := now.Add(-window)
	old := -1
	for i, r := range recs {
		if r.at.Before(cutoff) {
			old = i
		} else if r.replicas > highest {
			highest = r.replicas
		}
	}
	return highest, addRecommendation(recs, old, recommendation{desired, now})
}

func addRecommendation(recs []recommendation, old int, r recommendation) []recommendation {
	if old >= 0 {
		recs[old] = r
		return recs
	}
	return append(recs, r)
}

// limitLegacy bounds desired by minReplicas, maxReplicas and the legacy scale-up limit,
// with the ScalingLimited reason and message upstream gives.
func limitLegacy(current, desired, minReplicas, maxReplicas int32) (int32, string, string) {
	upLimit := int32(math.Max(scaleUpLimitFactor*float64(current), scaleUpLimitMinimum))
	maximum, reason, message := maxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
	if maxReplicas > upLimit {
		maximum, reason, message = upLimit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
	}
	switch {
	case desired < minReplicas:
		return minReplicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
	case desired > maximum:
		return maximum, reason, message
	}
	return desired, "DesiredWithinRange", "the desired count is within the acceptable range"
}

// stabilizeWithBehavior records desired and brings the current count toward it only as
// far as every recommendation of the scale-up window (for a scale up: their lowest) and
// of the scale-down window (for a scale down: their highest) agrees; with the reason and
// message for when that is not desired.
func stabilizeWithBehavior(recs []recommendation, b *autoscalingv2.HorizontalPodAutoscalerBehavior, current, desired int32, now time.Time) (int32, string, string, []recommendation) {
	up, down := desired, desired
	upCutoff := now.Add(-time.Duration(*b.ScaleUp.StabilizationWindowSeconds) * time.Second)
	downCutoff := now.Add(-time.Duration(*b.ScaleDown.StabilizationWindowSeconds) * time.Second)
	old := -1
	for i, r := range recs {
		if r.at.After(upCutoff) {
			up = min(up, r.replicas)
		}
		if r.at.After(downCutoff) {
			down = max(down, r.replicas)
		}
		if r.at.Before(upCutoff) && r.at.Before(downCutoff) {
			old = i
		}
	}
	stabilized := max(current, up)
	stabilized = min(stabilized, down)
	recs = addRecommendation(recs, old, recommendation{desired, now})
	if desired >= current {
		return stabilized, "ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation", recs
	}
	return stabilized, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation", recs
}

// limitWithBehavior bounds desired by minReplicas, maxReplicas and the behavior's
// policies over the rescales of their periods, with the ScalingLimited reason and
// message.
func limitWithBehavior(b *autoscalingv2.HorizontalPodAutoscalerBehavior, ups, downs []scaleEvent, current, desired, minReplicas, maxReplicas int32, now time.Time) (int32, string, string) {
	switch {
	case desired > current:
		limit := max(scaleLimit(true, current, ups, downs, b.ScaleUp, now), current)
		maximum, reason, message := maxReplicas, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
		if maxReplicas > limit {
			maximum, reason, message = limit, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
		}
		if desired > maximum {
			return maximum, reason, message
		}
	case desired < current:
		limit := min(scaleLimit(false, current, ups, downs, b.ScaleDown, now), current)
		minimum, reason, message := minReplicas, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
		if minReplicas < limit {
			minimum, reason, message = limit, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate"
		}
		if desired < minimum {
			return minimum, reason, message
		}
	}
	return desired, "DesiredWithinRange", "the desired count is within the acceptable range"
}

// changeInPeriod is the replicas the events added (or removed) within the last period.
func changeInPeriod(periodSeconds int32, events []scaleEvent, now time.Time) int32 {
	cutoff := now.Add(-time.Duration(periodSeconds) * time.Second)
	var n int32
	for _, e := range events {
		if e.at.After(cutoff) {
			n += e.change
		}
	}
	return n
}

// scaleLimit is the bound the policies of rules put on a scale up (up) or down now: the
// most replicas a scale up may reach, the fewest a scale down may. Each policy allows its
// value (pods, or percent) over the count at the start of its period; Max takes the
// policy allowing the largest change, Min the smallest, Disabled none.
func scaleLimit(up bool, current int32, ups, downs []scaleEvent, rules *autoscalingv2.HPAScalingRules, now time.Time) int32 {
	selectPolicy := *rules.SelectPolicy
	if selectPolicy == autoscalingv2.DisabledPolicySelect {
		return current
	}
	// The largest change up is the highest count, the largest change down the lowest.
	highest := (selectPolicy != autoscalingv2.MinChangePolicySelect) == up
	result := int32(math.MaxInt32)
	pick := func(a, b int32) int32 { return min(a, b) }
	if highest {
		result, pick = math.MinInt32, func(a, b int32) int32 { return max(a, b) }
	}
	for _, p := range rules.Policies {
		start := current - changeInPeriod(p.PeriodSeconds, ups, now) + changeInPeriod(p.PeriodSeconds, downs, now)
		var proposed int32
		switch {
		case p.Type == autoscalingv2.PodsScalingPolicy && up:
			proposed = start + p.Value
		case p.Type == autoscalingv2.PodsScalingPolicy:
			proposed = start - p.Value
		case p.Type == autoscalingv2.PercentScalingPolicy && up:
			proposed = int32(math.Ceil(float64(start) * (1 + float64(p.Value)/100)))
		case p.Type == autoscalingv2.PercentScalingPolicy:
			proposed = int32(float64(start) * (1 - float64(p.Value)/100))
		}
		result = pick(result, proposed)
	}
	return result
}

// recordScaleEvent adds a rescale to the events of its direction, reusing an event older
// than the longest policy period of the rules.
func recordScaleEvent(events []scaleEvent, rules *autoscalingv2.HPAScalingRules, change int32, now time.Time) []scaleEvent {
	var longest int32
	for _, p := range rules.Policies {
		longest = max(longest, p.PeriodSeconds)
	}
	cutoff := now.Add(-time.Duration(longest) * time.Second)
	old := -1
	for i := range events {
		if events[i].at.Before(cutoff) {
			events[i].outdated = true
		}
		if events[i].outdated {
			old = i
		}
	}
	e := scaleEvent{change: change, at: now}
	if old >= 0 {
		events[old] = e
		return events
	}
	return append(events, e)
}

package apiserver

import (
	"encoding/json"
	"fmt"
	"strings"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// autoscalingResources is the row of HorizontalPodAutoscalers: stored and preferred
// in autoscaling/v2, served in autoscaling/v1 too, converted on the way.
func autoscalingResources() []resource {
	return []resource{{
		group: "autoscaling", version: "v2", alsoVersions: []string{"v1"},
		kind: "HorizontalPodAutoscaler", plural: "horizontalpodautoscalers", singular: "horizontalpodautoscaler",
		shortNames: []string{"hpa"}, categories: []string{"all"}, namespaced: true, status: true, generation: true,
		newObj:  func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscaler{} },
		newList: func() runtime.Object { return &autoscalingv2.HorizontalPodAutoscalerList{} },
		columns: []metav1.TableColumnDefinition{nameCol(),
			col("Reference", "string", "Reference to the scaled target."),
			col("Targets", "string", "Current and target value of each metric."),
			col("MinPods", "string", "Lower limit of the number of pods."),
			col("MaxPods", "string", "Upper limit of the number of pods."),
			col("Replicas", "string", "Current number of replicas of pods managed by this autoscaler."), ageCol()},
		row: func(o runtime.Object) []interface{} {
			h := o.(*autoscalingv2.HorizontalPodAutoscaler)
			ref := h.Spec.ScaleTargetRef.Kind + "/" + h.Spec.ScaleTargetRef.Name
			min := "<unset>"
			if h.Spec.MinReplicas != nil {
				min = fmt.Sprint(*h.Spec.MinReplicas)
			}
			return []interface{}{h.Name, ref, hpaTargets(h), min, int64(h.Spec.MaxReplicas), int64(h.Status.CurrentReplicas), age(h.CreationTimestamp)}
		},
		hooks: hooks{validate: func(o runtime.Object) field.ErrorList { return validateHPA(o.(*autoscalingv2.HorizontalPodAutoscaler)) }},
	}}
}

// hpaTargets is the TARGETS column: current/target per metric, as kubectl prints it.
func hpaTargets(h *autoscalingv2.HorizontalPodAutoscaler) string {
	var out []string
	for i, m := range h.Spec.Metrics {
		if m.Type != autoscalingv2.ResourceMetricSourceType || m.Resource == nil {
			out = append(out, "<unknown>/<unknown>")
			continue
		}
		current := "<unknown>"
		var cur *autoscalingv2.MetricValueStatus
		if i < len(h.Status.CurrentMetrics) && h.Status.CurrentMetrics[i].Resource != nil {
			cur = &h.Status.CurrentMetrics[i].Resource.Current
		}
		t := m.Resource.Target
		switch {
		case t.AverageUtilization != nil:
			if cur != nil && cur.AverageUtilization != nil {
				current = fmt.Sprintf("%d%%", *cur.AverageUtilization)
			}
			out = append(out, fmt.Sprintf("%s: %s/%d%%", m.Resource.Name, current, *t.AverageUtilization))
		case t.AverageValue != nil:
			if cur != nil && cur.AverageValue != nil {
				current = cur.AverageValue.String()
			}
			out = append(out, fmt.Sprintf("%s: %s/%s", m.Resource.Name, current, t.AverageValue.String()))
		}
	}
	if len(out) == 0 {
		return "<none>"
	}
	return strings.Join(out, ", ")
}

func defaultHPA(h *autoscalingv2.HorizontalPodAutoscaler) {
	if h.Spec.MinReplicas == nil {
		h.Spec.MinReplicas = ptr.To[int32](1)
	}
	if len(h.Spec.Metrics) == 0 {
		h.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](80)}}}}
	}
	if b := h.Spec.Behavior; b != nil {
		if b.ScaleUp == nil {
			b.ScaleUp = &autoscalingv2.HPAScalingRules{}
		}
		if b.ScaleDown == nil {
			b.ScaleDown = &autoscalingv2.HPAScalingRules{}
		}
		defaultScalingRules(b.ScaleUp, 0, []autoscalingv2.HPAScalingPolicy{
			{Type: autoscalingv2.PodsScalingPolicy, Value: 4, PeriodSeconds: 15}, {Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}})
		defaultScalingRules(b.ScaleDown, 300, []autoscalingv2.HPAScalingPolicy{{Type: autoscalingv2.PercentScalingPolicy, Value: 100, PeriodSeconds: 15}})
	}
}

func defaultScalingRules(r *autoscalingv2.HPAScalingRules, window int32, policies []autoscalingv2.HPAScalingPolicy) {
	if r.StabilizationWindowSeconds == nil {
		r.StabilizationWindowSeconds = ptr.To(window)
	}
	if r.SelectPolicy == nil {
		r.SelectPolicy = ptr.To(autoscalingv2.MaxChangePolicySelect)
	}
	if len(r.Policies) == 0 {
		r.Policies = policies
	}
}

func validateHPA(h *autoscalingv2.HorizontalPodAutoscaler) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	ref := spec.Child("scaleTargetRef")
	if h.Spec.ScaleTargetRef.Kind == "" {
		errs = append(errs, field.Required(ref.Child("kind"), ""))
	} else {
		for _, msg := range path.IsValidPathSegmentName(h.Spec.ScaleTargetRef.Kind) {
			errs = append(errs, field.Invalid(ref.Child("kind"), h.Spec.ScaleTargetRef.Kind, msg))
		}
	}
	if h.Spec.ScaleTargetRef.Name == "" {
		errs = append(errs, field.Required(ref.Child("name"), ""))
	} else {
		for _, msg := range path.IsValidPathSegmentName(h.Spec.ScaleTargetRef.Name) {
			errs = append(errs, field.Invalid(ref.Child("name"), h.Spec.ScaleTargetRef.Name, msg))
		}
	}
	min := ptr.Deref(h.Spec.MinReplicas, 1)
	switch {
	case min < 0:
		errs = append(errs, field.Invalid(spec.Child("minReplicas"), min, "must be greater than or equal to 0"))
	case min == 0 && !hasObjectOrExternalMetric(h.Spec.Metrics):
		errs = append(errs, field.Forbidden(spec.Child("metrics"), "must specify at least one Object or External metric to support scaling to zero replicas"))
	}
	if h.Spec.MaxReplicas == 0 {
		errs = append(errs, field.Required(spec.Child("maxReplicas"), ""))
	}
	if h.Spec.MaxReplicas < min {
		errs = append(errs, field.Invalid(spec.Child("maxReplicas"), h.Spec.MaxReplicas, "must be greater than or equal to `minReplicas`"))
	}
	for i, m := range h.Spec.Metrics {
		errs = append(errs, validateMetricSpec(m, spec.Child("metrics").Index(i))...)
	}
	if b := h.Spec.Behavior; b != nil {
		errs = append(errs, validateScalingRules(b.ScaleUp, spec.Child("behavior", "scaleUp"))...)
		errs = append(errs, validateScalingRules(b.ScaleDown, spec.Child("behavior", "scaleDown"))...)
	}
	return errs
}

func hasObjectOrExternalMetric(metrics []autoscalingv2.MetricSpec) bool {
	for _, m := range metrics {
		if m.Type == autoscalingv2.ObjectMetricSourceType || m.Type == autoscalingv2.ExternalMetricSourceType {
			return true
		}
	}
	return false
}

// validateMetricSpec: the type names the one source the metric populates, and the
// source's target is complete.
func validateMetricSpec(m autoscalingv2.MetricSpec, p *field.Path) field.ErrorList {
	sources := map[autoscalingv2.MetricSourceType]bool{
		autoscalingv2.ObjectMetricSourceType: m.Object != nil, autoscalingv2.PodsMetricSourceType: m.Pods != nil,
		autoscalingv2.ResourceMetricSourceType: m.Resource != nil, autoscalingv2.ContainerResourceMetricSourceType: m.ContainerResource != nil,
		autoscalingv2.ExternalMetricSourceType: m.External != nil,
	}
	populated, ok := sources[m.Type]
	switch {
	case m.Type == "":
		return field.ErrorList{field.Required(p.Child("type"), "must specify a metric source type")}
	case !ok:
		return field.ErrorList{field.NotSupported(p.Child("type"), m.Type, []autoscalingv2.MetricSourceType{
			autoscalingv2.ContainerResourceMetricSourceType, autoscalingv2.ExternalMetricSourceType, autoscalingv2.ObjectMetricSourceType,
			autoscalingv2.PodsMetricSourceType, autoscalingv2.ResourceMetricSourceType})}
	case !populated:
		child := map[autoscalingv2.MetricSourceType]string{autoscalingv2.ObjectMetricSourceType: "object", autoscalingv2.PodsMetricSourceType: "pods",
			autoscalingv2.ResourceMetricSourceType: "resource", autoscalingv2.ContainerResourceMetricSourceType: "containerResource",
			autoscalingv2.ExternalMetricSourceType: "external"}[m.Type]
		return field.ErrorList{field.Required(p.Child(child), "must populate information for the given metric source")}
	}
	var errs field.ErrorList
	for t, set := range sources {
		if set && t != m.Type {
			errs = append(errs, field.Forbidden(p, "must populate the given metric source only"))
			break
		}
	}
	if r := m.Resource; r != nil {
		errs = append(errs, validateResourceTarget(string(r.Name), r.Target, p.Child("resource"))...)
	}
	if r := m.ContainerResource; r != nil {
		errs = append(errs, validateResourceTarget(string(r.Name), r.Target, p.Child("containerResource"))...)
	}
	return errs
}

func validateResourceTarget(name string, t autoscalingv2.MetricTarget, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(p.Child("name"), "must specify a resource name"))
	}
	target := p.Child("target")
	switch t.Type {
	case "":
		errs = append(errs, field.Required(target.Child("type"), "must specify a metric target type"))
	case autoscalingv2.UtilizationMetricType, autoscalingv2.ValueMetricType, autoscalingv2.AverageValueMetricType:
	default:
		errs = append(errs, field.Invalid(target.Child("type"), t.Type, "must be either Utilization, Value, or AverageValue"))
	}
	if u := t.AverageUtilization; u != nil && *u < 1 {
		errs = append(errs, field.Invalid(target.Child("averageUtilization"), *u, "must be greater than 0"))
	}
	if t.AverageUtilization == nil && t.AverageValue == nil {
		errs = append(errs, field.Required(target.Child("averageUtilization"), "must set either a target raw value or a target utilization"))
	}
	if t.AverageUtilization != nil && t.AverageValue != nil {
		errs = append(errs, field.Forbidden(target.Child("averageValue"), "may not set both a target raw value and a target utilization"))
	}
	if t.Value != nil {
		errs = append(errs, field.Forbidden(target.Child("value"), "may not set the target.value for Resource metrics"))
	}
	return errs
}

// maxStabilizationWindow and maxPolicyPeriod bound a behavior's windows, in seconds.
const (
	maxStabilizationWindow = 3600
	maxPolicyPeriod        = 1800
)

func validateScalingRules(r *autoscalingv2.HPAScalingRules, p *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if w := r.StabilizationWindowSeconds; w != nil {
		if *w < 0 {
			errs = append(errs, field.Invalid(p.Child("stabilizationWindowSeconds"), *w, "must be greater than or equal to zero"))
		} else if *w > maxStabilizationWindow {
			errs = append(errs, field.Invalid(p.Child("stabilizationWindowSeconds"), *w, fmt.Sprintf("must be less than or equal to %d", maxStabilizationWindow)))
		}
	}
	if sp := r.SelectPolicy; sp != nil {
		switch *sp {
		case autoscalingv2.MaxChangePolicySelect, autoscalingv2.MinChangePolicySelect, autoscalingv2.DisabledPolicySelect:
		default:
			errs = append(errs, field.NotSupported(p.Child("selectPolicy"), *sp, []autoscalingv2.ScalingPolicySelect{
				autoscalingv2.DisabledPolicySelect, autoscalingv2.MaxChangePolicySelect, autoscalingv2.MinChangePolicySelect}))
		}
	}
	for i, pol := range r.Policies {
		pp := p.Child("policies").Index(i)
		switch pol.Type {
		case autoscalingv2.PodsScalingPolicy, autoscalingv2.PercentScalingPolicy:
		default:
			errs = append(errs, field.NotSupported(pp.Child("type"), pol.Type, []autoscalingv2.HPAScalingPolicyType{
				autoscalingv2.PercentScalingPolicy, autoscalingv2.PodsScalingPolicy}))
		}
		if pol.Value <= 0 {
			errs = append(errs, field.Invalid(pp.Child("value"), pol.Value, "must be greater than zero"))
		}
		if pol.PeriodSeconds <= 0 {
			errs = append(errs, field.Invalid(pp.Child("periodSeconds"), pol.PeriodSeconds, "must be greater than zero"))
		} else if pol.PeriodSeconds > maxPolicyPeriod {
			errs = append(errs, field.Invalid(pp.Child("periodSeconds"), pol.PeriodSeconds, fmt.Sprintf("must be less than or equal to %d", maxPolicyPeriod)))
		}
	}
	return errs
}

// The annotation under which autoscaling/v1 keeps the v2 conditions it has no field
// for, as upstream does.
const hpaConditionsAnnotation = "autoscaling.alpha.kubernetes.io/conditions"

// addAutoscalingConversions converts autoscaling/v1 HorizontalPodAutoscalers to and from
// the v2 form the store keeps: v1's CPU target is v2's cpu Utilization metric, and v2's
// conditions ride in an annotation of the v1 object.
func addAutoscalingConversions(s *runtime.Scheme) error {
	toV2 := func(in *autoscalingv1.HorizontalPodAutoscaler, out *autoscalingv2.HorizontalPodAutoscaler) error {
		*out = autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: *in.ObjectMeta.DeepCopy()}
		out.Spec = autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
			MinReplicas:    in.Spec.MinReplicas, MaxReplicas: in.Spec.MaxReplicas,
		}
		if t := in.Spec.TargetCPUUtilizationPercentage; t != nil {
			out.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(*t)}}}}
		}
		out.Status = autoscalingv2.HorizontalPodAutoscalerStatus{
			ObservedGeneration: in.Status.ObservedGeneration, LastScaleTime: in.Status.LastScaleTime,
			CurrentReplicas: in.Status.CurrentReplicas, DesiredReplicas: in.Status.DesiredReplicas,
		}
		if c := in.Status.CurrentCPUUtilizationPercentage; c != nil {
			out.Status.CurrentMetrics = []autoscalingv2.MetricStatus{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricStatus{
				Name: corev1.ResourceCPU, Current: autoscalingv2.MetricValueStatus{AverageUtilization: ptr.To(*c)}}}}
		}
		if raw, ok := out.Annotations[hpaConditionsAnnotation]; ok {
			var conds []autoscalingv2.HorizontalPodAutoscalerCondition
			if err := json.Unmarshal([]byte(raw), &conds); err == nil {
				out.Status.Conditions = conds
			}
			delete(out.Annotations, hpaConditionsAnnotation)
			if len(out.Annotations) == 0 {
				out.Annotations = nil
			}
		}
		return nil
	}
	toV1 := func(in *autoscalingv2.HorizontalPodAutoscaler, out *autoscalingv1.HorizontalPodAutoscaler) error {
		*out = autoscalingv1.HorizontalPodAutoscaler{ObjectMeta: *in.ObjectMeta.DeepCopy()}
		out.Spec = autoscalingv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv1.CrossVersionObjectReference(in.Spec.ScaleTargetRef),
			MinReplicas:    in.Spec.MinReplicas, MaxReplicas: in.Spec.MaxReplicas,
		}
		for _, m := range in.Spec.Metrics {
			if m.Resource != nil && m.Resource.Name == corev1.ResourceCPU && m.Resource.Target.AverageUtilization != nil {
				out.Spec.TargetCPUUtilizationPercentage = ptr.To(*m.Resource.Target.AverageUtilization)
			}
		}
		out.Status = autoscalingv1.HorizontalPodAutoscalerStatus{
			ObservedGeneration: in.Status.ObservedGeneration, LastScaleTime: in.Status.LastScaleTime,
			CurrentReplicas: in.Status.CurrentReplicas, DesiredReplicas: in.Status.DesiredReplicas,
		}
		for _, m := range in.Status.CurrentMetrics {
			if m.Resource != nil && m.Resource.Name == corev1.ResourceCPU && m.Resource.Current.AverageUtilization != nil {
				out.Status.CurrentCPUUtilizationPercentage = ptr.To(*m.Resource.Current.AverageUtilization)
			}
		}
		if len(in.Status.Conditions) > 0 {
			raw, err := json.Marshal(in.Status.Conditions)
			if err != nil {
				return err
			}
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[hpaConditionsAnnotation] = string(raw)
		}
		return nil
	}
	if err := s.AddConversionFunc((*autoscalingv1.HorizontalPodAutoscaler)(nil), (*autoscalingv2.HorizontalPodAutoscaler)(nil), func(a, b interface{}, _ conversion.Scope) error {
		return toV2(a.(*autoscalingv1.HorizontalPodAutoscaler), b.(*autoscalingv2.HorizontalPodAutoscaler))
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*autoscalingv2.HorizontalPodAutoscaler)(nil), (*autoscalingv1.HorizontalPodAutoscaler)(nil), func(a, b interface{}, _ conversion.Scope) error {
		return toV1(a.(*autoscalingv2.HorizontalPodAutoscaler), b.(*autoscalingv1.HorizontalPodAutoscaler))
	}); err != nil {
		return err
	}
	if err := s.AddConversionFunc((*autoscalingv1.HorizontalPodAutoscalerList)(nil), (*autoscalingv2.HorizontalPodAutoscalerList)(nil), func(a, b interface{}, _ conversion.Scope) error {
		in, out := a.(*autoscalingv1.HorizontalPodAutoscalerList), b.(*autoscalingv2.HorizontalPodAutoscalerList)
		out.ListMeta, out.Items = in.ListMeta, make([]autoscalingv2.HorizontalPodAutoscaler, len(in.Items))
		for i := range in.Items {
			if err := toV2(&in.Items[i], &out.Items[i]); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	return s.AddConversionFunc((*autoscalingv2.HorizontalPodAutoscalerList)(nil), (*autoscalingv1.HorizontalPodAutoscalerList)(nil), func(a, b interface{}, _ conversion.Scope) error {
		in, out := a.(*autoscalingv2.HorizontalPodAutoscalerList), b.(*autoscalingv1.HorizontalPodAutoscalerList)
		out.ListMeta, out.Items = in.ListMeta, make([]autoscalingv1.HorizontalPodAutoscaler, len(in.Items))
		for i := range in.Items {
			if err := toV1(&in.Items[i], &out.Items[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

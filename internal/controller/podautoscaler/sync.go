package podautoscaler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// defaultCPUUtilization is the target of an autoscaler that names no metric (80% CPU),
// as the API's defaulting sets it.
const defaultCPUUtilization = 80

// sync reconciles the autoscaler of key; deleted says it no longer exists.
func (c *Controller) sync(ctx context.Context, key string) (deleted bool, err error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return true, err
	}
	hpa, err := c.hpaLister.HorizontalPodAutoscalers(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		c.forget(key)
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, c.reconcile(ctx, hpa.DeepCopy(), key)
}

// reconcile reads the target's scale, computes the desired replicas from the metrics,
// bounds and stabilizes them, rescales the target when they differ and writes the
// status (current and desired replicas, metrics, conditions, last scale time).
func (c *Controller) reconcile(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, key string) (retErr error) {
	now := c.cfg.Clock.Now()
	original := hpa.Status.DeepCopy()
	ref := hpa.Spec.ScaleTargetRef
	reference := fmt.Sprintf("%s/%s/%s", ref.Kind, hpa.Namespace, ref.Name)
	if len(hpa.Spec.Metrics) == 0 {
		hpa.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](defaultCPUUtilization)}}}}
	}
	behavior := normalizeBehavior(hpa.Spec.Behavior, c.cfg.DownscaleStabilizationWindow)
	tol := hpaTolerances(behavior, c.cfg.Tolerance)

	scale, targetGR, failed, err := c.getScale(ctx, hpa, reference)
	if err != nil {
		c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedGetScale", err.Error())
		c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedGetScale", "the HPA controller was unable to get the target's current scale: %v", err)
		if err := c.updateStatusIfNeeded(ctx, original, hpa); err != nil {
			c.cfg.Logger.ErrorContext(ctx, "update HPA status", "hpa", key, "err", err)
		}
		return fmt.Errorf("%s: %w", failed, err)
	}
	c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededGetScale", "the HPA controller was able to get the target's current scale")
	current := scale.Spec.Replicas
	c.recordInitialRecommendation(key, current, now)

	minReplicas := int32(1)
	if hpa.Spec.MinReplicas != nil {
		minReplicas = *hpa.Spec.MinReplicas
	}
	scaledToZero := conditionTrue(hpa, autoscalingv2.ScaledToZero)
	objectOrExternal := hasObjectOrExternalMetrics(hpa)
	var (
		desired    int32
		reason     string
		statuses   []autoscalingv2.MetricStatus
		rescale    = true
		useMetrics = true
	)
	switch {
	case current == 0:
		if !(minReplicas != 0 && scaledToZero) && !(scaledToZero && objectOrExternal) {
			// Scaled to zero by hand: leave it.
			useMetrics, rescale = false, false
			c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
		}
	case current > hpa.Spec.MaxReplicas:
		reason, desired, useMetrics = "Current number of replicas above Spec.MaxReplicas", hpa.Spec.MaxReplicas, false
	case current < minReplicas:
		reason, desired, useMetrics = "Current number of replicas below Spec.MinReplicas", minReplicas, false
	}
	if useMetrics {
		proposed, metricName, metricStatuses, err := c.computeReplicasForMetrics(ctx, hpa, scale, key, now, tol)
		statuses = metricStatuses
		if err != nil && proposed == -1 {
			c.setStatus(hpa, current, hpa.Status.DesiredReplicas, statuses, false, now)
			if err := c.updateStatusIfNeeded(ctx, original, hpa); err != nil {
				c.cfg.Logger.ErrorContext(ctx, "update HPA status", "hpa", key, "err", err)
			}
			c.recorder.Event(hpa, corev1.EventTypeWarning, "FailedComputeMetricsReplicas", err.Error())
			return fmt.Errorf("failed to compute desired number of replicas based on listed metrics for %s: %w", reference, err)
		}
		// Some metrics failed but the others scale up: scale, then report the failure.
		retErr = err
		c.cfg.Logger.DebugContext(ctx, "proposing desired replicas", "hpa", key, "desiredReplicas", proposed, "metric", metricName,
			"tolerances", tol.String(), "scaleTarget", reference)
		rescaleMetric := ""
		if proposed > desired {
			desired, rescaleMetric = proposed, metricName
		}
		if desired > current {
			reason = rescaleMetric + " above target"
		}
		if desired < current {
			reason = "All metrics below target"
		}
		if behavior == nil {
			desired = c.normalizeLegacy(hpa, key, current, desired, minReplicas, now)
		} else {
			desired = c.normalizeWithBehavior(hpa, behavior, key, current, desired, minReplicas, now)
		}
		if current == 0 && minReplicas != 0 && scaledToZero && desired < minReplicas {
			desired = minReplicas
			if reason == "" {
				reason = "Current number of replicas below Spec.MinReplicas"
			}
		}
		rescale = desired != current
	}

	if rescale {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			scale.Spec.Replicas = desired
			_, err := c.clients.Scales.Scales(hpa.Namespace).Update(ctx, targetGR, scale, metav1.UpdateOptions{})
			if err == nil {
				return nil
			}
			if latest, getErr := c.clients.Scales.Scales(hpa.Namespace).Get(ctx, targetGR, ref.Name, metav1.GetOptions{}); getErr == nil {
				scale = latest
			}
			return err
		})
		if err != nil {
			c.recorder.Eventf(hpa, corev1.EventTypeWarning, "FailedRescale", "New size: %d; reason: %s; error: %v", desired, reason, err.Error())
			c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionFalse, "FailedUpdateScale", "the HPA controller was unable to update the target scale: %v", err)
			c.setStatus(hpa, current, hpa.Status.DesiredReplicas, statuses, false, now)
			if err := c.updateStatusIfNeeded(ctx, original, hpa); err != nil {
				c.cfg.Logger.ErrorContext(ctx, "update HPA status", "hpa", key, "err", err)
			}
			return fmt.Errorf("failed to rescale %s: %w", reference, err)
		}
		c.setCondition(hpa, autoscalingv2.AbleToScale, corev1.ConditionTrue, "SucceededRescale", "the HPA controller was able to update the target scale to %d", desired)
		c.recorder.Eventf(hpa, corev1.EventTypeNormal, "SuccessfulRescale", "New size: %d; reason: %s", desired, reason)
		c.recordScale(behavior, key, current, desired, now)
		c.cfg.Logger.InfoContext(ctx, "successfully rescaled", "hpa", key, "currentReplicas", current, "desiredReplicas", desired, "reason", reason)
		if current > 0 && desired == 0 && minReplicas == 0 && objectOrExternal {
			c.setCondition(hpa, autoscalingv2.ScaledToZero, corev1.ConditionTrue, "ScaledToZero", "the HPA controller scaled the workload to zero")
		} else {
			c.setCondition(hpa, autoscalingv2.ScaledToZero, corev1.ConditionFalse, "NotScaledToZero", "the HPA controller did not scale the workload to zero")
		}
	} else {
		desired = current
	}
	c.setStatus(hpa, current, desired, statuses, rescale, now)
	if err := c.updateStatusIfNeeded(ctx, original, hpa); err != nil {
		return err
	}
	return retErr
}

// getScale reads the target's scale through the first of its kind's resources that
// answers; on failure, what failed and why.
func (c *Controller) getScale(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, reference string) (*autoscalingv1.Scale, schema.GroupResource, string, error) {
	ref := hpa.Spec.ScaleTargetRef
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return nil, schema.GroupResource{}, "invalid API version in scale target reference", err
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
	mappings, err := c.clients.Mapper.RESTMappings(gk)
	if r, ok := c.clients.Mapper.(interface{ Reset() }); ok && apimeta.IsNoMatchError(err) {
		// The kind may have appeared since discovery was cached.
		r.Reset()
		mappings, err = c.clients.Mapper.RESTMappings(gk)
	}
	if err != nil {
		return nil, schema.GroupResource{}, "unable to determine resource for scale target reference", err
	}
	var first error
	for _, m := range mappings {
		gr := m.Resource.GroupResource()
		scale, err := c.clients.Scales.Scales(hpa.Namespace).Get(ctx, gr, ref.Name, metav1.GetOptions{})
		if err == nil {
			return scale, gr, "", nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = errors.New("unrecognized resource")
	}
	return nil, schema.GroupResource{}, "failed to query scale subresource for " + reference, first
}

// computeReplicasForMetrics is the largest replica count the metrics propose, the
// metric that proposes it and every metric's status. When every metric fails, or some
// fail and the others would scale down, it returns -1 and the first failure (whose
// condition it sets); when some fail and the others scale up, their proposal and the
// failure.
func (c *Controller) computeReplicasForMetrics(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, scale *autoscalingv1.Scale, key string,
	now time.Time, tol tolerances) (replicas int32, metric string, statuses []autoscalingv2.MetricStatus, err error) {
	selector, err := c.validateSelector(hpa, scale.Status.Selector, key)
	if err != nil {
		return -1, "", nil, err
	}
	statuses = make([]autoscalingv2.MetricStatus, len(hpa.Spec.Metrics))
	invalid := 0
	var firstErr error
	var firstCond autoscalingv2.HorizontalPodAutoscalerCondition
	for i, spec := range hpa.Spec.Metrics {
		proposal, name, cond, err := c.computeReplicasForMetric(ctx, hpa, spec, scale.Spec.Replicas, selector, &statuses[i], now, tol)
		if err != nil {
			if invalid == 0 {
				firstErr, firstCond = err, cond
			}
			invalid++
			continue
		}
		if replicas == 0 || proposal > replicas {
			replicas, metric = proposal, name
		}
	}
	if firstErr != nil {
		firstErr = fmt.Errorf("invalid metrics (%v invalid out of %v), first error is: %w", invalid, len(hpa.Spec.Metrics), firstErr)
	}
	if invalid >= len(hpa.Spec.Metrics) || (invalid > 0 && replicas < scale.Spec.Replicas) {
		c.setCondition(hpa, firstCond.Type, firstCond.Status, firstCond.Reason, "%s", firstCond.Message)
		return -1, "", statuses, firstErr
	}
	c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionTrue, "ValidMetricFound", "the HPA was able to successfully calculate a replica count from %s", metric)
	return replicas, metric, statuses, firstErr
}

// validateSelector parses the target's pod selector and checks that no other
// autoscaler's target selects the same pods.
func (c *Controller) validateSelector(hpa *autoscalingv2.HorizontalPodAutoscaler, selector, key string) (labels.Selector, error) {
	if selector == "" {
		msg := "selector is required"
		c.recorder.Event(hpa, corev1.EventTypeWarning, "SelectorRequired", msg)
		c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", "the HPA target's scale is missing a selector")
		return nil, errors.New(msg)
	}
	parsed, err := labels.Parse(selector)
	if err != nil {
		msg := fmt.Sprintf("couldn't convert selector into a corresponding internal selector object: %v", err)
		c.recorder.Event(hpa, corev1.EventTypeWarning, "InvalidSelector", msg)
		c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "InvalidSelector", "%s", msg)
		return nil, errors.New(msg)
	}
	c.selectors.put(hpa.Namespace, key, parsed)
	pods, err := c.podLister.Pods(hpa.Namespace).List(parsed)
	if err != nil {
		return nil, err
	}
	if selecting := c.selectors.selecting(hpa.Namespace, pods); len(selecting) > 1 {
		msg := fmt.Sprintf("pods by selector %v are controlled by more than one HPA (e.g. [%s])", selector, strings.Join(selecting[:2], " "))
		c.recorder.Event(hpa, corev1.EventTypeWarning, "AmbiguousSelector", msg)
		c.setCondition(hpa, autoscalingv2.ScalingActive, corev1.ConditionFalse, "AmbiguousSelector", "%s", msg)
		return nil, errors.New(msg)
	}
	return parsed, nil
}

// The metric APIs kubelab does not serve.
var (
	errNoCustomMetrics   = errors.New("no custom metrics API (custom.metrics.k8s.io) registered")
	errNoExternalMetrics = errors.New("no external metrics API (external.metrics.k8s.io) registered")
)

// computeReplicasForMetric is one metric's proposal, filling its status; on failure, the
// condition to set.
func (c *Controller) computeReplicasForMetric(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, spec autoscalingv2.MetricSpec, current int32,
	selector labels.Selector, status *autoscalingv2.MetricStatus, now time.Time, tol tolerances) (int32, string, autoscalingv2.HorizontalPodAutoscalerCondition, error) {
	switch spec.Type {
	case autoscalingv2.ResourceMetricSourceType:
		if spec.Resource == nil {
			break
		}
		replicas, value, name, err := c.resourceReplicas(ctx, hpa, current, spec.Resource.Target, spec.Resource.Name, "", selector, now, tol)
		if err != nil {
			cond := c.unableToCompute(hpa, "FailedGetResourceMetric", err)
			return 0, "", cond, fmt.Errorf("failed to get %s resource metric value: %w", spec.Resource.Name, err)
		}
		*status = autoscalingv2.MetricStatus{Type: spec.Type, Resource: &autoscalingv2.ResourceMetricStatus{Name: spec.Resource.Name, Current: *value}}
		return replicas, name, autoscalingv2.HorizontalPodAutoscalerCondition{}, nil
	case autoscalingv2.ContainerResourceMetricSourceType:
		if spec.ContainerResource == nil {
			break
		}
		cr := spec.ContainerResource
		replicas, value, name, err := c.resourceReplicas(ctx, hpa, current, cr.Target, cr.Name, cr.Container, selector, now, tol)
		if err != nil {
			cond := c.unableToCompute(hpa, "FailedGetContainerResourceMetric", err)
			return 0, "", cond, fmt.Errorf("failed to get %s container metric value: %w", cr.Container, err)
		}
		*status = autoscalingv2.MetricStatus{Type: spec.Type, ContainerResource: &autoscalingv2.ContainerResourceMetricStatus{
			Name: cr.Name, Container: cr.Container, Current: *value}}
		return replicas, name, autoscalingv2.HorizontalPodAutoscalerCondition{}, nil
	case autoscalingv2.PodsMetricSourceType:
		if spec.Pods == nil {
			break
		}
		err := fmt.Errorf("unable to get metric %s: unable to fetch metrics from custom metrics API: %w", spec.Pods.Metric.Name, errNoCustomMetrics)
		return 0, "", c.unableToCompute(hpa, "FailedGetPodsMetric", err), fmt.Errorf("failed to get pods metric value: %w", err)
	case autoscalingv2.ObjectMetricSourceType:
		if spec.Object == nil {
			break
		}
		o := spec.Object
		err := fmt.Errorf("unable to get metric %s on %s %s/%s: %w", o.Metric.Name, o.DescribedObject.Kind, hpa.Namespace, o.DescribedObject.Name, errNoCustomMetrics)
		return 0, "", c.unableToCompute(hpa, "FailedGetObjectMetric", err), fmt.Errorf("failed to get object metric value: %w", err)
	case autoscalingv2.ExternalMetricSourceType:
		if spec.External == nil {
			break
		}
		err := fmt.Errorf("unable to get external metric %s/%s/%+v: %w", hpa.Namespace, spec.External.Metric.Name, spec.External.Metric.Selector, errNoExternalMetrics)
		return 0, "", c.unableToCompute(hpa, "FailedGetExternalMetric", err),
			fmt.Errorf("failed to get %s external metric value: %w", spec.External.Metric.Name, err)
	}
	err := fmt.Errorf("unknown metric source type %q", string(spec.Type))
	return 0, "", c.unableToCompute(hpa, "InvalidMetricSourceType", err), err
}

// resourceReplicas is the proposal of a resource metric (of one container, or of whole
// pods), its current value and the metric's description.
func (c *Controller) resourceReplicas(ctx context.Context, hpa *autoscalingv2.HorizontalPodAutoscaler, current int32, target autoscalingv2.MetricTarget,
	resource corev1.ResourceName, container string, selector labels.Selector, now time.Time, tol tolerances) (int32, *autoscalingv2.MetricValueStatus, string, error) {
	if target.AverageValue == nil && target.AverageUtilization == nil {
		return 0, nil, "", errors.New("invalid resource metric source: neither an average utilization target nor an average value (usage) target was set")
	}
	what := "usage"
	if target.AverageValue == nil {
		what = "utilization"
	}
	in, err := c.replicaInput(ctx, hpa.Namespace, current, resource, container, selector, now, tol)
	if err != nil {
		return 0, nil, "", fmt.Errorf("failed to get %s %s: %w", resource, what, err)
	}
	if target.AverageValue != nil {
		replicas, average, err := averageValueReplicas(in, target.AverageValue.MilliValue())
		if err != nil {
			return 0, nil, "", fmt.Errorf("failed to get %s usage: %w", resource, err)
		}
		q := quantity(resource, average)
		return replicas, &autoscalingv2.MetricValueStatus{AverageValue: &q}, fmt.Sprintf("%s resource", resource), nil
	}
	replicas, utilization, average, err := utilizationReplicas(in, *target.AverageUtilization)
	if err != nil {
		return 0, nil, "", fmt.Errorf("failed to get %s utilization: %w", resource, err)
	}
	name := fmt.Sprintf("%s resource utilization (percentage of request)", resource)
	if container != "" {
		name = fmt.Sprintf("%s container resource utilization (percentage of request)", resource)
	}
	q := quantity(resource, average)
	return replicas, &autoscalingv2.MetricValueStatus{AverageUtilization: &utilization, AverageValue: &q}, name, nil
}

// replicaInput gathers the samples and the pods of the target.
func (c *Controller) replicaInput(ctx context.Context, namespace string, current int32, resource corev1.ResourceName, container string,
	selector labels.Selector, now time.Time, tol tolerances) (replicaInput, error) {
	metrics, _, err := resourceMetrics(ctx, c.clients.Metrics, resource, namespace, selector, container)
	if err != nil {
		return replicaInput{}, fmt.Errorf("unable to get metrics for resource %s: %w", resource, err)
	}
	pods, err := c.podLister.Pods(namespace).List(selector)
	if err != nil {
		return replicaInput{}, fmt.Errorf("unable to get pods while calculating replica count: %w", err)
	}
	return replicaInput{current: current, pods: pods, metrics: metrics, resource: resource, container: container, tolerances: tol,
		readiness: readiness{cpuInitializationPeriod: c.cfg.CPUInitializationPeriod, initialReadinessDelay: c.cfg.InitialReadinessDelay, now: now}}, nil
}

// quantity is a resource's average usage (milli-units) as metrics-server formats it:
// memory in binary units, the rest in decimal ones.
func quantity(resource corev1.ResourceName, milli int64) apiresource.Quantity {
	format := apiresource.DecimalSI
	if resource == corev1.ResourceMemory {
		format = apiresource.BinarySI
	}
	return *apiresource.NewMilliQuantity(milli, format)
}

// unableToCompute reports a metric's failure as a Warning event and returns the
// ScalingActive=False condition it sets when no metric works.
func (c *Controller) unableToCompute(hpa *autoscalingv2.HorizontalPodAutoscaler, reason string, err error) autoscalingv2.HorizontalPodAutoscalerCondition {
	c.recorder.Event(hpa, corev1.EventTypeWarning, reason, err.Error())
	return autoscalingv2.HorizontalPodAutoscalerCondition{Type: autoscalingv2.ScalingActive, Status: corev1.ConditionFalse, Reason: reason,
		Message: fmt.Sprintf("the HPA was unable to compute the replica count: %v", err)}
}

func hasObjectOrExternalMetrics(hpa *autoscalingv2.HorizontalPodAutoscaler) bool {
	for _, m := range hpa.Spec.Metrics {
		if m.Type == autoscalingv2.ObjectMetricSourceType || m.Type == autoscalingv2.ExternalMetricSourceType {
			return true
		}
	}
	return false
}

package podautoscaler

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/scale"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	metricsv1beta1client "k8s.io/metrics/pkg/client/clientset/versioned/typed/metrics/v1beta1"
)

// Clients are what the controller talks to.
type Clients struct {
	// Kube reads and writes autoscalers (status) and Events.
	Kube kubernetes.Interface
	// Metrics reads PodMetrics (metrics.k8s.io/v1beta1).
	Metrics metricsv1beta1client.PodMetricsesGetter
	// Scales gets and updates the /scale subresource of scale targets.
	Scales scale.ScalesGetter
	// Mapper maps a target's kind to its resource; one that can be Reset (a discovery
	// mapper) is reset when a kind is not found, for kinds that appeared since.
	Mapper apimeta.RESTMapper
}

// NewClients builds the clients from one client config: the /scale client and the mapper
// work from the API server's discovery.
func NewClients(cfg *rest.Config) (Clients, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("kubernetes client: %w", err)
	}
	metrics, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return Clients{}, fmt.Errorf("metrics client: %w", err)
	}
	discovery := memory.NewMemCacheClient(kube.Discovery())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(discovery)
	scales, err := scale.NewForConfig(cfg, mapper, dynamic.LegacyAPIPathResolverFunc, scale.NewDiscoveryScaleKindResolver(discovery))
	if err != nil {
		return Clients{}, fmt.Errorf("scale client: %w", err)
	}
	return Clients{Kube: kube, Metrics: metrics.MetricsV1beta1(), Scales: scales, Mapper: mapper}, nil
}

func (c Clients) validate() error {
	if c.Kube == nil || c.Metrics == nil || c.Scales == nil || c.Mapper == nil {
		return errors.New("horizontal pod autoscaler: the kubernetes, metrics and scale clients and a REST mapper are required")
	}
	return nil
}

// resourceMetrics lists the PodMetrics of the pods the selector picks and reads each
// pod's usage of the resource (milli-units): the named container's, or the sum over the
// pod's containers (a pod lacking the resource in one of them, or with no containers, has
// no sample). The timestamp is the first item's.
func resourceMetrics(ctx context.Context, client metricsv1beta1client.PodMetricsesGetter, resource corev1.ResourceName, namespace string,
	selector labels.Selector, container string) (podMetrics, time.Time, error) {
	list, err := client.PodMetricses(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("unable to fetch metrics from resource metrics API: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, time.Time{}, errors.New("no metrics returned from resource metrics API")
	}
	out := make(podMetrics, len(list.Items))
	for _, m := range list.Items {
		if v, ok := podUsage(m, resource, container); ok {
			out[m.Name] = podMetric{timestamp: m.Timestamp.Time, window: m.Window.Duration, value: v}
		}
	}
	return out, list.Items[0].Timestamp.Time, nil
}

func podUsage(m metricsv1beta1.PodMetrics, resource corev1.ResourceName, container string) (int64, bool) {
	if container != "" {
		for _, c := range m.Containers {
			if c.Name == container {
				q, ok := c.Usage[resource]
				return q.MilliValue(), ok
			}
		}
		return 0, false
	}
	if len(m.Containers) == 0 {
		return 0, false
	}
	var sum int64
	for _, c := range m.Containers {
		q, ok := c.Usage[resource]
		if !ok {
			return 0, false
		}
		sum += q.MilliValue()
	}
	return sum, true
}

package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// metrics.k8s.io/v1beta1 is served here rather than by a metrics-server behind the
// aggregator: NodeMetrics and PodMetrics are read, at each request, from the Summary API
// (/stats/summary) of the kubelets concerned, reached as the pods' log and exec
// subresources reach them. CPU is the kubelet's usage rate (usageNanoCores), memory its
// working set; a pod's metrics list its containers. What the kubelets cannot answer
// (unreachable, no CPU rate yet) is left out of lists, and a get of it is 404, as
// metrics-server answers before it has two samples.

// metricsWindow is the window the metrics report: metrics-server's default resolution.
const metricsWindow = 15 * time.Second

// summaryTimeout bounds one kubelet's answer to /stats/summary.
const summaryTimeout = 10 * time.Second

// objectStore is how the metrics read the Pods and Nodes they describe: the core stores.
type objectStore interface {
	rest.Getter
	rest.Lister
}

// metricsStorage is the REST storage of metrics.k8s.io/v1beta1: "nodes" (NodeMetrics)
// and "pods" (PodMetrics), over the Pod and Node stores.
func metricsStorage(kubelet *kubeletClient, pods, nodes objectStore) map[string]rest.Storage {
	src := &summaries{kubelet: kubelet, now: time.Now}
	return map[string]rest.Storage{
		"nodes": &nodeMetricsREST{src: src, nodes: nodes,
			TableConvertor: rest.NewDefaultTableConvertor(metricsv1beta1.Resource("nodemetrics"))},
		"pods": &podMetricsREST{src: src, pods: pods,
			TableConvertor: rest.NewDefaultTableConvertor(metricsv1beta1.Resource("podmetrics"))},
	}
}

// summaries fetches the kubelets' Summary API.
type summaries struct {
	kubelet *kubeletClient
	now     func() time.Time
}

// get is the summary of one node's kubelet, hollow or real alike (a hollow kubelet
// answers from its fake runtime's usage).
func (s *summaries) get(ctx context.Context, node string) (*statsapi.Summary, error) {
	loc, err := s.kubelet.location(ctx, node)
	if err != nil {
		return nil, err
	}
	loc.Path = "/stats/summary"
	ctx, cancel := context.WithTimeout(ctx, summaryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, loc.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := (&http.Client{Transport: s.kubelet.transport}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("get summary of node %s: %w", node, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		return nil, fmt.Errorf("get summary of node %s: %s: %s", node, resp.Status, b)
	}
	var summary statsapi.Summary
	if err := json.NewDecoder(resp.Body).Decode(&summary); err != nil {
		return nil, fmt.Errorf("decode summary of node %s: %w", node, err)
	}
	return &summary, nil
}

// getAll fetches the summaries of the nodes at once; nodes whose kubelet does not answer
// are missing from the result.
func (s *summaries) getAll(ctx context.Context, nodes []string) map[string]*statsapi.Summary {
	out := make(map[string]*statsapi.Summary, len(nodes))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, node := range nodes {
		wg.Go(func() {
			summary, err := s.get(ctx, node)
			if err != nil {
				return
			}
			mu.Lock()
			out[node] = summary
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// nodeMetricsREST serves metrics.k8s.io nodes (NodeMetrics): get and list.
type nodeMetricsREST struct {
	rest.TableConvertor
	src   *summaries
	nodes objectStore
}

var (
	_ rest.Getter               = (*nodeMetricsREST)(nil)
	_ rest.Lister               = (*nodeMetricsREST)(nil)
	_ rest.Scoper               = (*nodeMetricsREST)(nil)
	_ rest.SingularNameProvider = (*nodeMetricsREST)(nil)
)

func (r *nodeMetricsREST) New() runtime.Object     { return &metricsv1beta1.NodeMetrics{} }
func (r *nodeMetricsREST) NewList() runtime.Object { return &metricsv1beta1.NodeMetricsList{} }
func (r *nodeMetricsREST) Destroy()                {}
func (r *nodeMetricsREST) NamespaceScoped() bool   { return false }
func (r *nodeMetricsREST) GetSingularName() string { return "" }
func (r *nodeMetricsREST) notFound(name string) error {
	return apierrors.NewNotFound(metricsv1beta1.Resource("nodemetrics"), name)
}

// Get is the metrics of one node; 404 when the node does not exist or its kubelet has
// none.
func (r *nodeMetricsREST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.nodes.Get(genericapirequest.WithNamespace(ctx, ""), name, &metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, r.notFound(name)
		}
		return nil, err
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		return nil, fmt.Errorf("not a Node: %T", obj)
	}
	summary, err := r.src.get(ctx, name)
	if err != nil {
		return nil, r.notFound(name)
	}
	m, ok := nodeMetrics(node, summary, r.src.now())
	if !ok {
		return nil, r.notFound(name)
	}
	return m, nil
}

// List is the metrics of the nodes the label and field selectors (metadata.name) pick
// whose kubelets have them, by name.
func (r *nodeMetricsREST) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	obj, err := r.nodes.List(genericapirequest.WithNamespace(ctx, ""), &metainternalversion.ListOptions{LabelSelector: labelSelector(opts)})
	if err != nil {
		return nil, err
	}
	list, ok := obj.(*corev1.NodeList)
	if !ok {
		return nil, fmt.Errorf("not a NodeList: %T", obj)
	}
	var nodes []*corev1.Node
	var names []string
	for i := range list.Items {
		n := &list.Items[i]
		if matchesFields(opts, &n.ObjectMeta, false) {
			nodes = append(nodes, n)
			names = append(names, n.Name)
		}
	}
	got := r.src.getAll(ctx, names)
	now := r.src.now()
	out := &metricsv1beta1.NodeMetricsList{Items: []metricsv1beta1.NodeMetrics{}}
	for _, n := range nodes {
		summary, ok := got[n.Name]
		if !ok {
			continue
		}
		if m, ok := nodeMetrics(n, summary, now); ok {
			out.Items = append(out.Items, *m)
		}
	}
	sort.Slice(out.Items, func(i, j int) bool { return out.Items[i].Name < out.Items[j].Name })
	return out, nil
}

// nodeMetrics is a node's metrics from its kubelet's summary; false when the summary
// lacks the CPU rate or the working set.
func nodeMetrics(node *corev1.Node, summary *statsapi.Summary, now time.Time) (*metricsv1beta1.NodeMetrics, bool) {
	cpu, memory := summary.Node.CPU, summary.Node.Memory
	if cpu == nil || cpu.UsageNanoCores == nil || memory == nil || memory.WorkingSetBytes == nil {
		return nil, false
	}
	return &metricsv1beta1.NodeMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: node.Name, Labels: node.Labels, CreationTimestamp: metav1.NewTime(now)},
		Timestamp:  cpu.Time,
		Window:     metav1.Duration{Duration: metricsWindow},
		Usage:      usage(*cpu.UsageNanoCores, *memory.WorkingSetBytes),
	}, true
}

// podMetricsREST serves metrics.k8s.io pods (PodMetrics): get and list.
type podMetricsREST struct {
	rest.TableConvertor
	src  *summaries
	pods objectStore
}

var (
	_ rest.Getter               = (*podMetricsREST)(nil)
	_ rest.Lister               = (*podMetricsREST)(nil)
	_ rest.Scoper               = (*podMetricsREST)(nil)
	_ rest.SingularNameProvider = (*podMetricsREST)(nil)
)

func (r *podMetricsREST) New() runtime.Object     { return &metricsv1beta1.PodMetrics{} }
func (r *podMetricsREST) NewList() runtime.Object { return &metricsv1beta1.PodMetricsList{} }
func (r *podMetricsREST) Destroy()                {}
func (r *podMetricsREST) NamespaceScoped() bool   { return true }
func (r *podMetricsREST) GetSingularName() string { return "" }

// Get is the metrics of one pod; 404 when the pod does not exist or has none (as
// metrics-server: podmetrics "<namespace>/<name>" not found).
func (r *podMetricsREST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	namespace := genericapirequest.NamespaceValue(ctx)
	notFound := apierrors.NewNotFound(metricsv1beta1.Resource("podmetrics"), namespace+"/"+name)
	obj, err := r.pods.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, notFound
		}
		return nil, err
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("not a Pod: %T", obj)
	}
	if pod.Spec.NodeName == "" {
		return nil, notFound
	}
	summary, err := r.src.get(ctx, pod.Spec.NodeName)
	if err != nil {
		return nil, notFound
	}
	m, ok := podMetrics(pod, summary, r.src.now())
	if !ok {
		return nil, notFound
	}
	return m, nil
}

// List is the metrics of the pods of the request's namespace (all namespaces when none)
// that the label and field selectors (metadata.name, metadata.namespace) pick and whose
// kubelets have them, by namespace and name.
func (r *podMetricsREST) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	obj, err := r.pods.List(ctx, &metainternalversion.ListOptions{LabelSelector: labelSelector(opts)})
	if err != nil {
		return nil, err
	}
	list, ok := obj.(*corev1.PodList)
	if !ok {
		return nil, fmt.Errorf("not a PodList: %T", obj)
	}
	var pods []*corev1.Pod
	nodeSet := map[string]bool{}
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.NodeName == "" || !matchesFields(opts, &p.ObjectMeta, true) {
			continue
		}
		pods = append(pods, p)
		nodeSet[p.Spec.NodeName] = true
	}
	nodes := make([]string, 0, len(nodeSet))
	for n := range nodeSet {
		nodes = append(nodes, n)
	}
	got := r.src.getAll(ctx, nodes)
	now := r.src.now()
	out := &metricsv1beta1.PodMetricsList{Items: []metricsv1beta1.PodMetrics{}}
	for _, p := range pods {
		summary, ok := got[p.Spec.NodeName]
		if !ok {
			continue
		}
		if m, ok := podMetrics(p, summary, now); ok {
			out.Items = append(out.Items, *m)
		}
	}
	sort.Slice(out.Items, func(i, j int) bool {
		a, b := out.Items[i], out.Items[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out, nil
}

// podMetrics is a pod's metrics from its node's summary (the pod of the same namespace,
// name and UID); false when the summary has no such pod, no container of it, or a
// container without a CPU rate or working set. The timestamp is the oldest of its
// containers' CPU samples.
func podMetrics(pod *corev1.Pod, summary *statsapi.Summary, now time.Time) (*metricsv1beta1.PodMetrics, bool) {
	for _, ps := range summary.Pods {
		if ps.PodRef.Namespace != pod.Namespace || ps.PodRef.Name != pod.Name || (ps.PodRef.UID != "" && ps.PodRef.UID != string(pod.UID)) {
			continue
		}
		if len(ps.Containers) == 0 {
			return nil, false
		}
		m := &metricsv1beta1.PodMetrics{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, Labels: pod.Labels, CreationTimestamp: metav1.NewTime(now)},
			Window:     metav1.Duration{Duration: metricsWindow},
		}
		for _, c := range ps.Containers {
			if c.CPU == nil || c.CPU.UsageNanoCores == nil || c.Memory == nil || c.Memory.WorkingSetBytes == nil {
				return nil, false
			}
			if m.Timestamp.IsZero() || c.CPU.Time.Before(&m.Timestamp) {
				m.Timestamp = c.CPU.Time
			}
			m.Containers = append(m.Containers, metricsv1beta1.ContainerMetrics{Name: c.Name,
				Usage: usage(*c.CPU.UsageNanoCores, *c.Memory.WorkingSetBytes)})
		}
		return m, true
	}
	return nil, false
}

// usage is a CPU rate in nanocores and a working set in bytes as metrics-server
// formats them.
func usage(nanoCores, workingSet uint64) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    *apiresource.NewScaledQuantity(int64(nanoCores), apiresource.Nano),
		corev1.ResourceMemory: *apiresource.NewQuantity(int64(workingSet), apiresource.BinarySI),
	}
}

func labelSelector(opts *metainternalversion.ListOptions) labels.Selector {
	if opts == nil {
		return nil
	}
	return opts.LabelSelector
}

// matchesFields applies the field selector of a list to an object's metadata.
func matchesFields(opts *metainternalversion.ListOptions, m *metav1.ObjectMeta, namespaced bool) bool {
	if opts == nil || opts.FieldSelector == nil || opts.FieldSelector.Empty() {
		return true
	}
	return opts.FieldSelector.Matches(generic.AddObjectMetaFieldsSet(fields.Set{}, m, namespaced))
}

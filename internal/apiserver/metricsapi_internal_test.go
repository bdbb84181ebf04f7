package apiserver

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	restclient "k8s.io/client-go/rest"
	basecompatibility "k8s.io/component-base/compatibility"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/kubelab/kubelab/internal/apiserver/openapi"
	"github.com/kubelab/kubelab/internal/hollow"
)

// memStore is a Pod or Node store in memory: get, and list by namespace and labels.
type memStore struct {
	rest.TableConvertor
	objs    []runtime.Object
	newList func(items []runtime.Object) runtime.Object
}

func (s *memStore) NewList() runtime.Object { return s.newList(nil) }

func (s *memStore) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	for _, o := range s.objs {
		m := o.(metav1.Object)
		if m.GetName() == name && m.GetNamespace() == ns {
			return o.DeepCopyObject(), nil
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource("objects"), name)
}

func (s *memStore) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	ns := genericapirequest.NamespaceValue(ctx)
	var out []runtime.Object
	for _, o := range s.objs {
		m := o.(metav1.Object)
		if (ns != "" && m.GetNamespace() != ns) || (opts != nil && opts.LabelSelector != nil && !opts.LabelSelector.Matches(labels.Set(m.GetLabels()))) {
			continue
		}
		out = append(out, o.DeepCopyObject())
	}
	return s.newList(out), nil
}

func podStore(pods ...*corev1.Pod) *memStore {
	s := &memStore{newList: func(items []runtime.Object) runtime.Object {
		l := &corev1.PodList{}
		for _, o := range items {
			l.Items = append(l.Items, *o.(*corev1.Pod))
		}
		return l
	}}
	for _, p := range pods {
		s.objs = append(s.objs, p)
	}
	return s
}

func nodeStore(nodes ...*corev1.Node) *memStore {
	s := &memStore{newList: func(items []runtime.Object) runtime.Object {
		l := &corev1.NodeList{}
		for _, o := range items {
			l.Items = append(l.Items, *o.(*corev1.Node))
		}
		return l
	}}
	for _, n := range nodes {
		s.objs = append(s.objs, n)
	}
	return s
}

// fakeKubelets serves /stats/summary for several nodes on one TLS server: the node is
// told by the port, so each node gets a listener of its own.
type fakeKubelets struct {
	mu        sync.Mutex
	summaries map[string]*statsapi.Summary // by node; a node without one answers 500
	requests  map[string]int
	transport *http.Transport
}

// addNode starts the kubelet of a node and returns the Node reaching it.
func (k *fakeKubelets) addNode(t *testing.T, name string, nodeLabels map[string]string) *corev1.Node {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		defer k.mu.Unlock()
		k.requests[name]++
		s, ok := k.summaries[name]
		if r.URL.Path != "/stats/summary" || !ok {
			http.Error(w, "no summary", http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(s)
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	k.transport = srv.Client().Transport.(*http.Transport)
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	p, _ := strconv.Atoi(port)
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: nodeLabels},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: int32(p)}}}}
}

func u64p(v uint64) *uint64 { return &v }

func containerStats(name string, at time.Time, nanoCores *uint64, workingSet uint64) statsapi.ContainerStats {
	return statsapi.ContainerStats{Name: name,
		CPU:    &statsapi.CPUStats{Time: metav1.NewTime(at), UsageNanoCores: nanoCores, UsageCoreNanoSeconds: u64p(1e9)},
		Memory: &statsapi.MemoryStats{Time: metav1.NewTime(at), WorkingSetBytes: u64p(workingSet)}}
}

func runningPod(ns, name, node string, podLabels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name), Labels: podLabels},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
}

func TestMetricsFromKubeletSummaries(t *testing.T) {
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	k := &fakeKubelets{summaries: map[string]*statsapi.Summary{}, requests: map[string]int{}}
	nodeA := k.addNode(t, "node-a", map[string]string{"zone": "a"})
	nodeB := k.addNode(t, "node-b", map[string]string{"zone": "b"})
	nodeC := k.addNode(t, "node-c", map[string]string{"zone": "a"}) // its kubelet fails
	nodes := nodeStore(nodeA, nodeB, nodeC)
	web1 := runningPod("default", "web-1", "node-a", map[string]string{"app": "web"})
	web2 := runningPod("default", "web-2", "node-b", map[string]string{"app": "web"})
	db := runningPod("default", "db", "node-a", map[string]string{"app": "db"})
	fresh := runningPod("default", "fresh", "node-b", map[string]string{"app": "web"}) // no CPU rate yet
	recreated := runningPod("default", "recreated", "node-a", nil)                     // the summary knows an older pod of its name
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pending", Labels: map[string]string{"app": "web"}}}
	onC := runningPod("default", "on-c", "node-c", map[string]string{"app": "web"})
	other := runningPod("other", "web-1", "node-b", map[string]string{"app": "web"})
	pods := podStore(web1, web2, db, fresh, recreated, pending, onC, other)

	k.summaries["node-a"] = &statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "node-a", CPU: &statsapi.CPUStats{Time: metav1.NewTime(at), UsageNanoCores: u64p(1_250_000_000)},
			Memory: &statsapi.MemoryStats{Time: metav1.NewTime(at), WorkingSetBytes: u64p(3 << 30)}},
		Pods: []statsapi.PodStats{
			{PodRef: statsapi.PodReference{Namespace: "default", Name: "web-1", UID: "uid-web-1"}, Containers: []statsapi.ContainerStats{
				containerStats("app", at, u64p(250_000_000), 64<<20), containerStats("sidecar", at.Add(-time.Second), u64p(5_000_000), 16<<20)}},
			{PodRef: statsapi.PodReference{Namespace: "default", Name: "db", UID: "uid-db"}, Containers: []statsapi.ContainerStats{
				containerStats("postgres", at, u64p(1_000_000_000), 1<<30)}},
			{PodRef: statsapi.PodReference{Namespace: "default", Name: "recreated", UID: "uid-old"}, Containers: []statsapi.ContainerStats{
				containerStats("app", at, u64p(1), 1)}},
		},
	}
	k.summaries["node-b"] = &statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "node-b", CPU: &statsapi.CPUStats{Time: metav1.NewTime(at), UsageCoreNanoSeconds: u64p(5)},
			Memory: &statsapi.MemoryStats{Time: metav1.NewTime(at), WorkingSetBytes: u64p(1 << 30)}},
		Pods: []statsapi.PodStats{
			{PodRef: statsapi.PodReference{Namespace: "default", Name: "web-2", UID: "uid-web-2"}, Containers: []statsapi.ContainerStats{
				containerStats("app", at, u64p(750_000_000), 128<<20)}},
			{PodRef: statsapi.PodReference{Namespace: "default", Name: "fresh", UID: "uid-fresh"}, Containers: []statsapi.ContainerStats{
				containerStats("app", at, nil, 1<<20)}},
			{PodRef: statsapi.PodReference{Namespace: "other", Name: "web-1", UID: "uid-web-1"}, Containers: []statsapi.ContainerStats{
				containerStats("app", at, u64p(100_000_000), 1<<20)}},
		},
	}
	kubelet := &kubeletClient{transport: k.transport, types: defaultKubeletAddressTypes, nodes: nodes}
	storage := metricsStorage(kubelet, pods, nodes)
	type metricsREST interface {
		rest.Storage
		rest.Getter
		rest.Lister
		rest.Scoper
	}
	podsREST := storage["pods"].(metricsREST)
	nodesREST := storage["nodes"].(metricsREST)
	if !podsREST.NamespaceScoped() || nodesREST.NamespaceScoped() {
		t.Error("pods are namespaced, nodes are not")
	}
	if _, ok := podsREST.New().(*metricsv1beta1.PodMetrics); !ok {
		t.Errorf("pods serve %T", podsREST.New())
	}
	ctx := genericapirequest.WithNamespace(context.Background(), "default")

	// Get: the pod's containers, its labels, the oldest sample's time.
	obj, err := podsREST.Get(ctx, "web-1", &metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pm := obj.(*metricsv1beta1.PodMetrics)
	if pm.Name != "web-1" || pm.Namespace != "default" || pm.Labels["app"] != "web" || !pm.Timestamp.Time.Equal(at.Add(-time.Second)) ||
		pm.Window.Duration != 15*time.Second || len(pm.Containers) != 2 {
		t.Fatalf("web-1 metrics: %+v", pm)
	}
	app, sidecar := pm.Containers[0].Usage, pm.Containers[1].Usage
	if pm.Containers[0].Name != "app" || app.Cpu().String() != "250m" || app.Memory().String() != "64Mi" ||
		sidecar.Cpu().String() != "5m" || sidecar.Memory().String() != "16Mi" {
		t.Errorf("web-1 containers: %+v", pm.Containers)
	}
	for _, name := range []string{"fresh", "recreated", "pending", "on-c", "missing"} {
		_, err := podsREST.Get(ctx, name, &metav1.GetOptions{})
		if !apierrors.IsNotFound(err) || err.Error() != `podmetrics.metrics.k8s.io "default/`+name+`" not found` {
			t.Errorf("get %s: %v, want podmetrics not found", name, err)
		}
	}

	listPods := func(ctx context.Context, opts *metainternalversion.ListOptions) []string {
		t.Helper()
		obj, err := podsREST.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range obj.(*metricsv1beta1.PodMetricsList).Items {
			names = append(names, m.Namespace+"/"+m.Name)
		}
		return names
	}
	eq := func(what string, got []string, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", what, got, want)
			return
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("%s: %v, want %v", what, got, want)
				return
			}
		}
	}
	eq("pods of default", listPods(ctx, nil), "default/db", "default/web-1", "default/web-2")
	eq("pods of all namespaces", listPods(context.Background(), &metainternalversion.ListOptions{}), "default/db", "default/web-1", "default/web-2", "other/web-1")
	eq("app=web", listPods(ctx, &metainternalversion.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"app": "web"})}),
		"default/web-1", "default/web-2")
	eq("metadata.name=web-1 in all namespaces", listPods(context.Background(), &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "web-1")}),
		"default/web-1", "other/web-1")
	eq("metadata.namespace=other", listPods(context.Background(), &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.namespace", "other")}),
		"other/web-1")

	// Nodes: those whose kubelet reports a CPU rate.
	obj, err = nodesREST.Get(context.Background(), "node-a", &metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nm := obj.(*metricsv1beta1.NodeMetrics)
	if nm.Name != "node-a" || nm.Labels["zone"] != "a" || !nm.Timestamp.Time.Equal(at) || nm.Usage.Cpu().String() != "1250m" ||
		nm.Usage.Memory().String() != "3Gi" {
		t.Errorf("node-a metrics: %+v", nm)
	}
	for _, name := range []string{"node-b", "node-c", "node-x"} {
		_, err := nodesREST.Get(context.Background(), name, &metav1.GetOptions{})
		if !apierrors.IsNotFound(err) || err.Error() != `nodemetrics.metrics.k8s.io "`+name+`" not found` {
			t.Errorf("get %s: %v, want nodemetrics not found", name, err)
		}
	}
	k.mu.Lock()
	k.summaries["node-b"].Node.CPU.UsageNanoCores = u64p(2_000_000_000)
	k.mu.Unlock()
	listNodes := func(opts *metainternalversion.ListOptions) []string {
		t.Helper()
		obj, err := nodesREST.List(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, m := range obj.(*metricsv1beta1.NodeMetricsList).Items {
			names = append(names, m.Name+"="+m.Usage.Cpu().String())
		}
		return names
	}
	eq("nodes", listNodes(nil), "node-a=1250m", "node-b=2")
	eq("zone=a", listNodes(&metainternalversion.ListOptions{LabelSelector: labels.SelectorFromSet(labels.Set{"zone": "a"})}), "node-a=1250m")
	k.mu.Lock()
	before := k.requests["node-a"]
	k.mu.Unlock()
	eq("metadata.name=node-b", listNodes(&metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "node-b")}), "node-b=2")
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.requests["node-a"] != before {
		t.Error("a list by name asked other kubelets")
	}
}

// metricsScheme registers metrics.k8s.io/v1beta1 as the server's scheme does its other
// groups: the external types, their internal twins and the version's priority.
func metricsScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := metricsv1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	scheme.AddUnversionedTypes(schema.GroupVersion{Version: "v1"},
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	internal := schema.GroupVersion{Group: metricsv1beta1.GroupName, Version: runtime.APIVersionInternal}
	for kind, typ := range scheme.KnownTypes(metricsv1beta1.SchemeGroupVersion) {
		if typ.PkgPath() != metav1Pkg {
			scheme.AddKnownTypeWithName(internal.WithKind(kind), reflect.New(typ).Interface().(runtime.Object))
		}
	}
	if err := scheme.SetVersionPriority(metricsv1beta1.SchemeGroupVersion); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// The group installs in a generic API server and serves what kubectl top and the HPA
// controller ask: lists by label and field selectors, gets, and tables.
func TestMetricsAPIServed(t *testing.T) {
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	k := &fakeKubelets{summaries: map[string]*statsapi.Summary{}, requests: map[string]int{}}
	nodeA := k.addNode(t, "node-a", nil)
	nodes := nodeStore(nodeA)
	pods := podStore(runningPod("default", "web-1", "node-a", map[string]string{"app": "web"}),
		runningPod("default", "web-2", "node-a", map[string]string{"app": "web"}))
	k.summaries["node-a"] = &statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "node-a", CPU: &statsapi.CPUStats{Time: metav1.NewTime(at), UsageNanoCores: u64p(1_000_000_000)},
			Memory: &statsapi.MemoryStats{Time: metav1.NewTime(at), WorkingSetBytes: u64p(1 << 30)}},
		Pods: []statsapi.PodStats{
			{PodRef: statsapi.PodReference{Namespace: "default", Name: "web-1", UID: "uid-web-1"}, Containers: []statsapi.ContainerStats{
				containerStats("app", at, u64p(250_000_000), 64<<20)}},
			{PodRef: statsapi.PodReference{Namespace: "default", Name: "web-2", UID: "uid-web-2"}, Containers: []statsapi.ContainerStats{
				containerStats("app", at, u64p(500_000_000), 32<<20)}},
		},
	}
	scheme := metricsScheme(t)
	codecs := serializer.NewCodecFactory(scheme)
	cfg := genericapiserver.NewConfig(codecs)
	cfg.LoopbackClientConfig = &restclient.Config{}
	cfg.ExternalAddress = "127.0.0.1:443"
	cfg.EffectiveVersion = basecompatibility.NewEffectiveVersionFromString("1.37", "", "")
	namer := openapinamer.NewDefinitionNamer(scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(openapi.Definitions, namer)
	cfg.OpenAPIConfig.GetDefinitionName = definitionName(namer)
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openapi.Definitions, namer)
	cfg.OpenAPIV3Config.GetDefinitionName = definitionName(namer)
	srv, err := cfg.Complete(nil).New("test", genericapiserver.NewEmptyDelegate())
	if err != nil {
		t.Fatal(err)
	}
	info := genericapiserver.NewDefaultAPIGroupInfo(metricsv1beta1.GroupName, scheme, runtime.NewParameterCodec(scheme), codecs)
	info.VersionedResourcesStorageMap["v1beta1"] = metricsStorage(&kubeletClient{transport: k.transport, types: defaultKubeletAddressTypes, nodes: nodes}, pods, nodes)
	if err := srv.InstallAPIGroup(&info); err != nil {
		t.Fatal(err)
	}
	get := func(path string, out any, accept string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		rec := httptest.NewRecorder()
		srv.Handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var list metricsv1beta1.PodMetricsList
	get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods?labelSelector=app%3Dweb&fieldSelector=metadata.name%3Dweb-2", &list, "")
	if list.Kind != "PodMetricsList" || list.APIVersion != "metrics.k8s.io/v1beta1" || len(list.Items) != 1 || list.Items[0].Name != "web-2" ||
		list.Items[0].Containers[0].Usage.Cpu().String() != "500m" {
		t.Errorf("pod metrics list: %+v", list)
	}
	var pm metricsv1beta1.PodMetrics
	get("/apis/metrics.k8s.io/v1beta1/namespaces/default/pods/web-1", &pm, "")
	if pm.Kind != "PodMetrics" || pm.Containers[0].Usage.Memory().String() != "64Mi" {
		t.Errorf("pod metrics: %+v", pm)
	}
	var nodeList metricsv1beta1.NodeMetricsList
	get("/apis/metrics.k8s.io/v1beta1/nodes", &nodeList, "")
	if len(nodeList.Items) != 1 || nodeList.Items[0].Usage.Cpu().String() != "1" {
		t.Errorf("node metrics: %+v", nodeList)
	}
	var table metav1.Table
	get("/apis/metrics.k8s.io/v1beta1/nodes", &table, "application/json;as=Table;v=v1;g=meta.k8s.io")
	if len(table.Rows) != 1 || table.Rows[0].Cells[0] != "node-a" {
		t.Errorf("table: %+v", table)
	}
	var resources metav1.APIResourceList
	get("/apis/metrics.k8s.io/v1beta1", &resources, "")
	if len(resources.APIResources) != 2 {
		t.Errorf("discovery: %+v", resources.APIResources)
	}
	for _, r := range resources.APIResources {
		if r.Name == "pods" && (!r.Namespaced || r.Kind != "PodMetrics" || strings.Join(r.Verbs, ",") != "get,list") {
			t.Errorf("discovery of pods: %+v", r)
		}
		if r.Name == "nodes" && (r.Namespaced || r.Kind != "NodeMetrics") {
			t.Errorf("discovery of nodes: %+v", r)
		}
	}
}

// A hollow node's metrics come from its kubelet's Summary API like any node's: the API
// server reads no usage from the pods' hollow annotations (the hollow kubelet turns
// them into its summary).
func TestHollowNodeMetricsFromItsKubelet(t *testing.T) {
	at := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	k := &fakeKubelets{summaries: map[string]*statsapi.Summary{}, requests: map[string]int{}}
	node := k.addNode(t, "hollow-a", nil)
	node.Status.NodeInfo.ContainerRuntimeVersion = hollow.RuntimeVersion()
	pod := runningPod("default", "web", "hollow-a", nil)
	pod.Annotations = map[string]string{hollow.CPUUsageAnnotation: "250m", hollow.MemoryUsageAnnotation: "64Mi"}
	k.summaries["hollow-a"] = &statsapi.Summary{
		Node: statsapi.NodeStats{NodeName: "hollow-a", CPU: &statsapi.CPUStats{Time: metav1.NewTime(at), UsageNanoCores: u64p(300_000_000)},
			Memory: &statsapi.MemoryStats{Time: metav1.NewTime(at), WorkingSetBytes: u64p(96 << 20)}},
		Pods: []statsapi.PodStats{{PodRef: statsapi.PodReference{Namespace: "default", Name: "web", UID: "uid-web"},
			Containers: []statsapi.ContainerStats{containerStats("app", at, u64p(300_000_000), 96<<20)}}},
	}
	nodes := nodeStore(node)
	storage := metricsStorage(&kubeletClient{transport: k.transport, types: defaultKubeletAddressTypes, nodes: nodes}, podStore(pod), nodes)
	ctx := genericapirequest.WithNamespace(context.Background(), "default")
	obj, err := storage["pods"].(rest.Getter).Get(ctx, "web", &metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pm := obj.(*metricsv1beta1.PodMetrics)
	if len(pm.Containers) != 1 || pm.Containers[0].Usage.Cpu().String() != "300m" || pm.Containers[0].Usage.Memory().String() != "96Mi" {
		t.Errorf("pod metrics %+v, want the kubelet's 300m and 96Mi", pm.Containers)
	}
	obj, err = storage["nodes"].(rest.Getter).Get(ctx, "hollow-a", &metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if nm := obj.(*metricsv1beta1.NodeMetrics); nm.Usage.Cpu().String() != "300m" {
		t.Errorf("node metrics %+v, want the kubelet's 300m", nm.Usage)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.requests["hollow-a"] != 2 {
		t.Errorf("hollow kubelet asked %d times, want 2 (once per get)", k.requests["hollow-a"])
	}
}

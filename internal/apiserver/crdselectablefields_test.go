package apiserver_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// testSelectableFields: a CRD's selectableFields are field selectors of its custom
// resources in each version, each version with its own: v1 selects on hostPort, v2 (which
// a conversion webhook behind a Service converts to and from the stored v1) on host and
// port. Lists, watches and deletecollection with such selectors see only the matching
// objects, and an object updated out of a selection leaves a watch of it as deleted.
func testSelectableFields(t *testing.T, s *apiservertest.Server, network *apiservertest.ClusterNetwork) {
	ctx := context.Background()
	ns := "default"
	svcName := "sel-conv-" + fmt.Sprint(time.Now().UnixNano()%1_000_000)
	cert, caPEM := selfSignedServing(t, svcName+"."+ns+".svc")
	hook := httptest.NewUnstartedServer(http.HandlerFunc(convertHostPort))
	hook.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	hook.StartTLS()
	t.Cleanup(hook.Close)
	svc, err := s.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svcName},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Client.CoreV1().Services(ns).Delete(context.Background(), svcName, metav1.DeleteOptions{})
	})
	network.Route(net.JoinHostPort(svc.Spec.ClusterIP, "443"), hook.Listener.Addr().String())

	group := "selectable.kubelab.test"
	props := func(names ...string) *apiextensionsv1.CustomResourceValidation {
		p := map[string]apiextensionsv1.JSONSchemaProps{}
		for _, n := range names {
			p[n] = apiextensionsv1.JSONSchemaProps{Type: "string"}
		}
		return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: p}}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "endpoints." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "endpoints", Singular: "endpoint", Kind: "Endpoint", ListKind: "EndpointList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: props("hostPort"),
					SelectableFields: []apiextensionsv1.SelectableField{{JSONPath: ".hostPort"}}},
				{Name: "v2", Served: true, Schema: props("host", "port"),
					SelectableFields: []apiextensionsv1.SelectableField{{JSONPath: ".host"}, {JSONPath: ".port"}}},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
					ClientConfig: &apiextensionsv1.WebhookClientConfig{CABundle: caPEM,
						Service: &apiextensionsv1.ServiceReference{Namespace: ns, Name: svcName, Path: ptr.To("/convert"), Port: ptr.To[int32](443)}}}},
		},
	}
	crds := apiextensionsclient.NewForConfigOrDie(s.Config).ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crds.Delete(context.Background(), crd.Name, metav1.DeleteOptions{}) })
	dyn := dynamic.NewForConfigOrDie(s.Config)
	v1 := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "endpoints"}).Namespace(ns)
	v2 := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v2", Resource: "endpoints"}).Namespace(ns)
	testutil.Eventually(t, "v2 endpoints to be served", func() error {
		_, err := v2.List(ctx, metav1.ListOptions{FieldSelector: "host=none"})
		return err
	})

	watches := map[string]watch.Interface{}
	for _, w := range []struct {
		client dynamic.ResourceInterface
		key    string
		sel    string
	}{{v2, "v2 host", "host=host1"}, {v2, "v2 host,port", "host=host1,port=80"}, {v1, "v1 hostPort", "hostPort=host1:80"}} {
		wi, err := w.client.Watch(ctx, metav1.ListOptions{FieldSelector: w.sel})
		if err != nil {
			t.Fatalf("watch %s: %v", w.key, err)
		}
		t.Cleanup(wi.Stop)
		watches[w.key] = wi
	}
	for i, spec := range []map[string]any{{"host": "host1", "port": "80"}, {"host": "host1", "port": "8080"}, {"host": "host2"}} {
		obj := map[string]any{"apiVersion": group + "/v2", "kind": "Endpoint", "metadata": map[string]any{"name": fmt.Sprintf("cr-%d", i)}}
		for k, v := range spec {
			obj[k] = v
		}
		if _, err := v2.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create cr-%d: %v", i, err)
		}
	}
	t.Cleanup(func() { _ = v2.DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}) })

	list := func(client dynamic.ResourceInterface, sel string) string {
		t.Helper()
		l, err := client.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Fatalf("list %s: %v", sel, err)
		}
		var names []string
		for _, o := range l.Items {
			names = append(names, o.GetName())
		}
		slices.Sort(names)
		return strings.Join(names, ",")
	}
	for _, c := range []struct {
		client     dynamic.ResourceInterface
		sel, names string
	}{
		{v2, "host=host1", "cr-0,cr-1"},
		{v2, "host=host1,port=80", "cr-0"},
		{v1, "hostPort=host1:80", "cr-0"},
		{v1, "hostPort=host1:8080", "cr-1"},
		{v2, "host!=host1", "cr-2"},
	} {
		if got := list(c.client, c.sel); got != c.names {
			t.Errorf("list with %s: %q, want %q", c.sel, got, c.names)
		}
	}
	if _, err := v2.List(ctx, metav1.ListOptions{FieldSelector: "hostPort=host1:80"}); err == nil {
		t.Errorf("v2 accepted v1's selectable field hostPort")
	}

	if err := v2.DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}, metav1.ListOptions{FieldSelector: "host=host1,port=80"}); err != nil {
		t.Fatal(err)
	}
	cr1, err := v2.Get(ctx, "cr-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cr1.Object["host"] = "host2"
	if _, err := v2.Update(ctx, cr1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := list(v2, "host=host1"); got != "" {
		t.Errorf("host=host1 after the delete and the update: %q, want none", got)
	}

	// Each watch saw its objects added, then deleted (removed, or updated out of its selection).
	for key, want := range map[string]string{
		"v2 host":      "ADDED cr-0,ADDED cr-1,DELETED cr-0,DELETED cr-1",
		"v2 host,port": "ADDED cr-0,DELETED cr-0",
		"v1 hostPort":  "ADDED cr-0,DELETED cr-0",
	} {
		var events []string
		n := len(strings.Split(want, ","))
		testutil.Eventually(t, "events of the watch "+key, func() bool {
			for {
				select {
				case ev, ok := <-watches[key].ResultChan():
					if !ok {
						t.Fatalf("watch %s closed after %v", key, events)
					}
					if o, isObj := ev.Object.(*unstructured.Unstructured); isObj {
						events = append(events, string(ev.Type)+" "+o.GetName())
					}
				default:
					return len(events) >= n
				}
			}
		})
		if got := strings.Join(events, ","); got != want {
			t.Errorf("watch %s: %s, want %s", key, got, want)
		}
	}
}

// convertHostPort is the conversion webhook of the endpoints CRD: v1's hostPort
// "<host>:<port>" is v2's host and port.
func convertHostPort(w http.ResponseWriter, r *http.Request) {
	var review apiextensionsv1.ConversionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not a ConversionReview: %v", err), http.StatusBadRequest)
		return
	}
	resp := &apiextensionsv1.ConversionResponse{UID: review.Request.UID, Result: metav1.Status{Status: metav1.StatusSuccess}}
	for _, raw := range review.Request.Objects {
		var obj map[string]any
		if err := json.Unmarshal(raw.Raw, &obj); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch want := review.Request.DesiredAPIVersion; {
		case strings.HasSuffix(want, "/v2"):
			if hp, ok := obj["hostPort"].(string); ok {
				host, port, _ := strings.Cut(hp, ":")
				obj["host"] = host
				if port != "" {
					obj["port"] = port
				}
			}
			delete(obj, "hostPort")
		default:
			host, _ := obj["host"].(string)
			if port, ok := obj["port"].(string); ok {
				host += ":" + port
			}
			obj["hostPort"] = host
			delete(obj, "host")
			delete(obj, "port")
		}
		obj["apiVersion"] = review.Request.DesiredAPIVersion
		b, _ := json.Marshal(obj)
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: b})
	}
	review.Request, review.Response = nil, resp
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

package apiserver_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver"
	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestClusterNetwork: what the API server reaches on the cluster's network (Services'
// ClusterIPs, pods' IPs, aggregated API servers' endpoints) it reaches through Config.ClusterDial, here a stand-in that
// routes those addresses to servers on loopback.
func TestClusterNetwork(t *testing.T) {
	network := &apiservertest.ClusterNetwork{}
	s := apiservertest.Start(t, apiservertest.Options{ClusterDial: network.Dial})
	t.Run("conversion webhook", func(t *testing.T) { testConversionWebhook(t, s, network) })
	t.Run("selectable fields", func(t *testing.T) { testSelectableFields(t, s, network) })
	t.Run("pods/proxy", func(t *testing.T) { testPodProxy(t, s, network) })
	t.Run("services/proxy", func(t *testing.T) { testServiceProxy(t, s, network) })
	t.Run("nodes/proxy", func(t *testing.T) { testNodeProxy(t, s, network) })
	t.Run("aggregated API", func(t *testing.T) { testAggregatedAPI(t, s, network) })
}

// echo answers "<method> <request URI>" as text, and at /html a page with a link to
// /rewriteme.
func echo(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/html" {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, `<a href="/rewriteme">test</a>`)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = io.WriteString(w, r.Method+" "+r.URL.RequestURI())
}

// startEcho serves echo on loopback (with TLS when tls is set) until the test ends, and
// gives its address.
func startEcho(t *testing.T, tls bool) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(echo))
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String()
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// proxyClient sends requests to the server as cfg's user and returns redirects as they are.
func proxyClient(t *testing.T, cfg *rest.Config) *http.Client {
	t.Helper()
	c, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// proxyCase is a request through a proxy subresource and the answer it must get.
type proxyCase struct {
	method, path string
	status       int
	body         string // the whole body; for an error, a part of the Status's message
	location     string // the redirect's Location
}

// check sends the request to the server at base with client and compares the answer.
func (c proxyCase) check(t *testing.T, client *http.Client, base string) {
	t.Helper()
	req, err := http.NewRequest(c.method, base+c.path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", c.method, c.path, err)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	switch {
	case resp.StatusCode != c.status:
		t.Errorf("%s %s: %d %s, want %d", c.method, c.path, resp.StatusCode, b, c.status)
	case c.location != "" && resp.Header.Get("Location") != c.location:
		t.Errorf("%s %s: Location %q, want %q", c.method, c.path, resp.Header.Get("Location"), c.location)
	case c.status >= 400:
		var st metav1.Status
		if err := json.Unmarshal(b, &st); err != nil || st.Kind != "Status" || int(st.Code) != c.status || !strings.Contains(st.Message, c.body) {
			t.Errorf("%s %s: %s; want a Status %d with %q", c.method, c.path, b, c.status, c.body)
		}
	case c.status == http.StatusOK && string(b) != c.body:
		t.Errorf("%s %s: %q, want %q", c.method, c.path, b, c.body)
	}
}

// testPodProxy: pods/proxy carries every method, with and without a path, to the pod's IP
// at the port the name gives (a number, a container port's name, or the pod's first),
// over http or https, through the cluster network; it rewrites links, redirects an empty
// path, answers an unreachable pod with 503, and is authorized per verb.
func testPodProxy(t *testing.T, s *apiservertest.Server, network *apiservertest.ClusterNetwork) {
	ctx := context.Background()
	ns := "default"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "proxied"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "main", Image: "agnhost", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "tls", ContainerPort: 8443}}}}}}
	pod, err := s.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Client.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	pod.Status.PodIP, pod.Status.PodIPs = "10.244.7.7", []corev1.PodIP{{IP: "10.244.7.7"}}
	if _, err := s.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	network.Route("10.244.7.7:8080", startEcho(t, false))
	network.Route("10.244.7.7:8443", startEcho(t, true))
	network.Route("10.244.7.7:9999", closedAddr(t))

	prefix := "/api/v1/namespaces/" + ns + "/pods/"
	cases := []proxyCase{
		{method: "GET", path: prefix + "proxied/proxy/", status: 200, body: "GET /"},
		{method: "GET", path: prefix + "proxied/proxy/some/path/?q=1", status: 200, body: "GET /some/path/?q=1"},
		{method: "HEAD", path: prefix + "proxied/proxy/some/path", status: 200},
		{method: "GET", path: prefix + "proxied/proxy", status: 301, location: prefix + "proxied/proxy/"},
		{method: "GET", path: prefix + "proxied/proxy?method=GET", status: 301, location: prefix + "proxied/proxy/?method=GET"},
		{method: "HEAD", path: prefix + "proxied/proxy", status: 301, location: prefix + "proxied/proxy/"},
		{method: "GET", path: prefix + "proxied:8080/proxy/x", status: 200, body: "GET /x"},
		{method: "GET", path: prefix + "proxied:http/proxy/x", status: 200, body: "GET /x"},
		{method: "GET", path: prefix + "https:proxied:8443/proxy/tls", status: 200, body: "GET /tls"},
		{method: "GET", path: prefix + "https:proxied:tls/proxy/", status: 200, body: "GET /"},
		{method: "GET", path: prefix + "proxied/proxy/html", status: 200, body: `<a href="` + prefix + `proxied/proxy/rewriteme">test</a>`},
		{method: "GET", path: prefix + "proxied:9999/proxy/", status: 503, body: "error trying to reach service"},
		{method: "GET", path: prefix + "proxied:grpc/proxy/", status: 400, body: `no container port named "grpc"`},
		{method: "GET", path: prefix + "ftp:proxied:21/proxy/", status: 400, body: `invalid pod request "ftp:proxied:21"`},
		{method: "GET", path: prefix + "missing/proxy/", status: 404, body: `pods "missing" not found`},
	}
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		cases = append(cases,
			proxyCase{method: m, path: prefix + "proxied/proxy/some/path/with/" + m, status: 200, body: m + " /some/path/with/" + m},
			proxyCase{method: m, path: prefix + "proxied/proxy?method=" + m, status: 200, body: m + " /?method=" + m})
	}
	admin := proxyClient(t, s.Config)
	for _, c := range cases {
		c.check(t, admin, s.URL)
	}
	if !network.Dialed("10.244.7.7:8080") {
		t.Error("the pod was not dialled at its IP through the cluster network")
	}

	// A user who may only get pods/proxy may GET through it, not POST.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pod-proxy-reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"pods/proxy"}}}}
	if _, err := s.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pod-proxy-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "pod-proxy-reader"}}}
	if _, err := s.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Client.RbacV1().RoleBindings(ns).Delete(ctx, binding.Name, metav1.DeleteOptions{})
		_ = s.Client.RbacV1().Roles(ns).Delete(ctx, role.Name, metav1.DeleteOptions{})
	})
	reader := proxyClient(t, s.ConfigAs(t, "pod-proxy-reader"))
	testutil.Eventually(t, "the reader's binding to take effect", func() error {
		resp, err := reader.Get(s.URL + prefix + "proxied/proxy/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET: %d", resp.StatusCode)
		}
		return nil
	})
	proxyCase{method: "POST", path: prefix + "proxied/proxy/", status: 403, body: `cannot create resource "pods/proxy"`}.check(t, reader, s.URL)
	proxyCase{method: "GET", path: prefix + "proxied/proxy/", status: 200, body: "GET /"}.check(t, reader, s.URL)

	// An editor (the rules the edit role aggregates) may use it with every verb.
	bindEditor(t, s, ns, "pod-proxy-editor")
	editor := proxyClient(t, s.ConfigAs(t, "pod-proxy-editor"))
	testutil.Eventually(t, "the editor's binding to take effect", func() error {
		resp, err := editor.Get(s.URL + prefix + "proxied/proxy/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET: %d", resp.StatusCode)
		}
		return nil
	})
	proxyCase{method: "POST", path: prefix + "proxied/proxy/", status: 200, body: "POST /"}.check(t, editor, s.URL)
}

// bindEditor binds user in ns to system:aggregate-to-edit, whose rules the edit
// ClusterRole aggregates (no aggregation controller runs here).
func bindEditor(t *testing.T, s *apiservertest.Server, ns, user string) {
	t.Helper()
	ctx := context.Background()
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:aggregate-to-edit"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	if _, err := s.Client.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Client.RbacV1().RoleBindings(ns).Delete(ctx, binding.Name, metav1.DeleteOptions{}) })
}

// testConversionWebhook: a CRD whose conversion webhook is named by a ClusterIP Service
// has its objects converted by the webhook, called at the Service's ClusterIP.
func testConversionWebhook(t *testing.T, s *apiservertest.Server, network *apiservertest.ClusterNetwork) {
	ctx := context.Background()
	ns := "default"
	svcName := "conv-" + fmt.Sprint(time.Now().UnixNano()%1_000_000)
	cert, caPEM := selfSignedServing(t, svcName+"."+ns+".svc")
	hook := httptest.NewUnstartedServer(http.HandlerFunc(convertWidgets))
	hook.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	hook.StartTLS()
	t.Cleanup(hook.Close)
	svc, err := s.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svcName},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Client.CoreV1().Services(ns).Delete(ctx, svcName, metav1.DeleteOptions{}) })
	clusterAddr := net.JoinHostPort(svc.Spec.ClusterIP, "443")
	network.Route(clusterAddr, hook.Listener.Addr().String())

	crds := apiextensionsclient.NewForConfigOrDie(s.Config).ApiextensionsV1().CustomResourceDefinitions()
	schemaProps := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object", XPreserveUnknownFields: ptr.To(true)}}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.conversion.kubelab.test"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "conversion.kubelab.test", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{
				{Name: "v1", Served: true, Storage: true, Schema: schemaProps},
				{Name: "v2", Served: true, Schema: schemaProps},
			},
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter,
				Webhook: &apiextensionsv1.WebhookConversion{ConversionReviewVersions: []string{"v1"},
					ClientConfig: &apiextensionsv1.WebhookClientConfig{CABundle: caPEM,
						Service: &apiextensionsv1.ServiceReference{Namespace: ns, Name: svcName, Path: ptr.To("/convert"), Port: ptr.To[int32](443)}}}},
		},
	}
	if _, err := crds.Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crds.Delete(ctx, crd.Name, metav1.DeleteOptions{}) })
	dyn := dynamic.NewForConfigOrDie(s.Config)
	v1 := dyn.Resource(schema.GroupVersionResource{Group: "conversion.kubelab.test", Version: "v1", Resource: "widgets"}).Namespace(ns)
	v2 := dyn.Resource(schema.GroupVersionResource{Group: "conversion.kubelab.test", Version: "v2", Resource: "widgets"}).Namespace(ns)
	w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "conversion.kubelab.test/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w"}, "spec": map[string]any{"size": "large"}}}
	testutil.Eventually(t, "a v1 Widget to be created", func() error {
		_, err := v1.Create(ctx, w, metav1.CreateOptions{})
		return err
	})
	got, err := v2.Get(ctx, "w", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get the Widget as v2 (through the conversion webhook): %v", err)
	}
	if conv, _, _ := unstructured.NestedString(got.Object, "spec", "convertedBy"); conv != "webhook" || got.GetAPIVersion() != "conversion.kubelab.test/v2" {
		t.Errorf("the Widget as v2: %v; want it converted by the webhook", got.Object)
	}
	if !network.Dialed(clusterAddr) {
		t.Errorf("the conversion webhook was not dialled at the Service's ClusterIP %s through the cluster network", clusterAddr)
	}
}

// convertWidgets is a conversion webhook: every object gets the desired apiVersion and
// spec.convertedBy=webhook.
func convertWidgets(w http.ResponseWriter, r *http.Request) {
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
		obj["apiVersion"] = review.Request.DesiredAPIVersion
		if spec, ok := obj["spec"].(map[string]any); ok {
			spec["convertedBy"] = "webhook"
		}
		b, _ := json.Marshal(obj)
		resp.ConvertedObjects = append(resp.ConvertedObjects, runtime.RawExtension{Raw: b})
	}
	review.Request, review.Response = nil, resp
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(&review)
}

// selfSignedServing is a serving certificate for dnsName that is its own CA, and that CA
// in PEM.
func selfSignedServing(t *testing.T, dnsName string) (tls.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// createPod creates a pod with IP ip in ns, deleted when the test ends.
func createPod(t *testing.T, s *apiservertest.Server, ns, name, ip string, labels map[string]string) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "agnhost"}}}}
	pod, err := s.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
	pod.Status.PodIP, pod.Status.PodIPs = ip, []corev1.PodIP{{IP: ip}}
	if _, err := s.Client.CoreV1().Pods(ns).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// testServiceProxy: services/proxy carries every method, with and without a path, to a
// ready endpoint of the Service that is its pod, at the target port of the Service port
// the name gives (by number, by name, or the unnamed one), over http or https, through
// the cluster network; never to an endpoint that is not ready or not the pod it names;
// with kube-apiserver's 503s when there is no such port or endpoint.
func testServiceProxy(t *testing.T, s *apiservertest.Server, network *apiservertest.ClusterNetwork) {
	ctx := context.Background()
	ns := "default"
	createPod(t, s, ns, "svc-web-0", "10.244.8.8", nil)
	createPod(t, s, ns, "svc-web-1", "10.244.8.9", nil)
	wrong := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "WRONG") }))
	t.Cleanup(wrong.Close)
	network.Route("10.244.8.8:8080", startEcho(t, false))
	network.Route("10.244.8.8:8443", startEcho(t, true))
	network.Route("10.244.8.9:8080", wrong.Listener.Addr().String())  // not ready
	network.Route("10.244.8.10:8080", wrong.Listener.Addr().String()) // claims svc-web-0, whose IP it is not

	services := s.Client.CoreV1().Services(ns)
	for _, svc := range []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Name: "svc-web"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Name: "portname1", Port: 80, TargetPort: intstr.FromInt32(8080)},
			{Name: "tlsportname1", Port: 443, TargetPort: intstr.FromInt32(8443)},
			{Name: "portname9", Port: 99}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "svc-single"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{
			{Port: 80, TargetPort: intstr.FromInt32(8080)}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "svc-empty"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}},
	} {
		if _, err := services.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = services.Delete(ctx, svc.Name, metav1.DeleteOptions{}) })
	}
	endpoints := []discoveryv1.Endpoint{
		{Addresses: []string{"10.244.8.8"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "svc-web-0"}},
		{Addresses: []string{"10.244.8.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "svc-web-1"}},
		{Addresses: []string{"10.244.8.10"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
			TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "svc-web-0"}},
	}
	slices := s.Client.DiscoveryV1().EndpointSlices(ns)
	for _, slice := range []*discoveryv1.EndpointSlice{
		{ObjectMeta: metav1.ObjectMeta{Name: "svc-web-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "svc-web"}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: endpoints, Ports: []discoveryv1.EndpointPort{
				{Name: ptr.To("portname1"), Port: ptr.To[int32](8080)}, {Name: ptr.To("tlsportname1"), Port: ptr.To[int32](8443)}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "svc-single-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "svc-single"}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: endpoints, Ports: []discoveryv1.EndpointPort{
				{Name: ptr.To(""), Port: ptr.To[int32](8080)}}},
	} {
		if _, err := slices.Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = slices.Delete(ctx, slice.Name, metav1.DeleteOptions{}) })
	}

	admin := proxyClient(t, s.Config)
	prefix := "/api/v1/namespaces/" + ns + "/services/"
	testutil.Eventually(t, "the server to know the EndpointSlices", func() error {
		resp, err := admin.Get(s.URL + prefix + "svc-single/proxy/")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("%d %s", resp.StatusCode, b)
		}
		return nil
	})
	cases := []proxyCase{
		{method: "GET", path: prefix + "svc-web:portname1/proxy/", status: 200, body: "GET /"},
		{method: "GET", path: prefix + "svc-web:80/proxy/x?q=1", status: 200, body: "GET /x?q=1"},
		{method: "GET", path: prefix + "http:svc-web:portname1/proxy/x/", status: 200, body: "GET /x/"},
		{method: "GET", path: prefix + "https:svc-web:tlsportname1/proxy/tls", status: 200, body: "GET /tls"},
		{method: "GET", path: prefix + "https:svc-web:443/proxy/", status: 200, body: "GET /"},
		{method: "GET", path: prefix + "svc-single/proxy/some/path", status: 200, body: "GET /some/path"},
		{method: "HEAD", path: prefix + "svc-single/proxy/some/path", status: 200},
		{method: "GET", path: prefix + "svc-single/proxy/html", status: 200, body: `<a href="` + prefix + `svc-single/proxy/rewriteme">test</a>`},
		{method: "GET", path: prefix + "svc-single/proxy?method=GET", status: 301, location: prefix + "svc-single/proxy/?method=GET"},
		{method: "GET", path: prefix + "svc-web:81/proxy/", status: 503, body: `no service port 81 found for service "svc-web"`},
		{method: "GET", path: prefix + "svc-web:portname9/proxy/", status: 503, body: `no endpoints available for service "svc-web"`},
		{method: "GET", path: prefix + "svc-web/proxy/", status: 503, body: `no endpoints available for service "svc-web"`},
		{method: "GET", path: prefix + "svc-empty/proxy/", status: 503, body: `no endpoints available for service "svc-empty"`},
		{method: "GET", path: prefix + "svc-missing:80/proxy/", status: 404, body: `services "svc-missing" not found`},
		{method: "GET", path: prefix + "ftp:svc-web:80/proxy/", status: 400, body: `invalid service request "ftp:svc-web:80"`},
	}
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		cases = append(cases,
			proxyCase{method: m, path: prefix + "svc-single/proxy/some/path/with/" + m, status: 200, body: m + " /some/path/with/" + m},
			proxyCase{method: m, path: prefix + "svc-single/proxy?method=" + m, status: 200, body: m + " /?method=" + m})
	}
	for _, c := range cases {
		c.check(t, admin, s.URL)
	}
	// The not-ready endpoint and the one that is not its pod are never picked.
	for range 20 {
		proxyCase{method: "GET", path: prefix + "svc-single/proxy/", status: 200, body: "GET /"}.check(t, admin, s.URL)
	}
	if network.Dialed("10.244.8.9:8080") || network.Dialed("10.244.8.10:8080") {
		t.Error("services/proxy dialled an endpoint that is not ready or not its pod")
	}

	// An editor may use it.
	bindEditor(t, s, ns, "service-proxy-editor")
	editor := proxyClient(t, s.ConfigAs(t, "service-proxy-editor"))
	testutil.Eventually(t, "the editor's binding to take effect", func() error {
		resp, err := editor.Get(s.URL + prefix + "svc-single/proxy/")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET: %d", resp.StatusCode)
		}
		return nil
	})
}

// testNodeProxy: nodes/proxy carries every method, with and without a path, to the
// node's kubelet with the API server's kubelet client certificate, or, for another port,
// to the node's IP through the cluster network.
func testNodeProxy(t *testing.T, s *apiservertest.Server, network *apiservertest.ClusterNetwork) {
	ctx := context.Background()
	kubelet := startFakeKubelet(t, apiserver.PKI{Dir: filepath.Join(s.DataDir, "pki")}, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "kubelet "+r.Method+" "+r.URL.RequestURI())
	})
	addNode(t, s.Client, "proxy-node-a", kubelet.port())
	t.Cleanup(func() { _ = s.Client.CoreV1().Nodes().Delete(ctx, "proxy-node-a", metav1.DeleteOptions{}) })
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "proxy-node-b"}}
	node, err := s.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Client.CoreV1().Nodes().Delete(ctx, "proxy-node-b", metav1.DeleteOptions{}) })
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.31.9.9"}}
	if _, err := s.Client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	network.Route("172.31.9.9:8080", startEcho(t, false))

	prefix := "/api/v1/nodes/"
	kport := fmt.Sprint(kubelet.port())
	cases := []proxyCase{
		{method: "GET", path: prefix + "proxy-node-a/proxy/pods", status: 200, body: "kubelet GET /pods"},
		{method: "GET", path: prefix + "proxy-node-a/proxy/logs/", status: 200, body: "kubelet GET /logs/"},
		{method: "GET", path: prefix + "proxy-node-a:" + kport + "/proxy/stats/summary", status: 200, body: "kubelet GET /stats/summary"},
		{method: "GET", path: prefix + "proxy-node-a/proxy", status: 301, location: prefix + "proxy-node-a/proxy/"},
		{method: "GET", path: prefix + "proxy-node-a:1234/proxy/", status: 400, body: "address not allowed"},
		{method: "GET", path: prefix + "proxy-node-b:8080/proxy/x", status: 200, body: "GET /x"},
		{method: "GET", path: prefix + "proxy-node-b:http/proxy/", status: 400, body: `invalid port "http"`},
		{method: "GET", path: prefix + "proxy-node-missing/proxy/", status: 404, body: `nodes "proxy-node-missing" not found`},
	}
	for _, m := range []string{"POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		cases = append(cases, proxyCase{method: m, path: prefix + "proxy-node-a/proxy/x/" + m, status: 200, body: "kubelet " + m + " /x/" + m})
	}
	admin := proxyClient(t, s.Config)
	for _, c := range cases {
		c.check(t, admin, s.URL)
	}
	kubelet.mu.Lock()
	first := kubelet.requests[0]
	kubelet.mu.Unlock()
	if first != "kube-apiserver-kubelet-client GET /pods" {
		t.Errorf("the kubelet saw %q, want the API server's kubelet client asking GET /pods", first)
	}
	if !network.Dialed("172.31.9.9:8080") {
		t.Error("another port of a node was not dialled at its IP through the cluster network")
	}
	// Who may not use nodes/proxy is refused before anything is proxied.
	proxyCase{method: "GET", path: prefix + "proxy-node-a/proxy/pods", status: 403, body: `cannot get resource "nodes/proxy"`}.
		check(t, proxyClient(t, s.ConfigAs(t, "nobody")), s.URL)
	// system:kubelet-api-admin may.
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "proxy-kubelet-admin"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "proxy-kubelet-admin"}}}
	if _, err := s.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Client.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{}) })
	admins := proxyClient(t, s.ConfigAs(t, "proxy-kubelet-admin"))
	testutil.Eventually(t, "the kubelet API admin's binding to take effect", func() error {
		resp, err := admins.Get(s.URL + prefix + "proxy-node-a/proxy/pods")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET: %d", resp.StatusCode)
		}
		return nil
	})
}

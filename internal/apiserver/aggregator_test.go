package apiserver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// flunderBackend is a small aggregated API server of the group version gv with one
// namespaced resource, flunders, kept in memory. It trusts what an aggregated server
// reads from kube-system/extension-apiserver-authentication: requests must come with a
// client certificate of the requestheader CA whose common name is an allowed name, and
// name their user in the username header; anything else is 401.
type flunderBackend struct {
	gv           schema.GroupVersion
	allowedNames []string
	userHeader   string

	mu       sync.Mutex
	flunders map[string]map[string]any // by namespace/name
	creators []string                  // each create's user and groups
}

func (b *flunderBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(r.TLS.PeerCertificates) == 0 || !slices.Contains(b.allowedNames, r.TLS.PeerCertificates[0].Subject.CommonName) ||
		r.Header.Get(b.userHeader) == "" {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	base := "/apis/" + b.gv.Group + "/" + b.gv.Version
	if r.URL.Path == base {
		writeJSON(w, http.StatusOK, metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: b.gv.String(), APIResources: []metav1.APIResource{{Name: "flunders", SingularName: "flunder",
				Namespaced: true, Kind: "Flunder", Verbs: []string{"create", "delete", "get", "list", "watch"}}}})
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, base+"/"), "/")
	if !strings.HasPrefix(r.URL.Path, base+"/") || len(parts) < 3 || parts[0] != "namespaces" || parts[2] != "flunders" || len(parts) > 4 {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	ns := parts[1]
	if len(parts) == 4 {
		key := ns + "/" + parts[3]
		obj, ok := b.flunders[key]
		switch {
		case !ok:
			writeJSON(w, http.StatusNotFound, apierrors.NewNotFound(schema.GroupResource{Group: b.gv.Group, Resource: "flunders"}, parts[3]).Status())
		case r.Method == http.MethodGet:
			writeJSON(w, http.StatusOK, obj)
		case r.Method == http.MethodDelete:
			delete(b.flunders, key)
			writeJSON(w, http.StatusOK, obj)
		default:
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
		return
	}
	var items []any
	for key, obj := range b.flunders {
		if strings.HasPrefix(key, ns+"/") {
			items = append(items, obj)
		}
	}
	switch {
	case r.Method == http.MethodPost:
		var obj map[string]any
		if err := json.NewDecoder(r.Body).Decode(&obj); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		meta, _ := obj["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		meta["namespace"], meta["resourceVersion"] = ns, "1"
		b.flunders[ns+"/"+name] = obj
		b.creators = append(b.creators, r.Header.Get(b.userHeader)+" "+strings.Join(r.Header.Values("X-Remote-Group"), ","))
		writeJSON(w, http.StatusCreated, obj)
	case r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		for _, obj := range items {
			_ = json.NewEncoder(w).Encode(map[string]any{"type": "ADDED", "object": obj})
		}
		w.(http.Flusher).Flush()
		b.mu.Unlock()
		<-r.Context().Done()
		b.mu.Lock()
	default:
		writeJSON(w, http.StatusOK, map[string]any{"apiVersion": b.gv.String(), "kind": "FlunderList",
			"metadata": map[string]any{"resourceVersion": "1"}, "items": items})
	}
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// creatorsSeen are the user and groups of each create, as "user group,group".
func (b *flunderBackend) creatorsSeen() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.creators)
}

// testAggregatedAPI: an APIService naming a Service has its group version served by
// that Service's server, reached at an endpoint through the cluster network with the
// front-proxy certificate the published ConfigMap tells it to trust; it is in
// discovery; its Available condition follows the Service, its endpoints and the
// server's answer, and requests for it are 503 while it is not Available and 404 once
// it is gone.
func testAggregatedAPI(t *testing.T, s *apiservertest.Server, network *apiservertest.ClusterNetwork) {
	ctx := context.Background()
	ns := "default"
	suffix := fmt.Sprint(time.Now().UnixNano() % 1_000_000)
	svcName := "wardle-" + suffix
	gv := schema.GroupVersion{Group: "wardle" + suffix + ".kubelab.test", Version: "v1alpha1"}
	apiServiceName := gv.Version + "." + gv.Group

	// An aggregated server's service account, bound to the bootstrap Role that reads
	// what it needs and to system:auth-delegator, may read that and check its clients.
	sa := "system:serviceaccount:" + ns + ":wardle-" + suffix
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "wardle-auth-reader-" + suffix},
		RoleRef:  rbacv1.RoleRef{Kind: "Role", Name: "extension-apiserver-authentication-reader"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "wardle-" + suffix}}}
	if _, err := s.Client.RbacV1().RoleBindings("kube-system").Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Client.RbacV1().RoleBindings("kube-system").Delete(ctx, binding.Name, metav1.DeleteOptions{})
	})
	delegator := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "wardle-auth-delegator-" + suffix},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:auth-delegator"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "wardle-" + suffix}}}
	if _, err := s.Client.RbacV1().ClusterRoleBindings().Create(ctx, delegator, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.Client.RbacV1().ClusterRoleBindings().Delete(ctx, delegator.Name, metav1.DeleteOptions{})
	})
	may := func(attrs authorizationv1.ResourceAttributes) (bool, error) {
		review, err := s.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: sa, ResourceAttributes: &attrs}}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return review.Status.Allowed, nil
	}
	testutil.Eventually(t, "the service account's bindings to take effect", func() error {
		for _, attrs := range []authorizationv1.ResourceAttributes{
			{Namespace: "kube-system", Verb: "get", Resource: "configmaps", Name: "extension-apiserver-authentication"},
			{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"},
			{Verb: "create", Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
		} {
			if ok, err := may(attrs); err != nil || !ok {
				return fmt.Errorf("%+v: allowed %v, %v", attrs, ok, err)
			}
		}
		return nil
	})
	if ok, err := may(authorizationv1.ResourceAttributes{Namespace: "kube-system", Verb: "get", Resource: "configmaps", Name: "other"}); err != nil || ok {
		t.Errorf("the service account may read another kube-system ConfigMap: %v, %v", ok, err)
	}

	// What an aggregated server reads to know whom to trust.
	cm, err := s.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var allowed, userHeaders []string
	if err := json.Unmarshal([]byte(cm.Data["requestheader-allowed-names"]), &allowed); err != nil {
		t.Fatalf("requestheader-allowed-names: %v", err)
	}
	if err := json.Unmarshal([]byte(cm.Data["requestheader-username-headers"]), &userHeaders); err != nil || len(userHeaders) == 0 {
		t.Fatalf("requestheader-username-headers %q: %v", cm.Data["requestheader-username-headers"], err)
	}
	clientCAs := x509.NewCertPool()
	if !clientCAs.AppendCertsFromPEM([]byte(cm.Data["requestheader-client-ca-file"])) || cm.Data["client-ca-file"] == "" {
		t.Fatalf("the ConfigMap has no CAs: %v", cm.Data)
	}
	backend := &flunderBackend{gv: gv, allowedNames: allowed, userHeader: userHeaders[0], flunders: map[string]map[string]any{}}
	cert, caPEM := selfSignedServing(t, svcName+"."+ns+".svc")
	srv := httptest.NewUnstartedServer(backend)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: clientCAs, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	network.Route("10.244.9.9:8443", srv.Listener.Addr().String())

	apiServices := aggregatorclient.NewForConfigOrDie(s.Config).ApiregistrationV1().APIServices()
	_, err = apiServices.Create(ctx, &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: apiServiceName},
		Spec: apiregistrationv1.APIServiceSpec{Group: gv.Group, Version: gv.Version, CABundle: caPEM,
			GroupPriorityMinimum: 2000, VersionPriority: 200,
			Service: &apiregistrationv1.ServiceReference{Namespace: ns, Name: svcName, Port: ptr.To[int32](7443)}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = apiServices.Delete(ctx, apiServiceName, metav1.DeleteOptions{}) })
	available := func(status apiregistrationv1.ConditionStatus, reason, message string) func() error {
		return func() error {
			svc, err := apiServices.Get(ctx, apiServiceName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range svc.Status.Conditions {
				if c.Type == apiregistrationv1.Available && c.Status == status && c.Reason == reason && strings.Contains(c.Message, message) {
					return nil
				}
			}
			return fmt.Errorf("conditions %+v; want Available %s %s %q", svc.Status.Conditions, status, reason, message)
		}
	}
	flunders := "/apis/" + gv.Group + "/" + gv.Version + "/namespaces/" + ns + "/flunders"
	testutil.Eventually(t, "the APIService to be ServiceNotFound", available(apiregistrationv1.ConditionFalse, "ServiceNotFound",
		fmt.Sprintf("service/%s in %q is not present", svcName, ns)))
	if code, body := rawGet(t, s, flunders); code != http.StatusServiceUnavailable || body != "service unavailable\n" {
		t.Errorf("GET while not Available: %d %q, want 503 service unavailable", code, body)
	}

	services := s.Client.CoreV1().Services(ns)
	if _, err := services.Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: svcName},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 7443, TargetPort: intstr.FromInt32(8443)}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = services.Delete(ctx, svcName, metav1.DeleteOptions{}) })
	testutil.Eventually(t, "the APIService to have no endpoints", available(apiregistrationv1.ConditionFalse, "EndpointsNotFound", "cannot find endpointslices"))

	sliceAPI := s.Client.DiscoveryV1().EndpointSlices(ns)
	slice := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: svcName + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svcName}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.244.9.9"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To[int32](8443), Protocol: ptr.To(corev1.ProtocolTCP)}}}
	if _, err := sliceAPI.Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sliceAPI.Delete(ctx, slice.Name, metav1.DeleteOptions{}) })
	testutil.Eventually(t, "the APIService to be Available", available(apiregistrationv1.ConditionTrue, "Passed", "all checks passed"))
	if !network.Dialed("10.244.9.9:8443") {
		t.Error("the aggregated server was not dialled at its endpoint through the cluster network")
	}

	// The aggregated resources, through the API server, as its user.
	dyn := dynamic.NewForConfigOrDie(s.Config).Resource(gv.WithResource("flunders")).Namespace(ns)
	flunder := &unstructured.Unstructured{Object: map[string]any{"apiVersion": gv.String(), "kind": "Flunder",
		"metadata": map[string]any{"name": "rest-flunder"}}}
	// The proxy follows the APIService's status as its informer sees it, moments later.
	testutil.Eventually(t, "a flunder to be created", func() error {
		_, err := dyn.Create(ctx, flunder, metav1.CreateOptions{})
		return err
	})
	if got := backend.creatorsSeen(); len(got) != 1 || got[0] != "kubelab-admin system:masters,system:authenticated" {
		t.Errorf("the aggregated server saw the flunder created by %q, want kubelab-admin in system:masters,system:authenticated", got)
	}
	list, err := dyn.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 || list.Items[0].GetName() != "rest-flunder" {
		t.Fatalf("list flunders: %v, %v", list, err)
	}
	if got, err := dyn.Get(ctx, "rest-flunder", metav1.GetOptions{}); err != nil || got.GetNamespace() != ns {
		t.Errorf("get the flunder: %v, %v", got, err)
	}
	w, err := dyn.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added {
			t.Errorf("watch: %v, want ADDED", ev)
		}
	case <-time.After(30 * time.Second):
		t.Error("no event from the watch within 30s")
	}
	w.Stop()
	if err := dyn.Delete(ctx, "rest-flunder", metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete the flunder: %v", err)
	}
	if _, err := dyn.Get(ctx, "rest-flunder", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("get the deleted flunder: %v, want NotFound", err)
	}

	// Discovery: the group in /apis and /apis/<group>, the resource in the aggregated form.
	disco := discovery.NewDiscoveryClientForConfigOrDie(s.Config)
	groups, err := disco.ServerGroups()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(groups.Groups, func(g metav1.APIGroup) bool { return g.Name == gv.Group }) {
		t.Errorf("/apis does not list %s", gv.Group)
	}
	var group metav1.APIGroup
	if code, body := rawGet(t, s, "/apis/"+gv.Group); code != http.StatusOK || json.Unmarshal([]byte(body), &group) != nil ||
		group.PreferredVersion.GroupVersion != gv.String() {
		t.Errorf("GET /apis/%s: %d %s", gv.Group, code, body)
	}
	testutil.Eventually(t, "flunders in the aggregated discovery", func() error {
		_, lists, err := disco.ServerGroupsAndResources()
		if err != nil {
			return err
		}
		for _, l := range lists {
			if l.GroupVersion == gv.String() && len(l.APIResources) == 1 && l.APIResources[0].Name == "flunders" {
				return nil
			}
		}
		return fmt.Errorf("%s/flunders not discovered", gv)
	})

	// Without endpoints it is no longer Available and its requests are 503.
	if err := sliceAPI.Delete(ctx, slice.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the APIService to lose its endpoints", available(apiregistrationv1.ConditionFalse, "EndpointsNotFound", "cannot find endpointslices"))
	if _, err := dyn.List(ctx, metav1.ListOptions{}); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("list flunders without endpoints: %v, want 503", err)
	}

	// Once the APIService is gone, so are its group and its requests.
	if err := apiServices.Delete(ctx, apiServiceName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the group to leave /apis", func() error {
		groups, err := disco.ServerGroups()
		if err != nil {
			return err
		}
		if slices.ContainsFunc(groups.Groups, func(g metav1.APIGroup) bool { return g.Name == gv.Group }) {
			return fmt.Errorf("/apis still lists %s", gv.Group)
		}
		if code, _ := rawGet(t, s, flunders); code != http.StatusNotFound {
			return fmt.Errorf("GET flunders: %d, want 404", code)
		}
		return nil
	})
}

// rawGet GETs path from the server as its admin, and gives the status and body.
func rawGet(t *testing.T, s *apiservertest.Server, path string) (int, string) {
	t.Helper()
	c := proxyClient(t, s.Config)
	resp, err := c.Get(s.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

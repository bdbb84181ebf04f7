package apiserver

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/transport"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1listers "k8s.io/kube-aggregator/pkg/client/listers/apiregistration/v1"
	"k8s.io/utils/ptr"
)

func TestSplitGroupPath(t *testing.T) {
	for _, tc := range []struct {
		path, group, version string
		ok                   bool
	}{
		{path: "/apis/wardle.example.com", group: "wardle.example.com", ok: true},
		{path: "/apis/wardle.example.com/", group: "wardle.example.com", ok: true},
		{path: "/apis/wardle.example.com/v1alpha1", group: "wardle.example.com", version: "v1alpha1", ok: true},
		{path: "/apis/wardle.example.com/v1alpha1/", group: "wardle.example.com", version: "v1alpha1", ok: true},
		{path: "/apis/wardle.example.com/v1alpha1/namespaces/a/flunders", group: "wardle.example.com", version: "v1alpha1", ok: true},
		{path: "/apis"},
		{path: "/apis/"},
		{path: "/api/v1/pods"},
		{path: "/apis//v1"},
		{path: "/apis/g//x"},
		{path: "/openapi/v3/apis/g/v1"},
	} {
		group, version, ok := splitGroupPath(tc.path)
		if group != tc.group || version != tc.version || ok != tc.ok {
			t.Errorf("%s: %q %q %v, want %q %q %v", tc.path, group, version, ok, tc.group, tc.version, tc.ok)
		}
	}
}

// apiService is an APIService of group/version, naming Service ns/name:port unless name
// is empty, with Available status available ("" for none).
func apiService(group, version, ns, name string, port int32, available apiregistrationv1.ConditionStatus) *apiregistrationv1.APIService {
	s := &apiregistrationv1.APIService{ObjectMeta: metav1.ObjectMeta{Name: version + "." + group},
		Spec: apiregistrationv1.APIServiceSpec{Group: group, Version: version, GroupPriorityMinimum: 2000, VersionPriority: 200}}
	if name != "" {
		s.Spec.Service = &apiregistrationv1.ServiceReference{Namespace: ns, Name: name, Port: ptr.To(port)}
	}
	if available != "" {
		s.Status.Conditions = []apiregistrationv1.APIServiceCondition{{Type: apiregistrationv1.Available, Status: available}}
	}
	return s
}

func TestAPIServiceRoute(t *testing.T) {
	for _, tc := range []struct {
		name string
		svc  *apiregistrationv1.APIService
		want route
	}{
		{"no APIService", nil, routeLocal},
		{"local", apiService("g", "v1", "", "", 0, apiregistrationv1.ConditionTrue), routeLocal},
		{"local without status", apiService("g", "v1", "", "", 0, ""), routeLocal},
		{"available", apiService("g", "v1", "ns", "api", 443, apiregistrationv1.ConditionTrue), routeProxy},
		{"unavailable", apiService("g", "v1", "ns", "api", 443, apiregistrationv1.ConditionFalse), routeUnavailable},
		{"unknown", apiService("g", "v1", "ns", "api", 443, apiregistrationv1.ConditionUnknown), routeUnavailable},
		{"not checked yet", apiService("g", "v1", "ns", "api", 443, ""), routeUnavailable},
	} {
		if got := apiServiceRoute(tc.svc); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestAggregatedAPIGroup(t *testing.T) {
	low := apiService("wardle.example.com", "v1alpha1", "ns", "api", 443, "")
	high := apiService("wardle.example.com", "v1beta1", "ns", "api", 443, "")
	high.Spec.VersionPriority = 300
	same := apiService("wardle.example.com", "v1", "ns", "api", 443, "") // same priority as low: Kubernetes version order
	local := apiService("local.example.com", "v1", "", "", 0, "")
	list := []*apiregistrationv1.APIService{low, local, same, high}

	g, ok := aggregatedAPIGroup("wardle.example.com", list)
	if !ok {
		t.Fatal("the group of APIServices with a Service was not aggregated")
	}
	var versions []string
	for _, v := range g.Versions {
		versions = append(versions, v.GroupVersion)
	}
	want := []string{"wardle.example.com/v1beta1", "wardle.example.com/v1", "wardle.example.com/v1alpha1"}
	if !reflect.DeepEqual(versions, want) || g.PreferredVersion.Version != "v1beta1" || g.Name != "wardle.example.com" {
		t.Errorf("group: %+v; want versions %v, v1beta1 preferred", g, want)
	}
	if _, ok := aggregatedAPIGroup("local.example.com", list); ok {
		t.Error("a group of Local APIServices only was aggregated")
	}
	if _, ok := aggregatedAPIGroup("missing.example.com", list); ok {
		t.Error("a group without APIServices was aggregated")
	}
	all := aggregatedAPIGroups(list)
	if len(all) != 1 || !reflect.DeepEqual(all["wardle.example.com"], g) {
		t.Errorf("aggregated groups: %v; want wardle.example.com only", all)
	}
}

// backendRequest is what a backend saw of a request.
type backendRequest struct {
	method, uri string
	header      http.Header
	clientCN    string
}

// aggregatorFixture is an aggregator in front of a TLS backend that, as an aggregated
// API server configured from extension-apiserver-authentication would, demands a
// client certificate of the front-proxy CA.
type aggregatorFixture struct {
	apiServices cache.Indexer
	agg         *aggregator
	server      *httptest.Server // the aggregator, with user alice
	backend     *httptest.Server
	backendCA   []byte
	local       chan string
	mu          sync.Mutex
	seen        []backendRequest
	resolveErr  error
}

func newAggregatorFixture(t *testing.T, backendName string) *aggregatorFixture {
	t.Helper()
	dir := t.TempDir()
	pki := PKI{Dir: dir}
	if err := pki.ensureFrontProxy(); err != nil {
		t.Fatal(err)
	}
	frontCA, err := os.ReadFile(pki.FrontProxyCACert())
	if err != nil {
		t.Fatal(err)
	}
	f := &aggregatorFixture{local: make(chan string, 10)}
	f.backendCA, f.backend = startBackend(t, dir, backendName, frontCA, func(r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.seen = append(f.seen, backendRequest{method: r.Method, uri: r.URL.RequestURI(), header: r.Header.Clone(),
			clientCN: r.TLS.PeerCertificates[0].Subject.CommonName})
	})
	cert, _ := os.ReadFile(pki.FrontProxyClientCert())
	key, _ := os.ReadFile(pki.FrontProxyClientKey())
	f.apiServices = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	var d net.Dialer
	f.agg = &aggregator{
		apiServices: apiregistrationv1listers.NewAPIServiceLister(f.apiServices),
		resolve: func(namespace, name string, port int32) (*url.URL, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.resolveErr != nil {
				return nil, f.resolveErr
			}
			return &url.URL{Scheme: "https", Host: f.backend.Listener.Addr().String()}, nil
		},
		dial: &transport.DialHolder{Dial: d.DialContext}, proxyCert: cert, proxyKey: key,
		serializer: metaCodecs(t), own: sets.New("apps"), log: slog.New(slog.DiscardHandler),
	}
	local := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.local <- r.URL.Path
		_, _ = io.WriteString(w, "local")
	})
	alice := &user.DefaultInfo{Name: "alice", UID: "alice-uid", Groups: []string{"team-a", "system:authenticated"},
		Extra: map[string][]string{"scopes": {"read", "write"}}}
	handler := f.agg.wrap(local)
	f.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		handler.ServeHTTP(w, r.WithContext(genericapirequest.WithUser(r.Context(), alice)))
	}))
	t.Cleanup(f.server.Close)
	return f
}

// metaCodecs write the discovery documents, as the server's codecs do.
func metaCodecs(t *testing.T) runtime.NegotiatedSerializer {
	t.Helper()
	scheme := runtime.NewScheme()
	gv := schema.GroupVersion{Version: "v1"}
	metav1.AddToGroupVersion(scheme, gv)
	scheme.AddUnversionedTypes(gv, &metav1.Status{}, &metav1.APIGroup{}, &metav1.APIGroupList{})
	return serializer.NewCodecFactory(scheme)
}

// startBackend serves TLS as name (a certificate of a CA of its own, returned as PEM),
// accepting only clients with a certificate of clientCA; it records each request with
// seen and answers "<method> <request URI>", or to a watch (watch=1) a first line, flushed,
// and nothing more until the client leaves.
func startBackend(t *testing.T, dir, name string, clientCA []byte, seen func(*http.Request)) ([]byte, *httptest.Server) {
	t.Helper()
	caCert, caKey := filepath.Join(dir, name+"-ca.crt"), filepath.Join(dir, name+"-ca.key")
	if err := createCA(caCert, caKey, name+"-ca"); err != nil {
		t.Fatal(err)
	}
	ca, key, err := loadCAFiles(caCert, caKey)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if err := issue(&x509.Certificate{Subject: pkix.Name{CommonName: name}, DNSNames: []string{name},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}, ca, key, certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(clientCA)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen(r)
		if r.URL.Query().Get("watch") == "1" {
			_, _ = io.WriteString(w, "first\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		_, _ = io.WriteString(w, r.Method+" "+r.URL.RequestURI())
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caPEM, err := os.ReadFile(caCert)
	if err != nil {
		t.Fatal(err)
	}
	return caPEM, srv
}

func (f *aggregatorFixture) add(t *testing.T, s *apiregistrationv1.APIService) {
	t.Helper()
	if err := f.apiServices.Add(s); err != nil {
		t.Fatal(err)
	}
}

func (f *aggregatorFixture) last(t *testing.T) backendRequest {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) == 0 {
		t.Fatal("the backend saw no request")
	}
	return f.seen[len(f.seen)-1]
}

func (f *aggregatorFixture) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.seen)
}

// do sends method path with header h through the aggregator and gives the answer.
func (f *aggregatorFixture) do(t *testing.T, method, path string, h http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, f.server.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAggregatorProxy: a request for a group version whose APIService names a Service
// goes to the Service's server when the APIService is Available, with the front-proxy
// client certificate and the user in the X-Remote-* headers (whatever the client sent
// in them), its path and query kept, streamed; otherwise it is answered here.
func TestAggregatorProxy(t *testing.T) {
	f := newAggregatorFixture(t, "api.wardle.svc")
	good := apiService("wardle.example.com", "v1alpha1", "wardle", "api", 7443, apiregistrationv1.ConditionTrue)
	good.Spec.CABundle = f.backendCA
	f.add(t, good)

	spoofed := http.Header{"X-Remote-User": {"mallory"}, "X-Remote-Group": {"system:masters"}, "X-Remote-Extra-Evil": {"yes"}}
	code, body := f.do(t, "POST", "/apis/wardle.example.com/v1alpha1/namespaces/a/flunders?dryRun=All&fieldManager=m", spoofed)
	if code != 200 || body != "POST /apis/wardle.example.com/v1alpha1/namespaces/a/flunders?dryRun=All&fieldManager=m" {
		t.Fatalf("proxied POST: %d %q", code, body)
	}
	got := f.last(t)
	if got.clientCN != FrontProxyClientName {
		t.Errorf("client certificate %q, want %q", got.clientCN, FrontProxyClientName)
	}
	for header, want := range map[string][]string{
		"X-Remote-User":         {"alice"},
		"X-Remote-Uid":          {"alice-uid"},
		"X-Remote-Group":        {"team-a", "system:authenticated"},
		"X-Remote-Extra-Scopes": {"read", "write"},
		"X-Remote-Extra-Evil":   nil,
	} {
		if v := got.header.Values(header); !reflect.DeepEqual(v, want) {
			t.Errorf("%s: %q, want %q", header, v, want)
		}
	}
	if code, body := f.do(t, "GET", "/apis/wardle.example.com/v1alpha1", nil); code != 200 || body != "GET /apis/wardle.example.com/v1alpha1" {
		t.Errorf("proxied discovery: %d %q", code, body)
	}

	// A watch streams: its first event arrives while the backend still holds it open.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", f.server.URL+"/apis/wardle.example.com/v1alpha1/flunders?watch=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "first\n" {
		t.Errorf("watch: %q, %v; want its first line while it is open", line, err)
	}
	cancel()
	resp.Body.Close()

	// What is not the aggregated server's is the server's own.
	f.add(t, apiService("local.example.com", "v1", "", "", 0, apiregistrationv1.ConditionTrue))
	for _, path := range []string{"/apis/local.example.com/v1/things", "/apis/other.example.com/v1", "/api/v1/pods", "/apis", "/apis/apps"} {
		before := f.count()
		if code, body := f.do(t, "GET", path, nil); code != 200 || body != "local" {
			t.Errorf("GET %s: %d %q, want the server's own answer", path, code, body)
		}
		if got := <-f.local; got != path || f.count() != before {
			t.Errorf("GET %s: the server's own handler saw %q, the backend %d requests", path, got, f.count()-before)
		}
	}
}

// TestAggregatorRefuses: what keeps a request from the aggregated server: an APIService
// not Available, a Service without endpoints, a backend whose certificate the caBundle
// did not sign or that does not name <service>.<namespace>.svc (unless
// insecureSkipTLSVerify); each is 503.
func TestAggregatorRefuses(t *testing.T) {
	f := newAggregatorFixture(t, "api.wardle.svc")
	otherCA, _ := startBackend(t, t.TempDir(), "api.wardle.svc", nil, func(*http.Request) {})

	unavailable := apiService("down.example.com", "v1", "wardle", "api", 443, apiregistrationv1.ConditionFalse)
	unavailable.Spec.CABundle = f.backendCA
	wrongCA := apiService("wrongca.example.com", "v1", "wardle", "api", 443, apiregistrationv1.ConditionTrue)
	wrongCA.Spec.CABundle = otherCA
	wrongName := apiService("wrongname.example.com", "v1", "other", "api", 443, apiregistrationv1.ConditionTrue)
	wrongName.Spec.CABundle = f.backendCA
	insecure := apiService("insecure.example.com", "v1", "other", "api", 443, apiregistrationv1.ConditionTrue)
	insecure.Spec.InsecureSkipTLSVerify = true
	for _, s := range []*apiregistrationv1.APIService{unavailable, wrongCA, wrongName, insecure} {
		f.add(t, s)
	}
	for _, tc := range []struct {
		path string
		code int
		body string
	}{
		{"/apis/down.example.com/v1/things", 503, "service unavailable\n"},
		{"/apis/wrongca.example.com/v1/things", 503, "x509: certificate signed by unknown authority"},
		{"/apis/wrongname.example.com/v1/things", 503, "x509: certificate is valid for api.wardle.svc, not api.other.svc"},
		{"/apis/insecure.example.com/v1/things", 200, "GET /apis/insecure.example.com/v1/things"},
	} {
		code, body := f.do(t, "GET", tc.path, nil)
		if code != tc.code || !strings.Contains(body, tc.body) {
			t.Errorf("GET %s: %d %q, want %d %q", tc.path, code, body, tc.code, tc.body)
		}
	}
	f.mu.Lock()
	f.resolveErr = errors.New(`no endpoints available for service "api"`)
	f.mu.Unlock()
	if code, body := f.do(t, "GET", "/apis/insecure.example.com/v1/things", nil); code != 503 || body != "service unavailable\n" {
		t.Errorf("without endpoints: %d %q, want 503 service unavailable", code, body)
	}
}

// TestAggregatorGroupDiscovery: /apis/<group> of an aggregated group lists the group's
// APIServices; the server's own groups are its own to describe.
func TestAggregatorGroupDiscovery(t *testing.T) {
	f := newAggregatorFixture(t, "api.wardle.svc")
	f.add(t, apiService("wardle.example.com", "v1alpha1", "wardle", "api", 443, apiregistrationv1.ConditionFalse))
	beta := apiService("wardle.example.com", "v1beta1", "wardle", "api", 443, apiregistrationv1.ConditionFalse)
	beta.Spec.VersionPriority = 300
	f.add(t, beta)
	f.add(t, apiService("apps", "v1", "wardle", "api", 443, apiregistrationv1.ConditionTrue))
	code, body := f.do(t, "GET", "/apis/wardle.example.com", http.Header{"Accept": {"application/json"}})
	var g metav1.APIGroup
	if err := json.Unmarshal([]byte(body), &g); code != 200 || err != nil {
		t.Fatalf("GET /apis/wardle.example.com: %d %s (%v)", code, body, err)
	}
	if g.Kind != "APIGroup" || g.PreferredVersion.GroupVersion != "wardle.example.com/v1beta1" || len(g.Versions) != 2 ||
		g.Versions[1].GroupVersion != "wardle.example.com/v1alpha1" {
		t.Errorf("APIGroup: %+v; want v1beta1 (preferred), v1alpha1", g)
	}
	if code, body := f.do(t, "GET", "/apis/apps", nil); code != 200 || body != "local" {
		t.Errorf("GET /apis/apps: %d %q, want the server's own answer", code, body)
	}
	<-f.local
}

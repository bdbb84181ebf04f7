package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	genericfeatures "k8s.io/apiserver/pkg/features"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	apiproxy "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/transport"
	"k8s.io/component-base/metrics/legacyregistry"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	apiregistrationv1helper "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1/helper"
	kubeaggregator "k8s.io/kube-aggregator/pkg/apiserver"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	aggregatorinformers "k8s.io/kube-aggregator/pkg/client/informers/externalversions"
	apiregistrationv1listers "k8s.io/kube-aggregator/pkg/client/listers/apiregistration/v1"
	localavailability "k8s.io/kube-aggregator/pkg/controllers/status/local"
	availabilitymetrics "k8s.io/kube-aggregator/pkg/controllers/status/metrics"
	remoteavailability "k8s.io/kube-aggregator/pkg/controllers/status/remote"
)

// API aggregation, as kube-apiserver's kube-aggregator does it: the group versions of
// APIServices that name a Service are served by that Service's server (an aggregated
// API server), to which this server passes their requests on.
//
//   - /apis/<group>/<version> and all below it, for the APIService <version>.<group>
//     with spec.service: while its Available condition is not True, 503 with the text
//     "service unavailable"; else, once this server has authenticated, authorized and
//     limited the request as any other, it goes to https://<a ready endpoint of the
//     Service>:<the endpoint port of the Service port spec.service.port> (picked from
//     the Service's EndpointSlices), dialled through the cluster network
//     (Config.ClusterDial). The backend's certificate must be signed by spec.caBundle
//     for the name <service>.<namespace>.svc (unchecked with insecureSkipTLSVerify).
//     This server presents the front-proxy client certificate (frontproxypki.go) and
//     names the request's user in X-Remote-User, X-Remote-Uid, X-Remote-Group (one per
//     group) and X-Remote-Extra-<key> (one per value), which the ConfigMap
//     kube-system/extension-apiserver-authentication (authenticationtrust.go) tells
//     the backend to believe from that certificate only. Watches stream and upgrades
//     are carried through; a backend that cannot be reached is 503 with the error's text.
//   - /apis/<group>, for a group with such an APIService that is not one of this
//     server's own: the group's APIServices as an APIGroup, by version priority.
//   - Discovery: /apis lists those groups (discoverygroups.go). Its aggregated form
//     (apidiscovery.k8s.io/v2) has each such group version with the resources the
//     backend's own discovery gives, fetched (as system:kube-aggregator in
//     system:masters) and refreshed every minute by kube-aggregator's discovery
//     manager, and marked Stale while the backend does not answer.
//   - Status: kube-aggregator's availability controllers keep each APIService's
//     Available condition: a Local one's True; one with a Service False, with reason
//     ServiceNotFound, ServicePortError, EndpointsNotFound, MissingEndpoints or
//     FailedDiscoveryCheck, until a GET of /apis/<group>/<version> at an endpoint
//     answers 2xx, then True, reason Passed, "all checks passed".
//
// An APIService with a Service for a group version this server serves itself takes
// its requests over; the discovery of this server's own groups stays its own.
type aggregator struct {
	apiServices apiregistrationv1listers.APIServiceLister
	// resolve is where a Service's server is reached: one of its endpoints.
	resolve func(namespace, name string, port int32) (*url.URL, error)
	// dial reaches the cluster network.
	dial *transport.DialHolder
	// proxyCert and proxyKey are the front-proxy client certificate and key (PEM).
	proxyCert, proxyKey []byte
	// serializer writes the groups' discovery documents.
	serializer runtime.NegotiatedSerializer
	// own are the groups the server's own rows serve.
	own sets.Set[string]
	log *slog.Logger
}

// route is what the aggregator does with a request.
type route int

const (
	// routeLocal: the server serves it itself.
	routeLocal route = iota
	// routeUnavailable: 503, the aggregated server is not Available.
	routeUnavailable
	// routeProxy: the aggregated server serves it.
	routeProxy
)

// apiServiceRoute is the route of a request for a group version whose APIService is
// svc (nil: none).
func apiServiceRoute(svc *apiregistrationv1.APIService) route {
	switch {
	case svc == nil || svc.Spec.Service == nil:
		return routeLocal
	case !apiregistrationv1helper.IsAPIServiceConditionTrue(svc, apiregistrationv1.Available):
		return routeUnavailable
	default:
		return routeProxy
	}
}

// splitGroupPath splits a path under /apis: "/apis/<group>" (or with a trailing
// slash) gives the group and an empty version, "/apis/<group>/<version>[/...]" both;
// any other path ok false.
func splitGroupPath(path string) (group, version string, ok bool) {
	rest, found := strings.CutPrefix(path, "/apis/")
	if !found {
		return "", "", false
	}
	parts := strings.SplitN(rest, "/", 3)
	if parts[0] == "" {
		return "", "", false
	}
	if len(parts) == 1 {
		return parts[0], "", true
	}
	if parts[1] == "" && len(parts) == 2 {
		return parts[0], "", true
	}
	if parts[1] == "" {
		return "", "", false
	}
	return parts[0], parts[1], true
}

// aggregatedAPIGroup is the discovery entry of group from the APIServices among list
// that are of it, when one of them names a Service: their versions by version
// priority (highest first, then by Kubernetes version order), the first preferred.
func aggregatedAPIGroup(group string, list []*apiregistrationv1.APIService) (metav1.APIGroup, bool) {
	var ofGroup []*apiregistrationv1.APIService
	remote := false
	for _, s := range list {
		if s.Spec.Group == group {
			ofGroup = append(ofGroup, s)
			remote = remote || s.Spec.Service != nil
		}
	}
	if !remote {
		return metav1.APIGroup{}, false
	}
	out := metav1.APIGroup{Name: group}
	for _, s := range apiregistrationv1helper.SortedByGroupAndVersion(ofGroup)[0] {
		out.Versions = append(out.Versions, metav1.GroupVersionForDiscovery{GroupVersion: group + "/" + s.Spec.Version, Version: s.Spec.Version})
	}
	out.PreferredVersion = out.Versions[0]
	return out, true
}

// aggregatedAPIGroups are the discovery entries of the groups among list that have an
// APIService naming a Service.
func aggregatedAPIGroups(list []*apiregistrationv1.APIService) map[string]metav1.APIGroup {
	out := map[string]metav1.APIGroup{}
	for _, s := range list {
		if _, done := out[s.Spec.Group]; done || s.Spec.Service == nil || s.Spec.Group == "" {
			continue
		}
		if g, ok := aggregatedAPIGroup(s.Spec.Group, list); ok {
			out[s.Spec.Group] = g
		}
	}
	return out
}

// wrap has the aggregator answer what is its to answer and next the rest. It goes
// inside the server's filters, so requests reach it authenticated and authorized.
func (a *aggregator) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		group, version, ok := splitGroupPath(req.URL.Path)
		switch {
		case !ok:
			next.ServeHTTP(w, req)
		case version == "":
			if !a.serveGroup(w, req, group) {
				next.ServeHTTP(w, req)
			}
		default:
			svc, err := a.apiServices.Get(version + "." + group)
			if err != nil {
				svc = nil
			}
			switch apiServiceRoute(svc) {
			case routeLocal:
				next.ServeHTTP(w, req)
			case routeUnavailable:
				http.Error(w, "service unavailable", http.StatusServiceUnavailable)
			case routeProxy:
				a.proxy(w, req, svc)
			}
		}
	})
}

// serveGroup answers /apis/<group> for a group an APIService with a Service serves
// (not one of the server's own), saying whether it did.
func (a *aggregator) serveGroup(w http.ResponseWriter, req *http.Request, group string) bool {
	if a.own.Has(group) {
		return false
	}
	list, err := a.apiServices.List(labels.Everything())
	if err != nil {
		return false
	}
	g, ok := aggregatedAPIGroup(group, list)
	if !ok {
		return false
	}
	discovery.NewAPIGroupHandler(a.serializer, g).ServeHTTP(w, req)
	return true
}

// proxy passes req on to svc's server as the request's user.
func (a *aggregator) proxy(w http.ResponseWriter, req *http.Request, svc *apiregistrationv1.APIService) {
	user, ok := genericapirequest.UserFrom(req.Context())
	if !ok {
		http.Error(w, "missing user", http.StatusInternalServerError)
		return
	}
	ref := svc.Spec.Service
	port := int32(443)
	if ref.Port != nil {
		port = *ref.Port
	}
	endpoint, err := a.resolve(ref.Namespace, ref.Name, port)
	if err != nil {
		a.log.InfoContext(req.Context(), "aggregated API server not reached", "apiservice", svc.Name, "err", err)
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return
	}
	rt, err := transport.New(remoteavailability.BuildTransportConfig(a.dial, a.proxyCert, a.proxyKey, svc))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	uid := ""
	if utilfeature.DefaultFeatureGate.Enabled(genericfeatures.RemoteRequestHeaderUID) {
		uid = user.GetUID()
	}
	rt = transport.NewAuthProxyRoundTripper(user.GetName(), uid, user.GetGroups(), user.GetExtra(), rt)
	location := &url.URL{Scheme: "https", Host: endpoint.Host, Path: req.URL.Path, RawQuery: req.URL.Query().Encode()}
	out, cancel := apiproxy.NewRequestForProxy(location, req)
	defer cancel()
	upgrade := httpstream.IsUpgradeRequest(req)
	if upgrade {
		// An upgrade is dialled directly, past rt: the headers go on the request.
		transport.SetAuthProxyHeaders(out, user.GetName(), uid, user.GetGroups(), user.GetExtra())
	}
	proxy.NewUpgradeAwareHandler(location, rt, true, upgrade, textErrorResponder{}).ServeHTTP(w, out)
}

// textErrorResponder answers a backend that could not be reached with 503 and the
// error's text.
type textErrorResponder struct{}

func (textErrorResponder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	http.Error(w, err.Error(), http.StatusServiceUnavailable)
}

// discoveryHandler is how the discovery manager reaches the server of the APIService
// called name: as a request of the aggregator's own, whatever the APIService's
// availability.
func (a *aggregator) discoveryHandler(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		svc, err := a.apiServices.Get(name)
		if err != nil || svc.Spec.Service == nil {
			http.Error(w, "service unavailable", http.StatusServiceUnavailable)
			return
		}
		a.proxy(w, req, svc)
	})
}

// aggregation is the aggregator with what keeps it informed: the APIServices'
// informer, the availability controllers and the discovery manager.
type aggregation struct {
	*aggregator
	informers aggregatorinformers.SharedInformerFactory
	kube      informers.SharedInformerFactory
	remote    *remoteavailability.AvailableConditionController
	local     *localavailability.AvailableConditionController
	discovery kubeaggregator.DiscoveryAggregationController
	groups    *listedGroups
	// informer is the APIServices' informer.
	informer cache.SharedIndexInformer
}

// availabilityMetrics are kube-aggregator's APIService availability metrics, one set
// per process, registered in the metrics /metrics serves.
var availabilityMetrics = sync.OnceValue(func() *availabilitymetrics.Metrics {
	m := availabilitymetrics.New()
	_ = m.Register(legacyregistry.Register, legacyregistry.CustomRegister)
	return m
})

// aggregationDeps are what the aggregation is built from.
type aggregationDeps struct {
	loopback   *rest.Config
	kube       informers.SharedInformerFactory
	dial       dialFunc
	pki        PKI
	serializer runtime.NegotiatedSerializer
	own        sets.Set[string]
	log        *slog.Logger
}

// newAggregation builds the aggregator and its controllers; start runs them.
func newAggregation(d aggregationDeps) (*aggregation, error) {
	client, err := aggregatorclient.NewForConfig(d.loopback)
	if err != nil {
		return nil, fmt.Errorf("aggregator client: %w", err)
	}
	cert, err := os.ReadFile(d.pki.FrontProxyClientCert())
	if err != nil {
		return nil, fmt.Errorf("front-proxy client certificate: %w", err)
	}
	key, err := os.ReadFile(d.pki.FrontProxyClientKey())
	if err != nil {
		return nil, fmt.Errorf("front-proxy client key: %w", err)
	}
	factory := aggregatorinformers.NewSharedInformerFactory(client, 5*time.Minute)
	apiServices := factory.Apiregistration().V1().APIServices()
	services := d.kube.Core().V1().Services()
	serviceLister := services.Lister()
	slices, err := apiproxy.NewEndpointSliceIndexerGetter(d.kube.Discovery().V1().EndpointSlices())
	if err != nil {
		return nil, fmt.Errorf("aggregator: %w", err)
	}
	dial := &transport.DialHolder{Dial: d.dial}
	a := &aggregator{
		apiServices: apiServices.Lister(),
		resolve: func(namespace, name string, port int32) (*url.URL, error) {
			return apiproxy.ResolveEndpoint(serviceLister, slices, namespace, name, port)
		},
		dial: dial, proxyCert: cert, proxyKey: key, serializer: d.serializer, own: d.own, log: d.log,
	}
	metrics := availabilityMetrics()
	remote, err := remoteavailability.New(apiServices, services, d.kube.Discovery().V1().EndpointSlices(),
		client.ApiregistrationV1(), dial, func() ([]byte, []byte) { return cert, key }, resolverFunc(a.resolve), metrics)
	if err != nil {
		return nil, fmt.Errorf("aggregator: %w", err)
	}
	local, err := localavailability.New(apiServices, client.ApiregistrationV1(), metrics)
	if err != nil {
		return nil, fmt.Errorf("aggregator: %w", err)
	}
	return &aggregation{aggregator: a, informers: factory, kube: d.kube, remote: remote, local: local,
		informer: apiServices.Informer()}, nil
}

// resolverFunc is a function as kube-aggregator's service resolver.
type resolverFunc func(namespace, name string, port int32) (*url.URL, error)

func (f resolverFunc) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	return f(namespace, name, port)
}

// start has the aggregation run until ctx ends, its loops started with spawn, and
// returns once the APIServices are known and the discovery of those that name a Service
// has been tried once. Aggregated discovery goes to manager, the groups' /apis entries
// to groups.
func (a *aggregation) start(ctx context.Context, manager aggregated.ResourceManager, groups *listedGroups, spawn func(func())) error {
	a.discovery = kubeaggregator.NewDiscoveryManager(manager.WithSource(aggregated.AggregatorSource))
	a.groups = groups
	_, err := a.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { a.changed(o) },
		UpdateFunc: func(_, o any) { a.changed(o) },
		DeleteFunc: func(o any) {
			if tomb, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = tomb.Obj
			}
			if svc, ok := o.(*apiregistrationv1.APIService); ok {
				a.discovery.RemoveAPIService(svc.Name)
			}
			a.relist()
		},
	})
	if err != nil {
		return fmt.Errorf("aggregator: %w", err)
	}
	a.informers.Start(ctx.Done())
	a.kube.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), a.informer.HasSynced) {
		return ctx.Err()
	}
	spawn(func() { a.remote.Run(5, ctx.Done()) })
	spawn(func() { a.local.Run(5, ctx.Done()) })
	synced := make(chan struct{})
	spawn(func() { a.discovery.Run(ctx.Done(), synced) })
	select {
	case <-synced:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// changed tells the discovery manager of an APIService added or changed.
func (a *aggregation) changed(o any) {
	svc, ok := o.(*apiregistrationv1.APIService)
	if !ok {
		return
	}
	if svc.Spec.Service == nil {
		a.discovery.RemoveAPIService(svc.Name)
	} else {
		a.discovery.AddAPIService(svc, a.discoveryHandler(svc.Name))
	}
	a.relist()
}

// relist lists the groups of the APIServices that name a Service.
func (a *aggregation) relist() {
	list, err := a.apiServices.List(labels.Everything())
	if err != nil {
		return
	}
	a.groups.setAggregated(aggregatedAPIGroups(list))
}

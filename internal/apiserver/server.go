package apiserver

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
	apiserverconfig "k8s.io/apiserver/pkg/apis/apiserver"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/group"
	"k8s.io/apiserver/pkg/authentication/request/anonymous"
	"k8s.io/apiserver/pkg/authentication/request/bearertoken"
	"k8s.io/apiserver/pkg/authentication/request/union"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	tokencache "k8s.io/apiserver/pkg/authentication/token/cache"
	"k8s.io/apiserver/pkg/authentication/token/tokenfile"
	tokenunion "k8s.io/apiserver/pkg/authentication/token/union"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	authzunion "k8s.io/apiserver/pkg/authorization/union"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	genericfilters "k8s.io/apiserver/pkg/server/filters"
	"k8s.io/apiserver/pkg/server/options"
	serverstorage "k8s.io/apiserver/pkg/server/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	apiproxy "k8s.io/apiserver/pkg/util/proxy"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	policyv1client "k8s.io/client-go/kubernetes/typed/policy/v1"
	basecompatibility "k8s.io/component-base/compatibility"
	openapiutil "k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubelab/kubelab/internal/apiserver/admission"
	"github.com/kubelab/kubelab/internal/apiserver/auth"
	"github.com/kubelab/kubelab/internal/apiserver/auth/serviceaccount"
	"github.com/kubelab/kubelab/internal/apiserver/openapi"
	"github.com/kubelab/kubelab/internal/version"
)

// Server is kubelab's API server.
type Server struct {
	cfg   Config
	pki   PKI
	log   *slog.Logger
	ready chan struct{}
	url   string
	// tokens authenticate bearer tokens (TokenReview asks them too); set by applyAuth.
	tokens authenticator.Token
	// serviceAccounts issue (serviceaccounts/token) and authenticate service account
	// tokens; set by Run.
	serviceAccounts *serviceAccountTokens

	// The listeners besides the main one (AddListener): pending until Run serves, then
	// live's; stopped once Run has returned.
	mu      sync.Mutex
	pending []net.Listener
	live    *multiListener
	stopped bool
}

// New checks cfg and prepares a Server; Run starts it.
func New(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("apiserver config: %w", err)
	}
	return &Server{cfg: cfg, pki: PKI{Dir: filepath.Join(cfg.DataDir, "pki")}, log: cfg.Logger, ready: make(chan struct{})}, nil
}

// AddListener has the server serve HTTPS on l too, with the same handler, certificate
// and authentication as its main address: a socket the caller opened in another network
// namespace, say, so that pods reach the API there. It may be called any time after New,
// before Run or while it serves; the server closes l when Run returns. After Run has
// returned, l is closed and an error returned.
func (s *Server) AddListener(l net.Listener) error {
	if l == nil {
		return errors.New("apiserver: add listener: nil listener")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.stopped:
		l.Close()
		return fmt.Errorf("apiserver: add listener %s: %w", l.Addr(), errServerStopped)
	case s.live != nil:
		if err := s.live.add(l); err != nil {
			return fmt.Errorf("apiserver: add listener %s: %w", l.Addr(), err)
		}
	default:
		s.pending = append(s.pending, l)
	}
	return nil
}

// serveListeners makes the listener the HTTPS server accepts from: primary, the
// configured extra listeners and the ones added so far.
func (s *Server) serveListeners(primary net.Listener) *multiListener {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := newMultiListener(primary, s.log)
	for _, l := range append(append([]net.Listener(nil), s.cfg.ExtraListeners...), s.pending...) {
		_ = m.add(l)
	}
	s.pending, s.live = nil, m
	return m
}

// closeListeners ends the listeners' service when Run returns, whether or not it got
// to serve them.
func (s *Server) closeListeners() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopped = true
	if s.live != nil {
		s.live.Close()
	} else {
		for _, l := range s.cfg.ExtraListeners {
			l.Close()
		}
	}
	for _, l := range s.pending {
		l.Close()
	}
	s.pending = nil
}

// Ready is closed once the server serves requests and the built-in namespaces exist.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// URL is the server's https URL; valid after Ready.
func (s *Server) URL() string { return s.url }

// KubeconfigPath is where the admin kubeconfig is written.
func (s *Server) KubeconfigPath() string { return s.cfg.KubeconfigPath }

// PKI is the server's certificate authority and credentials.
func (s *Server) PKI() PKI { return s.pki }

// Issuer is the service account issuer whose tokens the server signs (the first
// --service-account-issuer).
func (s *Server) Issuer() string { return s.cfg.ServiceAccountIssuers[0] }

// allResources is the registry: every row kubelab serves.
func allResources() []resource {
	var rs []resource
	for _, r := range coreResources() {
		r.version = "v1"
		rs = append(rs, r)
	}
	rs = append(rs, appsResources()...)
	rs = append(rs, storageResources()...)
	rs = append(rs, networkingResources()...)
	rs = append(rs, serviceCIDRResources()...)
	rs = append(rs, discoveryResources()...)
	rs = append(rs, coordinationResources()...)
	rs = append(rs, eventsResources()...)
	rs = append(rs, rbacResources()...)
	rs = append(rs, snapshotResources()...)
	rs = append(rs, admissionRegistrationResources()...)
	rs = append(rs, replicationControllerResources()...)
	rs = append(rs, batchResources()...)
	rs = append(rs, autoscalingResources()...)
	rs = append(rs, policyResources()...)
	rs = append(rs, schedulingResources()...)
	rs = append(rs, nodeResources()...)
	rs = append(rs, certificatesResources()...)
	rs = append(rs, flowcontrolResources()...)
	rs = append(rs, apiregistrationResources()...)
	rs = append(rs, storageMigrationResources()...)
	rs = append(rs, draResources()...)
	return rs
}

// servedGroupVersions are the group versions of the rows and the extra endpoints, in
// the order of the rows, each once.
func servedGroupVersions(resources []resource, extra map[string]map[string]rest.Storage) [][2]string {
	seen := map[[2]string]bool{}
	var out [][2]string
	add := func(gv [2]string) {
		if !seen[gv] {
			seen[gv] = true
			out = append(out, gv)
		}
	}
	for _, r := range resources {
		for _, v := range append([]string{r.version}, r.alsoVersions...) {
			add([2]string{r.group, v})
		}
	}
	for _, g := range slices.Sorted(maps.Keys(extra)) {
		add([2]string{g, "v1"})
	}
	add([2]string{"apiextensions.k8s.io", "v1"})
	add([2]string{"metrics.k8s.io", "v1beta1"})
	return out
}

// Run serves until ctx ends.
func (s *Server) Run(ctx context.Context) error {
	// The extra listeners are the caller's to open and Run's to close.
	defer s.closeListeners()
	s.applyGC(ctx)
	_, cidr, _ := net.ParseCIDR(s.cfg.ServiceCIDR)
	kubernetesIP := addIP(cidr.IP, 1)
	servingIPs := []net.IP{kubernetesIP}
	if s.cfg.AdvertiseAddress != "" {
		servingIPs = append(servingIPs, net.ParseIP(s.cfg.AdvertiseAddress))
	}
	if bind := net.ParseIP(s.cfg.BindAddress); !bind.IsUnspecified() {
		servingIPs = append(servingIPs, bind)
	}
	if err := s.pki.ensure(servingIPs...); err != nil {
		return fmt.Errorf("apiserver pki: %w", err)
	}
	resources := allResources()
	scheme, codecs, err := newScheme(resources)
	if err != nil {
		return fmt.Errorf("apiserver scheme: %w", err)
	}

	l, err := net.Listen("tcp", net.JoinHostPort(s.cfg.BindAddress, strconv.Itoa(s.cfg.Port)))
	if err != nil {
		return fmt.Errorf("apiserver listen: %w", err)
	}
	listener := newTrackingListener(s.serveListeners(l))
	defer listener.Close()
	defer listener.closeAll()
	s.url = "https://" + listener.Addr().String()

	cfg := genericapiserver.NewConfig(codecs)
	applyLimits(cfg)
	info := version.Info()
	cfg.EffectiveVersion = kubelabVersion{basecompatibility.NewEffectiveVersionFromString(info.Major+"."+info.Minor, "", ""), info}
	if err := s.applyServing(cfg, listener); err != nil {
		listener.Close()
		return err
	}
	// The server's own clients (authorizers, admission plugins, bootstrap) go through
	// the loopback connection as system:apiserver, in group system:masters.
	client, err := kubernetes.NewForConfig(cfg.LoopbackClientConfig)
	if err != nil {
		listener.Close()
		return err
	}
	factory := informers.NewSharedInformerFactory(client, 10*time.Minute)
	if s.serviceAccounts, err = newServiceAccountTokens(s.pki, s.cfg.ServiceAccountIssuers, client, factory); err != nil {
		listener.Close()
		return fmt.Errorf("apiserver: %w", err)
	}
	if err := s.applyAuth(cfg, factory); err != nil {
		listener.Close()
		return err
	}
	// Watches, the pods' streaming subresources and the proxy subresources run as long
	// as their clients want, past the request timeout.
	cfg.LongRunningFunc = genericfilters.BasicLongRunningRequestCheck(sets.NewString("watch", "proxy"),
		sets.NewString("attach", "exec", "log", "portforward", "proxy"))
	kubelet, err := newKubeletClient(s.pki, s.cfg.KubeletPreferredAddressTypes, clusterDialer(s.cfg))
	if err != nil {
		listener.Close()
		return fmt.Errorf("apiserver: %w", err)
	}
	// The CRD server behind this one describes its kinds with the same namer.
	namer := openapinamer.NewDefinitionNamer(scheme, apiextensionsapiserver.Scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(openapi.Definitions, namer)
	cfg.OpenAPIConfig.Info.Title, cfg.OpenAPIConfig.Info.Version = "Kubernetes", info.GitVersion
	cfg.OpenAPIConfig.GetDefinitionName = definitionName(namer)
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(openapi.Definitions, namer)
	cfg.OpenAPIV3Config.Info.Title, cfg.OpenAPIV3Config.Info.Version = "Kubernetes", info.GitVersion
	cfg.OpenAPIV3Config.GetDefinitionName = definitionName(namer)

	resourceConfig := serverstorage.NewResourceConfig()
	for _, r := range resources {
		resourceConfig.EnableVersions(r.gv())
		for _, v := range r.alsoVersions {
			resourceConfig.EnableVersions(schema.GroupVersion{Group: r.group, Version: v})
		}
	}
	cfg.MergedResourceConfig = resourceConfig
	etcdOpts, err := s.applyStorage(cfg, scheme, codecs, resources, resourceConfig)
	if err != nil {
		listener.Close()
		return err
	}
	// The custom resource server adds its groups to the same aggregated discovery.
	cfg.AggregatedDiscoveryGroupManager = aggregated.NewResourceManager("apis")

	dialCluster := clusterDialer(s.cfg)
	chain, err := admission.New(admission.Deps{Client: client, Factory: factory, Loopback: cfg.LoopbackClientConfig,
		Authorizer: cfg.Authorization.Authorizer, Stop: cfg.DrainedNotify(), ClusterDial: dialCluster})
	if err != nil {
		listener.Close()
		return fmt.Errorf("apiserver: %w", err)
	}
	cfg.AdmissionControl = chain

	etcdClient, err := newEtcdClient(ctx, &s.cfg)
	if err != nil {
		listener.Close()
		return fmt.Errorf("apiserver etcd client: %w", err)
	}
	defer etcdClient.Close()
	alloc := newServiceAllocator(etcdReservations{etcdClient}, s.cfg.EtcdPrefix, cidr, s.log)
	// Loops started once the server serves end before the etcd client closes.
	var background sync.WaitGroup
	defer background.Wait()

	crds, err := newCustomResourceServer(*cfg, factory, *etcdOpts, dialCluster)
	if err != nil {
		listener.Close()
		return fmt.Errorf("apiserver: %w", err)
	}
	extra := reviews(cfg.Authorization.Authorizer, cfg.RuleResolver, s.tokens)
	gvs := servedGroupVersions(resources, extra)
	own := sets.New[string]()
	for _, gv := range gvs {
		own.Insert(gv[0])
	}
	aggregation, err := newAggregation(aggregationDeps{loopback: cfg.LoopbackClientConfig, kube: factory, dial: dialCluster,
		pki: s.pki, serializer: codecs, own: own, log: s.log})
	if err != nil {
		listener.Close()
		return fmt.Errorf("apiserver: %w", err)
	}
	// The aggregator answers inside the filters (authentication, authorization, limits),
	// before the server's own handlers: an APIService naming a Service takes its group
	// version over.
	cfg.BuildHandlerChainFunc = func(h http.Handler, c *genericapiserver.Config) http.Handler {
		return genericapiserver.DefaultBuildHandlerChain(aggregation.wrap(h), c)
	}
	server, err := cfg.Complete(factory).New("kubelab-apiserver", crds.GenericAPIServer)
	if err != nil {
		listener.Close()
		return fmt.Errorf("apiserver: %w", err)
	}
	server.DiscoveryGroupManager.AddGroup(apiextensionsGroup())
	groups := newListedGroups(server.DiscoveryGroupManager, own)
	if err := listCustomGroups(crds, groups); err != nil {
		listener.Close()
		return fmt.Errorf("apiserver: %w", err)
	}
	// Ready once the APIServices are known, so that no request for an aggregated group
	// version finds this server's 404 instead.
	server.AddPostStartHookOrDie("kubelab-aggregator", func(hook genericapiserver.PostStartHookContext) error {
		if err := aggregation.start(hook, server.AggregatedDiscoveryGroupManager, groups, background.Go); err != nil {
			// Only a stop ends it early; a failed post-start hook would exit the process.
			s.log.InfoContext(ctx, "aggregator not started", "err", err)
		}
		return nil
	})
	trust, err := s.authenticationTrust()
	if err != nil {
		listener.Close()
		return fmt.Errorf("apiserver: %w", err)
	}
	if err := discoverableIssuer(s.serviceAccounts.issuer.Name()); err != nil {
		s.log.InfoContext(ctx, "service account issuer discovery not served", "err", err)
	} else if err := installOpenIDMetadata(server.Handler.NonGoRestfulMux, s.serviceAccounts, s.jwksURI(listener.Addr())); err != nil {
		listener.Close()
		return fmt.Errorf("apiserver: %w", err)
	}
	// Watches never go idle, so a graceful HTTP shutdown would wait its whole timeout
	// for them; clients reconnect anyway.
	server.ShutdownTimeout = 3 * time.Second
	slices, err := apiproxy.NewEndpointSliceIndexerGetter(factory.Discovery().V1().EndpointSlices())
	if err != nil {
		return fmt.Errorf("apiserver: %w", err)
	}
	deps := storageDeps{alloc: alloc, kubelet: kubelet, tokens: s.serviceAccounts, pdbs: client.PolicyV1(), etcd: etcdClient,
		cluster: newClusterTransport(dialCluster), endpointSlices: slices, authorizer: cfg.Authorization.Authorizer}
	if err := installAPIs(server, scheme, codecs, resources, extra, cfg.RESTOptionsGetter, deps); err != nil {
		return err
	}
	server.AddPostStartHookOrDie("kubelab-bootstrap", func(hook genericapiserver.PostStartHookContext) error {
		loopback, err := kubernetes.NewForConfig(hook.LoopbackClientConfig)
		if err != nil {
			return err
		}
		ks := &kubernetesService{client: loopback, clusterIP: kubernetesIP.String(),
			targetPort: int32(listener.Addr().(*net.TCPAddr).Port), address: s.cfg.AdvertiseAddress, log: s.log}
		if s.cfg.AdvertiseAddress != "" {
			ks.targetPort = int32(s.cfg.AdvertisePort)
		}
		if err := bootstrap(hook, ks); err != nil {
			// Only a stop ends the bootstrap early; a failed post-start hook would exit the process.
			s.log.ErrorContext(ctx, "bootstrap did not finish", "err", err)
			return nil
		}
		trust.client = loopback
		if err := wait.PollUntilContextCancel(hook, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			return trust.sync(ctx) == nil, nil
		}); err != nil {
			s.log.ErrorContext(ctx, "ConfigMap "+authenticationTrustNamespace+"/"+authenticationTrustName+" not written", "err", err)
			return nil
		}
		background.Go(func() { trust.run(ctx, authenticationTrustResync) })
		dyn, err := dynamic.NewForConfig(hook.LoopbackClientConfig)
		if err != nil {
			return err
		}
		background.Go(func() { _ = writeCatalog(ctx, loopback, dyn, gvs) })
		repair := &serviceRepair{alloc: alloc, services: alloc.listServices, log: s.log}
		background.Go(func() { repair.run(ctx, s.cfg.ServiceRepairInterval) })
		defaultCIDR := &defaultServiceCIDR{client: loopback, cidrs: []string{cidr.String()}, log: s.log}
		background.Go(func() { defaultCIDR.run(ctx, defaultServiceCIDRResync) })
		if s.cfg.AdvertiseAddress != "" {
			background.Go(func() { ks.run(ctx, kubernetesServiceResync) })
		}
		if err := s.pki.WriteAdminKubeconfig(s.cfg.KubeconfigPath, s.url); err != nil {
			return fmt.Errorf("write kubeconfig: %w", err)
		}
		// Ready once every post-start hook has finished (this one included): a stop while
		// one still runs makes it fail, and a failed post-start hook exits the process.
		background.Go(func() {
			if err := waitReadyz(ctx, loopback); err != nil {
				return
			}
			s.log.InfoContext(ctx, "API server is ready", "url", s.url, "kubeconfig", s.cfg.KubeconfigPath,
				"advertiseAddress", s.cfg.AdvertiseAddress)
			close(s.ready)
		})
		return nil
	})
	prepared := server.PrepareRun()
	if err := shareOpenAPI(server, crds.GenericAPIServer); err != nil {
		return fmt.Errorf("apiserver: %w", err)
	}
	return prepared.RunWithContext(ctx)
}

// authenticationTrust is the writer of kube-system/extension-apiserver-authentication
// (authenticationtrust.go), saying to trust the cluster CA's client certificates and
// the front proxy's; its client is set once the server serves.
func (s *Server) authenticationTrust() (*authenticationTrustWriter, error) {
	clientCA, err := os.ReadFile(s.pki.CACert())
	if err != nil {
		return nil, err
	}
	frontProxyCA, err := os.ReadFile(s.pki.FrontProxyCACert())
	if err != nil {
		return nil, err
	}
	required, err := requiredAuthenticationTrust(clientCA, frontProxyCA)
	if err != nil {
		return nil, err
	}
	return &authenticationTrustWriter{required: required, now: time.Now, log: s.log}, nil
}

// kubelabVersion is the API level kubelab serves, answering /version with kubelab's
// build (version.Info) where upstream's would give the k8s.io/component-base build
// variables, which only upstream's release builds set ("v0.0.0-master+$Format:%H$",
// which kubectl version cannot parse).
type kubelabVersion struct {
	basecompatibility.EffectiveVersion
	info apimachineryversion.Info
}

func (v kubelabVersion) Info() *apimachineryversion.Info {
	info := v.info
	if up := v.EffectiveVersion.Info(); up != nil {
		info.EmulationMajor, info.EmulationMinor = up.EmulationMajor, up.EmulationMinor
		info.MinCompatibilityMajor, info.MinCompatibilityMinor = up.MinCompatibilityMajor, up.MinCompatibilityMinor
	}
	return &info
}

// definitionName names OpenAPI definitions and marks the kinds with their group, version
// and kind. Types without a model name (the snapshot kinds) are looked up by their Go path
// but known to the namer by its REST-friendly form (com.github.….v1.VolumeSnapshot).
func definitionName(namer *openapinamer.DefinitionNamer) func(string) (string, spec.Extensions) {
	lookup := func(name string) (string, spec.Extensions) {
		if n, ext := namer.GetDefinitionName(name); ext != nil || !strings.Contains(name, "/") {
			return n, ext
		}
		return namer.GetDefinitionName(openapiutil.ToRESTFriendlyName(name))
	}
	return func(name string) (string, spec.Extensions) {
		n, ext := lookup(name)
		// The internal twins of the kinds (scheme.go) are no business of clients.
		if gvks, ok := ext["x-kubernetes-group-version-kind"].([]interface{}); ok {
			var external []interface{}
			for _, g := range gvks {
				if m, ok := g.(map[string]interface{}); !ok || m["version"] != runtime.APIVersionInternal {
					external = append(external, g)
				}
			}
			ext = spec.Extensions{"x-kubernetes-group-version-kind": external}
		}
		return n, ext
	}
}

func (s *Server) applyServing(cfg *genericapiserver.Config, listener net.Listener) error {
	serving := options.NewSecureServingOptions().WithLoopback()
	serving.Listener = listener
	serving.BindAddress = net.ParseIP(s.cfg.BindAddress)
	serving.BindPort = listener.Addr().(*net.TCPAddr).Port
	serving.ServerCert.CertKey.CertFile = s.pki.ServingCert()
	serving.ServerCert.CertKey.KeyFile = s.pki.ServingKey()
	if err := serving.ApplyTo(&cfg.SecureServing, &cfg.LoopbackClientConfig); err != nil {
		return fmt.Errorf("apiserver serving: %w", err)
	}
	return nil
}

// applyAuth sets who a request is and what it may do.
//
// Authentication: x509 client certificates signed by the cluster CA (CN user, O
// groups), bearer tokens (the token file and the token authenticators after it), and
// anonymous requests, as system:anonymous in group system:unauthenticated, only on the
// public health and version paths and the issuer's discovery paths; anywhere else an
// unauthenticated request gets 401.
//
// Authorization, first opinion wins: the group system:masters may do everything; the
// Node authorizer decides for kubelets; RBAC for everyone; what none allows is 403.
func (s *Server) applyAuth(cfg *genericapiserver.Config, factory informers.SharedInformerFactory) error {
	caPEM, err := os.ReadFile(s.pki.CACert())
	if err != nil {
		return err
	}
	ca, err := dynamiccertificates.NewStaticCAContent("client-ca", caPEM)
	if err != nil {
		return fmt.Errorf("client CA: %w", err)
	}
	if err := cfg.Authentication.ApplyClientCert(ca, cfg.SecureServing); err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	verify := x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	certs := newCertCache(x509request.New(verify, x509request.CommonNameUserConversion), verify, time.Now)
	tokens, err := tokenfile.NewCSV(s.pki.TokenFile())
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	tokenAuthenticators := []authenticator.Token{tokens, s.serviceAccounts.authn}
	// A token that authenticated is remembered for 10s (a refusal is not), as
	// kube-apiserver does: checking a service account token costs a signature check and
	// look-ups of its account and bound object.
	s.tokens = tokencache.New(tokenunion.New(tokenAuthenticators...), false, 10*time.Second, 0)
	var authn authenticator.Request = union.New(certs, bearertoken.New(s.tokens))
	cfg.Authentication.Authenticator = union.New(group.NewAuthenticatedGroupAdder(authn), anonymousOnPublicPaths())

	node, err := auth.NewNode(factory)
	if err != nil {
		return err
	}
	rbac := auth.NewRBAC(factory)
	authz, err := authzunion.New(
		authzunion.NamedAuthorizer{AuthorizerName: "privileged-groups", Authorizer: authorizerfactory.NewPrivilegedGroups(user.SystemPrivilegedGroup)},
		authzunion.NamedAuthorizer{AuthorizerName: "node", Authorizer: node},
		authzunion.NamedAuthorizer{AuthorizerName: "rbac", Authorizer: rbac})
	if err != nil {
		return fmt.Errorf("authorizers: %w", err)
	}
	cfg.Authorization.Authorizer = authz
	cfg.RuleResolver = rbac
	genericapiserver.AuthorizeClientBearerToken(cfg.LoopbackClientConfig, &cfg.Authentication, &cfg.Authorization)
	return nil
}

// publicPaths are what anonymous requests may reach: what the bootstrap policy's
// system:public-info-viewer role allows, and the service account issuer's discovery
// paths, which a relying party (a cloud's STS) reads without credentials where the
// role system:service-account-issuer-discovery is bound to system:unauthenticated (RBAC
// refuses them otherwise).
var publicPaths = []string{"/healthz", "/livez", "/readyz", "/version", "/version/",
	serviceaccount.OpenIDConfigurationPath, serviceaccount.JWKSPath}

// anonymousOnPublicPaths authenticates requests without credentials as
// system:anonymous, but only on publicPaths exactly; elsewhere it leaves
// them unauthenticated, so they get 401.
func anonymousOnPublicPaths() authenticator.Request {
	var conditions []apiserverconfig.AnonymousAuthCondition
	for _, p := range publicPaths {
		conditions = append(conditions, apiserverconfig.AnonymousAuthCondition{Path: p})
	}
	return anonymous.NewAuthenticator(conditions)
}

// applyStorage stores every kind in etcd as protobuf (JSON for the snapshot kinds, which
// have no protobuf form), under /registry/<resource>, with a watch cache in front.
func (s *Server) applyStorage(cfg *genericapiserver.Config, scheme *runtime.Scheme, codecs serializer.CodecFactory, resources []resource, resourceConfig *serverstorage.ResourceConfig) (*options.EtcdOptions, error) {
	backend := storagebackend.NewDefaultConfig(s.cfg.EtcdPrefix, nil)
	backend.Transport.ServerList = s.cfg.EtcdServers
	backend.Transport.TrustedCAFile, backend.Transport.CertFile, backend.Transport.KeyFile = s.cfg.EtcdCAFile, s.cfg.EtcdCertFile, s.cfg.EtcdKeyFile
	etcdOpts := options.NewEtcdOptions(backend)
	etcdOpts.DefaultStorageMediaType = runtime.ContentTypeProtobuf
	factory := serverstorage.NewDefaultStorageFactory(etcdOpts.StorageConfig, runtime.ContentTypeProtobuf, codecs,
		serverstorage.NewDefaultResourceEncodingConfig(scheme), resourceConfig, nil)
	factory.AddCohabitatingResources(corev1.Resource("events"), eventsv1.Resource("events"))
	for _, r := range resources {
		if r.group == snapshotGroup {
			factory.SetSerializer(r.groupResource(), runtime.ContentTypeJSON, codecs)
		}
	}
	if err := etcdOpts.ApplyWithStorageFactoryTo(factory, cfg); err != nil {
		return nil, fmt.Errorf("apiserver storage: %w", err)
	}
	return etcdOpts, nil
}

// snapshotGroup's kinds are custom resources upstream: they have no protobuf form.
const snapshotGroup = "snapshot.storage.k8s.io"

// withoutProtobuf offers every media type of its serializer but protobuf, as the
// upstream API server offers custom resources: a client that accepts protobuf or JSON
// gets JSON, one that accepts only protobuf gets 406 Not Acceptable.
type withoutProtobuf struct{ runtime.NegotiatedSerializer }

func (w withoutProtobuf) SupportedMediaTypes() []runtime.SerializerInfo {
	var out []runtime.SerializerInfo
	for _, info := range w.NegotiatedSerializer.SupportedMediaTypes() {
		if info.MediaType != runtime.ContentTypeProtobuf {
			out = append(out, info)
		}
	}
	return out
}

// installAPIs builds a store per row and installs each group, with metrics.k8s.io and
// componentstatuses, which read other rows' stores (pods, nodes, leases).
// extra are endpoints without a row (the review APIs), by group and path, served in
// each group's preferred version.
func installAPIs(server *genericapiserver.GenericAPIServer, scheme *runtime.Scheme, codecs serializer.CodecFactory, resources []resource,
	extra map[string]map[string]rest.Storage, optsGetter generic.RESTOptionsGetter, deps storageDeps) error {
	groups := map[string]*genericapiserver.APIGroupInfo{}
	var order []string
	var pods, nodes, leases, services objectStore
	for _, group := range slices.Sorted(maps.Keys(extra)) {
		g := genericapiserver.NewDefaultAPIGroupInfo(group, scheme, runtime.NewParameterCodec(scheme), codecs)
		version := scheme.PrioritizedVersionsForGroup(group)[0].Version
		g.VersionedResourcesStorageMap[version] = extra[group]
		groups[group] = &g
		order = append(order, group)
	}
	for i := range resources {
		r := &resources[i]
		info, ok := groups[r.group]
		if !ok {
			g := genericapiserver.NewDefaultAPIGroupInfo(r.group, scheme, runtime.NewParameterCodec(scheme), codecs)
			if r.group == snapshotGroup {
				g.NegotiatedSerializer = withoutProtobuf{codecs}
			}
			info = &g
			groups[r.group] = info
			order = append(order, r.group)
		}
		storages, err := restStorages(scheme, r, optsGetter, deps)
		if err != nil {
			return err
		}
		switch r.gvk() {
		case corev1.SchemeGroupVersion.WithKind("Pod"):
			pods = storages["pods"].(objectStore)
		case corev1.SchemeGroupVersion.WithKind("Node"):
			nodes = storages["nodes"].(objectStore)
		case coordinationv1.SchemeGroupVersion.WithKind("Lease"):
			leases = storages["leases"].(objectStore)
		case corev1.SchemeGroupVersion.WithKind("Service"):
			services = storages["services"].(objectStore)
		}
		for _, version := range append([]string{r.version}, r.alsoVersions...) {
			if info.VersionedResourcesStorageMap[version] == nil {
				info.VersionedResourcesStorageMap[version] = map[string]rest.Storage{}
			}
			for path, st := range storages {
				info.VersionedResourcesStorageMap[version][path] = st
			}
		}
	}
	// metrics.k8s.io is served from the kubelets' summaries of the pods and nodes.
	m := genericapiserver.NewDefaultAPIGroupInfo(metricsv1beta1.GroupName, scheme, runtime.NewParameterCodec(scheme), codecs)
	m.VersionedResourcesStorageMap["v1beta1"] = metricsStorage(deps.kubelet, pods, nodes)
	rest := []*genericapiserver.APIGroupInfo{&m}
	groups[""].VersionedResourcesStorageMap["v1"]["componentstatuses"] = &componentStatusREST{leases: leases, etcd: deps.etcd, now: time.Now}
	groups[""].VersionedResourcesStorageMap["v1"]["services/proxy"] = &serviceProxyREST{services: services, pods: pods,
		slices: deps.endpointSlices, transport: deps.cluster}
	for _, g := range order {
		if g == "" {
			if err := server.InstallLegacyAPIGroup(genericapiserver.DefaultLegacyAPIPrefix, groups[g]); err != nil {
				return fmt.Errorf("install core API: %w", err)
			}
			continue
		}
		rest = append(rest, groups[g])
	}
	if err := server.InstallAPIGroups(rest...); err != nil {
		return fmt.Errorf("install APIs: %w", err)
	}
	return nil
}

// storageDeps are what some rows' endpoints need beyond their store.
type storageDeps struct {
	alloc   *serviceAllocator
	kubelet *kubeletClient
	tokens  *serviceAccountTokens
	// pdbs are read and written by pods/eviction (through the loopback client).
	pdbs policyv1client.PodDisruptionBudgetsGetter
	// etcd is probed for componentstatuses.
	etcd *clientv3.Client
	// cluster reaches the cluster network, for the proxy subresources.
	cluster http.RoundTripper
	// endpointSlices are the Services' EndpointSlices services/proxy picks from.
	endpointSlices apiproxy.EndpointSliceGetter
	// authorizer answers the endpoints that check more rights than the request's own
	// (a PodCertificateRequest's signer writing its status).
	authorizer authorizer.Authorizer
}

// restStorages are the REST endpoints of one row: the resource and its subresources.
func restStorages(scheme *runtime.Scheme, r *resource, optsGetter generic.RESTOptionsGetter, deps storageDeps) (map[string]rest.Storage, error) {
	alloc, kubelet, tokens := deps.alloc, deps.kubelet, deps.tokens
	store, err := newStore(scheme, r, optsGetter)
	if err != nil {
		return nil, err
	}
	if r.gvk() == corev1.SchemeGroupVersion.WithKind("Namespace") {
		store.ShouldDeleteDuringUpdate = namespaceShouldDeleteDuringUpdate
	}
	out := map[string]rest.Storage{r.plural: withMeta{store, r}}
	if r.status {
		out[r.plural+"/status"] = newStatusREST(scheme, r, store)
	}
	if r.approval {
		out[r.plural+"/approval"] = newStatusREST(scheme, r, store)
	}
	if r.scale {
		out[r.plural+"/scale"] = &scaleREST{r: r, store: store}
	}
	switch r.gvk() {
	case corev1.SchemeGroupVersion.WithKind("Pod"):
		out["pods/binding"] = &bindingREST{pods: store}
		out["bindings"] = &bindingREST{pods: store}
		out["pods/eviction"] = &evictionREST{pods: store, pdbs: deps.pdbs}
		out["pods/ephemeralcontainers"] = newEphemeralContainersREST(scheme, r, store)
		out["pods/resize"] = newPodResizeREST(scheme, r, store)
		streams := podStreams{pods: store, kubelet: kubelet}
		out["pods/log"] = &logREST{streams}
		out["pods/exec"] = &execREST{streams}
		out["pods/attach"] = &attachREST{streams}
		out["pods/portforward"] = &portForwardREST{streams}
		out["pods/proxy"] = &podProxyREST{pods: store, transport: deps.cluster}
	case corev1.SchemeGroupVersion.WithKind("Node"):
		kubelet.nodes = store
		out["nodes/proxy"] = &nodeProxyREST{kubelet: kubelet, transport: deps.cluster}
	case corev1.SchemeGroupVersion.WithKind("Namespace"):
		out["namespaces"] = namespaceStorage{withMeta{&namespaceREST{store}, r}}
		out["namespaces/finalize"] = newFinalizeREST(store)
	case corev1.SchemeGroupVersion.WithKind("ServiceAccount"):
		out["serviceaccounts/token"] = &tokenREST{serviceAccounts: store, tokens: tokens}
	case corev1.SchemeGroupVersion.WithKind("Service"):
		out[r.plural] = withMeta{alloc.decorate(store), r}
	case certificatesv1.SchemeGroupVersion.WithKind("PodCertificateRequest"):
		withSigner := *r
		withSigner.hooks.validateStatusUpdate = podCertificateRequestStatusRule(deps.authorizer, time.Now)
		out[r.plural+"/status"] = newStatusREST(scheme, &withSigner, store)
	}
	return out, nil
}

// withMeta adds the discovery facts of a row (short names, categories, singular name)
// to its main REST storage.
type withMeta struct {
	rest.StandardStorage
	r *resource
}

func (w withMeta) ShortNames() []string    { return w.r.shortNames }
func (w withMeta) Categories() []string    { return w.r.categories }
func (w withMeta) GetSingularName() string { return w.r.singular }
func (w withMeta) NamespaceScoped() bool   { return w.r.namespaced }
func (w withMeta) ConvertToTable(ctx context.Context, obj runtime.Object, opts runtime.Object) (*metav1.Table, error) {
	return w.StandardStorage.(rest.TableConvertor).ConvertToTable(ctx, obj, opts)
}

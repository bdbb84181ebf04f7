package admission

import (
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	webhookinit "k8s.io/apiserver/pkg/admission/plugin/webhook/initializer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
)

// apiServerID names this API server in the plugins' metrics.
const apiServerID = "kubelab-apiserver"

// virtualResources are the resources no object of is ever stored (the review APIs):
// no policy or webhook sees their requests.
var virtualResources = []schema.GroupResource{
	authenticationv1.Resource("tokenreviews"), authenticationv1.Resource("selfsubjectreviews"),
	authorizationv1.Resource("subjectaccessreviews"), authorizationv1.Resource("selfsubjectaccessreviews"),
	authorizationv1.Resource("localsubjectaccessreviews"), authorizationv1.Resource("selfsubjectrulesreviews"),
}

// initialize hands plugin everything k8s.io/apiserver's plugins may ask for through the
// initializer interfaces (the loopback clients, the informer factory, the authorizer, a
// REST mapper over discovery, the feature gates, the stop channel, the webhooks' service
// resolver and cluster dialer, the excluded resources), then checks it has what it needs.
func initialize(d Deps, plugin admission.Interface) error {
	if d.Loopback == nil || d.Client == nil || d.Factory == nil || d.Authorizer == nil || d.Stop == nil {
		return fmt.Errorf("incomplete dependencies: the loopback config, client, informer factory, authorizer and stop channel are required")
	}
	dyn, err := dynamic.NewForConfig(d.Loopback)
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}
	// Discovery is read when a plugin first maps a kind (a policy's paramKind), and again
	// when a kind is not found in what was read.
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(d.Client.Discovery()))
	admission.PluginInitializers{
		initializer.NewAPIServerIDInitializer(apiServerID),
		initializer.New(d.Client, dyn, d.Factory, d.Authorizer, utilfeature.DefaultFeatureGate, nil, d.Stop, mapper),
		webhookinit.NewPluginInitializer(ClusterDialWrapper(d.ClusterDial), newServiceResolver(d.Factory.Core().V1().Services().Lister(), d.Loopback.Host)),
	}.Initialize(plugin)
	if wants, ok := plugin.(initializer.WantsExcludedAdmissionResources); ok {
		wants.SetExcludedAdmissionResources(virtualResources)
	}
	if v, ok := plugin.(admission.InitializationValidator); ok {
		return v.ValidateInitialization()
	}
	return nil
}

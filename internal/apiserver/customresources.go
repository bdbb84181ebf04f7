package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsv1beta1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1beta1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	apiextensionsoptions "k8s.io/apiextensions-apiserver/pkg/cmd/server/options"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/version"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/options"
	"k8s.io/apiserver/pkg/server/resourceconfig"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	openapiaggregator "k8s.io/kube-openapi/pkg/aggregator"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/kubelab/kubelab/internal/apiserver/admission"
)

// newCustomResourceServer builds the server of apiextensions.k8s.io: CustomResourceDefinitions
// and the custom resources they define, from k8s.io/apiextensions-apiserver, as the
// delegate behind kubelab's own server. It shares cfg's authentication, authorization,
// admission and aggregated discovery; its objects go to the same etcd. Conversion
// webhooks named by a Service are called as admission webhooks are: at the Service's
// ClusterIP, through dialCluster.
func newCustomResourceServer(cfg genericapiserver.Config, factory informers.SharedInformerFactory, etcdOpts options.EtcdOptions,
	dialCluster dialFunc) (*apiextensionsapiserver.CustomResourceDefinitions, error) {
	cfg.PostStartHooks = map[string]genericapiserver.PostStartHookConfigEntry{}
	cfg.RESTOptionsGetter = nil
	// CRDs are stored as upstream stores them: v1beta1 JSON, which every version of
	// kube-apiserver reads.
	etcdOpts.StorageConfig.Codec = apiextensionsapiserver.Codecs.LegacyCodec(apiextensionsv1beta1.SchemeGroupVersion, apiextensionsv1.SchemeGroupVersion)
	etcdOpts.StorageConfig.EncodeVersioner = runtime.NewMultiGroupVersioner(apiextensionsv1beta1.SchemeGroupVersion,
		schema.GroupKind{Group: apiextensionsv1beta1.GroupName})
	etcdOpts.SkipHealthEndpoints = true
	if err := etcdOpts.ApplyTo(&cfg); err != nil {
		return nil, fmt.Errorf("apiextensions storage: %w", err)
	}
	merged, err := resourceconfig.MergeAPIResourceConfigs(apiextensionsapiserver.DefaultAPIResourceConfigSource(), nil, apiextensionsapiserver.Scheme)
	if err != nil {
		return nil, fmt.Errorf("apiextensions resources: %w", err)
	}
	cfg.MergedResourceConfig = merged
	crdConfig := &apiextensionsapiserver.Config{
		GenericConfig: &genericapiserver.RecommendedConfig{Config: cfg, SharedInformerFactory: factory},
		ExtraConfig: apiextensionsapiserver.ExtraConfig{
			CRDRESTOptionsGetter: apiextensionsoptions.NewCRDRESTOptionsGetter(etcdOpts, cfg.ResourceTransformers, cfg.StorageObjectCountTracker),
			MasterCount:          1,
			ServiceResolver:      admission.NewServiceResolver(factory.Core().V1().Services().Lister(), cfg.LoopbackClientConfig.Host),
			AuthResolverWrapper:  admission.ClusterDialWrapper(dialCluster),
		},
	}
	return crdConfig.Complete().New(genericapiserver.NewEmptyDelegate())
}

// listCustomGroups keeps the groups of established CRDs in the server's unaggregated
// discovery (/apis as an APIGroupList), as kube-apiserver's aggregator does; the
// aggregated form gets them from the apiextensions server directly.
func listCustomGroups(crds *apiextensionsapiserver.CustomResourceDefinitions, groups *listedGroups) error {
	informer := crds.Informers.Apiextensions().V1().CustomResourceDefinitions().Informer()
	sync := func() {
		byGroup := map[string][]apiextensionsv1.CustomResourceDefinition{}
		for _, o := range informer.GetStore().List() {
			crd := o.(*apiextensionsv1.CustomResourceDefinition)
			if crdEstablished(crd) && crd.DeletionTimestamp == nil {
				byGroup[crd.Spec.Group] = append(byGroup[crd.Spec.Group], *crd)
			}
		}
		custom := map[string]metav1.APIGroup{}
		for g, list := range byGroup {
			custom[g] = customAPIGroup(g, list)
		}
		groups.setCustom(custom)
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { sync() },
		UpdateFunc: func(any, any) { sync() },
		DeleteFunc: func(any) { sync() },
	})
	return err
}

func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
			return true
		}
	}
	return false
}

// customAPIGroup is the discovery entry of a group of CRDs: its served versions, most
// preferred first by Kubernetes version priority.
func customAPIGroup(group string, crds []apiextensionsv1.CustomResourceDefinition) metav1.APIGroup {
	versions := sets.New[string]()
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if v.Served {
				versions.Insert(v.Name)
			}
		}
	}
	list := sets.List(versions)
	sort.Slice(list, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(list[i], list[j]) > 0 })
	out := metav1.APIGroup{Name: group}
	for _, v := range list {
		out.Versions = append(out.Versions, metav1.GroupVersionForDiscovery{GroupVersion: group + "/" + v, Version: v})
	}
	if len(out.Versions) > 0 {
		out.PreferredVersion = out.Versions[0]
	}
	return out
}

// apiextensionsGroup is apiextensions.k8s.io in the unaggregated discovery (/apis as an
// APIGroupList) of kubelab's server: the group is served by the custom resource server
// behind it, whose own discovery document no request reaches.
func apiextensionsGroup() metav1.APIGroup {
	v1 := metav1.GroupVersionForDiscovery{GroupVersion: apiextensionsv1.SchemeGroupVersion.String(), Version: "v1"}
	return metav1.APIGroup{Name: apiextensionsv1.GroupName, Versions: []metav1.GroupVersionForDiscovery{v1}, PreferredVersion: v1}
}

// shareOpenAPI makes kubelab's /openapi/v2 and /openapi/v3 describe what the custom
// resource server serves too, as kube-apiserver's aggregated documents do: the
// CustomResourceDefinition API itself, and every established CRD's served versions (a
// definition per kind from its openAPIV3Schema, marked with
// x-kubernetes-group-version-kind, and its paths), kept up to date as CRDs change.
//
// It runs between PrepareRun (which builds both servers' documents) and Run. The v2
// spec of the CRD API is merged into kubelab's, and the v3 documents of group versions
// kubelab lacks are copied from the CRD server. apiextensions' own OpenAPI controllers,
// which its post-start hook starts against the CRD server's documents, are pointed at
// kubelab's instead, so they publish where clients read.
func shareOpenAPI(main, crds *genericapiserver.GenericAPIServer) error {
	if main.StaticOpenAPISpec == nil || main.OpenAPIVersionedService == nil || main.OpenAPIV3VersionedService == nil {
		return errors.New("openapi: the server has no OpenAPI documents")
	}
	if crds.StaticOpenAPISpec != nil {
		if err := openapiaggregator.MergeSpecsIgnorePathConflictRenamingDefinitionsAndParameters(main.StaticOpenAPISpec, crds.StaticOpenAPISpec); err != nil {
			return fmt.Errorf("openapi v2: %w", err)
		}
		main.OpenAPIVersionedService.UpdateSpec(main.StaticOpenAPISpec)
	}
	if crds.OpenAPIV3VersionedService != nil {
		if err := copyOpenAPIV3(main, crds.UnprotectedHandler()); err != nil {
			return fmt.Errorf("openapi v3: %w", err)
		}
	}
	crds.StaticOpenAPISpec = main.StaticOpenAPISpec
	crds.OpenAPIVersionedService = main.OpenAPIVersionedService
	crds.OpenAPIV3VersionedService = main.OpenAPIV3VersionedService
	return nil
}

// copyOpenAPIV3 adds to main's /openapi/v3 the group versions from's lists and main's
// does not.
func copyOpenAPIV3(main *genericapiserver.GenericAPIServer, from http.Handler) error {
	type discovery struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	get := func(h http.Handler, path string, into any) error {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			return fmt.Errorf("GET %s: %d %s", path, rec.Code, rec.Body.String())
		}
		return json.Unmarshal(rec.Body.Bytes(), into)
	}
	var have, theirs discovery
	if err := get(main.UnprotectedHandler(), "/openapi/v3", &have); err != nil {
		return err
	}
	if err := get(from, "/openapi/v3", &theirs); err != nil {
		return err
	}
	for _, gv := range slices.Sorted(maps.Keys(theirs.Paths)) {
		if _, ok := have.Paths[gv]; ok {
			continue
		}
		doc := &spec3.OpenAPI{}
		if err := get(from, theirs.Paths[gv].ServerRelativeURL, doc); err != nil {
			return err
		}
		main.OpenAPIV3VersionedService.UpdateGroupVersion(gv, doc)
	}
	return nil
}

package quotaeval

import (
	"errors"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/apiserver/pkg/quota/v1/generic"
	"k8s.io/client-go/tools/cache"
)

// countPrefix starts the object-count quota names, count/<resource>[.<group>].
const countPrefix = "count/"

var (
	podsGVR       = corev1.SchemeGroupVersion.WithResource("pods")
	servicesGVR   = corev1.SchemeGroupVersion.WithResource("services")
	claimsGVR     = corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims")
	configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")
	secretsGVR    = corev1.SchemeGroupVersion.WithResource("secrets")
	quotasGVR     = corev1.SchemeGroupVersion.WithResource("resourcequotas")
	rcsGVR        = corev1.SchemeGroupVersion.WithResource("replicationcontrollers")
)

// EvaluatedResources are the kinds Evaluators measures: what the resourcequota
// controller watches from the start.
func EvaluatedResources() []schema.GroupVersionResource {
	return []schema.GroupVersionResource{podsGVR, servicesGVR, claimsGVR, configMapsGVR, secretsGVR, quotasGVR, rcsGVR}
}

// legacyCounts are the object counts that also answer to their name without count/.
var legacyCounts = map[schema.GroupVersionResource]corev1.ResourceName{
	configMapsGVR: corev1.ResourceConfigMaps,
	secretsGVR:    corev1.ResourceSecrets,
	quotasGVR:     corev1.ResourceQuotas,
	rcsGVR:        corev1.ResourceReplicationControllers,
}

// errNoLister answers UsageStats of evaluators built without a lister (admission
// measures single objects and never lists).
var errNoLister = errors.New("resourcequota: evaluator has no lister")

// Evaluators are the quota evaluators of the kinds whose usage is more than a count
// (pods, services, persistentvolumeclaims) and of the counts with legacy names
// (configmaps, secrets, resourcequotas, replicationcontrollers). listerFor lists a kind's objects for
// UsageStats; nil builds evaluators that only measure single objects.
func Evaluators(listerFor quota.ListerForResourceFunc) []quota.Evaluator {
	if listerFor == nil {
		listerFor = func(schema.GroupVersionResource) (cache.GenericLister, error) { return nil, errNoLister }
	}
	out := []quota.Evaluator{
		newPodEvaluator(generic.ListResourceUsingListerFunc(listerFor, podsGVR)),
		newServiceEvaluator(generic.ListResourceUsingListerFunc(listerFor, servicesGVR)),
		newClaimEvaluator(generic.ListResourceUsingListerFunc(listerFor, claimsGVR)),
	}
	for _, gvr := range []schema.GroupVersionResource{configMapsGVR, secretsGVR, quotasGVR, rcsGVR} {
		out = append(out, generic.NewObjectCountEvaluator(gvr.GroupResource(),
			generic.ListResourceUsingListerFunc(listerFor, gvr), legacyCounts[gvr]))
	}
	return out
}

// IgnoredResources are never charged to a quota: Events, which components write all
// the time and no quota may cap.
func IgnoredResources() map[schema.GroupResource]struct{} {
	return map[schema.GroupResource]struct{}{
		corev1.Resource("events"):                    {},
		{Group: "events.k8s.io", Resource: "events"}: {},
	}
}

// CountedResource is the kind a count/<resource>[.<group>] quota name counts.
func CountedResource(name corev1.ResourceName) (schema.GroupResource, bool) {
	rest, ok := strings.CutPrefix(string(name), countPrefix)
	if !ok || rest == "" {
		return schema.GroupResource{}, false
	}
	resource, group, _ := strings.Cut(rest, ".")
	if resource == "" {
		return schema.GroupResource{}, false
	}
	return schema.GroupResource{Group: group, Resource: resource}, true
}

// matchedScopes are the selectors of scopes that item matches, by matches.
func matchedScopes(item runtime.Object, scopes []corev1.ScopedResourceSelectorRequirement,
	matches generic.MatchesScopeFunc) ([]corev1.ScopedResourceSelectorRequirement, error) {
	var out []corev1.ScopedResourceSelectorRequirement
	for _, s := range scopes {
		ok, err := matches(s, item)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, s)
		}
	}
	return out, nil
}

// uncoveredScopes are the limited scopes no matched quota scope covers.
func uncoveredScopes(limited, matched []corev1.ScopedResourceSelectorRequirement) []corev1.ScopedResourceSelectorRequirement {
	var out []corev1.ScopedResourceSelectorRequirement
	for _, l := range limited {
		covered := false
		for _, m := range matched {
			if l.ScopeName == m.ScopeName && l.Operator == m.Operator {
				covered = true
				break
			}
		}
		if !covered {
			out = append(out, l)
		}
	}
	return out
}

// noScopes: a kind without quota scopes matches no scoped quota.
func noScopes(corev1.ScopedResourceSelectorRequirement, runtime.Object) (bool, error) {
	return false, nil
}

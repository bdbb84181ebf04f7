package apiserver

import (
	"fmt"
	"reflect"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	snapshotv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
)

// The API server has no separate "internal" Go types, as kube-apiserver does: each kind's
// versioned k8s.io/api type is registered a second time under its group's internal
// version, so the generic registry converts between the two by only changing the kind.
// The one exception is events.k8s.io: its objects are stored as core/v1 Events (one
// store, two APIs, as upstream), so the core type is its internal type and conversion
// functions translate the fields.

// addToSchemes registers the external versions kubelab serves.
var addToSchemes = []func(*runtime.Scheme) error{
	corev1.AddToScheme, appsv1.AddToScheme, storagev1.AddToScheme, discoveryv1.AddToScheme,
	coordinationv1.AddToScheme, eventsv1.AddToScheme, rbacv1.AddToScheme, policyv1.AddToScheme,
	autoscalingv1.AddToScheme, networkingv1.AddToScheme, snapshotv1.AddToScheme,
	authenticationv1.AddToScheme, authorizationv1.AddToScheme, admissionregistrationv1.AddToScheme,
	batchv1.AddToScheme, autoscalingv2.AddToScheme, schedulingv1.AddToScheme, nodev1.AddToScheme,
	certificatesv1.AddToScheme, flowcontrolv1.AddToScheme,
	apiregistrationv1.AddToScheme, metricsv1beta1.AddToScheme, storagemigrationv1.AddToScheme,
	resourcev1.AddToScheme,
}

var metav1Pkg = reflect.TypeOf(metav1.Status{}).PkgPath()

// newScheme builds the scheme and codecs of the server: external versions, their internal
// twins, defaulting, field-label conversions and the events conversions.
func newScheme(resources []resource) (*runtime.Scheme, serializer.CodecFactory, error) {
	scheme := runtime.NewScheme()
	for _, add := range addToSchemes {
		if err := add(scheme); err != nil {
			return nil, serializer.CodecFactory{}, err
		}
	}
	// What the generic server needs for its own objects.
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	scheme.AddUnversionedTypes(schema.GroupVersion{Version: "v1"},
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})

	for _, gv := range scheme.PrioritizedVersionsAllGroups() {
		internal := schema.GroupVersion{Group: gv.Group, Version: runtime.APIVersionInternal}
		for kind, t := range scheme.KnownTypes(gv) {
			if t.PkgPath() == metav1Pkg || gv.Group == eventsv1.GroupName || (gv == autoscalingv1.SchemeGroupVersion && kind != "Scale") {
				continue
			}
			scheme.AddKnownTypeWithName(internal.WithKind(kind), reflect.New(t).Interface().(runtime.Object))
		}
	}
	eventsInternal := schema.GroupVersion{Group: eventsv1.GroupName, Version: runtime.APIVersionInternal}
	scheme.AddKnownTypes(eventsInternal, &corev1.Event{}, &corev1.EventList{})
	if err := addEventConversions(scheme); err != nil {
		return nil, serializer.CodecFactory{}, err
	}
	// autoscaling/v1's HorizontalPodAutoscaler is served from v2's store: v2's type is
	// its internal type.
	if err := addAutoscalingConversions(scheme); err != nil {
		return nil, serializer.CodecFactory{}, err
	}
	if err := addPodOptionsConversions(scheme); err != nil {
		return nil, serializer.CodecFactory{}, err
	}
	if err := addProxyOptionsConversions(scheme); err != nil {
		return nil, serializer.CodecFactory{}, err
	}
	// Versions in order of preference, so that the storage encodes in the first of each
	// group (autoscaling/v2 before v1).
	byGroup := map[string][]schema.GroupVersion{}
	for _, gv := range []schema.GroupVersion{corev1.SchemeGroupVersion, appsv1.SchemeGroupVersion,
		storagev1.SchemeGroupVersion, discoveryv1.SchemeGroupVersion, coordinationv1.SchemeGroupVersion,
		eventsv1.SchemeGroupVersion, rbacv1.SchemeGroupVersion, policyv1.SchemeGroupVersion,
		autoscalingv2.SchemeGroupVersion, autoscalingv1.SchemeGroupVersion, networkingv1.SchemeGroupVersion, snapshotv1.SchemeGroupVersion,
		authenticationv1.SchemeGroupVersion, authorizationv1.SchemeGroupVersion, admissionregistrationv1.SchemeGroupVersion,
		batchv1.SchemeGroupVersion, schedulingv1.SchemeGroupVersion, nodev1.SchemeGroupVersion, certificatesv1.SchemeGroupVersion,
		flowcontrolv1.SchemeGroupVersion,
		apiregistrationv1.SchemeGroupVersion, metricsv1beta1.SchemeGroupVersion, storagemigrationv1.SchemeGroupVersion,
		resourcev1.SchemeGroupVersion} {
		byGroup[gv.Group] = append(byGroup[gv.Group], gv)
	}
	// One call per group: a call sets the whole order of its group.
	for _, gvs := range byGroup {
		if err := scheme.SetVersionPriority(gvs...); err != nil {
			return nil, serializer.CodecFactory{}, err
		}
	}

	addDefaults(scheme)
	addAdmissionRegistrationDefaults(scheme)
	addDRADefaults(scheme)
	for i := range resources {
		r := &resources[i]
		// allowed maps each label the version accepts to the label of the stored
		// object's fields: itself, but for events.k8s.io, whose Events are core's.
		allowed := map[string]string{"metadata.name": "metadata.name", "metadata.namespace": "metadata.namespace"}
		for _, f := range r.selectableFields {
			allowed[f] = f
			if r.group == eventsv1.GroupName {
				allowed[f] = eventsV1FieldLabels[f]
			}
		}
		for _, version := range append([]string{r.version}, r.alsoVersions...) {
			kind := schema.GroupVersionKind{Group: r.group, Version: version, Kind: r.kind}
			err := scheme.AddFieldLabelConversionFunc(kind, func(label, value string) (string, string, error) {
				stored, ok := allowed[label]
				if !ok {
					return "", "", fmt.Errorf("field label not supported: %s", label)
				}
				return stored, value, nil
			})
			if err != nil {
				return nil, serializer.CodecFactory{}, err
			}
		}
	}
	return scheme, serializer.NewCodecFactory(scheme), nil
}

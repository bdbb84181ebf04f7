package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/util/podutil"
)

// The rules below are the ones users meet first; they follow upstream's messages so that
// errors read as they would on any cluster.

func pathSegmentName(name string, prefix bool) []string {
	if prefix {
		return path.IsValidPathSegmentPrefix(name)
	}
	return path.IsValidPathSegmentName(name)
}

func namespaceHooks() hooks {
	return hooks{
		name: apivalidation.ValidateNamespaceName,
		validate: func(o runtime.Object) field.ErrorList {
			var errs field.ErrorList
			p := field.NewPath("spec", "finalizers")
			for _, f := range o.(*corev1.Namespace).Spec.Finalizers {
				errs = append(errs, apivalidation.ValidateFinalizerName(string(f), p)...)
				errs = append(errs, validateStandardFinalizer(string(f), p)...)
			}
			return errs
		},
		prepareForCreate: func(o runtime.Object) {
			ns := o.(*corev1.Namespace)
			ns.Status = corev1.NamespaceStatus{Phase: corev1.NamespaceActive}
			if !containsFinalizer(ns.Spec.Finalizers, corev1.FinalizerKubernetes) {
				ns.Spec.Finalizers = append(ns.Spec.Finalizers, corev1.FinalizerKubernetes)
			}
		},
		prepareForUpdate: func(o, old runtime.Object) {
			// spec.finalizers change only through /finalize.
			o.(*corev1.Namespace).Spec.Finalizers = old.(*corev1.Namespace).Spec.Finalizers
		},
	}
}

func containsFinalizer(list []corev1.FinalizerName, f corev1.FinalizerName) bool {
	for _, x := range list {
		if x == f {
			return true
		}
	}
	return false
}

func podHooks() hooks {
	return hooks{
		prepareForCreate: func(o runtime.Object) {
			p := o.(*corev1.Pod)
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: podutil.ComputeQOSClass(p)}
		},
		validate:       validatePod,
		validateUpdate: validatePodUpdate,
		gracefulDelete: podGracefulDelete,
	}
}

func validatePod(o runtime.Object) field.ErrorList {
	return validatePodSpec(&o.(*corev1.Pod).Spec, field.NewPath("spec"), nil)
}

// validatePodSpec checks a pod's spec at path spec; claimVolumes are volume names that
// come from elsewhere (a StatefulSet's volumeClaimTemplates).
func validatePodSpec(podSpec *corev1.PodSpec, spec *field.Path, claimVolumes []string) field.ErrorList {
	p := &corev1.Pod{Spec: *podSpec}
	var errs field.ErrorList
	if len(p.Spec.Containers) == 0 {
		errs = append(errs, field.Required(spec.Child("containers"), ""))
	}
	volumes := sets.New(claimVolumes...)
	for i, v := range p.Spec.Volumes {
		vp := spec.Child("volumes").Index(i)
		errs = append(errs, dnsLabel(vp.Child("name"), v.Name)...)
		if volumes.Has(v.Name) {
			errs = append(errs, field.Duplicate(vp.Child("name"), v.Name))
		}
		volumes.Insert(v.Name)
		if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == "" {
			errs = append(errs, field.Required(vp.Child("persistentVolumeClaim", "claimName"), ""))
		}
		errs = append(errs, validateVolumeSource(&v.VolumeSource, vp)...)
	}
	names := sets.New[string]()
	check := func(list []corev1.Container, p *field.Path) {
		for i, c := range list {
			cp := p.Index(i)
			errs = append(errs, dnsLabel(cp.Child("name"), c.Name)...)
			if names.Has(c.Name) {
				errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
			}
			names.Insert(c.Name)
			if c.Image == "" {
				errs = append(errs, field.Required(cp.Child("image"), ""))
			}
			for j, port := range c.Ports {
				switch {
				case port.ContainerPort == 0:
					errs = append(errs, field.Required(cp.Child("ports").Index(j).Child("containerPort"), ""))
				case port.ContainerPort < 1 || port.ContainerPort > 65535:
					errs = append(errs, field.Invalid(cp.Child("ports").Index(j).Child("containerPort"), port.ContainerPort, "must be between 1 and 65535, inclusive"))
				}
			}
			errs = append(errs, validateContainerExtra(&c, cp, podSpec.HostNetwork)...)
			for j, m := range c.VolumeMounts {
				mp := cp.Child("volumeMounts").Index(j)
				if !volumes.Has(m.Name) {
					errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
				}
				if m.MountPath == "" {
					errs = append(errs, field.Required(mp.Child("mountPath"), ""))
				}
			}
			errs = append(errs, nonNegative(cp.Child("resources", "requests"), c.Resources.Requests)...)
			errs = append(errs, nonNegative(cp.Child("resources", "limits"), c.Resources.Limits)...)
		}
	}
	// Regular containers first: a clashing name is reported on the init container.
	check(p.Spec.Containers, spec.Child("containers"))
	check(p.Spec.InitContainers, spec.Child("initContainers"))
	errs = append(errs, validatePodSpecExtra(podSpec, spec)...)
	switch p.Spec.RestartPolicy {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	default:
		errs = append(errs, field.NotSupported(spec.Child("restartPolicy"), p.Spec.RestartPolicy,
			[]string{string(corev1.RestartPolicyAlways), string(corev1.RestartPolicyOnFailure), string(corev1.RestartPolicyNever)}))
	}
	return errs
}

// validatePodUpdate: a pod's spec is fixed once created, but for container images,
// activeDeadlineSeconds, added tolerations and removed scheduling gates.
func validatePodUpdate(o, old runtime.Object) field.ErrorList {
	p, op := o.(*corev1.Pod), old.(*corev1.Pod)
	mutable := p.Spec.DeepCopy()
	for i := range mutable.Containers {
		if i < len(op.Spec.Containers) {
			mutable.Containers[i].Image = op.Spec.Containers[i].Image
		}
	}
	for i := range mutable.InitContainers {
		if i < len(op.Spec.InitContainers) {
			mutable.InitContainers[i].Image = op.Spec.InitContainers[i].Image
		}
	}
	mutable.ActiveDeadlineSeconds = op.Spec.ActiveDeadlineSeconds
	mutable.Tolerations = op.Spec.Tolerations
	mutable.SchedulingGates = op.Spec.SchedulingGates
	if !apiequality.Semantic.DeepEqual(*mutable, op.Spec) {
		return field.ErrorList{field.Forbidden(field.NewPath("spec"),
			"pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)")}
	}
	return nil
}

// podGracefulDelete: a pod on a node gets its grace period so the kubelet can stop it;
// a pod never scheduled, or already finished, goes at once.
func podGracefulDelete(ctx context.Context, o runtime.Object, options *metav1.DeleteOptions) bool {
	p := o.(*corev1.Pod)
	if options == nil {
		return false
	}
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if p.Spec.TerminationGracePeriodSeconds != nil {
		grace = *p.Spec.TerminationGracePeriodSeconds
	}
	if options.GracePeriodSeconds != nil {
		grace = *options.GracePeriodSeconds
	}
	if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
		grace = 0
	}
	if grace < 0 {
		grace = 1
	}
	options.GracePeriodSeconds = &grace
	return true
}

func validateNode(o runtime.Object) field.ErrorList {
	n := o.(*corev1.Node)
	var errs field.ErrorList
	for _, cidr := range n.Spec.PodCIDRs {
		if _, err := parseCIDR(cidr); err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "podCIDRs"), cidr, err.Error()))
		}
	}
	return errs
}

func pvHooks() hooks {
	return hooks{
		prepareForCreate: func(o runtime.Object) {
			now := metav1.NewTime(time.Now().Truncate(time.Second))
			o.(*corev1.PersistentVolume).Status = corev1.PersistentVolumeStatus{Phase: corev1.VolumePending, LastPhaseTransitionTime: &now}
		},
		validate: func(o runtime.Object) field.ErrorList {
			return validatePVSpec(&o.(*corev1.PersistentVolume).Spec, field.NewPath("spec"))
		},
	}
}

func pvcHooks() hooks {
	return hooks{
		prepareForCreate: func(o runtime.Object) {
			o.(*corev1.PersistentVolumeClaim).Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
		},
		validate: func(o runtime.Object) field.ErrorList {
			return validatePVCSpec(&o.(*corev1.PersistentVolumeClaim).Spec, field.NewPath("spec"))
		},
		validateUpdate: func(o, old runtime.Object) field.ErrorList {
			pvc, opvc := o.(*corev1.PersistentVolumeClaim), old.(*corev1.PersistentVolumeClaim)
			mutable := pvc.Spec.DeepCopy()
			mutable.Resources.Requests = opvc.Spec.Resources.Requests
			mutable.VolumeAttributesClassName = opvc.Spec.VolumeAttributesClassName
			if opvc.Spec.VolumeName == "" {
				mutable.VolumeName = ""
				// A claim that names no class may be given one (the PV controller gives
				// it the default class), once.
				if !storagehelpers.PersistentVolumeClaimHasClass(opvc) && pvc.Spec.StorageClassName != nil && *pvc.Spec.StorageClassName != "" {
					mutable.StorageClassName = nil
				}
			}
			if !apiequality.Semantic.DeepEqual(*mutable, opvc.Spec) {
				return field.ErrorList{field.Forbidden(field.NewPath("spec"), "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims, and storageClassName for a claim that names none")}
			}
			newSize, oldSize := pvc.Spec.Resources.Requests[corev1.ResourceStorage], opvc.Spec.Resources.Requests[corev1.ResourceStorage]
			if newSize.Cmp(oldSize) != 0 && opvc.Status.Phase != corev1.ClaimBound {
				return field.ErrorList{field.Forbidden(field.NewPath("spec", "resources", "requests", "storage"), "only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize")}
			}
			if newSize.Cmp(oldSize) < 0 {
				return field.ErrorList{field.Forbidden(field.NewPath("spec", "resources", "requests", "storage"), "field can not be less than status.capacity")}
			}
			return nil
		},
	}
}

// validateConfigMap checks the keys and that the values of data and binaryData total at
// most corev1.MaxSecretSize (1 MiB).
func validateConfigMap(o runtime.Object) field.ErrorList {
	cm := o.(*corev1.ConfigMap)
	var errs field.ErrorList
	size := 0
	for k, v := range cm.Data {
		errs = append(errs, configKey(field.NewPath("data").Key(k), k)...)
		size += len(v)
	}
	for k, v := range cm.BinaryData {
		errs = append(errs, configKey(field.NewPath("binaryData").Key(k), k)...)
		if _, dup := cm.Data[k]; dup {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(k), k, "duplicate of key present in data"))
		}
		size += len(v)
	}
	if size > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", corev1.MaxSecretSize))
	}
	return errs
}

// validateSecret checks the keys and that the values of data total at most
// corev1.MaxSecretSize (1 MiB), stringData counted as the data it stands for.
func validateSecret(o runtime.Object) field.ErrorList {
	s := o.(*corev1.Secret)
	var errs field.ErrorList
	size := 0
	for k, v := range s.Data {
		errs = append(errs, configKey(field.NewPath("data").Key(k), k)...)
		if _, replaced := s.StringData[k]; !replaced {
			size += len(v)
		}
	}
	for _, v := range s.StringData {
		size += len(v)
	}
	if size > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(field.NewPath("data"), "", corev1.MaxSecretSize))
	}
	return append(errs, validateSecretType(s)...)
}

// validateSecretType checks the keys each well-known secret type needs.
func validateSecretType(s *corev1.Secret) field.ErrorList {
	data := field.NewPath("data")
	has := func(k string) bool {
		if _, ok := s.Data[k]; ok {
			return true
		}
		_, ok := s.StringData[k]
		return ok
	}
	var errs field.ErrorList
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg, corev1.SecretTypeDockerConfigJson:
		key := corev1.DockerConfigKey
		if s.Type == corev1.SecretTypeDockerConfigJson {
			key = corev1.DockerConfigJsonKey
		}
		if !has(key) {
			errs = append(errs, field.Required(data.Key(key), ""))
			break
		}
		var cfg map[string]interface{}
		if err := json.Unmarshal(s.Data[key], &cfg); err != nil {
			errs = append(errs, field.Invalid(data.Key(key), "<secret contents redacted>", err.Error()))
		}
	case corev1.SecretTypeBasicAuth:
		if !has(corev1.BasicAuthUsernameKey) && !has(corev1.BasicAuthPasswordKey) {
			errs = append(errs, field.Required(data.Key(corev1.BasicAuthUsernameKey), ""),
				field.Required(data.Key(corev1.BasicAuthPasswordKey), ""))
		}
	case corev1.SecretTypeSSHAuth:
		if len(s.Data[corev1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(data.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeTLS:
		for _, k := range []string{corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
			if !has(k) {
				errs = append(errs, field.Required(data.Key(k), ""))
			}
		}
	}
	return errs
}

func configKey(p *field.Path, k string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsConfigMapKey(k) {
		errs = append(errs, field.Invalid(p, k, msg))
	}
	return errs
}

func dnsLabel(p *field.Path, v string) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Label(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

func nonNegative(p *field.Path, list corev1.ResourceList) field.ErrorList {
	var errs field.ErrorList
	for name, q := range list {
		if q.Cmp(apiresource.Quantity{}) < 0 {
			errs = append(errs, field.Invalid(p.Key(string(name)), q.String(), "must be greater than or equal to 0"))
		}
	}
	return errs
}

// standardLimitTypes are the LimitRange item types without a domain prefix.
var standardLimitTypes = []string{string(corev1.LimitTypePod), string(corev1.LimitTypeContainer), string(corev1.LimitTypePersistentVolumeClaim)}

// validateLimitRange: each item has a known type (once), resource names fit its type,
// min ≤ defaultRequest ≤ default ≤ max, maxLimitRequestRatio ≥ 1 (and ≤ max/min), a
// Pod item has no defaults and a PersistentVolumeClaim item bounds storage.
func validateLimitRange(o runtime.Object) field.ErrorList {
	lr := o.(*corev1.LimitRange)
	var errs field.ErrorList
	seen := map[corev1.LimitType]bool{}
	for i := range lr.Spec.Limits {
		item := &lr.Spec.Limits[i]
		p := field.NewPath("spec", "limits").Index(i)
		errs = append(errs, limitTypeName(p.Child("type"), string(item.Type))...)
		if seen[item.Type] {
			errs = append(errs, field.Duplicate(p.Child("type"), item.Type))
		}
		seen[item.Type] = true
		names := sets.New[corev1.ResourceName]()
		check := func(child string, list corev1.ResourceList) {
			for k := range list {
				errs = append(errs, limitResourceName(item.Type, p.Child(child).Key(string(k)), string(k))...)
				names.Insert(k)
			}
		}
		check("max", item.Max)
		check("min", item.Min)
		if item.Type == corev1.LimitTypePod {
			if len(item.Default) > 0 {
				errs = append(errs, field.Forbidden(p.Child("default"), "may not be specified when `type` is 'Pod'"))
			}
			if len(item.DefaultRequest) > 0 {
				errs = append(errs, field.Forbidden(p.Child("defaultRequest"), "may not be specified when `type` is 'Pod'"))
			}
		} else {
			check("default", item.Default)
			check("defaultRequest", item.DefaultRequest)
		}
		if item.Type == corev1.LimitTypePersistentVolumeClaim {
			_, hasMin := item.Min[corev1.ResourceStorage]
			_, hasMax := item.Max[corev1.ResourceStorage]
			if !hasMin && !hasMax {
				errs = append(errs, field.Required(p.Child("limits"), "either minimum or maximum storage value is required, but neither was provided"))
			}
		}
		check("maxLimitRequestRatio", item.MaxLimitRequestRatio)
		for _, k := range sets.List(names) {
			errs = append(errs, limitRangeOrder(p, k, item)...)
		}
	}
	return errs
}

// limitRangeOrder checks the quantities one item gives resource k against each other.
func limitRangeOrder(p *field.Path, k corev1.ResourceName, item *corev1.LimitRangeItem) field.ErrorList {
	var errs field.ErrorList
	key := string(k)
	min, hasMin := item.Min[k]
	max, hasMax := item.Max[k]
	def, hasDef := item.Default[k]
	defReq, hasDefReq := item.DefaultRequest[k]
	ratio, hasRatio := item.MaxLimitRequestRatio[k]
	if item.Type == corev1.LimitTypePod {
		hasDef, hasDefReq = false, false
	}
	if hasMin && hasMax && min.Cmp(max) > 0 {
		errs = append(errs, field.Invalid(p.Child("min").Key(key), min.String(), fmt.Sprintf("min value %s is greater than max value %s", min.String(), max.String())))
	}
	if hasDefReq && hasMin && min.Cmp(defReq) > 0 {
		errs = append(errs, field.Invalid(p.Child("defaultRequest").Key(key), defReq.String(), fmt.Sprintf("min value %s is greater than default request value %s", min.String(), defReq.String())))
	}
	if hasDefReq && hasMax && defReq.Cmp(max) > 0 {
		errs = append(errs, field.Invalid(p.Child("defaultRequest").Key(key), defReq.String(), fmt.Sprintf("default request value %s is greater than max value %s", defReq.String(), max.String())))
	}
	if hasDefReq && hasDef && defReq.Cmp(def) > 0 {
		errs = append(errs, field.Invalid(p.Child("defaultRequest").Key(key), defReq.String(), fmt.Sprintf("default request value %s is greater than default limit value %s", defReq.String(), def.String())))
	}
	if hasDef && hasMin && min.Cmp(def) > 0 {
		errs = append(errs, field.Invalid(p.Child("default").Key(key), min.String(), fmt.Sprintf("min value %s is greater than default value %s", min.String(), def.String())))
	}
	if hasDef && hasMax && def.Cmp(max) > 0 {
		errs = append(errs, field.Invalid(p.Child("default").Key(key), max.String(), fmt.Sprintf("default value %s is greater than max value %s", def.String(), max.String())))
	}
	if hasRatio && ratio.Cmp(*apiresource.NewQuantity(1, apiresource.DecimalSI)) < 0 {
		errs = append(errs, field.Invalid(p.Child("maxLimitRequestRatio").Key(key), ratio.String(), fmt.Sprintf("ratio %s is less than 1", ratio.String())))
	}
	if hasRatio && hasMin && hasMax && min.Sign() > 0 {
		r, lo, hi := float64(ratio.Value()), float64(min.Value()), float64(max.Value())
		if ratio.Value() < apiresource.MaxMilliValue && min.Value() < apiresource.MaxMilliValue && max.Value() < apiresource.MaxMilliValue {
			r, lo, hi = float64(ratio.MilliValue())/1000, float64(min.MilliValue()), float64(max.MilliValue())
		}
		if r > hi/lo {
			errs = append(errs, field.Invalid(p.Child("maxLimitRequestRatio").Key(key), ratio.String(), fmt.Sprintf("ratio %s is greater than max/min = %f", ratio.String(), hi/lo)))
		}
	}
	return errs
}

func limitTypeName(p *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	if len(errs) == 0 && !strings.Contains(v, "/") && !slices.Contains(standardLimitTypes, v) {
		errs = append(errs, field.NotSupported(p, v, standardLimitTypes))
	}
	return errs
}

// limitResourceName: a name with a domain prefix is an extended resource; one without
// must be a resource of the item's type.
func limitResourceName(t corev1.LimitType, p *field.Path, v string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range utilvalidation.IsQualifiedName(v) {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	if len(errs) > 0 || strings.Contains(v, "/") {
		return errs
	}
	switch t {
	case corev1.LimitTypePod, corev1.LimitTypeContainer:
		switch corev1.ResourceName(v) {
		case corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		default:
			if !strings.HasPrefix(v, corev1.ResourceHugePagesPrefix) {
				errs = append(errs, field.Invalid(p, v, "must be a standard resource for containers"))
			}
		}
	default:
		switch corev1.ResourceName(v) {
		case corev1.ResourceStorage, corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		default:
			errs = append(errs, field.Invalid(p, v, "must be a standard resource type or fully qualified"))
		}
	}
	return errs
}

// standardQuotaNames are the quota resource names without a domain prefix.
var standardQuotaNames = sets.New[corev1.ResourceName](
	corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsStorage, corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
	corev1.ResourcePods, corev1.ResourceServices, corev1.ResourceReplicationControllers, corev1.ResourceQuotas,
	corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims,
	corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers)

// integerQuotaNames are counted in whole objects.
var integerQuotaNames = sets.New[corev1.ResourceName](
	corev1.ResourcePods, corev1.ResourceServices, corev1.ResourceReplicationControllers, corev1.ResourceQuotas,
	corev1.ResourceSecrets, corev1.ResourceConfigMaps, corev1.ResourcePersistentVolumeClaims,
	corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers)

// quotaScopes are the scopes a ResourceQuota may name.
var quotaScopes = []string{string(corev1.ResourceQuotaScopeTerminating), string(corev1.ResourceQuotaScopeNotTerminating),
	string(corev1.ResourceQuotaScopeBestEffort), string(corev1.ResourceQuotaScopeNotBestEffort),
	string(corev1.ResourceQuotaScopePriorityClass), string(corev1.ResourceQuotaScopeCrossNamespacePodAffinity),
	string(corev1.ResourceQuotaScopeVolumeAttributesClass)}

// validateResourceQuota: spec.hard (and status) name quota resources with quantities
// that are not negative (whole for object counts); scopes and scope selectors are
// known ones.
func validateResourceQuota(o runtime.Object) field.ErrorList {
	rq := o.(*corev1.ResourceQuota)
	var errs field.ErrorList
	errs = append(errs, quotaList(field.NewPath("spec", "hard"), rq.Spec.Hard)...)
	errs = append(errs, quotaList(field.NewPath("status", "hard"), rq.Status.Hard)...)
	errs = append(errs, quotaList(field.NewPath("status", "used"), rq.Status.Used)...)
	for i, s := range rq.Spec.Scopes {
		if !slices.Contains(quotaScopes, string(s)) {
			errs = append(errs, field.NotSupported(field.NewPath("spec", "scopes").Index(i), s, quotaScopes))
		}
	}
	if sel := rq.Spec.ScopeSelector; sel != nil {
		for i, req := range sel.MatchExpressions {
			p := field.NewPath("spec", "scopeSelector", "matchExpressions").Index(i)
			if !slices.Contains(quotaScopes, string(req.ScopeName)) {
				errs = append(errs, field.NotSupported(p.Child("scopeName"), req.ScopeName, quotaScopes))
			}
			switch req.Operator {
			case corev1.ScopeSelectorOpIn, corev1.ScopeSelectorOpNotIn:
				if len(req.Values) == 0 {
					errs = append(errs, field.Required(p.Child("values"), "must be at least one value when `operator` is 'In' or 'NotIn' for scope selector"))
				}
			case corev1.ScopeSelectorOpExists, corev1.ScopeSelectorOpDoesNotExist:
				if len(req.Values) != 0 {
					errs = append(errs, field.Invalid(p.Child("values"), req.Values, "must be no value when `operator` is 'Exist' or 'DoesNotExist' for scope selector"))
				}
			default:
				errs = append(errs, field.NotSupported(p.Child("operator"), req.Operator,
					[]string{string(corev1.ScopeSelectorOpIn), string(corev1.ScopeSelectorOpNotIn), string(corev1.ScopeSelectorOpExists), string(corev1.ScopeSelectorOpDoesNotExist)}))
			}
		}
	}
	return errs
}

func quotaList(p *field.Path, list corev1.ResourceList) field.ErrorList {
	var errs field.ErrorList
	for name, q := range list {
		kp := p.Key(string(name))
		for _, msg := range utilvalidation.IsQualifiedName(string(name)) {
			errs = append(errs, field.Invalid(kp, name, msg))
		}
		if !strings.Contains(string(name), "/") && !standardQuotaNames.Has(name) &&
			!strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) && !strings.HasPrefix(string(name), corev1.ResourceRequestsHugePagesPrefix) {
			errs = append(errs, field.Invalid(kp, name, "must be a standard resource for quota"))
		}
		if q.Sign() < 0 {
			errs = append(errs, field.Invalid(kp, q.String(), "must be greater than or equal to 0"))
		}
		if integerQuotaNames.Has(name) && q.MilliValue()%1000 != 0 {
			errs = append(errs, field.Invalid(kp, q.String(), "must be an integer"))
		}
	}
	return errs
}

// validateVolumeSource checks one pod volume's source: exactly one type, and the
// fields of the common types.
func validateVolumeSource(v *corev1.VolumeSource, vp *field.Path) field.ErrorList {
	var errs field.ErrorList
	rv := reflect.ValueOf(*v)
	var set []string
	for i := 0; i < rv.NumField(); i++ {
		if !rv.Field(i).IsNil() {
			name, _, _ := strings.Cut(rv.Type().Field(i).Tag.Get("json"), ",")
			set = append(set, name)
		}
	}
	// Upstream looks at emptyDir before hostPath: the later type is the one reported.
	if len(set) > 1 && set[0] == "hostPath" && set[1] == "emptyDir" {
		set[0], set[1] = set[1], set[0]
	}
	for _, extra := range set[min(1, len(set)):] {
		errs = append(errs, field.Forbidden(vp.Child(extra), "may not specify more than 1 volume type"))
	}
	mode := func(m *int32, p *field.Path) {
		if m != nil && (*m < 0 || *m > 0777) {
			errs = append(errs, field.Invalid(p, *m, "must be a number between 0 and 0777 (octal), both inclusive"))
		}
	}
	switch {
	case v.HostPath != nil:
		if t := v.HostPath.Type; t != nil {
			valid := []corev1.HostPathType{corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory,
				corev1.HostPathFileOrCreate, corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev}
			if !slices.Contains(valid, *t) {
				errs = append(errs, field.NotSupported(vp.Child("hostPath", "type"), *t, valid))
			}
		}
	case v.EmptyDir != nil:
		if l := v.EmptyDir.SizeLimit; l != nil && l.Sign() < 0 {
			errs = append(errs, field.Forbidden(vp.Child("emptyDir", "sizeLimit"), "SizeLimit field must be a valid resource quantity"))
		}
	case v.ConfigMap != nil:
		mode(v.ConfigMap.DefaultMode, vp.Child("configMap", "defaultMode"))
	case v.Secret != nil:
		if v.Secret.SecretName == "" {
			errs = append(errs, field.Required(vp.Child("secret", "secretName"), ""))
		}
		mode(v.Secret.DefaultMode, vp.Child("secret", "defaultMode"))
	}
	return errs
}

// downwardAPIPaths are the pod field paths a fieldRef may name (true: usable in env).
var downwardAPIPaths = map[string]bool{
	"metadata.name": true, "metadata.namespace": true, "metadata.uid": true, "spec.nodeName": true,
	"spec.serviceAccountName": true, "status.hostIP": true, "status.hostIPs": true, "status.podIP": true,
	"status.podIPs": true, "metadata.labels": false, "metadata.annotations": false, "spec.restartPolicy": false,
	"spec.schedulerName": false, "status.phase": false,
}

// validateContainerExtra: the container rules beyond names, images and mounts.
func validateContainerExtra(c *corev1.Container, cp *field.Path, hostNetwork bool) field.ErrorList {
	var errs field.ErrorList
	portNames := sets.New[string]()
	for j, port := range c.Ports {
		pp := cp.Child("ports").Index(j)
		if port.Name != "" {
			for _, msg := range utilvalidation.IsValidPortName(port.Name) {
				errs = append(errs, field.Invalid(pp.Child("name"), port.Name, msg))
			}
			if portNames.Has(port.Name) {
				errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
			}
			portNames.Insert(port.Name)
		}
		if port.HostPort != 0 {
			for _, msg := range utilvalidation.IsValidPortNum(int(port.HostPort)) {
				errs = append(errs, field.Invalid(pp.Child("hostPort"), port.HostPort, msg))
			}
		}
		// Pods have hostPort defaulted from containerPort; templates keep it unset.
		if hostNetwork && port.HostPort != 0 && port.HostPort != port.ContainerPort {
			errs = append(errs, field.Invalid(pp.Child("hostPort"), port.ContainerPort, "must match `containerPort` when `hostNetwork` is true"))
		}
		valid := []corev1.Protocol{corev1.ProtocolSCTP, corev1.ProtocolTCP, corev1.ProtocolUDP}
		if !slices.Contains(valid, port.Protocol) {
			errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, valid))
		}
	}
	if pol := c.ImagePullPolicy; pol != "" {
		valid := []corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}
		if !slices.Contains(valid, pol) {
			errs = append(errs, field.NotSupported(cp.Child("imagePullPolicy"), pol, valid))
		}
	}
	if pol := c.TerminationMessagePolicy; pol != "" {
		valid := []corev1.TerminationMessagePolicy{corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}
		if !slices.Contains(valid, pol) {
			errs = append(errs, field.NotSupported(cp.Child("terminationMessagePolicy"), pol, valid))
		}
	}
	for j, e := range c.Env {
		ep := cp.Child("env").Index(j)
		if e.Name == "" {
			errs = append(errs, field.Required(ep.Child("name"), ""))
		} else if strings.ContainsFunc(e.Name, func(r rune) bool { return r < ' ' || r > '~' || r == '=' }) {
			errs = append(errs, field.Invalid(ep.Child("name"), e.Name, "a valid environment variable name must consist only of printable ASCII characters other than '='"))
		}
		if e.ValueFrom == nil {
			continue
		}
		if e.Value != "" {
			errs = append(errs, field.Invalid(ep.Child("valueFrom"), "", "may not be specified when `value` is not empty"))
		}
		if f := e.ValueFrom.FieldRef; f != nil {
			fp := ep.Child("valueFrom", "fieldRef", "fieldPath")
			path, subscript, hasSubscript := strings.Cut(f.FieldPath, "[")
			envOK, known := downwardAPIPaths[path]
			switch {
			case !known || (hasSubscript && path != "metadata.labels" && path != "metadata.annotations"):
				errs = append(errs, field.Invalid(fp, f.FieldPath, "error converting fieldPath: field label not supported: "+f.FieldPath))
			case hasSubscript && !strings.HasSuffix(subscript, "]"):
				errs = append(errs, field.Invalid(fp, f.FieldPath, "error converting fieldPath: invalid subscript"))
			case !hasSubscript && !envOK:
				errs = append(errs, field.NotSupported(fp, f.FieldPath, []string{"metadata.name", "metadata.namespace", "metadata.uid",
					"spec.nodeName", "spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs"}))
			}
		}
	}
	for _, pr := range []struct {
		name     string
		probe    *corev1.Probe
		liveness bool
	}{{"livenessProbe", c.LivenessProbe, true}, {"readinessProbe", c.ReadinessProbe, false}, {"startupProbe", c.StartupProbe, true}} {
		if pr.probe == nil {
			continue
		}
		pp := cp.Child(pr.name)
		h := pr.probe.ProbeHandler
		errs = append(errs, validateHandlerCount(pp, h.Exec != nil, h.HTTPGet != nil, h.TCPSocket != nil, h.GRPC != nil)...)
		for _, f := range []struct {
			name string
			v    int32
		}{{"initialDelaySeconds", pr.probe.InitialDelaySeconds}, {"timeoutSeconds", pr.probe.TimeoutSeconds},
			{"periodSeconds", pr.probe.PeriodSeconds}, {"successThreshold", pr.probe.SuccessThreshold}, {"failureThreshold", pr.probe.FailureThreshold}} {
			if f.v < 0 {
				errs = append(errs, field.Invalid(pp.Child(f.name), f.v, "must be greater than or equal to 0"))
			}
		}
		if pr.liveness && pr.probe.SuccessThreshold != 1 {
			errs = append(errs, field.Invalid(pp.Child("successThreshold"), pr.probe.SuccessThreshold, "must be 1"))
		}
	}
	if l := c.Lifecycle; l != nil {
		for _, hk := range []struct {
			name string
			h    *corev1.LifecycleHandler
		}{{"postStart", l.PostStart}, {"preStop", l.PreStop}} {
			if hk.h == nil {
				continue
			}
			hp := cp.Child("lifecycle", hk.name)
			errs = append(errs, validateHandlerCount(hp, hk.h.Exec != nil, hk.h.HTTPGet != nil, hk.h.TCPSocket != nil, hk.h.Sleep != nil)...)
			if hk.h.Sleep != nil && hk.h.Sleep.Seconds < 0 {
				errs = append(errs, field.Invalid(hp.Child("sleep"), hk.h.Sleep.Seconds, "must be non-negative"))
			}
		}
	}
	for _, list := range []struct {
		name string
		rl   corev1.ResourceList
	}{{"requests", c.Resources.Requests}, {"limits", c.Resources.Limits}} {
		for name := range list.rl {
			if !strings.Contains(string(name), "/") && !standardContainerResources.Has(string(name)) && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
				errs = append(errs, field.Invalid(cp.Child("resources", list.name).Key(string(name)), name, "must be a standard resource type or fully qualified"))
			}
		}
	}
	for name, req := range c.Resources.Requests {
		if lim, ok := c.Resources.Limits[name]; ok && req.Cmp(lim) > 0 {
			errs = append(errs, field.Invalid(cp.Child("resources", "requests"), req.String(),
				fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
		}
	}
	mounts := sets.New[string]()
	for j, m := range c.VolumeMounts {
		if m.MountPath != "" && mounts.Has(m.MountPath) {
			errs = append(errs, field.Invalid(cp.Child("volumeMounts").Index(j).Child("mountPath"), m.MountPath, "must be unique"))
		}
		mounts.Insert(m.MountPath)
	}
	return errs
}

var standardContainerResources = sets.New("cpu", "memory", "ephemeral-storage")

// validateHandlerCount: a probe or lifecycle hook has exactly one handler type; the
// flags are in upstream's order (exec, httpGet, tcpSocket, then grpc or sleep).
func validateHandlerCount(p *field.Path, exec, httpGet, tcpSocket, fourth bool) field.ErrorList {
	names := []string{"exec", "httpGet", "tcpSocket", "grpc"}
	if p.String() != "" && strings.Contains(p.String(), "lifecycle") {
		names[3] = "sleep"
	}
	var errs field.ErrorList
	n := 0
	for i, set := range []bool{exec, httpGet, tcpSocket, fourth} {
		if !set {
			continue
		}
		if n > 0 {
			errs = append(errs, field.Forbidden(p.Child(names[i]), "may not specify more than 1 handler type"))
		}
		n++
	}
	if n == 0 {
		errs = append(errs, field.Required(p, "must specify a handler type"))
	}
	return errs
}

// validatePodSpecExtra: the pod-level rules beyond containers, volumes and restartPolicy.
func validatePodSpecExtra(ps *corev1.PodSpec, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	dnsPolicies := []corev1.DNSPolicy{corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone}
	if ps.DNSPolicy != "" && !slices.Contains(dnsPolicies, ps.DNSPolicy) {
		errs = append(errs, field.NotSupported(spec.Child("dnsPolicy"), ps.DNSPolicy, dnsPolicies))
	}
	if ps.DNSPolicy == corev1.DNSNone && ps.DNSConfig == nil {
		errs = append(errs, field.Required(spec.Child("dnsConfig"), fmt.Sprintf("must provide `dnsConfig` when `dnsPolicy` is %s", corev1.DNSNone)))
	}
	if a := ps.ActiveDeadlineSeconds; a != nil && (*a < 1 || *a > math.MaxInt32) {
		errs = append(errs, field.Invalid(spec.Child("activeDeadlineSeconds"), *a, "must be between 1 and 2147483647, inclusive"))
	}
	if sc := ps.SecurityContext; sc != nil {
		scp := spec.Child("securityContext")
		for _, id := range []struct {
			name string
			v    *int64
		}{{"runAsUser", sc.RunAsUser}, {"runAsGroup", sc.RunAsGroup}, {"fsGroup", sc.FSGroup}} {
			if id.v != nil && (*id.v < 0 || *id.v > math.MaxInt32) {
				errs = append(errs, field.Invalid(scp.Child(id.name), *id.v, "must be between 0 and 2147483647, inclusive"))
			}
		}
		if p := sc.FSGroupChangePolicy; p != nil && *p != corev1.FSGroupChangeOnRootMismatch && *p != corev1.FSGroupChangeAlways {
			errs = append(errs, field.NotSupported(scp.Child("fsGroupChangePolicy"), *p, []corev1.PodFSGroupChangePolicy{corev1.FSGroupChangeOnRootMismatch, corev1.FSGroupChangeAlways}))
		}
		if sp := sc.SeccompProfile; sp != nil && sp.Type == corev1.SeccompProfileTypeLocalhost && (sp.LocalhostProfile == nil || *sp.LocalhostProfile == "") {
			errs = append(errs, field.Required(scp.Child("seccompProfile", "localhostProfile"), "must be set when seccomp type is Localhost"))
		}
		for i, sys := range sc.Sysctls {
			if !sysctlName.MatchString(sys.Name) || len(sys.Name) > 253 {
				errs = append(errs, field.Invalid(scp.Child("sysctls").Index(i).Child("name"), sys.Name,
					fmt.Sprintf("must have at most 253 characters and match regex %s", sysctlName.String())))
			}
		}
	}
	errs = append(errs, metav1validation.ValidateLabels(ps.NodeSelector, spec.Child("nodeSelector"))...)
	for i, t := range ps.Tolerations {
		errs = append(errs, validateToleration(t, spec.Child("tolerations").Index(i))...)
	}
	if ps.Hostname != "" {
		for _, msg := range utilvalidation.IsDNS1123Label(ps.Hostname) {
			errs = append(errs, field.Invalid(spec.Child("hostname"), ps.Hostname, msg))
		}
	}
	if ps.Subdomain != "" {
		for _, msg := range utilvalidation.IsDNS1123Label(ps.Subdomain) {
			errs = append(errs, field.Invalid(spec.Child("subdomain"), ps.Subdomain, msg))
		}
	}
	for i, ha := range ps.HostAliases {
		if net.ParseIP(ha.IP) == nil {
			errs = append(errs, field.Invalid(spec.Child("hostAliases").Index(i).Child("ip"), ha.IP, "must be a valid IP address"))
		}
	}
	if ps.NodeName != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(ps.NodeName, false) {
			errs = append(errs, field.Invalid(spec.Child("nodeName"), ps.NodeName, msg))
		}
		if len(ps.SchedulingGates) > 0 {
			errs = append(errs, field.Forbidden(spec.Child("nodeName"), "cannot be set until all schedulingGates have been cleared"))
		}
	}
	for i, g := range ps.SchedulingGates {
		for _, msg := range utilvalidation.IsQualifiedName(g.Name) {
			errs = append(errs, field.Invalid(spec.Child("schedulingGates").Index(i), g.Name, msg))
		}
	}
	for i, g := range ps.ReadinessGates {
		for _, msg := range utilvalidation.IsQualifiedName(string(g.ConditionType)) {
			errs = append(errs, field.Invalid(spec.Child("readinessGates").Index(i).Child("conditionType"), g.ConditionType, msg))
		}
	}
	if ps.OS != nil && ps.OS.Name != corev1.Linux && ps.OS.Name != corev1.Windows {
		errs = append(errs, field.NotSupported(spec.Child("os"), ps.OS.Name, []corev1.OSName{corev1.Linux, corev1.Windows}))
	}
	for i, c := range ps.TopologySpreadConstraints {
		cp := spec.Child("topologySpreadConstraints").Index(i)
		if c.MaxSkew <= 0 {
			errs = append(errs, field.Invalid(cp.Child("maxSkew"), c.MaxSkew, "must be greater than zero"))
		}
		valid := []corev1.UnsatisfiableConstraintAction{corev1.DoNotSchedule, corev1.ScheduleAnyway}
		if !slices.Contains(valid, c.WhenUnsatisfiable) {
			errs = append(errs, field.NotSupported(cp.Child("whenUnsatisfiable"), c.WhenUnsatisfiable, valid))
		}
	}
	if a := ps.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil &&
		len(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms) == 0 {
		errs = append(errs, field.Required(spec.Child("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"),
			"must have at least one node selector term"))
	}
	return errs
}

var sysctlName = regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)

// validateToleration checks a toleration's key, operator, value and effect.
func validateToleration(t corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		errs = append(errs, metav1validation.ValidateLabelName(t.Key, p.Child("key"))...)
	}
	if t.Key == "" && t.Operator != corev1.TolerationOpExists {
		errs = append(errs, field.Invalid(p.Child("operator"), t.Operator,
			"operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
	}
	if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
		errs = append(errs, field.Invalid(p.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
	}
	switch t.Operator {
	case corev1.TolerationOpEqual, "":
		for _, msg := range utilvalidation.IsValidLabelValue(t.Value) {
			errs = append(errs, field.Invalid(p.Child("operator"), t.Value, msg))
		}
	case corev1.TolerationOpExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(p.Child("operator"), t, "value must be empty when `operator` is 'Exists'"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
	}
	if t.Effect != "" {
		valid := []corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}
		if !slices.Contains(valid, t.Effect) {
			errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, valid))
		}
	}
	return errs
}

var supportedAccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOnce, corev1.ReadWriteOncePod}

// validateAccessModes: known modes, ReadWriteOncePod alone.
func validateAccessModes(modes []corev1.PersistentVolumeAccessMode, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, m := range modes {
		if !slices.Contains(supportedAccessModes, m) {
			errs = append(errs, field.NotSupported(p, m, supportedAccessModes))
		}
	}
	if slices.Contains(modes, corev1.ReadWriteOncePod) && len(modes) > 1 {
		errs = append(errs, field.Forbidden(p, "may not use ReadWriteOncePod with other access modes"))
	}
	return errs
}

// validateVolumeModeAndClass: the volume mode and storage class name shared by claims and volumes.
func validateVolumeModeAndClass(mode *corev1.PersistentVolumeMode, class *string, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	if mode != nil && *mode != corev1.PersistentVolumeBlock && *mode != corev1.PersistentVolumeFilesystem {
		errs = append(errs, field.NotSupported(spec.Child("volumeMode"), *mode, []corev1.PersistentVolumeMode{corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem}))
	}
	if class != nil && *class != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(*class, false) {
			errs = append(errs, field.Invalid(spec.Child("storageClassName"), *class, msg))
		}
	}
	return errs
}

// validatePVCSpec checks a claim's spec (also a StatefulSet's claim templates).
func validatePVCSpec(ps *corev1.PersistentVolumeClaimSpec, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(ps.AccessModes) == 0 {
		errs = append(errs, field.Required(spec.Child("accessModes"), "at least 1 access mode is required"))
	}
	errs = append(errs, validateAccessModes(ps.AccessModes, spec.Child("accessModes"))...)
	if ps.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(ps.Selector, metav1validation.LabelSelectorValidationOptions{}, spec.Child("selector"))...)
	}
	// Upstream reports the storage request at spec.resources[storage].
	reqPath := spec.Child("resources").Key(string(corev1.ResourceStorage))
	q, ok := ps.Resources.Requests[corev1.ResourceStorage]
	if !ok {
		errs = append(errs, field.Required(reqPath, ""))
	} else if q.Sign() <= 0 {
		errs = append(errs, field.Invalid(reqPath, q.String(), "must be greater than zero"))
	}
	errs = append(errs, validateVolumeModeAndClass(ps.VolumeMode, ps.StorageClassName, spec)...)
	if ds, ref := ps.DataSource, ps.DataSourceRef; ds != nil && ref != nil && (ref.Namespace == nil || *ref.Namespace == "") {
		if ptr.Deref(ds.APIGroup, "") != ptr.Deref(ref.APIGroup, "") || ds.Kind != ref.Kind || ds.Name != ref.Name {
			errs = append(errs, field.Invalid(spec, spec.Child("dataSource"), "must match dataSourceRef"))
		}
	}
	return errs
}

// validatePVSpec checks a volume's spec: access modes, capacity (storage only), reclaim
// policy, exactly one source and the fields of the common sources.
func validatePVSpec(ps *corev1.PersistentVolumeSpec, spec *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(ps.AccessModes) == 0 {
		errs = append(errs, field.Required(spec.Child("accessModes"), ""))
	}
	errs = append(errs, validateAccessModes(ps.AccessModes, spec.Child("accessModes"))...)
	cp := spec.Child("capacity")
	if len(ps.Capacity) == 0 {
		errs = append(errs, field.Required(cp, ""))
	}
	if _, ok := ps.Capacity[corev1.ResourceStorage]; !ok || len(ps.Capacity) > 1 {
		errs = append(errs, field.NotSupported(cp, ps.Capacity, []corev1.ResourceName{corev1.ResourceStorage}))
	}
	for name, q := range ps.Capacity {
		if q.Sign() <= 0 {
			errs = append(errs, field.Invalid(cp.Key(string(name)), q.String(), "must be greater than zero"))
		}
	}
	policies := []corev1.PersistentVolumeReclaimPolicy{corev1.PersistentVolumeReclaimDelete, corev1.PersistentVolumeReclaimRecycle, corev1.PersistentVolumeReclaimRetain}
	if rp := ps.PersistentVolumeReclaimPolicy; rp != "" && !slices.Contains(policies, rp) {
		errs = append(errs, field.NotSupported(spec.Child("persistentVolumeReclaimPolicy"), rp, policies))
	}
	if ps.PersistentVolumeReclaimPolicy == corev1.PersistentVolumeReclaimRecycle && ps.HostPath != nil && filepath.Clean(ps.HostPath.Path) == "/" {
		errs = append(errs, field.Forbidden(spec.Child("persistentVolumeReclaimPolicy"), "may not be 'recycle' for a hostPath volume with the root directory '/'"))
	}
	// The sources in upstream's order: the first one set counts, the others are forbidden.
	src := ps.PersistentVolumeSource
	n := 0
	for _, f := range []struct {
		name string
		set  bool
	}{{"hostPath", src.HostPath != nil}, {"gcePersistentDisk", src.GCEPersistentDisk != nil}, {"awsElasticBlockStore", src.AWSElasticBlockStore != nil},
		{"glusterfs", src.Glusterfs != nil}, {"flocker", src.Flocker != nil}, {"nfs", src.NFS != nil}, {"rbd", src.RBD != nil},
		{"quobyte", src.Quobyte != nil}, {"cephfs", src.CephFS != nil}, {"iscsi", src.ISCSI != nil}, {"cinder", src.Cinder != nil},
		{"fc", src.FC != nil}, {"flexVolume", src.FlexVolume != nil}, {"azureFile", src.AzureFile != nil}, {"vsphereVolume", src.VsphereVolume != nil},
		{"photonPersistentDisk", src.PhotonPersistentDisk != nil}, {"portworxVolume", src.PortworxVolume != nil}, {"azureDisk", src.AzureDisk != nil},
		{"scaleIO", src.ScaleIO != nil}, {"local", src.Local != nil}, {"storageos", src.StorageOS != nil}, {"csi", src.CSI != nil}} {
		if !f.set {
			continue
		}
		if n > 0 {
			errs = append(errs, field.Forbidden(spec.Child(f.name), "may not specify more than 1 volume type"))
		}
		n++
	}
	if n == 0 {
		errs = append(errs, field.Required(spec, "must specify a volume type"))
	}
	if hp := src.HostPath; hp != nil {
		if slices.Contains(strings.Split(filepath.ToSlash(hp.Path), "/"), "..") {
			errs = append(errs, field.Invalid(spec.Child("hostPath", "path"), hp.Path, "must not contain '..'"))
		}
		if t := hp.Type; t != nil {
			valid := []corev1.HostPathType{corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory,
				corev1.HostPathFileOrCreate, corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev}
			if !slices.Contains(valid, *t) {
				errs = append(errs, field.NotSupported(spec.Child("hostPath", "type"), *t, valid))
			}
		}
	}
	if src.Local != nil && (ps.NodeAffinity == nil || ps.NodeAffinity.Required == nil) {
		errs = append(errs, field.Required(spec.Child("nodeAffinity"), "Local volume requires node affinity"))
	}
	if na := ps.NodeAffinity; na != nil && na.Required != nil && len(na.Required.NodeSelectorTerms) == 0 {
		errs = append(errs, field.Required(spec.Child("nodeAffinity", "required", "nodeSelectorTerms"), "must have at least one node selector term"))
	}
	if c := src.CSI; c != nil {
		if c.Driver == "" {
			errs = append(errs, field.Required(spec.Child("csi", "driver"), ""))
		}
		if c.VolumeHandle == "" {
			errs = append(errs, field.Required(spec.Child("csi", "volumeHandle"), ""))
		}
	}
	if nfs := src.NFS; nfs != nil {
		if nfs.Server == "" {
			errs = append(errs, field.Required(spec.Child("nfs", "server"), ""))
		}
		if nfs.Path == "" {
			errs = append(errs, field.Required(spec.Child("nfs", "path"), ""))
		} else if !filepath.IsAbs(nfs.Path) {
			errs = append(errs, field.Invalid(spec.Child("nfs", "path"), nfs.Path, "must be an absolute path"))
		}
	}
	return append(errs, validateVolumeModeAndClass(ps.VolumeMode, &ps.StorageClassName, spec)...)
}

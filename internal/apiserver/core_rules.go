package apiserver

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	storagehelpers "k8s.io/component-helpers/storage/volume"
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
			p.Status = corev1.PodStatus{Phase: corev1.PodPending, QOSClass: qosClass(p)}
		},
		validate:       validatePod,
		validateUpdate: validatePodUpdate,
		gracefulDelete: podGracefulDelete,
	}
}

// qosClass is the pod's quality-of-service class, from its containers' requests and limits.
func qosClass(p *corev1.Pod) corev1.PodQOSClass {
	any, guaranteed := false, true
	for _, c := range append(append([]corev1.Container{}, p.Spec.InitContainers...), p.Spec.Containers...) {
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, hasReq := c.Resources.Requests[r]
			lim, hasLim := c.Resources.Limits[r]
			if hasReq || hasLim {
				any = true
			}
			if !hasLim || (hasReq && req.Cmp(lim) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case !any:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	default:
		return corev1.PodQOSBurstable
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
				if port.ContainerPort < 1 || port.ContainerPort > 65535 {
					errs = append(errs, field.Invalid(cp.Child("ports").Index(j).Child("containerPort"), port.ContainerPort, "must be between 1 and 65535, inclusive"))
				}
			}
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
	check(p.Spec.InitContainers, spec.Child("initContainers"))
	check(p.Spec.Containers, spec.Child("containers"))
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
			pv := o.(*corev1.PersistentVolume)
			spec := field.NewPath("spec")
			var errs field.ErrorList
			if len(pv.Spec.AccessModes) == 0 {
				errs = append(errs, field.Required(spec.Child("accessModes"), ""))
			}
			q, ok := pv.Spec.Capacity[corev1.ResourceStorage]
			if !ok {
				errs = append(errs, field.Required(spec.Child("capacity").Key(string(corev1.ResourceStorage)), ""))
			} else if q.Sign() <= 0 {
				errs = append(errs, field.Invalid(spec.Child("capacity").Key(string(corev1.ResourceStorage)), q.String(), "must be greater than zero"))
			}
			if n := countVolumeSources(pv.Spec.PersistentVolumeSource); n != 1 {
				errs = append(errs, field.Required(spec, "must specify exactly one volume type"))
			}
			return errs
		},
	}
}

func countVolumeSources(s corev1.PersistentVolumeSource) int {
	n := 0
	for _, set := range []bool{s.CSI != nil, s.HostPath != nil, s.Local != nil, s.NFS != nil, s.AWSElasticBlockStore != nil,
		s.ISCSI != nil, s.FC != nil, s.GCEPersistentDisk != nil, s.AzureDisk != nil, s.AzureFile != nil, s.RBD != nil,
		s.CephFS != nil, s.Cinder != nil, s.Glusterfs != nil, s.FlexVolume != nil, s.VsphereVolume != nil} {
		if set {
			n++
		}
	}
	return n
}

func pvcHooks() hooks {
	return hooks{
		prepareForCreate: func(o runtime.Object) {
			o.(*corev1.PersistentVolumeClaim).Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimPending}
		},
		validate: func(o runtime.Object) field.ErrorList {
			pvc := o.(*corev1.PersistentVolumeClaim)
			spec := field.NewPath("spec")
			var errs field.ErrorList
			if len(pvc.Spec.AccessModes) == 0 {
				errs = append(errs, field.Required(spec.Child("accessModes"), "at least 1 access mode is required"))
			}
			reqPath := spec.Child("resources", "requests").Key(string(corev1.ResourceStorage))
			q, ok := pvc.Spec.Resources.Requests[corev1.ResourceStorage]
			if !ok {
				errs = append(errs, field.Required(reqPath, ""))
			} else if q.Sign() <= 0 {
				errs = append(errs, field.Invalid(reqPath, q.String(), "must be greater than zero"))
			}
			return errs
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

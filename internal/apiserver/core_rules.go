package apiserver

import (
	"context"
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
			addDefaultTolerations(p)
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

func validateConfigMap(o runtime.Object) field.ErrorList {
	cm := o.(*corev1.ConfigMap)
	var errs field.ErrorList
	for k := range cm.Data {
		errs = append(errs, configKey(field.NewPath("data").Key(k), k)...)
	}
	for k := range cm.BinaryData {
		errs = append(errs, configKey(field.NewPath("binaryData").Key(k), k)...)
		if _, dup := cm.Data[k]; dup {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(k), k, "duplicate of key present in data"))
		}
	}
	return errs
}

func validateSecret(o runtime.Object) field.ErrorList {
	s := o.(*corev1.Secret)
	var errs field.ErrorList
	for k := range s.Data {
		errs = append(errs, configKey(field.NewPath("data").Key(k), k)...)
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

// defaultTolerationSeconds is how long a pod stays on a node that is not ready or
// unreachable before it is evicted, unless it says otherwise (upstream's
// DefaultTolerationSeconds admission).
const defaultTolerationSeconds = int64(300)

func addDefaultTolerations(p *corev1.Pod) {
	for _, key := range []string{corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable} {
		found := false
		for _, t := range p.Spec.Tolerations {
			if (t.Key == key || t.Key == "") && (t.Effect == corev1.TaintEffectNoExecute || t.Effect == "") {
				found = true
			}
		}
		if !found {
			secs := defaultTolerationSeconds
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{
				Key: key, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: &secs,
			})
		}
	}
}

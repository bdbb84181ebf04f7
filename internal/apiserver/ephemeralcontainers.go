package apiserver

import (
	"context"
	"fmt"
	"reflect"
	"unicode"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
)

// newEphemeralContainersREST serves pods/ephemeralcontainers: a pod read whole, and an
// update (PUT or PATCH) that changes only spec.ephemeralContainers, adding containers to
// a running pod for the kubelet to start; existing ones are never removed or changed.
func newEphemeralContainersREST(scheme *runtime.Scheme, r *resource, store *genericregistry.Store) *podSpecREST {
	return newPodSpecREST(store, ephemeralContainersStrategy{newStrategy(scheme, r)})
}

// ephemeralContainersStrategy keeps everything of the stored pod but
// spec.ephemeralContainers (metadata as a status write does), and starts a new
// generation when they changed.
type ephemeralContainersStrategy struct{ strategy }

func (s ephemeralContainersStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	p, op := obj.(*corev1.Pod), old.(*corev1.Pod)
	ecs := p.Spec.EphemeralContainers
	p.Spec = *op.Spec.DeepCopy()
	p.Spec.EphemeralContainers = ecs
	p.Status = *op.Status.DeepCopy()
	metav1.ResetObjectMetaForStatus(p, op)
	if !apiequality.Semantic.DeepEqual(p.Spec, op.Spec) {
		p.Generation = op.Generation + 1
	}
}

func (s ephemeralContainersStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	p, op := obj.(*corev1.Pod), old.(*corev1.Pod)
	if _, mirror := op.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
		return field.ErrorList{field.Forbidden(field.NewPath(""), "static pods do not support ephemeral containers")}
	}
	errs := apivalidation.ValidateObjectMetaUpdate(&p.ObjectMeta, &op.ObjectMeta, field.NewPath("metadata"))
	errs = append(errs, s.validateObject(p)...)
	return append(errs, validateEphemeralContainersUpdate(p.Spec.EphemeralContainers, op.Spec.EphemeralContainers)...)
}

// validateEphemeralContainersUpdate: every ephemeral container of old is still there,
// unchanged (by name: a patch may reorder the list).
func validateEphemeralContainersUpdate(ecs, old []corev1.EphemeralContainer) field.ErrorList {
	p := field.NewPath("spec", "ephemeralContainers")
	byName := make(map[string]*corev1.EphemeralContainer, len(ecs))
	for i := range ecs {
		byName[ecs[i].Name] = &ecs[i]
	}
	var errs field.ErrorList
	for _, o := range old {
		switch n, ok := byName[o.Name]; {
		case !ok:
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("existing ephemeral containers %q may not be removed", o.Name)))
		case !apiequality.Semantic.DeepEqual(o, *n):
			errs = append(errs, field.Forbidden(p, fmt.Sprintf("existing ephemeral containers %q may not be changed", o.Name)))
		}
	}
	return errs
}

// validatePodCreate: a new pod has no ephemeral containers; they are added through the
// subresource.
func validatePodCreate(o runtime.Object) field.ErrorList {
	if len(o.(*corev1.Pod).Spec.EphemeralContainers) > 0 {
		return field.ErrorList{field.Forbidden(field.NewPath("spec", "ephemeralContainers"), "cannot be set on create")}
	}
	return nil
}

// ephemeralContainerFields are the fields an ephemeral container may set: no ports,
// probes, lifecycle, resources or restart rules, as nothing of the pod may rely on it.
var ephemeralContainerFields = sets.New("Name", "Image", "Command", "Args", "WorkingDir", "EnvFrom", "Env",
	"VolumeMounts", "VolumeDevices", "TerminationMessagePath", "TerminationMessagePolicy", "ImagePullPolicy",
	"SecurityContext", "Stdin", "StdinOnce", "TTY")

// validateEphemeralContainers checks a pod's ephemeral containers as containers (name,
// image, mounts of the pod's volumes, the rules of every container), with names unique
// across all the pod's containers, a target that is an app or init container, only the
// fields ephemeralContainerFields allows and no subPath mounts.
func validateEphemeralContainers(spec *corev1.PodSpec, p *field.Path) field.ErrorList {
	if len(spec.EphemeralContainers) == 0 {
		return nil
	}
	others := sets.New[string]()
	for _, list := range [][]corev1.Container{spec.Containers, spec.InitContainers} {
		for _, c := range list {
			others.Insert(c.Name)
		}
	}
	all := others.Clone()
	volumes := sets.New[string]()
	for _, v := range spec.Volumes {
		volumes.Insert(v.Name)
	}
	var errs field.ErrorList
	for i := range spec.EphemeralContainers {
		ec := &spec.EphemeralContainers[i]
		ep := p.Index(i)
		c := (*corev1.Container)(&ec.EphemeralContainerCommon)
		errs = append(errs, dnsLabel(ep.Child("name"), c.Name)...)
		if c.Image == "" {
			errs = append(errs, field.Required(ep.Child("image"), ""))
		}
		errs = append(errs, validateContainerExtra(c, ep, spec.HostNetwork)...)
		for j, m := range c.VolumeMounts {
			mp := ep.Child("volumeMounts").Index(j)
			if !volumes.Has(m.Name) {
				errs = append(errs, field.NotFound(mp.Child("name"), m.Name))
			}
			if m.MountPath == "" {
				errs = append(errs, field.Required(mp.Child("mountPath"), ""))
			}
			if m.SubPath != "" {
				errs = append(errs, field.Forbidden(mp.Child("subPath"), "cannot be set for an Ephemeral Container"))
			}
			if m.SubPathExpr != "" {
				errs = append(errs, field.Forbidden(mp.Child("subPathExpr"), "cannot be set for an Ephemeral Container"))
			}
		}
		if all.Has(c.Name) {
			errs = append(errs, field.Duplicate(ep.Child("name"), c.Name))
		}
		all.Insert(c.Name)
		if ec.TargetContainerName != "" && !others.Has(ec.TargetContainerName) {
			errs = append(errs, field.NotFound(ep.Child("targetContainerName"), ec.TargetContainerName))
		}
		errs = append(errs, onlyAllowedFields(ec.EphemeralContainerCommon, ephemeralContainerFields, ep)...)
	}
	return errs
}

// onlyAllowedFields forbids every field of struct v that is set but not in allowed,
// naming it by its JSON name (the Go name with a lower-case first letter).
func onlyAllowedFields(v interface{}, allowed sets.Set[string], p *field.Path) field.ErrorList {
	var errs field.ErrorList
	t, val := reflect.TypeOf(v), reflect.ValueOf(v)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if allowed.Has(f.Name) || val.Field(i).IsZero() {
			continue
		}
		r, n := utf8.DecodeRuneInString(f.Name)
		errs = append(errs, field.Forbidden(p.Child(string(unicode.ToLower(r))+f.Name[n:]), "cannot be set for an Ephemeral Container"))
	}
	return errs
}

package apiserver

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// appsResources are the rows of apps/v1: the workload kinds (Deployment, ReplicaSet,
// StatefulSet, DaemonSet) and ControllerRevision.
func appsResources() []resource {
	containersCols := []metav1.TableColumnDefinition{
		wide("Containers", "string", "Names of each container in the template."),
		wide("Images", "string", "Images referenced by each container in the template."),
	}
	selectorCol := wide("Selector", "string", "Label selector of the pods.")
	apps := func(r resource) resource {
		r.group, r.version, r.namespaced, r.status, r.generation = "apps", "v1", true, true, true
		r.categories = []string{"all"}
		return r
	}
	return []resource{
		apps(resource{
			kind: "Deployment", plural: "deployments", singular: "deployment", shortNames: []string{"deploy"}, scale: true,
			newObj: func() runtime.Object { return &appsv1.Deployment{} }, newList: func() runtime.Object { return &appsv1.DeploymentList{} },
			columns: append([]metav1.TableColumnDefinition{nameCol(),
				col("Ready", "string", "Number of the pod with ready state"),
				col("Up-to-date", "string", "Total number of non-terminated pods targeted by this deployment that have the desired template spec."),
				col("Available", "string", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment."),
				ageCol()}, append(containersCols, selectorCol)...),
			row: func(o runtime.Object) []interface{} {
				d := o.(*appsv1.Deployment)
				names, images := containers(d.Spec.Template.Spec.Containers)
				return []interface{}{d.Name, ratio(d.Status.ReadyReplicas, d.Spec.Replicas), int64(d.Status.UpdatedReplicas),
					int64(d.Status.AvailableReplicas), age(d.CreationTimestamp), names, images, selectorString(d.Spec.Selector)}
			},
			hooks: hooks{validate: func(o runtime.Object) field.ErrorList {
				return validateDeployment(o.(*appsv1.Deployment))
			}},
		}),
		apps(resource{
			kind: "ReplicaSet", plural: "replicasets", singular: "replicaset", shortNames: []string{"rs"}, scale: true,
			newObj: func() runtime.Object { return &appsv1.ReplicaSet{} }, newList: func() runtime.Object { return &appsv1.ReplicaSetList{} },
			columns: append([]metav1.TableColumnDefinition{nameCol(),
				col("Desired", "integer", "Number of desired pods."), col("Current", "integer", "Number of actually running pods."),
				col("Ready", "integer", "Number of ready pods."), ageCol()}, append(containersCols, selectorCol)...),
			row: func(o runtime.Object) []interface{} {
				rs := o.(*appsv1.ReplicaSet)
				names, images := containers(rs.Spec.Template.Spec.Containers)
				return []interface{}{rs.Name, int64(deref(rs.Spec.Replicas)), int64(rs.Status.Replicas), int64(rs.Status.ReadyReplicas),
					age(rs.CreationTimestamp), names, images, selectorString(rs.Spec.Selector)}
			},
			hooks: hooks{validate: func(o runtime.Object) field.ErrorList {
				rs := o.(*appsv1.ReplicaSet)
				errs := validateAppsWorkload("replicaset", rs.Spec.Replicas, rs.Spec.Selector, &rs.Spec.Template, true)
				return append(errs, nonNegative32(field.NewPath("spec", "minReadySeconds"), rs.Spec.MinReadySeconds)...)
			}},
		}),
		apps(resource{
			kind: "StatefulSet", plural: "statefulsets", singular: "statefulset", shortNames: []string{"sts"}, scale: true,
			newObj: func() runtime.Object { return &appsv1.StatefulSet{} }, newList: func() runtime.Object { return &appsv1.StatefulSetList{} },
			columns: append([]metav1.TableColumnDefinition{nameCol(), col("Ready", "string", "Number of the pod with ready state"), ageCol()}, containersCols...),
			row: func(o runtime.Object) []interface{} {
				s := o.(*appsv1.StatefulSet)
				names, images := containers(s.Spec.Template.Spec.Containers)
				return []interface{}{s.Name, ratio(s.Status.ReadyReplicas, s.Spec.Replicas), age(s.CreationTimestamp), names, images}
			},
			hooks: hooks{name: apivalidation.NameIsDNSLabel, validate: func(o runtime.Object) field.ErrorList {
				return validateStatefulSet(o.(*appsv1.StatefulSet))
			}},
		}),
		{
			group: "apps", version: "v1", kind: "ControllerRevision", plural: "controllerrevisions", singular: "controllerrevision", namespaced: true,
			newObj: func() runtime.Object { return &appsv1.ControllerRevision{} }, newList: func() runtime.Object { return &appsv1.ControllerRevisionList{} },
			columns: []metav1.TableColumnDefinition{nameCol(), col("Controller", "string", "The controller that owns the revision"),
				col("Revision", "integer", "The revision number"), ageCol()},
			row: func(o runtime.Object) []interface{} {
				r := o.(*appsv1.ControllerRevision)
				controller := "<none>"
				if ref := metav1.GetControllerOf(r); ref != nil {
					controller = strings.ToLower(ref.Kind) + ".apps/" + ref.Name
				}
				return []interface{}{r.Name, controller, r.Revision, age(r.CreationTimestamp)}
			},
			hooks: hooks{validateUpdate: func(o, old runtime.Object) field.ErrorList {
				n, p := o.(*appsv1.ControllerRevision), old.(*appsv1.ControllerRevision)
				if !apiequality.Semantic.DeepEqual(n.Data, p.Data) {
					return field.ErrorList{field.Invalid(field.NewPath("data"), "", "field is immutable")}
				}
				return nil
			}},
		},
		apps(resource{
			kind: "DaemonSet", plural: "daemonsets", singular: "daemonset", shortNames: []string{"ds"},
			newObj: func() runtime.Object { return &appsv1.DaemonSet{} }, newList: func() runtime.Object { return &appsv1.DaemonSetList{} },
			columns: append([]metav1.TableColumnDefinition{nameCol(),
				col("Desired", "integer", "The total number of nodes that should be running the daemon pod."),
				col("Current", "integer", "The number of nodes running at least one daemon pod."),
				col("Ready", "integer", "The number of nodes that should be running the daemon pod and have one or more ready."),
				col("Up-to-date", "integer", "The total number of nodes that are running updated daemon pod"),
				col("Available", "integer", "The number of nodes that should be running the daemon pod and have one or more available."),
				col("Node Selector", "string", "Node selector of the pod template."), ageCol()}, append(containersCols, selectorCol)...),
			row: func(o runtime.Object) []interface{} {
				d := o.(*appsv1.DaemonSet)
				names, images := containers(d.Spec.Template.Spec.Containers)
				return []interface{}{d.Name, int64(d.Status.DesiredNumberScheduled), int64(d.Status.CurrentNumberScheduled),
					int64(d.Status.NumberReady), int64(d.Status.UpdatedNumberScheduled), int64(d.Status.NumberAvailable),
					labelMap(d.Spec.Template.Spec.NodeSelector), age(d.CreationTimestamp), names, images, selectorString(d.Spec.Selector)}
			},
			hooks: hooks{
				validate: func(o runtime.Object) field.ErrorList {
					return validateDaemonSet(o.(*appsv1.DaemonSet))
				},
				prepareForCreate: func(o runtime.Object) { setTemplateGeneration(o.(*appsv1.DaemonSet), 1) },
				prepareForUpdate: func(o, old runtime.Object) {
					n, p := o.(*appsv1.DaemonSet), old.(*appsv1.DaemonSet)
					gen, _ := strconv.ParseInt(p.Annotations[appsv1.DeprecatedTemplateGeneration], 10, 64)
					if !apiequality.Semantic.DeepEqual(n.Spec.Template, p.Spec.Template) {
						gen++
					}
					setTemplateGeneration(n, gen)
				},
			},
		}),
	}
}

// setTemplateGeneration records the DaemonSet's template generation in the deprecated
// annotation upstream keeps for it.
func setTemplateGeneration(d *appsv1.DaemonSet, gen int64) {
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[appsv1.DeprecatedTemplateGeneration] = strconv.FormatInt(gen, 10)
}

func deref(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func ratio(ready int32, want *int32) string {
	return itoa(ready) + "/" + itoa(deref(want))
}

func itoa(i int32) string { return strconv.Itoa(int(i)) }

func containers(list []corev1.Container) (string, string) {
	var names, images []string
	for _, c := range list {
		names = append(names, c.Name)
		images = append(images, c.Image)
	}
	return strings.Join(names, ","), strings.Join(images, ",")
}

// validateWorkload: the rules Deployments, ReplicaSets, StatefulSets and DaemonSets share.
func validateWorkload(replicas *int32, selector *metav1.LabelSelector, tmpl *corev1.PodTemplateSpec, claimVolumes ...string) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if replicas != nil && *replicas < 0 {
		errs = append(errs, field.Invalid(spec.Child("replicas"), *replicas, "must be greater than or equal to 0"))
	}
	if selector == nil {
		errs = append(errs, field.Required(spec.Child("selector"), ""),
			field.Invalid(spec.Child("template", "metadata", "labels"), tmpl.Labels, "`selector` does not match template `labels`"))
	} else {
		sel, err := metav1.LabelSelectorAsSelector(selector)
		switch {
		case err != nil:
			errs = append(errs, field.Invalid(spec.Child("selector"), selector, err.Error()))
		case sel.Empty():
			errs = append(errs, field.Invalid(spec.Child("selector"), selector, "empty selector is invalid for deployment"))
		case !sel.Matches(labels.Set(tmpl.Labels)):
			errs = append(errs, field.Invalid(spec.Child("template", "metadata", "labels"), tmpl.Labels, "`selector` does not match template `labels`"))
		}
	}
	errs = append(errs, validateTemplateMeta(tmpl, spec.Child("template"))...)
	return append(errs, validatePodSpec(&tmpl.Spec, spec.Child("template", "spec"), claimVolumes)...)
}

// nonNegative32 is upstream's check of a count that may be zero.
func nonNegative32(p *field.Path, v int32) field.ErrorList {
	if v < 0 {
		return field.ErrorList{field.Invalid(p, v, "must be greater than or equal to 0")}
	}
	return nil
}

// validateAppsWorkload: the selector and template rules of the apps kinds. The selector
// is required except for DaemonSets (required=false), whose template must still match it.
func validateAppsWorkload(kind string, replicas *int32, selector *metav1.LabelSelector, tmpl *corev1.PodTemplateSpec, required bool) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if replicas != nil {
		errs = append(errs, nonNegative32(spec.Child("replicas"), *replicas)...)
	}
	sp := spec.Child("selector")
	if selector == nil && required {
		errs = append(errs, field.Required(sp, ""))
	} else if selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(selector, metav1validation.LabelSelectorValidationOptions{}, sp)...)
		if len(selector.MatchLabels)+len(selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(sp, selector, "empty selector is invalid for "+kind))
		}
	}
	sel, err := metav1.LabelSelectorAsSelector(selector)
	switch {
	case err != nil && required:
		errs = append(errs, field.Invalid(sp, selector, "invalid label selector"))
	case err == nil && (selector == nil || !sel.Empty()) && !sel.Matches(labels.Set(tmpl.Labels)):
		errs = append(errs, field.Invalid(spec.Child("template", "metadata", "labels"), tmpl.Labels, "`selector` does not match template `labels`"))
	}
	return append(errs, validateAppsTemplate(kind, tmpl, spec.Child("template"), nil)...)
}

// validateAppsTemplate checks a workload's pod template: its labels and annotations,
// its spec, restartPolicy Always and no activeDeadlineSeconds.
func validateAppsTemplate(kind string, tmpl *corev1.PodTemplateSpec, p *field.Path, claimVolumes []string) field.ErrorList {
	errs := validateTemplateMeta(tmpl, p)
	if tmpl.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(p.Child("spec", "restartPolicy"), tmpl.Spec.RestartPolicy, []corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	if tmpl.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(p.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in "+kind+" is not Supported"))
	}
	return append(errs, validatePodSpec(&tmpl.Spec, p.Child("spec"), claimVolumes)...)
}

// validateTemplateMeta checks a pod template's labels and annotations.
func validateTemplateMeta(tmpl *corev1.PodTemplateSpec, p *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabels(tmpl.Labels, p.Child("labels"))
	return append(errs, apivalidation.ValidateAnnotations(tmpl.Annotations, p.Child("annotations"))...)
}

// validateIntOrPercent: a non-negative count or a percentage, at most 100%
// when atMost100.
func validateIntOrPercent(v *intstr.IntOrString, p *field.Path, atMost100 bool) field.ErrorList {
	if v == nil {
		return nil
	}
	var errs field.ErrorList
	if v.Type == intstr.String {
		if msgs := validation.IsValidPercent(v.StrVal); len(msgs) > 0 {
			for _, msg := range msgs {
				errs = append(errs, field.Invalid(p, v, msg))
			}
			return errs
		}
	} else {
		errs = append(errs, nonNegative32(p, v.IntVal)...)
	}
	if atMost100 && v.Type == intstr.String && intOrPercentValue(v) > 100 {
		errs = append(errs, field.Invalid(p, v, "must not be greater than 100%"))
	}
	return errs
}

func intOrPercentValue(v *intstr.IntOrString) int {
	if v == nil {
		return 0
	}
	if v.Type == intstr.String {
		n, _ := strconv.Atoi(strings.TrimSuffix(v.StrVal, "%"))
		return n
	}
	return v.IntValue()
}

func validateDeployment(d *appsv1.Deployment) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateAppsWorkload("deployment", d.Spec.Replicas, d.Spec.Selector, &d.Spec.Template, true)
	sp := spec.Child("strategy")
	switch d.Spec.Strategy.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if d.Spec.Strategy.RollingUpdate != nil {
			errs = append(errs, field.Forbidden(sp.Child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'"))
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		ru := d.Spec.Strategy.RollingUpdate
		if ru == nil {
			errs = append(errs, field.Required(sp.Child("rollingUpdate"), "this should be defaulted and never be nil"))
			break
		}
		rp := sp.Child("rollingUpdate")
		errs = append(errs, validateIntOrPercent(ru.MaxUnavailable, rp.Child("maxUnavailable"), true)...)
		errs = append(errs, validateIntOrPercent(ru.MaxSurge, rp.Child("maxSurge"), false)...)
		if intOrPercentValue(ru.MaxUnavailable) == 0 && intOrPercentValue(ru.MaxSurge) == 0 {
			errs = append(errs, field.Invalid(rp.Child("maxUnavailable"), ru.MaxUnavailable, "may not be 0 when `maxSurge` is 0"))
		}
	default:
		errs = append(errs, field.NotSupported(sp, d.Spec.Strategy, []string{string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType)}))
	}
	errs = append(errs, nonNegative32(spec.Child("minReadySeconds"), d.Spec.MinReadySeconds)...)
	if d.Spec.RevisionHistoryLimit != nil {
		errs = append(errs, nonNegative32(spec.Child("revisionHistoryLimit"), *d.Spec.RevisionHistoryLimit)...)
	}
	if pd := d.Spec.ProgressDeadlineSeconds; pd != nil {
		errs = append(errs, nonNegative32(spec.Child("progressDeadlineSeconds"), *pd)...)
		if *pd <= d.Spec.MinReadySeconds {
			errs = append(errs, field.Invalid(spec.Child("progressDeadlineSeconds"), *pd, "must be greater than minReadySeconds"))
		}
	}
	return errs
}

func validateStatefulSet(s *appsv1.StatefulSet) field.ErrorList {
	spec := field.NewPath("spec")
	var claims []string
	for _, c := range s.Spec.VolumeClaimTemplates {
		claims = append(claims, c.Name)
	}
	var errs field.ErrorList
	switch s.Spec.PodManagementPolicy {
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	case "":
		errs = append(errs, field.Required(spec.Child("podManagementPolicy"), ""))
	default:
		errs = append(errs, field.Invalid(spec.Child("podManagementPolicy"), s.Spec.PodManagementPolicy,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement)))
	}
	up := spec.Child("updateStrategy")
	switch s.Spec.UpdateStrategy.Type {
	case "":
		errs = append(errs, field.Required(up, ""))
	case appsv1.OnDeleteStatefulSetStrategyType:
		if s.Spec.UpdateStrategy.RollingUpdate != nil {
			errs = append(errs, field.Invalid(up.Child("rollingUpdate"), s.Spec.UpdateStrategy.RollingUpdate,
				fmt.Sprintf("only allowed for updateStrategy '%s'", appsv1.RollingUpdateStatefulSetStrategyType)))
		}
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil {
			rp := up.Child("rollingUpdate")
			if ru.Partition != nil {
				errs = append(errs, nonNegative32(rp.Child("partition"), *ru.Partition)...)
			}
			if ru.MaxUnavailable != nil {
				errs = append(errs, validateIntOrPercent(ru.MaxUnavailable, rp.Child("maxUnavailable"), true)...)
				if intOrPercentValue(ru.MaxUnavailable) == 0 {
					errs = append(errs, field.Invalid(rp.Child("maxUnavailable"), ru.MaxUnavailable, "should be greater than 0"))
				}
			}
		}
	default:
		errs = append(errs, field.Invalid(up, s.Spec.UpdateStrategy,
			fmt.Sprintf("must be '%s' or '%s'", appsv1.RollingUpdateStatefulSetStrategyType, appsv1.OnDeleteStatefulSetStrategyType)))
	}
	if rp := s.Spec.PersistentVolumeClaimRetentionPolicy; rp != nil {
		valid := []string{string(appsv1.RetainPersistentVolumeClaimRetentionPolicyType), string(appsv1.DeletePersistentVolumeClaimRetentionPolicyType)}
		pp := spec.Child("persistentVolumeClaimRetentionPolicy")
		for _, f := range []struct {
			name string
			v    appsv1.PersistentVolumeClaimRetentionPolicyType
		}{{"whenDeleted", rp.WhenDeleted}, {"whenScaled", rp.WhenScaled}} {
			if !slices.Contains(valid, string(f.v)) {
				errs = append(errs, field.NotSupported(pp.Child(f.name), f.v, valid))
			}
		}
	}
	for i := range s.Spec.VolumeClaimTemplates {
		errs = append(errs, validatePVCSpec(&s.Spec.VolumeClaimTemplates[i].Spec, spec.Child("volumeClaimTemplates").Index(i).Child("spec"))...)
	}
	if s.Spec.Ordinals != nil {
		errs = append(errs, nonNegative32(spec.Child("ordinals", "start"), s.Spec.Ordinals.Start)...)
	}
	if s.Spec.ServiceName != "" {
		for _, msg := range apivalidation.NameIsDNS1035Label(s.Spec.ServiceName, false) {
			errs = append(errs, field.Invalid(spec.Child("serviceName"), s.Spec.ServiceName, msg))
		}
	}
	errs = append(errs, nonNegative32(spec.Child("minReadySeconds"), s.Spec.MinReadySeconds)...)
	if s.Spec.Replicas != nil {
		errs = append(errs, nonNegative32(spec.Child("replicas"), *s.Spec.Replicas)...)
	}
	sp := spec.Child("selector")
	if s.Spec.Selector == nil {
		errs = append(errs, field.Required(sp, ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Spec.Selector, metav1validation.LabelSelectorValidationOptions{}, sp)...)
		if len(s.Spec.Selector.MatchLabels)+len(s.Spec.Selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(sp, s.Spec.Selector, "empty selector is invalid for statefulset"))
		}
	}
	if sel, err := metav1.LabelSelectorAsSelector(s.Spec.Selector); err != nil {
		errs = append(errs, field.Invalid(sp, s.Spec.Selector, ""))
	} else if (s.Spec.Selector == nil || !sel.Empty()) && !sel.Matches(labels.Set(s.Spec.Template.Labels)) {
		errs = append(errs, field.Invalid(spec.Child("template", "metadata", "labels"), s.Spec.Template.Labels, "`selector` does not match template `labels`"))
	}
	return append(errs, validateAppsTemplate("StatefulSet", &s.Spec.Template, spec.Child("template"), claims)...)
}

func validateDaemonSet(d *appsv1.DaemonSet) field.ErrorList {
	spec := field.NewPath("spec")
	errs := validateAppsWorkload("daemonset", nil, d.Spec.Selector, &d.Spec.Template, false)
	errs = append(errs, nonNegative32(spec.Child("minReadySeconds"), d.Spec.MinReadySeconds)...)
	up := spec.Child("updateStrategy")
	switch d.Spec.UpdateStrategy.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
	case appsv1.RollingUpdateDaemonSetStrategyType:
		ru := d.Spec.UpdateStrategy.RollingUpdate
		if ru == nil {
			errs = append(errs, field.Required(up.Child("rollingUpdate"), ""))
			break
		}
		rp := up.Child("rollingUpdate")
		errs = append(errs, validateIntOrPercent(ru.MaxUnavailable, rp.Child("maxUnavailable"), true)...)
		errs = append(errs, validateIntOrPercent(ru.MaxSurge, rp.Child("maxSurge"), true)...)
		if intOrPercentValue(ru.MaxUnavailable) == 0 && intOrPercentValue(ru.MaxSurge) == 0 {
			errs = append(errs, field.Required(rp.Child("maxUnavailable"), "cannot be 0 when maxSurge is 0"))
		}
	default:
		errs = append(errs, field.NotSupported(up, d.Spec.UpdateStrategy, []string{string(appsv1.RollingUpdateDaemonSetStrategyType), string(appsv1.OnDeleteDaemonSetStrategyType)}))
	}
	if d.Spec.RevisionHistoryLimit != nil {
		errs = append(errs, nonNegative32(spec.Child("revisionHistoryLimit"), *d.Spec.RevisionHistoryLimit)...)
	}
	return errs
}

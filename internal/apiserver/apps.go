package apiserver

import (
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
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
				d := o.(*appsv1.Deployment)
				return validateWorkload(d.Spec.Replicas, d.Spec.Selector, &d.Spec.Template)
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
				return validateWorkload(rs.Spec.Replicas, rs.Spec.Selector, &rs.Spec.Template)
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
			hooks: hooks{validate: func(o runtime.Object) field.ErrorList {
				s := o.(*appsv1.StatefulSet)
				var claims []string
				for _, c := range s.Spec.VolumeClaimTemplates {
					claims = append(claims, c.Name)
				}
				return validateWorkload(s.Spec.Replicas, s.Spec.Selector, &s.Spec.Template, claims...)
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
					d := o.(*appsv1.DaemonSet)
					return validateWorkload(nil, d.Spec.Selector, &d.Spec.Template)
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
		errs = append(errs, field.Required(spec.Child("selector"), ""))
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
	return append(errs, validatePodSpec(&tmpl.Spec, spec.Child("template", "spec"), claimVolumes)...)
}

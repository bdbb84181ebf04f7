package apiserver

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// replicationControllerResources are the core/v1 rows of the oldest workload API:
// ReplicationControllers (with status and scale) and PodTemplates.
func replicationControllerResources() []resource {
	return []resource{
		{
			version: "v1", kind: "ReplicationController", plural: "replicationcontrollers", singular: "replicationcontroller",
			shortNames: []string{"rc"}, categories: []string{"all"}, namespaced: true, status: true, scale: true, generation: true,
			newObj: func() runtime.Object { return &corev1.ReplicationController{} }, newList: func() runtime.Object { return &corev1.ReplicationControllerList{} },
			columns: []metav1.TableColumnDefinition{nameCol(),
				col("Desired", "integer", "Number of desired pods."), col("Current", "integer", "Number of actually running pods."),
				col("Ready", "integer", "Number of ready pods."), ageCol(),
				wide("Containers", "string", "Names of each container in the template."),
				wide("Images", "string", "Images referenced by each container in the template."),
				wide("Selector", "string", "Label selector of the pods.")},
			row: func(o runtime.Object) []interface{} {
				rc := o.(*corev1.ReplicationController)
				var names, images string
				if rc.Spec.Template != nil {
					names, images = containers(rc.Spec.Template.Spec.Containers)
				}
				return []interface{}{rc.Name, int64(ptr.Deref(rc.Spec.Replicas, 1)), int64(rc.Status.Replicas), int64(rc.Status.ReadyReplicas),
					age(rc.CreationTimestamp), names, images, labels.SelectorFromSet(rc.Spec.Selector).String()}
			},
			hooks: hooks{validate: func(o runtime.Object) field.ErrorList {
				return validateReplicationController(o.(*corev1.ReplicationController))
			}},
		},
		{
			version: "v1", kind: "PodTemplate", plural: "podtemplates", singular: "podtemplate", namespaced: true,
			newObj: func() runtime.Object { return &corev1.PodTemplate{} }, newList: func() runtime.Object { return &corev1.PodTemplateList{} },
			columns: []metav1.TableColumnDefinition{nameCol(),
				col("Containers", "string", "Names of each container in the template."),
				col("Images", "string", "Images referenced by each container in the template."),
				col("Pod Labels", "string", "The labels for the pod template."), ageCol()},
			row: func(o runtime.Object) []interface{} {
				t := o.(*corev1.PodTemplate)
				names, images := containers(t.Template.Spec.Containers)
				return []interface{}{t.Name, names, images, labels.FormatLabels(t.Template.Labels), age(t.CreationTimestamp)}
			},
			hooks: hooks{validate: func(o runtime.Object) field.ErrorList {
				t := o.(*corev1.PodTemplate)
				return validatePodSpec(&t.Template.Spec, field.NewPath("template", "spec"), nil)
			}},
		},
	}
}

// defaultReplicationController: one replica, and the selector and labels taken from
// the template when unset, as upstream defaults them.
func defaultReplicationController(rc *corev1.ReplicationController) {
	if rc.Spec.Template != nil {
		defaultPodSpec(&rc.Spec.Template.Spec)
		if len(rc.Spec.Selector) == 0 {
			rc.Spec.Selector = rc.Spec.Template.Labels
		}
		if len(rc.Labels) == 0 {
			rc.Labels = rc.Spec.Template.Labels
		}
	}
	defaultReplicas(&rc.Spec.Replicas)
}

func validateReplicationController(rc *corev1.ReplicationController) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if r := ptr.Deref(rc.Spec.Replicas, 0); r < 0 {
		errs = append(errs, field.Invalid(spec.Child("replicas"), r, "must be greater than or equal to 0"))
	}
	if len(rc.Spec.Selector) == 0 {
		errs = append(errs, field.Required(spec.Child("selector"), ""))
	}
	if rc.Spec.Template == nil {
		return append(errs, field.Required(spec.Child("template"), ""))
	}
	if !labels.SelectorFromSet(rc.Spec.Selector).Matches(labels.Set(rc.Spec.Template.Labels)) {
		errs = append(errs, field.Invalid(spec.Child("template", "metadata", "labels"), rc.Spec.Template.Labels,
			"`selector` does not match template `labels`"))
	}
	if rp := rc.Spec.Template.Spec.RestartPolicy; rp != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(spec.Child("template", "spec", "restartPolicy"), rp, []corev1.RestartPolicy{corev1.RestartPolicyAlways}))
	}
	return append(errs, validatePodSpec(&rc.Spec.Template.Spec, spec.Child("template", "spec"), nil)...)
}

package job

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// completionIndexEnv is the variable Indexed Jobs' containers get their index in.
const completionIndexEnv = "JOB_COMPLETION_INDEX"

// maxGeneratedNameLength is the longest generateName prefix the API server keeps whole
// (a name is at most 63 characters, 5 of them random).
const maxGeneratedNameLength = 58

// controllerRef is the ownerReference of the Job's pods.
func controllerRef(job *batchv1.Job) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job", Name: job.Name, UID: job.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// podForJob is the pod the controller creates for job: its template with the tracking
// finalizer and the controller ownerReference; for an index (noIndex for a NonIndexed
// Job) the index annotation and label, the hostname "<job>-<index>", the
// JOB_COMPLETION_INDEX variable and, with backoffLimitPerIndex, the failure counts taken
// from replaced, the index's last failed pod (may be nil).
func podForJob(job *batchv1.Job, index int, replaced *corev1.Pod) *corev1.Pod {
	t := job.Spec.Template.DeepCopy()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName:    job.Name + "-",
			Namespace:       job.Namespace,
			Labels:          t.Labels,
			Annotations:     t.Annotations,
			Finalizers:      t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{controllerRef(job)},
		},
		Spec: t.Spec,
	}
	if !slices.Contains(pod.Finalizers, batchv1.JobTrackingFinalizer) {
		pod.Finalizers = append(pod.Finalizers, batchv1.JobTrackingFinalizer)
	}
	if !isIndexed(job) {
		return pod
	}
	for i := range pod.Spec.InitContainers {
		addIndexEnv(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		addIndexEnv(&pod.Spec.Containers[i])
	}
	if index == noIndex {
		return pod
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Annotations[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(index)
	pod.Labels[batchv1.JobCompletionIndexAnnotation] = strconv.Itoa(index)
	pod.Spec.Hostname = fmt.Sprintf("%s-%d", job.Name, index)
	pod.GenerateName = generateNameWithIndex(job.Name, index)
	if hasBackoffLimitPerIndex(job) {
		counted, ignored := replacementFailureCounts(job, replaced)
		pod.Annotations[batchv1.JobIndexFailureCountAnnotation] = strconv.Itoa(int(counted))
		if ignored > 0 {
			pod.Annotations[batchv1.JobIndexIgnoredFailureCountAnnotation] = strconv.Itoa(int(ignored))
		}
	}
	return pod
}

// addIndexEnv gives a container JOB_COMPLETION_INDEX from the pod's index label, unless
// it sets the variable itself.
func addIndexEnv(c *corev1.Container) {
	for _, e := range c.Env {
		if e.Name == completionIndexEnv {
			return
		}
	}
	c.Env = append(c.Env, corev1.EnvVar{Name: completionIndexEnv, ValueFrom: &corev1.EnvVarSource{
		FieldRef: &corev1.ObjectFieldSelector{FieldPath: fmt.Sprintf("metadata.labels['%s']", batchv1.JobCompletionIndexAnnotation)}}})
}

// generateNameWithIndex is "<job>-<index>-", the job name cut so that the index stays.
func generateNameWithIndex(job string, index int) string {
	suffix := "-" + strconv.Itoa(index) + "-"
	prefix := job + suffix
	if len(prefix) > maxGeneratedNameLength {
		prefix = prefix[:maxGeneratedNameLength-len(suffix)] + suffix
	}
	return prefix
}

func hasTrackingFinalizer(p *corev1.Pod) bool {
	return slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer)
}

// removeFinalizerPatch is the strategic merge patch that drops the tracking finalizer
// (nil when the pod has none).
func removeFinalizerPatch(p *corev1.Pod) []byte {
	if !hasTrackingFinalizer(p) {
		return nil
	}
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"$deleteFromPrimitiveList/finalizers": []string{batchv1.JobTrackingFinalizer}}})
	return b
}

// adoptPatch makes job the controller of pod and adds the tracking finalizer.
func adoptPatch(job *batchv1.Job, pod *corev1.Pod) []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"ownerReferences": []metav1.OwnerReference{controllerRef(job)},
		"uid":             pod.UID,
		"finalizers":      []string{batchv1.JobTrackingFinalizer},
	}})
	return b
}

// releasePatch removes job's ownerReference from pod.
func releasePatch(job *batchv1.Job, pod *corev1.Pod) []byte {
	return fmt.Appendf(nil, `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":%q}],"uid":%q}}`, job.UID, pod.UID)
}

package job

import (
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestPodForJob(t *testing.T) {
	job := newJob("pi", func(j *batchv1.Job) {
		j.Spec.Template.Annotations = map[string]string{"note": "x"}
		j.Spec.Template.Finalizers = []string{"example.com/keep"}
		j.Spec.Template.Spec.Subdomain = "workers"
	})
	p := podForJob(job, noIndex, nil)
	if p.GenerateName != "pi-" || p.Namespace != testNS || p.Annotations["note"] != "x" || p.Spec.Hostname != "" ||
		!slices.Equal(p.Finalizers, []string{"example.com/keep", batchv1.JobTrackingFinalizer}) {
		t.Errorf("NonIndexed pod %+v", p.ObjectMeta)
	}
	if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != job.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("ownerReferences %+v", p.OwnerReferences)
	}
	if len(p.Spec.Containers[0].Env) != 0 {
		t.Errorf("NonIndexed pod has env %+v", p.Spec.Containers[0].Env)
	}
	if job.Spec.Template.Finalizers[0] != "example.com/keep" || len(job.Spec.Template.Finalizers) != 1 {
		t.Error("the template was changed")
	}

	ix := newJob("pi", indexed(), completions(5), func(j *batchv1.Job) {
		j.Spec.Template.Spec.Subdomain = "workers"
		j.Spec.Template.Spec.InitContainers = []corev1.Container{{Name: "init"}}
		j.Spec.Template.Spec.Containers = append(j.Spec.Template.Spec.Containers, corev1.Container{Name: "own",
			Env: []corev1.EnvVar{{Name: completionIndexEnv, Value: "mine"}}})
	})
	p = podForJob(ix, 3, nil)
	if p.GenerateName != "pi-3-" || p.Spec.Hostname != "pi-3" || p.Spec.Subdomain != "workers" ||
		p.Annotations[batchv1.JobCompletionIndexAnnotation] != "3" || p.Labels[batchv1.JobCompletionIndexAnnotation] != "3" {
		t.Errorf("Indexed pod %+v %+v", p.ObjectMeta, p.Spec)
	}
	for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
		var envs []corev1.EnvVar
		for _, e := range c.Env {
			if e.Name == completionIndexEnv {
				envs = append(envs, e)
			}
		}
		if len(envs) != 1 {
			t.Errorf("container %s has %d JOB_COMPLETION_INDEX", c.Name, len(envs))
			continue
		}
		if c.Name == "own" {
			if envs[0].Value != "mine" {
				t.Errorf("the container's own JOB_COMPLETION_INDEX was replaced: %+v", envs[0])
			}
		} else if envs[0].ValueFrom == nil || envs[0].ValueFrom.FieldRef.FieldPath != "metadata.labels['batch.kubernetes.io/job-completion-index']" {
			t.Errorf("container %s env %+v", c.Name, envs[0])
		}
	}
	if _, ok := ix.Spec.Template.Annotations[batchv1.JobCompletionIndexAnnotation]; ok || len(ix.Spec.Template.Spec.Containers[0].Env) != 0 {
		t.Error("the template was changed")
	}

	// backoffLimitPerIndex: the replacement carries the failure counts.
	per := newJob("pi", indexed(), completions(5), func(j *batchv1.Job) { j.Spec.BackoffLimitPerIndex = ptr.To[int32](3) })
	failed := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{batchv1.JobIndexFailureCountAnnotation: "1"}}, Status: corev1.PodStatus{Phase: corev1.PodFailed}}
	if p := podForJob(per, 2, failed); p.Annotations[batchv1.JobIndexFailureCountAnnotation] != "2" {
		t.Errorf("replacement annotations %v, want failure count 2", p.Annotations)
	}
	if p := podForJob(per, 2, nil); p.Annotations[batchv1.JobIndexFailureCountAnnotation] != "0" {
		t.Errorf("first pod annotations %v, want failure count 0", p.Annotations)
	}
}

func TestGenerateNameWithIndex(t *testing.T) {
	long := strings.Repeat("a", 70)
	got := generateNameWithIndex(long, 12)
	if len(got) != maxGeneratedNameLength || !strings.HasSuffix(got, "-12-") {
		t.Errorf("generateNameWithIndex(70 a's, 12) = %q (%d), want 58 characters ending -12-", got, len(got))
	}
	if got := generateNameWithIndex("pi", 0); got != "pi-0-" {
		t.Errorf("= %q, want pi-0-", got)
	}
}

func TestPatches(t *testing.T) {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Finalizers: []string{batchv1.JobTrackingFinalizer}}}
	if got := string(removeFinalizerPatch(p)); got != `{"metadata":{"$deleteFromPrimitiveList/finalizers":["batch.kubernetes.io/job-tracking"]}}` {
		t.Errorf("remove patch %s", got)
	}
	if removeFinalizerPatch(&corev1.Pod{}) != nil {
		t.Error("patch for a pod without the finalizer")
	}
	job := newJob("pi")
	if got := string(releasePatch(job, p)); got != `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"job-uid-pi"}],"uid":"u1"}}` {
		t.Errorf("release patch %s", got)
	}
	if got := string(adoptPatch(job, p)); !strings.Contains(got, `"finalizers":["batch.kubernetes.io/job-tracking"]`) || !strings.Contains(got, `"uid":"u1"`) {
		t.Errorf("adopt patch %s", got)
	}
}

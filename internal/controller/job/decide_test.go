package job

import (
	"reflect"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestWantActiveAndComplete(t *testing.T) {
	queue := func(j *batchv1.Job) { j.Spec.Completions = nil }
	for _, tc := range []struct {
		name              string
		job               *batchv1.Job
		succeeded, active int32
		want              int32
		complete          bool
	}{
		{"fresh", newJob("j", completions(5), parallelism(2)), 0, 0, 2, false},
		{"remaining below parallelism", newJob("j", completions(5), parallelism(2)), 4, 2, 1, false},
		{"all succeeded", newJob("j", completions(5), parallelism(2)), 5, 0, 0, true},
		{"more than completions", newJob("j", completions(2), parallelism(2)), 3, 1, 0, false},
		{"queue before success", newJob("j", queue, parallelism(3)), 0, 1, 3, false},
		{"queue after success keeps running pods", newJob("j", queue, parallelism(3)), 1, 2, 2, false},
		{"queue done", newJob("j", queue, parallelism(3)), 1, 0, 0, true},
		{"queue nothing yet", newJob("j", queue, parallelism(3)), 0, 0, 3, false},
	} {
		if got := wantActive(tc.job, tc.succeeded, tc.active); got != tc.want {
			t.Errorf("%s: wantActive = %d, want %d", tc.name, got, tc.want)
		}
		if got := complete(tc.job, tc.succeeded, tc.active); got != tc.complete {
			t.Errorf("%s: complete = %v, want %v", tc.name, got, tc.complete)
		}
	}
}

func rankPod(name, node string, phase corev1.PodPhase, readyAt int64, restarts int32, created int64) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(time.Unix(created, 0))},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", RestartCount: restarts}}}}
	if readyAt > 0 {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Unix(readyAt, 0))}}
	}
	return p
}

func TestPodsForRemoval(t *testing.T) {
	pods := []*corev1.Pod{
		rankPod("old-ready", "n1", corev1.PodRunning, 100, 0, 10),
		rankPod("new-ready", "n1", corev1.PodRunning, 200, 0, 20),
		rankPod("running-not-ready", "n1", corev1.PodRunning, 0, 0, 10),
		rankPod("pending", "n1", corev1.PodPending, 0, 0, 10),
		rankPod("unscheduled", "", corev1.PodPending, 0, 0, 10),
		rankPod("restarted", "n1", corev1.PodRunning, 100, 3, 10),
	}
	got := podNames(podsForRemoval(newJob("j"), pods, len(pods)))
	want := []string{"unscheduled", "pending", "running-not-ready", "new-ready", "restarted", "old-ready"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("deletion order %v, want %v", got, want)
	}
	if got := podNames(podsForRemoval(newJob("j"), pods, 2)); !reflect.DeepEqual(got, want[:2]) {
		t.Errorf("first 2 = %v, want %v", got, want[:2])
	}
	// Indexed: the duplicate and index-less pods go even when none must.
	ix := newJob("j", indexed(), completions(3))
	dup := []*corev1.Pod{indexedPod("a", 0, corev1.PodRunning, true), indexedPod("b", 0, corev1.PodPending, true), indexedPod("c", 1, corev1.PodRunning, true)}
	if got := podNames(podsForRemoval(ix, dup, 0)); !reflect.DeepEqual(got, []string{"b"}) {
		t.Errorf("indexed removal = %v, want [b]", got)
	}
}

func TestPastBackoffLimitOnFailure(t *testing.T) {
	onFailure := func(limit int32) *batchv1.Job {
		return newJob("j", backoffLimit(limit), func(j *batchv1.Job) { j.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyOnFailure })
	}
	pod := func(phase corev1.PodPhase, restarts int32) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{RestartCount: restarts}}}}
	}
	for _, tc := range []struct {
		name string
		job  *batchv1.Job
		pods []*corev1.Pod
		want bool
	}{
		{"never policy", newJob("j", backoffLimit(1)), []*corev1.Pod{pod(corev1.PodRunning, 5)}, false},
		{"below", onFailure(3), []*corev1.Pod{pod(corev1.PodRunning, 1), pod(corev1.PodPending, 1)}, false},
		{"reached", onFailure(3), []*corev1.Pod{pod(corev1.PodRunning, 2), pod(corev1.PodPending, 1)}, true},
		{"finished pods do not count", onFailure(3), []*corev1.Pod{pod(corev1.PodFailed, 5)}, false},
		{"limit 0", onFailure(0), []*corev1.Pod{pod(corev1.PodRunning, 1)}, true},
	} {
		if got := pastBackoffLimitOnFailure(tc.job, tc.pods); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestFinishCondition(t *testing.T) {
	now := time.Unix(10000, 0)
	withConds := func(conds ...batchv1.JobCondition) jobOpt {
		return func(j *batchv1.Job) { j.Status.Conditions = conds }
	}
	started := func(ago time.Duration) jobOpt {
		return func(j *batchv1.Job) { j.Status.StartTime = &metav1.Time{Time: now.Add(-ago)} }
	}
	deadline := func(s int64) jobOpt { return func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptr.To(s) } }
	failedPod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3}}}}}}
	failJobOn3 := func(j *batchv1.Job) {
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{{Action: batchv1.PodFailurePolicyActionFailJob,
			OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{3}}}}}
	}
	perIndex := func(j *batchv1.Job) { j.Spec.BackoffLimitPerIndex = ptr.To[int32](1) }
	for _, tc := range []struct {
		name    string
		in      failureInput
		want    batchv1.JobConditionType
		reason  string
		message string
	}{
		{name: "running", in: failureInput{job: newJob("j", backoffLimit(2)), failed: 2}},
		{name: "backoff limit", in: failureInput{job: newJob("j", backoffLimit(2)), failed: 3},
			want: batchv1.JobFailureTarget, reason: "BackoffLimitExceeded", message: "Job has reached the specified backoff limit"},
		{name: "before deadline", in: failureInput{job: newJob("j", deadline(60), started(59*time.Second))}},
		{name: "deadline", in: failureInput{job: newJob("j", deadline(60), started(60*time.Second))},
			want: batchv1.JobFailureTarget, reason: "DeadlineExceeded", message: "Job was active longer than specified deadline"},
		{name: "no deadline while suspended", in: failureInput{job: newJob("j", deadline(60), started(time.Hour), func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) })}},
		{name: "pod failure policy", in: failureInput{job: newJob("j", failJobOn3), pods: []*corev1.Pod{failedPod}},
			want: batchv1.JobFailureTarget, reason: "PodFailurePolicy", message: "Container main for pod ns/p failed with exit code 3 matching FailJob rule at index 0"},
		{name: "recorded failure target becomes Failed", in: failureInput{job: newJob("j", withConds(batchv1.JobCondition{Type: batchv1.JobFailureTarget,
			Status: corev1.ConditionTrue, Reason: "DeadlineExceeded", Message: "m"}))},
			want: batchv1.JobFailed, reason: "DeadlineExceeded", message: "m"},
		{name: "success criteria stand", in: failureInput{job: newJob("j", withConds(batchv1.JobCondition{Type: batchv1.JobSuccessCriteriaMet,
			Status: corev1.ConditionTrue, Reason: "SuccessPolicy", Message: "Matched rules at index 0"})), failed: 100},
			want: batchv1.JobSuccessCriteriaMet, reason: "SuccessPolicy", message: "Matched rules at index 0"},
		{name: "max failed indexes", in: failureInput{job: newJob("j", indexed(), completions(5), perIndex, func(j *batchv1.Job) { j.Spec.MaxFailedIndexes = ptr.To[int32](1) }),
			failedIdx: &intervals{{0, 1}}},
			want: batchv1.JobFailureTarget, reason: "MaxFailedIndexesExceeded", message: "Job has exceeded the specified maximal number of failed indexes"},
		{name: "failed indexes once all decided", in: failureInput{job: newJob("j", indexed(), completions(3), perIndex),
			failedIdx: &intervals{{0, 0}}, succeededIdx: intervals{{1, 2}}},
			want: batchv1.JobFailureTarget, reason: "FailedIndexes", message: "Job has failed indexes"},
		{name: "failed index, others pending", in: failureInput{job: newJob("j", indexed(), completions(3), perIndex),
			failedIdx: &intervals{{0, 0}}, succeededIdx: intervals{{1, 1}}}},
		{name: "success policy", in: failureInput{job: newJob("j", indexed(), completions(5), func(j *batchv1.Job) {
			j.Spec.SuccessPolicy = &batchv1.SuccessPolicy{Rules: []batchv1.SuccessPolicyRule{{SucceededIndexes: ptr.To("0")}}}
		}), succeededIdx: intervals{{0, 0}}},
			want: batchv1.JobSuccessCriteriaMet, reason: "SuccessPolicy", message: "Matched rules at index 0"},
	} {
		tc.in.now = now
		got := finishCondition(tc.in)
		if tc.want == "" {
			if got != nil {
				t.Errorf("%s: %+v, want none", tc.name, got)
			}
			continue
		}
		if got == nil || got.Type != tc.want || got.Status != corev1.ConditionTrue || got.Reason != tc.reason || got.Message != tc.message {
			t.Errorf("%s: %+v, want %s %s %q", tc.name, got, tc.want, tc.reason, tc.message)
		}
	}
}

func TestFinalCondition(t *testing.T) {
	now := time.Unix(5, 0)
	for from, to := range map[batchv1.JobConditionType]batchv1.JobConditionType{
		batchv1.JobFailureTarget: batchv1.JobFailed, batchv1.JobSuccessCriteriaMet: batchv1.JobComplete,
	} {
		got := finalCondition(newCondition(from, "R", "M", time.Unix(1, 0)), now)
		if got.Type != to || got.Reason != "R" || got.Message != "M" || !got.LastTransitionTime.Time.Equal(now) {
			t.Errorf("finalCondition(%s) = %+v, want %s R M at %v", from, got, to, now)
		}
	}
}

func TestSetCondition(t *testing.T) {
	now := time.Unix(100, 0)
	list, changed := setCondition(nil, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed", now)
	if changed || len(list) != 0 {
		t.Errorf("absent condition set False: %v, %v; want nothing added", list, changed)
	}
	list, changed = setCondition(list, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended", now)
	if !changed || len(list) != 1 || list[0].Status != corev1.ConditionTrue {
		t.Fatalf("add: %v, %v", list, changed)
	}
	if _, changed = setCondition(list, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended", now.Add(time.Hour)); changed {
		t.Error("same condition reported as changed")
	}
	list, changed = setCondition(list, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed", now.Add(time.Hour))
	if !changed || list[0].Status != corev1.ConditionFalse || !list[0].LastTransitionTime.Time.Equal(now.Add(time.Hour)) {
		t.Errorf("flip: %+v, %v", list, changed)
	}
}

func TestPodFailedAndTerminating(t *testing.T) {
	deleted := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{}}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	failed := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}
	anyTime := newJob("j")
	onlyFailed := newJob("j", func(j *batchv1.Job) { j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed) })
	withPolicy := newJob("j", func(j *batchv1.Job) {
		j.Spec.PodReplacementPolicy = nil
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{}
	})
	if !podFailed(deleted, anyTime) || podFailed(deleted, onlyFailed) || podFailed(deleted, withPolicy) || !podFailed(failed, onlyFailed) {
		t.Error("a deleted pod counts as failed only with podReplacementPolicy TerminatingOrFailed; a Failed one always")
	}
	if !podTerminating(deleted) || podTerminating(failed) || podActive(deleted) || podActive(failed) {
		t.Error("terminating: deleted and not finished; active: neither")
	}
}

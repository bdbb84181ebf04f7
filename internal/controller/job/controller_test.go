package job

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestJobRunsToCompletion: a Job of 3 completions, 2 at a time, creates its pods from
// the template with the finalizer and the controller reference, counts each finished pod
// once (through uncountedTerminatedPods, then the counter, once its finalizer is gone) and
// ends with SuccessCriteriaMet then Complete.
func TestJobRunsToCompletion(t *testing.T) {
	h := newHarness(t)
	h.createJob(newJob("pi", completions(3), parallelism(2)))
	h.mustSync("pi")

	pods := h.pods()
	if len(pods) != 2 {
		t.Fatalf("%d pods, want parallelism 2", len(pods))
	}
	job := h.job("pi")
	for _, p := range pods {
		ref := metav1.GetControllerOf(&p)
		if ref == nil || ref.Kind != "Job" || ref.APIVersion != "batch/v1" || ref.Name != "pi" || ref.UID != job.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
			t.Errorf("pod %s ownerReferences %+v, want the Job as controller blocking its deletion", p.Name, p.OwnerReferences)
		}
		if p.GenerateName != "pi-" || !slices.Equal(p.Finalizers, []string{batchv1.JobTrackingFinalizer}) {
			t.Errorf("pod %s: generateName %q, finalizers %v; want pi- and [%s]", p.Name, p.GenerateName, p.Finalizers, batchv1.JobTrackingFinalizer)
		}
		if !reflect.DeepEqual(p.Labels, job.Spec.Template.Labels) || p.Spec.Containers[0].Image != "busybox:1.36" {
			t.Errorf("pod %s: labels %v, spec %+v; want the template's", p.Name, p.Labels, p.Spec)
		}
	}
	st := job.Status
	if st.Active != 2 || ptr.Deref(st.Ready, -1) != 0 || ptr.Deref(st.Terminating, -1) != 0 || st.StartTime == nil ||
		!st.StartTime.Time.Equal(t0) || st.UncountedTerminatedPods == nil {
		t.Errorf("status %+v, want active 2, ready 0, terminating 0, startTime %v, uncountedTerminatedPods {}", st, t0)
	}
	if ev := h.drainEvents(); len(ev) != 2 || !hasEvent(ev, "Normal SuccessfulCreate Created pod: pi-") {
		t.Errorf("events %q, want two SuccessfulCreate", ev)
	}

	h.running(pods[0].Name, true)
	h.running(pods[1].Name, false)
	h.mustSync("pi")
	if r := ptr.Deref(h.job("pi").Status.Ready, -1); r != 1 {
		t.Errorf("ready %d, want 1", r)
	}

	h.client.ClearActions()
	h.exit(pods[0].Name, 0)
	h.mustSync("pi")
	// The pod went into uncountedTerminatedPods before its finalizer was removed, then
	// into succeeded.
	var order []string
	for _, a := range h.client.Actions() {
		switch {
		case a.GetVerb() == "update" && a.GetSubresource() == "status" && a.GetResource().Resource == "jobs":
			j := a.(clienttesting.UpdateAction).GetObject().(*batchv1.Job)
			order = append(order, fmt.Sprintf("status succeeded=%d uncounted=%v", j.Status.Succeeded, j.Status.UncountedTerminatedPods.Succeeded))
		case a.GetVerb() == "patch" && a.GetResource().Resource == "pods":
			order = append(order, "patch "+a.(clienttesting.PatchAction).GetName())
		}
	}
	want := []string{
		fmt.Sprintf("status succeeded=0 uncounted=[%s]", pods[0].UID),
		"patch " + pods[0].Name,
		"status succeeded=1 uncounted=[]",
	}
	if !slices.Equal(order, want) {
		t.Errorf("writes %q, want %q", order, want)
	}
	if p := h.pods()[0]; hasTrackingFinalizer(&p) {
		t.Errorf("counted pod %s keeps its finalizer", p.Name)
	}
	h.mustSync("pi")
	if n := len(h.activePods()); n != 2 {
		t.Fatalf("%d active pods after one success, want 2 (2 completions left)", n)
	}
	for _, p := range h.activePods() {
		h.exit(p.Name, 0)
	}
	job = h.syncUntil("pi", 3, "Complete", func(j *batchv1.Job) bool { return finished(j) })
	st = job.Status
	if got := conditionTypes(job); !slices.Equal(got, []batchv1.JobConditionType{batchv1.JobSuccessCriteriaMet, batchv1.JobComplete}) {
		t.Errorf("conditions %v, want SuccessCriteriaMet then Complete", got)
	}
	c := condition(job, batchv1.JobComplete)
	if c.Reason != "CompletionsReached" || c.Message != "Reached expected number of succeeded pods" {
		t.Errorf("Complete condition %+v", c)
	}
	if st.Succeeded != 3 || st.Failed != 0 || st.Active != 0 || st.CompletionTime == nil || len(st.UncountedTerminatedPods.Succeeded) != 0 {
		t.Errorf("status %+v, want 3 succeeded, completionTime set", st)
	}
	if !hasEvent(h.drainEvents(), "Normal Completed Job completed") {
		t.Error("no Completed event")
	}
	for _, p := range h.pods() {
		if hasTrackingFinalizer(&p) {
			t.Errorf("pod %s of the finished Job keeps its finalizer", p.Name)
		}
	}
}

// TestWorkQueueJob: without completions the Job is done once a pod succeeded and none
// runs; no pod is created after the first success.
func TestWorkQueueJob(t *testing.T) {
	h := newHarness(t)
	h.createJob(newJob("queue", func(j *batchv1.Job) { j.Spec.Completions = nil }, parallelism(3)))
	h.mustSync("queue")
	pods := h.pods()
	if len(pods) != 3 {
		t.Fatalf("%d pods, want 3", len(pods))
	}
	h.exit(pods[0].Name, 0)
	h.mustSync("queue")
	h.mustSync("queue")
	if n := len(h.pods()); n != 3 {
		t.Errorf("%d pods after a success, want no new one", n)
	}
	if j := h.job("queue"); finished(j) || j.Status.Active != 2 || j.Status.Succeeded != 1 {
		t.Errorf("status %+v, want 2 active, 1 succeeded, not finished", j.Status)
	}
	h.exit(pods[1].Name, 0)
	h.exit(pods[2].Name, 0)
	j := h.syncUntil("queue", 3, "Complete", finished)
	if j.Status.Succeeded != 3 || condition(j, batchv1.JobComplete) == nil {
		t.Errorf("status %+v, want Complete with 3 succeeded", j.Status)
	}
}

// TestBackoffLimit: failed pods are re-created after 10s, 20s… (the back-off grows per
// failure in a row); once more pods failed than backoffLimit the Job gets FailureTarget,
// then Failed, with reason BackoffLimitExceeded.
func TestBackoffLimit(t *testing.T) {
	h := newHarness(t)
	h.createJob(newJob("flaky", backoffLimit(2)))
	h.mustSync("flaky")
	first := h.pods()[0].Name

	h.exit(first, 1)
	h.mustSync("flaky")
	if j := h.job("flaky"); j.Status.Failed != 1 || j.Status.Active != 0 {
		t.Fatalf("status %+v, want 1 failed, 0 active", j.Status)
	}
	h.clock.Step(9 * time.Second)
	h.mustSync("flaky")
	if n := len(h.activePods()); n != 0 {
		t.Fatalf("%d active pods 9s after the failure, want none before the 10s back-off", n)
	}
	h.clock.Step(time.Second)
	h.mustSync("flaky")
	if n := len(h.activePods()); n != 1 {
		t.Fatalf("%d active pods 10s after the failure, want 1", n)
	}
	second := h.activePods()[0].Name
	h.exit(second, 1)
	h.clock.Step(19 * time.Second)
	h.mustSync("flaky")
	if n := len(h.activePods()); n != 0 {
		t.Fatalf("%d active pods 19s after the second failure in a row, want none before 20s", n)
	}
	h.clock.Step(time.Second)
	h.mustSync("flaky")
	if n := len(h.activePods()); n != 1 {
		t.Fatalf("%d active pods 20s after the second failure, want 1", n)
	}
	h.exit(h.activePods()[0].Name, 1)
	h.mustSync("flaky")
	j := h.job("flaky")
	ft := condition(j, batchv1.JobFailureTarget)
	if ft == nil || ft.Reason != "BackoffLimitExceeded" || ft.Message != "Job has reached the specified backoff limit" {
		t.Fatalf("conditions %+v, want FailureTarget BackoffLimitExceeded", j.Status.Conditions)
	}
	j = h.syncUntil("flaky", 2, "Failed", finished)
	if got := conditionTypes(j); !slices.Equal(got, []batchv1.JobConditionType{batchv1.JobFailureTarget, batchv1.JobFailed}) {
		t.Errorf("conditions %v, want FailureTarget then Failed", got)
	}
	if c := condition(j, batchv1.JobFailed); c.Reason != "BackoffLimitExceeded" || j.Status.Failed != 3 || j.Status.CompletionTime != nil {
		t.Errorf("status %+v, want Failed BackoffLimitExceeded with 3 failed, no completionTime", j.Status)
	}
	if !hasEvent(h.drainEvents(), "Warning BackoffLimitExceeded Job has reached the specified backoff limit") {
		t.Error("no BackoffLimitExceeded event")
	}
}

// TestActiveDeadline: past activeDeadlineSeconds the Job fails with DeadlineExceeded;
// its running pods are deleted and counted as failed, and Failed comes once none is left
// terminating.
func TestActiveDeadline(t *testing.T) {
	h := newHarness(t)
	h.createJob(newJob("slow", completions(2), parallelism(2), func(j *batchv1.Job) { j.Spec.ActiveDeadlineSeconds = ptr.To[int64](30) }))
	h.mustSync("slow")
	for _, p := range h.pods() {
		h.running(p.Name, true)
	}
	h.clock.Step(29 * time.Second)
	h.mustSync("slow")
	if j := h.job("slow"); finished(j) || condition(j, batchv1.JobFailureTarget) != nil {
		t.Fatalf("conditions %+v before the deadline", j.Status.Conditions)
	}
	h.clock.Step(time.Second)
	h.mustSync("slow")
	j := h.job("slow")
	if c := condition(j, batchv1.JobFailureTarget); c == nil || c.Reason != "DeadlineExceeded" || c.Message != "Job was active longer than specified deadline" {
		t.Fatalf("conditions %+v, want FailureTarget DeadlineExceeded", j.Status.Conditions)
	}
	if j.Status.Active != 0 || ptr.Deref(j.Status.Terminating, 0) != 2 || ptr.Deref(j.Status.Ready, -1) != 0 {
		t.Errorf("status %+v, want 0 active, 2 terminating, 0 ready", j.Status)
	}
	for _, p := range h.pods() {
		if p.DeletionTimestamp == nil {
			t.Errorf("pod %s not deleted", p.Name)
		}
	}
	j = h.syncUntil("slow", 3, "Failed", finished)
	if c := condition(j, batchv1.JobFailed); c.Reason != "DeadlineExceeded" || j.Status.Failed != 2 || ptr.Deref(j.Status.Terminating, -1) != 0 {
		t.Errorf("status %+v, want Failed DeadlineExceeded with 2 failed", j.Status)
	}
	if n := len(h.pods()); n != 0 {
		t.Errorf("%d pods left, want the deleted pods gone once counted", n)
	}
	if ev := h.drainEvents(); !hasEvent(ev, "Warning DeadlineExceeded Job was active longer than specified deadline") || !hasEvent(ev, "Normal SuccessfulDelete Deleted pod: slow-") {
		t.Errorf("events %q, want DeadlineExceeded and SuccessfulDelete", ev)
	}
}

// TestSuspendAndResume: a suspended Job runs no pod and has Suspended True; on resume it
// starts (startTime reset) and Suspended goes False; suspending again deletes its pods
// without counting them as failures.
func TestSuspendAndResume(t *testing.T) {
	h := newHarness(t)
	h.createJob(newJob("later", completions(2), parallelism(2), func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) }))
	h.mustSync("later")
	j := h.job("later")
	if n := len(h.pods()); n != 0 || j.Status.StartTime != nil {
		t.Fatalf("%d pods, startTime %v; want none while suspended", n, j.Status.StartTime)
	}
	if c := condition(j, batchv1.JobSuspended); c == nil || c.Status != corev1.ConditionTrue || c.Reason != "JobSuspended" || c.Message != "Job suspended" {
		t.Fatalf("conditions %+v, want Suspended True", j.Status.Conditions)
	}
	h.clock.Step(time.Minute)
	h.updateJob("later", func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) })
	h.mustSync("later")
	j = h.job("later")
	if c := condition(j, batchv1.JobSuspended); c == nil || c.Status != corev1.ConditionFalse || c.Reason != "JobResumed" || c.Message != "Job resumed" {
		t.Errorf("conditions %+v, want Suspended False JobResumed", j.Status.Conditions)
	}
	if j.Status.StartTime == nil || !j.Status.StartTime.Time.Equal(t0.Add(time.Minute)) || len(h.pods()) != 2 {
		t.Errorf("startTime %v, %d pods; want started at resume with 2 pods", j.Status.StartTime, len(h.pods()))
	}
	for _, p := range h.pods() {
		h.running(p.Name, true)
	}
	h.updateJob("later", func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(true) })
	h.mustSync("later")
	j = h.job("later")
	if n := len(h.pods()); n != 0 || j.Status.Active != 0 || j.Status.Failed != 0 {
		t.Errorf("%d pods, status %+v; want pods deleted, none counted as failed", n, j.Status)
	}
	if c := condition(j, batchv1.JobSuspended); c == nil || c.Status != corev1.ConditionTrue {
		t.Errorf("conditions %+v, want Suspended True again", j.Status.Conditions)
	}
	h.clock.Step(time.Minute)
	h.updateJob("later", func(j *batchv1.Job) { j.Spec.Suspend = ptr.To(false) })
	h.mustSync("later")
	if st := h.job("later").Status.StartTime; st == nil || !st.Time.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("startTime %v after the second resume, want %v", st, t0.Add(2*time.Minute))
	}
	ev := h.drainEvents()
	for _, want := range []string{"Normal Suspended Job suspended", "Normal Resumed Job resumed", "Normal SuccessfulDelete Deleted pod: later-"} {
		if !hasEvent(ev, want) {
			t.Errorf("events %q lack %q", ev, want)
		}
	}
}

// TestParallelismDecrease deletes the excess pods, not ready ones first, without
// counting them as failures.
func TestParallelismDecrease(t *testing.T) {
	h := newHarness(t)
	h.createJob(newJob("wide", completions(10), parallelism(3)))
	h.mustSync("wide")
	pods := h.pods()
	h.running(pods[0].Name, true)
	h.running(pods[1].Name, false)
	h.running(pods[2].Name, true)
	h.updateJob("wide", func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To[int32](2) })
	h.mustSync("wide")
	left := h.pods()
	if len(left) != 2 || left[0].Name != pods[0].Name || left[1].Name != pods[2].Name {
		t.Errorf("pods left %v, want the two ready ones", names(left))
	}
	if j := h.job("wide"); j.Status.Active != 2 || j.Status.Failed != 0 {
		t.Errorf("status %+v, want 2 active, 0 failed", j.Status)
	}
}

func names(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// TestIndexedJob: pods get their index (annotation, label, hostname, env); the Job
// tracks completedIndexes as intervals and completes when every index succeeded.
func TestIndexedJob(t *testing.T) {
	h := newHarness(t)
	h.createJob(newJob("idx", indexed(), completions(4), parallelism(2)))
	h.mustSync("idx")
	pods := h.pods()
	if len(pods) != 2 {
		t.Fatalf("%d pods, want 2", len(pods))
	}
	for i, p := range pods {
		ix := fmt.Sprint(i)
		env := p.Spec.Containers[0].Env
		if p.Annotations[batchv1.JobCompletionIndexAnnotation] != ix || p.Labels[batchv1.JobCompletionIndexAnnotation] != ix ||
			p.Spec.Hostname != "idx-"+ix || p.GenerateName != "idx-"+ix+"-" || len(env) != 1 || env[0].Name != "JOB_COMPLETION_INDEX" ||
			env[0].ValueFrom.FieldRef.FieldPath != "metadata.labels['batch.kubernetes.io/job-completion-index']" {
			t.Errorf("pod %s: annotations %v, labels %v, hostname %q, generateName %q, env %+v; want index %s", p.Name, p.Annotations,
				p.Labels, p.Spec.Hostname, p.GenerateName, env, ix)
		}
	}
	h.exit(pods[1].Name, 0)
	h.mustSync("idx")
	if j := h.job("idx"); j.Status.CompletedIndexes != "1" || j.Status.Succeeded != 1 {
		t.Errorf("completedIndexes %q, succeeded %d; want \"1\", 1", j.Status.CompletedIndexes, j.Status.Succeeded)
	}
	h.mustSync("idx")
	active := h.activePods()
	if len(active) != 2 || completionIndex(&active[1]) != 2 {
		t.Fatalf("active pods %v, want indexes 0 and 2", names(active))
	}
	h.exit(active[1].Name, 0)
	h.mustSync("idx")
	if j := h.job("idx"); j.Status.CompletedIndexes != "1,2" {
		t.Errorf("completedIndexes %q, want \"1,2\"", j.Status.CompletedIndexes)
	}
	h.mustSync("idx")
	for _, p := range h.activePods() {
		h.exit(p.Name, 0)
	}
	j := h.syncUntil("idx", 4, "Complete", finished)
	if j.Status.CompletedIndexes != "0-3" || j.Status.Succeeded != 4 {
		t.Errorf("completedIndexes %q, succeeded %d; want 0-3, 4", j.Status.CompletedIndexes, j.Status.Succeeded)
	}
}

// TestBackoffLimitPerIndex: an index whose pod failed more than backoffLimitPerIndex
// times is failed; the replacement carries the failure count; the Job fails with
// FailedIndexes once every index has an outcome.
func TestBackoffLimitPerIndex(t *testing.T) {
	h := newHarness(t)
	h.createJob(newJob("per", indexed(), completions(2), parallelism(2), func(j *batchv1.Job) {
		j.Spec.BackoffLimitPerIndex = ptr.To[int32](1)
		j.Spec.BackoffLimit = ptr.To[int32](1<<31 - 1)
	}))
	h.mustSync("per")
	byIndex := func(ix int) corev1.Pod {
		for _, p := range h.activePods() {
			if completionIndex(&p) == ix {
				return p
			}
		}
		t.Fatalf("no active pod for index %d", ix)
		return corev1.Pod{}
	}
	h.exit(byIndex(0).Name, 1)
	h.exit(byIndex(1).Name, 0)
	h.mustSync("per")
	h.clock.Step(10 * time.Second)
	h.mustSync("per")
	again := byIndex(0)
	if again.Annotations[batchv1.JobIndexFailureCountAnnotation] != "1" {
		t.Errorf("replacement annotations %v, want failure count 1", again.Annotations)
	}
	h.exit(again.Name, 1)
	h.mustSync("per")
	j := h.job("per")
	if ptr.Deref(j.Status.FailedIndexes, "") != "0" || j.Status.CompletedIndexes != "1" {
		t.Errorf("failedIndexes %v, completedIndexes %q; want 0 and 1", j.Status.FailedIndexes, j.Status.CompletedIndexes)
	}
	j = h.syncUntil("per", 3, "Failed", finished)
	if c := condition(j, batchv1.JobFailed); c == nil || c.Reason != "FailedIndexes" || c.Message != "Job has failed indexes" {
		t.Errorf("conditions %+v, want Failed FailedIndexes", j.Status.Conditions)
	}
}

// TestPodFailurePolicy: an Ignore rule on DisruptionTarget does not count the failure;
// a FailJob rule on exit code 42 fails the Job with PodFailurePolicy and deletes the
// other pods.
func TestPodFailurePolicy(t *testing.T) {
	h := newHarness(t)
	h.createJob(newJob("pfp", completions(3), parallelism(2), func(j *batchv1.Job) {
		j.Spec.PodReplacementPolicy = ptr.To(batchv1.Failed)
		j.Spec.PodFailurePolicy = &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
			{Action: batchv1.PodFailurePolicyActionFailJob, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{
				Operator: batchv1.PodFailurePolicyOnExitCodesOpIn, Values: []int32{42}}},
			{Action: batchv1.PodFailurePolicyActionIgnore, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{
				{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue}}},
		}}
	}))
	h.mustSync("pfp")
	pods := h.pods()
	h.exit(pods[0].Name, 137, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "PreemptionByScheduler"})
	h.mustSync("pfp")
	if j := h.job("pfp"); j.Status.Failed != 0 || finished(j) {
		t.Fatalf("status %+v, want the disrupted pod not counted", j.Status)
	}
	h.clock.Step(10 * time.Second)
	h.mustSync("pfp")
	if n := len(h.activePods()); n != 2 {
		t.Fatalf("%d active pods, want the disrupted one replaced", n)
	}
	victim := h.activePods()[0].Name
	h.exit(victim, 42)
	h.mustSync("pfp")
	j := h.job("pfp")
	wantMsg := fmt.Sprintf("Container main for pod %s/%s failed with exit code 42 matching FailJob rule at index 0", testNS, victim)
	if c := condition(j, batchv1.JobFailureTarget); c == nil || c.Reason != "PodFailurePolicy" || c.Message != wantMsg {
		t.Fatalf("conditions %+v, want FailureTarget PodFailurePolicy %q", j.Status.Conditions, wantMsg)
	}
	j = h.syncUntil("pfp", 3, "Failed", finished)
	if c := condition(j, batchv1.JobFailed); c.Reason != "PodFailurePolicy" || c.Message != wantMsg {
		t.Errorf("Failed condition %+v", c)
	}
	if n := len(h.activePods()); n != 0 {
		t.Errorf("%d active pods left on a failed Job", n)
	}
}

// TestAdoptAndRelease: an orphan matching the selector is adopted with the finalizer; a
// pod of the Job whose labels stop matching is released.
func TestAdoptAndRelease(t *testing.T) {
	job := newJob("adopt", completions(3), parallelism(2))
	orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Namespace: testNS, UID: "uid-orphan", ResourceVersion: "1",
		Labels: job.Spec.Template.Labels}, Spec: job.Spec.Template.Spec}
	h := newHarness(t, orphan)
	h.createJob(job)
	h.mustSync("adopt")
	p, _ := h.client.CoreV1().Pods(testNS).Get(h.ctx, "orphan", metav1.GetOptions{})
	if !metav1.IsControlledBy(p, h.job("adopt")) || !hasTrackingFinalizer(p) {
		t.Fatalf("orphan %+v, want adopted with the finalizer", p.ObjectMeta)
	}
	if n := len(h.pods()); n != 2 {
		t.Errorf("%d pods, want the adopted one and one more", n)
	}
	p.Labels = map[string]string{"app": "other"}
	if _, err := h.client.CoreV1().Pods(testNS).Update(h.ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.mustSync("adopt")
	p, _ = h.client.CoreV1().Pods(testNS).Get(h.ctx, "orphan", metav1.GetOptions{})
	if metav1.GetControllerOf(p) != nil {
		t.Errorf("pod with other labels still controlled: %+v", p.OwnerReferences)
	}
}

// TestOrphanPodLosesFinalizer: the finalizer of a pod whose Job finished, or of a pod
// without a controller, is removed; that of a running Job's pod stays.
func TestOrphanPodLosesFinalizer(t *testing.T) {
	done := newJob("done")
	done.Status.Conditions = []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}
	running := newJob("running")
	pod := func(name string, owner *batchv1.Job) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: types.UID("uid-" + name), ResourceVersion: "1",
			Finalizers: []string{batchv1.JobTrackingFinalizer}}}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{controllerRef(owner)}
		}
		return p
	}
	h := newHarness(t, done, running, pod("of-done", done), pod("of-running", running), pod("orphan", nil))
	h.settle()
	for _, name := range []string{"of-done", "of-running", "orphan"} {
		if err := h.c.syncOrphanPod(h.ctx, testNS+"/"+name); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range h.pods() {
		if want := p.Name == "of-running"; hasTrackingFinalizer(&p) != want {
			t.Errorf("pod %s finalizers %v, want the finalizer kept only on the running Job's pod", p.Name, p.Finalizers)
		}
	}
}

// TestStatusConflictRequeues: a conflict on jobs/status fails the sync with a conflict
// (the worker retries it on a fresh copy); the retry writes the status.
func TestStatusConflictRequeues(t *testing.T) {
	h := newHarness(t)
	h.createJob(newJob("race"))
	conflicts := 1
	h.client.PrependReactor("update", "jobs", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && conflicts > 0 {
			conflicts--
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "batch", Resource: "jobs"}, "race", errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	err := h.sync("race")
	if !apierrors.IsConflict(err) {
		t.Fatalf("sync = %v, want a conflict", err)
	}
	h.mustSync("race")
	if j := h.job("race"); j.Status.Active != 1 || len(h.pods()) != 1 {
		t.Errorf("status %+v with %d pods, want 1 active and no second pod", j.Status, len(h.pods()))
	}
}

// TestManagedByAnotherController: such a Job is left alone.
func TestManagedByAnotherController(t *testing.T) {
	h := newHarness(t)
	h.createJob(newJob("theirs", func(j *batchv1.Job) { j.Spec.ManagedBy = ptr.To("example.com/other") }))
	h.mustSync("theirs")
	if n := len(h.pods()); n != 0 || h.job("theirs").Status.StartTime != nil {
		t.Errorf("%d pods, status %+v; want the Job untouched", n, h.job("theirs").Status)
	}
}

// TestRunDrivesJobToCompletion runs the controller with its workers: informer events
// alone take a Job from creation to Complete, a status conflict is retried, and Events
// come from job-controller.
func TestRunDrivesJobToCompletion(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	client := newFakeClient(clk)
	var conflicts atomic.Int32
	conflicts.Store(1)
	client.PrependReactor("update", "jobs", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && conflicts.Add(-1) >= 0 {
			return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "batch", Resource: "jobs"}, "run", errors.New("the object has been modified"))
		}
		return false, nil, nil
	})
	controllertest.RunController(t, client, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(Config{Clock: clk, SyncBatchPeriod: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, client, f)
	})
	ctx := context.Background()
	if _, err := client.BatchV1().Jobs(testNS).Create(ctx, newJob("run", completions(2), parallelism(2)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The conflict's retry waits on the controller's clock: move it along while waiting.
	tick := func() { clk.Step(200 * time.Millisecond) }
	var pods []corev1.Pod
	testutil.Eventually(t, "2 pods and active 2", func() (bool, error) {
		tick()
		list, err := client.CoreV1().Pods(testNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods = list.Items
		j, err := client.BatchV1().Jobs(testNS).Get(ctx, "run", metav1.GetOptions{})
		return err == nil && len(pods) == 2 && j.Status.Active == 2, err
	})
	for _, p := range pods {
		p.Status.Phase = corev1.PodSucceeded
		if _, err := client.CoreV1().Pods(testNS).UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, "the Job Complete", func() (bool, error) {
		tick()
		j, err := client.BatchV1().Jobs(testNS).Get(ctx, "run", metav1.GetOptions{})
		return err == nil && finished(j) && j.Status.Succeeded == 2, err
	})
	testutil.Eventually(t, "events from job-controller", func() (bool, error) {
		evs, err := client.CoreV1().Events(testNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		seen := map[string]bool{}
		for _, e := range evs.Items {
			if e.Source.Component == ComponentName && e.InvolvedObject.Name == "run" {
				seen[e.Reason] = true
			}
		}
		return seen["SuccessfulCreate"] && seen["Completed"], nil
	})
	if conflicts.Load() >= 0 {
		t.Error("the conflict was never hit")
	}
}

package job

import (
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func exitedPod(code int32, conds ...corev1.PodConditionType) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Status: corev1.PodStatus{Phase: corev1.PodFailed,
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "init", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}}},
		ContainerStatuses: []corev1.ContainerStatus{
			{Name: "side", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}},
			{Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}},
		}}}
	for _, c := range conds {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue})
	}
	return p
}

func TestMatchPodFailurePolicy(t *testing.T) {
	rule := func(action batchv1.PodFailurePolicyAction, op batchv1.PodFailurePolicyOnExitCodesOperator, container *string, codes ...int32) batchv1.PodFailurePolicyRule {
		return batchv1.PodFailurePolicyRule{Action: action, OnExitCodes: &batchv1.PodFailurePolicyOnExitCodesRequirement{ContainerName: container, Operator: op, Values: codes}}
	}
	onCond := func(action batchv1.PodFailurePolicyAction, c corev1.PodConditionType) batchv1.PodFailurePolicyRule {
		return batchv1.PodFailurePolicyRule{Action: action, OnPodConditions: []batchv1.PodFailurePolicyOnPodConditionsPattern{{Type: c, Status: corev1.ConditionTrue}}}
	}
	policy := &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{
		onCond(batchv1.PodFailurePolicyActionIgnore, corev1.DisruptionTarget),
		rule(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpIn, ptr.To("main"), 42),
		rule(batchv1.PodFailurePolicyActionFailIndex, batchv1.PodFailurePolicyOnExitCodesOpIn, nil, 7),
		rule(batchv1.PodFailurePolicyActionCount, batchv1.PodFailurePolicyOnExitCodesOpNotIn, nil, 1, 2),
		onCond(batchv1.PodFailurePolicyActionFailJob, "ConfigIssue"),
	}}
	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		action  batchv1.PodFailurePolicyAction
		count   bool
		failJob string
	}{
		{"ignored disruption", exitedPod(42, corev1.DisruptionTarget), batchv1.PodFailurePolicyActionIgnore, false, ""},
		{"fail job", exitedPod(42), batchv1.PodFailurePolicyActionFailJob, true, "Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 1"},
		{"fail index", exitedPod(7), batchv1.PodFailurePolicyActionFailIndex, true, ""},
		{"count NotIn", exitedPod(9), batchv1.PodFailurePolicyActionCount, true, ""},
		{"no rule", exitedPod(1), "", true, ""},
		{"condition fail job", exitedPod(1, "ConfigIssue"), batchv1.PodFailurePolicyActionFailJob, true, "Pod ns/p has condition ConfigIssue matching FailJob rule at index 4"},
	} {
		m := matchPodFailurePolicy(policy, tc.pod)
		action := batchv1.PodFailurePolicyAction("")
		if m.action != nil {
			action = *m.action
		}
		if action != tc.action || m.count != tc.count || ptr.Deref(m.failJob, "") != tc.failJob {
			t.Errorf("%s: action %q count %v failJob %q; want %q %v %q", tc.name, action, m.count, ptr.Deref(m.failJob, ""), tc.action, tc.count, tc.failJob)
		}
	}
	if m := matchPodFailurePolicy(nil, exitedPod(1)); !m.count || m.action != nil {
		t.Errorf("no policy: %+v, want counted", m)
	}
	// Exit code 0 never matches, NotIn included.
	zero := &batchv1.PodFailurePolicy{Rules: []batchv1.PodFailurePolicyRule{rule(batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyOnExitCodesOpNotIn, nil, 5)}}
	if m := matchPodFailurePolicy(zero, exitedPod(0)); m.failJob != nil {
		t.Errorf("exit code 0 matched: %+v", m)
	}
}

func TestMatchSuccessPolicy(t *testing.T) {
	policy := func(rules ...batchv1.SuccessPolicyRule) *batchv1.SuccessPolicy {
		return &batchv1.SuccessPolicy{Rules: rules}
	}
	for _, tc := range []struct {
		name      string
		policy    *batchv1.SuccessPolicy
		succeeded intervals
		want      string
	}{
		{"no policy", nil, intervals{{0, 4}}, ""},
		{"indexes all there", policy(batchv1.SuccessPolicyRule{SucceededIndexes: ptr.To("0,2-3")}), intervals{{0, 0}, {2, 4}}, "Matched rules at index 0"},
		{"indexes missing", policy(batchv1.SuccessPolicyRule{SucceededIndexes: ptr.To("0,2-3")}), intervals{{0, 2}}, ""},
		{"count of the indexes", policy(batchv1.SuccessPolicyRule{SucceededIndexes: ptr.To("1-4"), SucceededCount: ptr.To[int32](2)}), intervals{{0, 0}, {3, 4}}, "Matched rules at index 0"},
		{"count alone, second rule", policy(batchv1.SuccessPolicyRule{SucceededIndexes: ptr.To("9")}, batchv1.SuccessPolicyRule{SucceededCount: ptr.To[int32](3)}), intervals{{0, 2}}, "Matched rules at index 1"},
		{"nothing succeeded", policy(batchv1.SuccessPolicyRule{SucceededCount: ptr.To[int32](0)}), nil, ""},
	} {
		msg, ok := matchSuccessPolicy(tc.policy, 5, tc.succeeded)
		if msg != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: %q, %v; want %q", tc.name, msg, ok, tc.want)
		}
	}
}

func TestBackoffDelay(t *testing.T) {
	now := time.Unix(1000, 0)
	at := func(ago time.Duration) *time.Time { t := now.Add(-ago); return &t }
	for _, tc := range []struct {
		failures int32
		last     *time.Time
		want     time.Duration
	}{
		{0, nil, 0},
		{1, at(0), 10 * time.Second},
		{1, at(4 * time.Second), 6 * time.Second},
		{1, at(10 * time.Second), 0},
		{2, at(5 * time.Second), 15 * time.Second},
		{3, at(0), 40 * time.Second},
		{6, at(0), 320 * time.Second},
		{7, at(0), 10 * time.Minute},
		{30, at(time.Minute), 9 * time.Minute},
	} {
		if got := backoffDelay(tc.failures, tc.last, now, 10*time.Second, 10*time.Minute); got != tc.want {
			t.Errorf("backoffDelay(%d failures, last %v ago) = %v, want %v", tc.failures, now.Sub(ptr.Deref(tc.last, now)), got, tc.want)
		}
	}
}

func finishedAt(phase corev1.PodPhase, sec int64) *corev1.Pod {
	return &corev1.Pod{Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(time.Unix(sec, 0))}}}}}}
}

func TestNextBackoffRecord(t *testing.T) {
	t50 := time.Unix(50, 0)
	for _, tc := range []struct {
		name              string
		old               backoffRecord
		succeeded, failed []*corev1.Pod
		wantFailures      int32
		wantLast          int64 // unix seconds, 0: none
	}{
		{"nothing new", backoffRecord{failuresAfterLastSuccess: 2, lastFailure: &t50}, nil, nil, 2, 50},
		{"failures add up", backoffRecord{failuresAfterLastSuccess: 1, lastFailure: &t50},
			nil, []*corev1.Pod{finishedAt(corev1.PodFailed, 70), finishedAt(corev1.PodFailed, 60)}, 3, 70},
		{"success resets", backoffRecord{failuresAfterLastSuccess: 4, lastFailure: &t50},
			[]*corev1.Pod{finishedAt(corev1.PodSucceeded, 60)}, nil, 0, 0},
		{"failures after the success count", backoffRecord{failuresAfterLastSuccess: 4},
			[]*corev1.Pod{finishedAt(corev1.PodSucceeded, 60)}, []*corev1.Pod{finishedAt(corev1.PodFailed, 55), finishedAt(corev1.PodFailed, 65), finishedAt(corev1.PodFailed, 70)}, 2, 70},
	} {
		got := nextBackoffRecord(tc.old, tc.succeeded, tc.failed)
		last := int64(0)
		if got.lastFailure != nil {
			last = got.lastFailure.Unix()
		}
		if got.failuresAfterLastSuccess != tc.wantFailures || last != tc.wantLast {
			t.Errorf("%s: %d failures, last %d; want %d, %d", tc.name, got.failuresAfterLastSuccess, last, tc.wantFailures, tc.wantLast)
		}
	}
}

func TestFinishedTime(t *testing.T) {
	created := metav1.NewTime(time.Unix(1, 0))
	notReady := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}, Status: corev1.PodStatus{
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(time.Unix(20, 0))}}}}
	deleted := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created, DeletionTimestamp: &metav1.Time{Time: time.Unix(60, 0)},
		DeletionGracePeriodSeconds: ptr.To[int64](30)}}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want int64
	}{
		"containers": {finishedAt(corev1.PodFailed, 40), 40},
		"not ready":  {notReady, 20},
		"deleted":    {deleted, 30},
		"created":    {&corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}}, 1},
	} {
		if got := finishedTime(tc.pod).Unix(); got != tc.want {
			t.Errorf("%s: %d, want %d", name, got, tc.want)
		}
	}
}

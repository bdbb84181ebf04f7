package job

import (
	"fmt"
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// failurePolicyMatch is what a failed pod's match against spec.podFailurePolicy says.
type failurePolicyMatch struct {
	// failJob is the Job's failure message when a FailJob rule matched.
	failJob *string
	// count says whether the failure counts towards backoffLimit (false on Ignore).
	count bool
	// action is the action of the matching rule (nil: none matched).
	action *batchv1.PodFailurePolicyAction
}

// matchPodFailurePolicy matches a failed pod against the policy's rules in order; the
// first rule that matches decides. Without a match the failure counts.
func matchPodFailurePolicy(policy *batchv1.PodFailurePolicy, pod *corev1.Pod) failurePolicyMatch {
	if policy == nil {
		return failurePolicyMatch{count: true}
	}
	for i, rule := range policy.Rules {
		var failJob string
		switch {
		case rule.OnExitCodes != nil:
			cs := matchExitCodes(&pod.Status, rule.OnExitCodes)
			if cs == nil {
				continue
			}
			failJob = fmt.Sprintf("Container %s for pod %s/%s failed with exit code %v matching %v rule at index %d",
				cs.Name, pod.Namespace, pod.Name, cs.State.Terminated.ExitCode, rule.Action, i)
		case rule.OnPodConditions != nil:
			cond := matchPodConditions(&pod.Status, rule.OnPodConditions)
			if cond == nil {
				continue
			}
			failJob = fmt.Sprintf("Pod %s/%s has condition %v matching %v rule at index %d",
				pod.Namespace, pod.Name, cond.Type, rule.Action, i)
		default:
			continue
		}
		action := rule.Action
		switch action {
		case batchv1.PodFailurePolicyActionIgnore:
			return failurePolicyMatch{action: &action}
		case batchv1.PodFailurePolicyActionFailIndex, batchv1.PodFailurePolicyActionCount:
			return failurePolicyMatch{count: true, action: &action}
		case batchv1.PodFailurePolicyActionFailJob:
			return failurePolicyMatch{failJob: &failJob, count: true, action: &action}
		}
	}
	return failurePolicyMatch{count: true}
}

// matchExitCodes is the first terminated container (app containers, then init
// containers) with a non-zero exit code the requirement matches.
func matchExitCodes(st *corev1.PodStatus, req *batchv1.PodFailurePolicyOnExitCodesRequirement) *corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{st.ContainerStatuses, st.InitContainerStatuses} {
		for i := range list {
			cs := &list[i]
			t := cs.State.Terminated
			if t == nil || t.ExitCode == 0 || (req.ContainerName != nil && *req.ContainerName != cs.Name) {
				continue
			}
			in := slices.Contains(req.Values, t.ExitCode)
			if (req.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && in) || (req.Operator == batchv1.PodFailurePolicyOnExitCodesOpNotIn && !in) {
				return cs
			}
		}
	}
	return nil
}

// matchPodConditions is the first pod condition a pattern matches (type and status).
func matchPodConditions(st *corev1.PodStatus, patterns []batchv1.PodFailurePolicyOnPodConditionsPattern) *corev1.PodCondition {
	for i := range st.Conditions {
		for _, p := range patterns {
			if st.Conditions[i].Type == p.Type && st.Conditions[i].Status == p.Status {
				return &st.Conditions[i]
			}
		}
	}
	return nil
}

// failJobMessage is the failure message of the first failed pod a FailJob rule matches.
func failJobMessage(job *batchv1.Job, pods []*corev1.Pod) *string {
	if job.Spec.PodFailurePolicy == nil {
		return nil
	}
	for _, p := range pods {
		if podFailed(p, job) {
			if m := matchPodFailurePolicy(job.Spec.PodFailurePolicy, p); m.failJob != nil {
				return m.failJob
			}
		}
	}
	return nil
}

// matchSuccessPolicy says whether the succeeded indexes meet a rule of the Indexed Job's
// successPolicy, with the message of the SuccessCriteriaMet condition.
func matchSuccessPolicy(policy *batchv1.SuccessPolicy, completions int32, succeeded intervals) (string, bool) {
	if policy == nil || len(succeeded) == 0 {
		return "", false
	}
	for i, rule := range policy.Rules {
		if rule.SucceededIndexes != nil {
			want := parseIntervals(*rule.SucceededIndexes, int(completions))
			if len(want) == 0 {
				continue
			}
			if n := overlap(want, succeeded); n == want.total() || (rule.SucceededCount != nil && n >= int(*rule.SucceededCount)) {
				return fmt.Sprintf("Matched rules at index %d", i), true
			}
			continue
		}
		if rule.SucceededCount != nil && succeeded.total() >= int(*rule.SucceededCount) {
			return fmt.Sprintf("Matched rules at index %d", i), true
		}
	}
	return "", false
}

// overlap is how many indexes a and b have in common.
func overlap(a, b intervals) int {
	n, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		if o := min(a[i].last, b[j].last) - max(a[i].first, b[j].first) + 1; o > 0 {
			n += o
		}
		switch {
		case b[j].last < a[i].last:
			j++
		case b[j].last > a[i].last:
			i++
		default:
			i++
			j++
		}
	}
	return n
}

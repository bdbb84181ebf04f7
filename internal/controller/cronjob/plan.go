package cronjob

import (
	"fmt"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// controllerKind is the kind of the ownerReference of the Jobs the controller creates.
var controllerKind = batchv1.SchemeGroupVersion.WithKind("CronJob")

// event is an Event to record about the CronJob being synced.
type event struct {
	Type, Reason, Message string
}

func warning(reason, format string, args ...any) event {
	return event{corev1.EventTypeWarning, reason, fmt.Sprintf(format, args...)}
}

func normal(reason, format string, args ...any) event {
	return event{corev1.EventTypeNormal, reason, fmt.Sprintf(format, args...)}
}

// jobName is the name of the Job of the start time t: the CronJob's name and t in
// minutes since the epoch, so a start time never gets two Jobs.
func jobName(cj *batchv1.CronJob, t time.Time) string {
	return fmt.Sprintf("%s-%d", cj.Name, t.Unix()/60)
}

// finishedCondition returns the type of the Job's first true Complete or Failed
// condition, or "" while it runs.
func finishedCondition(j *batchv1.Job) batchv1.JobConditionType {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type
		}
	}
	return ""
}

func jobFinished(j *batchv1.Job) bool { return finishedCondition(j) != "" }

func jobSucceeded(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func inActiveList(cj *batchv1.CronJob, uid types.UID) bool {
	for _, ref := range cj.Status.Active {
		if ref.UID == uid {
			return true
		}
	}
	return false
}

func inActiveListByName(cj *batchv1.CronJob, ns, name string) bool {
	for _, ref := range cj.Status.Active {
		if ref.Name == name && ref.Namespace == ns {
			return true
		}
	}
	return false
}

func deleteFromActiveList(cj *batchv1.CronJob, uid types.UID) {
	active := []corev1.ObjectReference{}
	for _, ref := range cj.Status.Active {
		if ref.UID != uid {
			active = append(active, ref)
		}
	}
	cj.Status.Active = active
}

// ownedBy tells whether job's controller is the CronJob named name (by name, as
// upstream: a Job whose CronJob was deleted and created again stays its child).
func ownedBy(job *batchv1.Job, name string) bool {
	ref := metav1.GetControllerOf(job)
	return ref != nil && ref.Kind == controllerKind.Kind && ref.Name == name
}

// runningUnknown returns the running Jobs of cj missing from its status.active: Jobs
// it created whose status write its cache has not seen yet, or Jobs it never made.
func runningUnknown(cj *batchv1.CronJob, jobs []*batchv1.Job) []*batchv1.Job {
	var out []*batchv1.Job
	for _, j := range jobs {
		if !jobFinished(j) && !inActiveList(cj, j.UID) {
			out = append(out, j)
		}
	}
	return out
}

// observeJobs brings status.active and status.lastSuccessfulTime of cj up to date with
// the Jobs it controls: finished Jobs leave the active list (SawCompletedJob), the
// latest completion of a succeeded Job is the last successful time, and a running Job
// the list lacks is reported (UnexpectedJob). It reports whether the status changed.
func observeJobs(cj *batchv1.CronJob, jobs []*batchv1.Job) (bool, []event) {
	changed := false
	var events []event
	for _, j := range jobs {
		found := inActiveList(cj, j.UID)
		cond := finishedCondition(j)
		if cond == "" {
			if !found {
				events = append(events, warning("UnexpectedJob", "Saw a job that the controller did not create or forgot: %s", j.Name))
			}
			continue
		}
		if found {
			deleteFromActiveList(cj, j.UID)
			events = append(events, normal("SawCompletedJob", "Saw completed job: %s, condition: %v", j.Name, cond))
			changed = true
		}
		if done := j.Status.CompletionTime; jobSucceeded(j) && done != nil {
			if last := cj.Status.LastSuccessfulTime; last == nil || done.After(last.Time) {
				cj.Status.LastSuccessfulTime = done.DeepCopy()
				changed = true
			}
		}
	}
	return changed, events
}

// missingActive returns the references of status.active whose Job is not among jobs;
// the controller asks the API server before it believes them gone (MissingJob).
func missingActive(cj *batchv1.CronJob, jobs []*batchv1.Job) []corev1.ObjectReference {
	known := make(map[types.UID]bool, len(jobs))
	for _, j := range jobs {
		known[j.UID] = true
	}
	var out []corev1.ObjectReference
	for _, ref := range cj.Status.Active {
		if !known[ref.UID] {
			out = append(out, ref)
		}
	}
	return out
}

// jobsToDelete returns the finished Jobs beyond the CronJob's history limits: the
// succeeded Jobs beyond successfulJobsHistoryLimit and the failed ones beyond
// failedJobsHistoryLimit, those that started first first (Jobs that never started
// last, then by name). A nil limit keeps every Job of its kind.
func jobsToDelete(cj *batchv1.CronJob, jobs []*batchv1.Job) []*batchv1.Job {
	var succeeded, failed []*batchv1.Job
	for _, j := range jobs {
		switch finishedCondition(j) {
		case batchv1.JobComplete:
			succeeded = append(succeeded, j)
		case batchv1.JobFailed:
			failed = append(failed, j)
		}
	}
	var out []*batchv1.Job
	for _, c := range []struct {
		jobs  []*batchv1.Job
		limit *int32
	}{{succeeded, cj.Spec.SuccessfulJobsHistoryLimit}, {failed, cj.Spec.FailedJobsHistoryLimit}} {
		if c.limit == nil || len(c.jobs) <= int(*c.limit) {
			continue
		}
		sort.SliceStable(c.jobs, func(a, b int) bool { return startedBefore(c.jobs[a], c.jobs[b]) })
		out = append(out, c.jobs[:len(c.jobs)-int(max(*c.limit, 0))]...)
	}
	return out
}

// startedBefore orders Jobs by status.startTime, Jobs without one last, then by name.
func startedBefore(a, b *batchv1.Job) bool {
	sa, sb := a.Status.StartTime, b.Status.StartTime
	switch {
	case sa == nil && sb != nil:
		return false
	case sa != nil && sb == nil:
		return true
	case sa.Equal(sb):
		return a.Name < b.Name
	}
	return sa.Before(sb)
}

// startPlan is what the sync of a CronJob does about its schedule.
type startPlan struct {
	// Events to record about the CronJob, in order.
	Events []event
	// Start is the start time to create a Job for; nil when no Job is due.
	Start *time.Time
	// Replace: delete the active Jobs before creating the new one (concurrencyPolicy
	// Replace).
	Replace bool
	// Requeue is when to sync the CronJob again (after the Job of Start is created, when
	// there is one); nil: only when it or its Jobs change.
	Requeue *time.Duration
}

// planStart decides whether cj, whose status observeJobs brought up to date, is due for
// a Job at now, and when to look at it again. Schedules without spec.timeZone are read
// in local.
func planStart(cj *batchv1.CronJob, now time.Time, local *time.Location) startPlan {
	var p startPlan
	if cj.DeletionTimestamp != nil {
		return p
	}
	if tz := cj.Spec.TimeZone; tz != nil {
		if _, err := time.LoadLocation(*tz); err != nil {
			p.Events = append(p.Events, warning("UnknownTimeZone", "invalid timeZone: %q: %s", *tz, err))
			return p
		}
	}
	if ptr.Deref(cj.Spec.Suspend, false) {
		return p
	}
	if scheduleHasTZ(cj) {
		p.Events = append(p.Events, warning("UnsupportedSchedule",
			"CRON_TZ or TZ used in schedule %q is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
			cj.Spec.Schedule))
	}
	sched, err := parseSchedule(cj, local)
	if err != nil {
		p.Events = append(p.Events, warning("UnparseableSchedule", "unparseable schedule: %q : %s", cj.Spec.Schedule, err))
		return p
	}
	due, m, err := nextScheduleTime(cj, now, sched)
	if err != nil {
		p.Events = append(p.Events, warning("InvalidSchedule", "invalid schedule: %s : %s", cj.Spec.Schedule, err))
		return p
	}
	requeue := nextScheduleDelay(cj, now, sched)
	p.Requeue = &requeue
	if due == nil {
		return p
	}
	if m == manyMissed {
		p.Events = append(p.Events, warning("TooManyMissedTimes",
			"too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew"))
	}
	if d := cj.Spec.StartingDeadlineSeconds; d != nil && due.Add(time.Duration(*d)*time.Second).Before(now) {
		p.Events = append(p.Events, warning("MissSchedule", "Missed scheduled time to start a job: %s", due.UTC().Format(time.RFC1123Z)))
		return p
	}
	if inActiveListByName(cj, cj.Namespace, jobName(cj, *due)) ||
		(cj.Status.LastScheduleTime != nil && cj.Status.LastScheduleTime.Time.Equal(*due)) {
		return p
	}
	if cj.Spec.ConcurrencyPolicy == batchv1.ForbidConcurrent && len(cj.Status.Active) > 0 {
		p.Events = append(p.Events, normal("JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid"))
		return p
	}
	p.Replace = cj.Spec.ConcurrencyPolicy == batchv1.ReplaceConcurrent && len(cj.Status.Active) > 0
	p.Start = due
	// Once the Job is created, lastScheduleTime is its start time.
	after := cj.DeepCopy()
	after.Status.LastScheduleTime = &metav1.Time{Time: *due}
	afterStart := nextScheduleDelay(after, now, sched)
	p.Requeue = &afterStart
	return p
}

// jobFromTemplate is the Job of cj for the start time t: spec.jobTemplate with its
// labels and annotations, named jobName, annotated with t in the CronJob's time zone
// (UTC without spec.timeZone) and controlled by cj.
func jobFromTemplate(cj *batchv1.CronJob, t time.Time) (*batchv1.Job, error) {
	loc, err := time.LoadLocation(ptr.Deref(cj.Spec.TimeZone, ""))
	if err != nil {
		return nil, fmt.Errorf("job of cronjob %s/%s: %w", cj.Namespace, cj.Name, err)
	}
	tmpl := &cj.Spec.JobTemplate
	labels := make(map[string]string, len(tmpl.Labels))
	for k, v := range tmpl.Labels {
		labels[k] = v
	}
	annotations := make(map[string]string, len(tmpl.Annotations)+1)
	for k, v := range tmpl.Annotations {
		annotations[k] = v
	}
	annotations[batchv1.CronJobScheduledTimestampAnnotation] = t.In(loc).Format(time.RFC3339)
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{
			Name:              jobName(cj, t),
			Namespace:         cj.Namespace,
			Labels:            labels,
			Annotations:       annotations,
			CreationTimestamp: metav1.Time{Time: t},
			OwnerReferences:   []metav1.OwnerReference{*metav1.NewControllerRef(cj, controllerKind)},
		},
	}
	tmpl.Spec.DeepCopyInto(&job.Spec)
	return job, nil
}

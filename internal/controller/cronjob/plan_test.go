package cronjob

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// job is a Job of the CronJob "cj" named name.
func job(name string) *batchv1.Job {
	return &batchv1.Job{ObjectMeta: metav1.ObjectMeta{
		Namespace: "ns", Name: name, UID: types.UID(name + "-uid"),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "CronJob", Name: "cj", UID: "cj-uid", Controller: ptr.To(true)}},
	}}
}

func finished(j *batchv1.Job, cond batchv1.JobConditionType, started, completed time.Time) *batchv1.Job {
	j.Status.StartTime = &metav1.Time{Time: started}
	j.Status.Conditions = append(j.Status.Conditions, batchv1.JobCondition{Type: cond, Status: corev1.ConditionTrue})
	if cond == batchv1.JobComplete {
		j.Status.CompletionTime = &metav1.Time{Time: completed}
	}
	return j
}

func activeRef(j *batchv1.Job) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Job", APIVersion: "batch/v1", Namespace: j.Namespace, Name: j.Name, UID: j.UID}
}

func names(jobs []*batchv1.Job) string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.Name)
	}
	return strings.Join(out, ",")
}

func reasons(evs []event) string {
	var out []string
	for _, e := range evs {
		out = append(out, e.Reason)
	}
	return strings.Join(out, ",")
}

func TestJobName(t *testing.T) {
	cj := cronJob("* * * * *", at(0, 0, 0))
	if got, want := jobName(cj, at(10, 1, 0)), fmt.Sprintf("cj-%d", at(10, 1, 0).Unix()/60); got != want {
		t.Errorf("jobName = %q, want %q", got, want)
	}
	if got := jobName(cj, time.Unix(60*29_000_000, 0)); got != "cj-29000000" {
		t.Errorf("jobName = %q, want cj-29000000", got)
	}
}

func TestJobFromTemplate(t *testing.T) {
	cj := cronJob("0 9 * * *", at(0, 0, 0))
	cj.Spec.JobTemplate = batchv1.JobTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "report"}, Annotations: map[string]string{"team": "data"}},
		Spec: batchv1.JobSpec{
			BackoffLimit: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyOnFailure,
				Containers:    []corev1.Container{{Name: "run", Image: "busybox"}},
			}},
		},
	}
	start := at(14, 0, 0)
	for _, tc := range []struct {
		timeZone *string
		want     string
	}{
		{nil, "2026-01-01T14:00:00Z"},
		{ptr.To("America/New_York"), "2026-01-01T09:00:00-05:00"},
	} {
		cj.Spec.TimeZone = tc.timeZone
		j, err := jobFromTemplate(cj, start)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("cj-%d", start.Unix()/60); j.Name != want || j.Namespace != "ns" {
			t.Errorf("job %s/%s, want ns/%s", j.Namespace, j.Name, want)
		}
		wantAnn := map[string]string{"team": "data", "batch.kubernetes.io/cronjob-scheduled-timestamp": tc.want}
		if !reflect.DeepEqual(j.Annotations, wantAnn) {
			t.Errorf("annotations = %v, want %v", j.Annotations, wantAnn)
		}
		if !reflect.DeepEqual(j.Labels, map[string]string{"app": "report"}) {
			t.Errorf("labels = %v, want app=report", j.Labels)
		}
		if !reflect.DeepEqual(j.Spec, cj.Spec.JobTemplate.Spec) {
			t.Errorf("spec = %+v, want the template's", j.Spec)
		}
		ref := metav1.GetControllerOf(j)
		if ref == nil || ref.APIVersion != "batch/v1" || ref.Kind != "CronJob" || ref.Name != "cj" || ref.UID != "cj-uid" ||
			!ptr.Deref(ref.BlockOwnerDeletion, false) || len(j.OwnerReferences) != 1 {
			t.Errorf("ownerReferences = %+v, want the CronJob as controller blocking deletion", j.OwnerReferences)
		}
	}
	// The Job does not share the template's maps.
	j, _ := jobFromTemplate(cj, start)
	j.Labels["x"] = "y"
	j.Spec.Template.Spec.Containers[0].Image = "other"
	if _, ok := cj.Spec.JobTemplate.Labels["x"]; ok || cj.Spec.JobTemplate.Spec.Template.Spec.Containers[0].Image != "busybox" {
		t.Error("the Job shares the template's labels or spec")
	}
	cj.Spec.TimeZone = ptr.To("Mars/Olympus")
	if _, err := jobFromTemplate(cj, start); err == nil {
		t.Error("a Job for an unknown time zone, want an error")
	}
}

func TestJobsToDelete(t *testing.T) {
	ok := func(name string, started int) *batchv1.Job {
		return finished(job(name), batchv1.JobComplete, at(10, started, 0), at(10, started, 30))
	}
	failed := func(name string, started int) *batchv1.Job {
		return finished(job(name), batchv1.JobFailed, at(10, started, 0), time.Time{})
	}
	unstarted := func(name string) *batchv1.Job {
		j := ok(name, 0)
		j.Status.StartTime = nil
		return j
	}
	running := job("running")
	// Listed out of order: the oldest go first whatever the order of the cache.
	jobs := []*batchv1.Job{ok("s4", 4), failed("f2", 2), ok("s1", 1), running, ok("s3", 3), failed("f1", 1), ok("s2", 2), failed("f3", 3)}
	for _, tc := range []struct {
		name               string
		successful, failed *int32
		jobs               []*batchv1.Job
		want               string
	}{
		{name: "no limits", jobs: jobs, want: ""},
		{name: "defaults 3 and 1", successful: ptr.To[int32](3), failed: ptr.To[int32](1), jobs: jobs, want: "s1,f1,f2"},
		{name: "only successful limited", successful: ptr.To[int32](1), jobs: jobs, want: "s1,s2,s3"},
		{name: "only failed limited", failed: ptr.To[int32](2), jobs: jobs, want: "f1"},
		{name: "zero keeps none", successful: ptr.To[int32](0), failed: ptr.To[int32](0), jobs: jobs, want: "s1,s2,s3,s4,f1,f2,f3"},
		{name: "under the limits", successful: ptr.To[int32](10), failed: ptr.To[int32](10), jobs: jobs, want: ""},
		{name: "unstarted last, then by name", successful: ptr.To[int32](1), jobs: []*batchv1.Job{unstarted("u2"), unstarted("u1"), ok("s1", 1)}, want: "s1,u1"},
		{name: "same start by name", successful: ptr.To[int32](1), jobs: []*batchv1.Job{ok("b", 1), ok("a", 1)}, want: "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cj := cronJob("* * * * *", at(0, 0, 0))
			cj.Spec.SuccessfulJobsHistoryLimit, cj.Spec.FailedJobsHistoryLimit = tc.successful, tc.failed
			in := append([]*batchv1.Job(nil), tc.jobs...)
			if got := names(jobsToDelete(cj, in)); got != tc.want {
				t.Errorf("jobs to delete = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestObserveJobs(t *testing.T) {
	done := finished(job("done"), batchv1.JobComplete, at(10, 0, 0), at(10, 0, 40))
	older := finished(job("older"), batchv1.JobComplete, at(9, 0, 0), at(9, 0, 40))
	broken := finished(job("broken"), batchv1.JobFailed, at(10, 0, 0), time.Time{})
	running := job("running")
	stranger := job("stranger")
	for _, tc := range []struct {
		name          string
		active        []*batchv1.Job
		lastSuccess   *time.Time
		jobs          []*batchv1.Job
		wantActive    string
		wantSuccess   *time.Time
		wantChanged   bool
		wantEvents    string
		wantFirstText string
	}{
		{name: "running and listed", active: []*batchv1.Job{running}, jobs: []*batchv1.Job{running}, wantActive: "running"},
		{name: "completed leaves the list", active: []*batchv1.Job{running, done}, jobs: []*batchv1.Job{running, done},
			wantActive: "running", wantSuccess: ptr.To(at(10, 0, 40)), wantChanged: true,
			wantEvents: "SawCompletedJob", wantFirstText: "Saw completed job: done, condition: Complete"},
		{name: "failed leaves the list", active: []*batchv1.Job{broken}, jobs: []*batchv1.Job{broken}, wantChanged: true,
			wantEvents: "SawCompletedJob", wantFirstText: "Saw completed job: broken, condition: Failed"},
		{name: "latest success wins", lastSuccess: ptr.To(at(9, 30, 0)), jobs: []*batchv1.Job{done, older},
			wantSuccess: ptr.To(at(10, 0, 40)), wantChanged: true},
		{name: "earlier success does not go back", lastSuccess: ptr.To(at(11, 0, 0)), jobs: []*batchv1.Job{done},
			wantSuccess: ptr.To(at(11, 0, 0))},
		{name: "running and unknown", jobs: []*batchv1.Job{stranger}, wantEvents: "UnexpectedJob",
			wantFirstText: "Saw a job that the controller did not create or forgot: stranger"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cj := cronJob("* * * * *", at(0, 0, 0))
			for _, j := range tc.active {
				cj.Status.Active = append(cj.Status.Active, activeRef(j))
			}
			if tc.lastSuccess != nil {
				cj.Status.LastSuccessfulTime = &metav1.Time{Time: *tc.lastSuccess}
			}
			changed, evs := observeJobs(cj, tc.jobs)
			var active []string
			for _, r := range cj.Status.Active {
				active = append(active, r.Name)
			}
			if got := strings.Join(active, ","); got != tc.wantActive {
				t.Errorf("active = %q, want %q", got, tc.wantActive)
			}
			got := cj.Status.LastSuccessfulTime
			if (got == nil) != (tc.wantSuccess == nil) || (got != nil && !got.Time.Equal(*tc.wantSuccess)) {
				t.Errorf("lastSuccessfulTime = %v, want %v", got, tc.wantSuccess)
			}
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
			if reasons(evs) != tc.wantEvents {
				t.Errorf("events = %q, want %q", reasons(evs), tc.wantEvents)
			}
			if tc.wantFirstText != "" && (len(evs) == 0 || evs[0].Message != tc.wantFirstText) {
				t.Errorf("events = %+v, want first message %q", evs, tc.wantFirstText)
			}
		})
	}
}

func TestMissingActive(t *testing.T) {
	cj := cronJob("* * * * *", at(0, 0, 0))
	here, gone := job("here"), job("gone")
	cj.Status.Active = []corev1.ObjectReference{activeRef(here), activeRef(gone)}
	got := missingActive(cj, []*batchv1.Job{here, job("other")})
	if len(got) != 1 || got[0].Name != "gone" {
		t.Errorf("missing = %+v, want gone", got)
	}
}

func TestPlanStart(t *testing.T) {
	minute := at(10, 1, 0)
	justAfter := at(10, 1, 0, 100*time.Millisecond)
	runningJob := job("running")
	type mod func(*batchv1.CronJob)
	for _, tc := range []struct {
		name        string
		schedule    string
		mods        []mod
		now         time.Time
		wantStart   *time.Time
		wantReplace bool
		wantRequeue *time.Duration
		wantEvents  string
		wantMessage string
	}{
		{name: "due", schedule: "* * * * *", now: justAfter, wantStart: &minute, wantRequeue: ptr.To(60 * time.Second)},
		{name: "not due", schedule: "* * * * *", now: at(10, 0, 40), wantRequeue: ptr.To(20*time.Second + 100*time.Millisecond)},
		{name: "suspended", schedule: "* * * * *", mods: []mod{func(cj *batchv1.CronJob) { cj.Spec.Suspend = ptr.To(true) }}, now: justAfter},
		{name: "being deleted", schedule: "* * * * *", mods: []mod{func(cj *batchv1.CronJob) { cj.DeletionTimestamp = &metav1.Time{Time: at(10, 0, 50)} }}, now: justAfter},
		{name: "unknown time zone", schedule: "* * * * *", mods: []mod{func(cj *batchv1.CronJob) { cj.Spec.TimeZone = ptr.To("Mars/Olympus") }}, now: justAfter,
			wantEvents: "UnknownTimeZone"},
		{name: "unparseable", schedule: "every minute", now: justAfter, wantEvents: "UnparseableSchedule"},
		{name: "never fires", schedule: "59 23 31 2 *", now: justAfter, wantEvents: "InvalidSchedule",
			wantMessage: "invalid schedule: 59 23 31 2 * : time difference between two schedules is less than 1 second"},
		{name: "TZ in the schedule", schedule: "TZ=UTC * * * * *", now: justAfter, wantStart: &minute, wantRequeue: ptr.To(60 * time.Second),
			wantEvents: "UnsupportedSchedule"},
		{name: "already scheduled", schedule: "* * * * *", mods: []mod{func(cj *batchv1.CronJob) { cj.Status.LastScheduleTime = &metav1.Time{Time: minute} }},
			now: justAfter, wantRequeue: ptr.To(60 * time.Second)},
		{name: "its job already active", schedule: "* * * * *", mods: []mod{func(cj *batchv1.CronJob) {
			cj.Status.Active = []corev1.ObjectReference{{Namespace: "ns", Name: jobName(cj, minute)}}
		}}, now: justAfter, wantRequeue: ptr.To(60 * time.Second)},
		{name: "forbid with an active job", schedule: "* * * * *", mods: []mod{func(cj *batchv1.CronJob) {
			cj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent
			cj.Status.Active = []corev1.ObjectReference{activeRef(runningJob)}
		}}, now: justAfter, wantRequeue: ptr.To(60 * time.Second), wantEvents: "JobAlreadyActive",
			wantMessage: "Not starting job because prior execution is running and concurrency policy is Forbid"},
		{name: "forbid with none active", schedule: "* * * * *", mods: []mod{func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.ForbidConcurrent }},
			now: justAfter, wantStart: &minute, wantRequeue: ptr.To(60 * time.Second)},
		{name: "allow with an active job", schedule: "* * * * *", mods: []mod{func(cj *batchv1.CronJob) {
			cj.Spec.ConcurrencyPolicy = batchv1.AllowConcurrent
			cj.Status.Active = []corev1.ObjectReference{activeRef(runningJob)}
		}}, now: justAfter, wantStart: &minute, wantRequeue: ptr.To(60 * time.Second)},
		{name: "replace with an active job", schedule: "* * * * *", mods: []mod{func(cj *batchv1.CronJob) {
			cj.Spec.ConcurrencyPolicy = batchv1.ReplaceConcurrent
			cj.Status.Active = []corev1.ObjectReference{activeRef(runningJob)}
		}}, now: justAfter, wantStart: &minute, wantReplace: true, wantRequeue: ptr.To(60 * time.Second)},
		{name: "replace with none active", schedule: "* * * * *", mods: []mod{func(cj *batchv1.CronJob) { cj.Spec.ConcurrencyPolicy = batchv1.ReplaceConcurrent }},
			now: justAfter, wantStart: &minute, wantRequeue: ptr.To(60 * time.Second)},
		{name: "too many missed: the latest, with a warning", schedule: "* * * * *", mods: []mod{func(cj *batchv1.CronJob) {
			cj.CreationTimestamp = metav1.NewTime(at(6, 0, 0))
		}}, now: justAfter, wantStart: &minute, wantRequeue: ptr.To(60 * time.Second), wantEvents: "TooManyMissedTimes",
			wantMessage: "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew"},
		{name: "too many missed within the deadline", schedule: "* * * * *", mods: []mod{func(cj *batchv1.CronJob) {
			cj.CreationTimestamp = metav1.NewTime(at(6, 0, 0))
			cj.Spec.StartingDeadlineSeconds = ptr.To[int64](200)
		}}, now: justAfter, wantStart: &minute, wantRequeue: ptr.To(60 * time.Second)},
		{name: "start in the time zone", schedule: "0 9 * * *", mods: []mod{func(cj *batchv1.CronJob) {
			cj.CreationTimestamp = metav1.NewTime(at(0, 0, 0))
			cj.Spec.TimeZone = ptr.To("America/New_York")
		}}, now: at(14, 0, 5), wantStart: ptr.To(at(14, 0, 0)), wantRequeue: ptr.To(24*time.Hour - 5*time.Second + 100*time.Millisecond)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cj := cronJob(tc.schedule, at(10, 0, 30))
			for _, m := range tc.mods {
				m(cj)
			}
			before := cj.DeepCopy()
			p := planStart(cj, tc.now, time.UTC)
			if (p.Start == nil) != (tc.wantStart == nil) || (p.Start != nil && !p.Start.Equal(*tc.wantStart)) {
				t.Errorf("start = %v, want %v", p.Start, tc.wantStart)
			}
			if p.Replace != tc.wantReplace {
				t.Errorf("replace = %v, want %v", p.Replace, tc.wantReplace)
			}
			if (p.Requeue == nil) != (tc.wantRequeue == nil) || (p.Requeue != nil && *p.Requeue != *tc.wantRequeue) {
				t.Errorf("requeue = %v, want %v", ptr.Deref(p.Requeue, -1), ptr.Deref(tc.wantRequeue, -1))
			}
			if reasons(p.Events) != tc.wantEvents {
				t.Errorf("events = %q, want %q", reasons(p.Events), tc.wantEvents)
			}
			if tc.wantMessage != "" && (len(p.Events) == 0 || p.Events[0].Message != tc.wantMessage) {
				t.Errorf("events = %+v, want message %q", p.Events, tc.wantMessage)
			}
			if !reflect.DeepEqual(cj, before) {
				t.Error("planStart changed the CronJob")
			}
		})
	}
}

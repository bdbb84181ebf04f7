package cronjob

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
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
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// recordingQueue remembers what the controller queues.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	mu    sync.Mutex
	added []string
	after map[string]time.Duration
}

func (q *recordingQueue) Add(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.added = append(q.added, key)
}

func (q *recordingQueue) AddAfter(key string, d time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.after[key] = d
}

// requeue returns the delay key was last queued with, if it was.
func (q *recordingQueue) requeue(key string) (time.Duration, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	d, ok := q.after[key]
	return d, ok
}

// fixture is a controller on a fake clientset whose informer caches hold the objects it
// started with; tests call sync themselves.
type fixture struct {
	client   *fake.Clientset
	clock    *testingclock.FakeClock
	c        *Controller
	recorder *record.FakeRecorder
	queue    *recordingQueue
	factory  informers.SharedInformerFactory
}

// giveUIDs makes the fake API server give created Jobs a UID, as a real one does.
func giveUIDs(client *fake.Clientset) {
	n := 0
	var mu sync.Mutex
	client.PrependReactor("create", "jobs", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if j, ok := a.(clienttesting.CreateAction).GetObject().(*batchv1.Job); ok && j.UID == "" {
			mu.Lock()
			n++
			j.UID = types.UID(fmt.Sprintf("job-uid-%d", n))
			mu.Unlock()
		}
		return false, nil, nil
	})
}

func newFixture(t *testing.T, now time.Time, objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	giveUIDs(client)
	factory := informers.NewSharedInformerFactory(client, 0)
	clk := testingclock.NewFakeClock(now)
	c, err := New(Config{Clock: clk, Location: time.UTC, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))}, client, factory)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *batchv1.CronJob:
			_ = factory.Batch().V1().CronJobs().Informer().GetIndexer().Add(o)
		case *batchv1.Job:
			_ = factory.Batch().V1().Jobs().Informer().GetIndexer().Add(o)
		}
	}
	f := &fixture{client: client, clock: clk, c: c, recorder: record.NewFakeRecorder(100), factory: factory}
	f.queue = &recordingQueue{TypedRateLimitingInterface: c.queue, after: map[string]time.Duration{}}
	c.recorder, c.queue = f.recorder, f.queue
	t.Cleanup(f.queue.ShutDown)
	return f
}

// events drains the events recorded so far, as "Type Reason Message".
func (f *fixture) events() []string {
	var out []string
	for {
		select {
		case e := <-f.recorder.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func eventReasons(evs []string) string {
	var out []string
	for _, e := range evs {
		out = append(out, strings.SplitN(e, " ", 3)[1])
	}
	return strings.Join(out, ",")
}

// writes lists the verb/resource[/subresource] of the client's writes and gets.
func (f *fixture) writes() string {
	var out []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "list" || a.GetVerb() == "watch" {
			continue
		}
		s := a.GetVerb() + " " + a.GetResource().Resource
		if a.GetSubresource() != "" {
			s += "/" + a.GetSubresource()
		}
		out = append(out, s)
	}
	return strings.Join(out, ",")
}

func (f *fixture) cronJob(t *testing.T) *batchv1.CronJob {
	t.Helper()
	cj, err := f.client.BatchV1().CronJobs("ns").Get(context.Background(), "cj", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cj
}

func (f *fixture) jobNames(t *testing.T) string {
	t.Helper()
	list, err := f.client.BatchV1().Jobs("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, j := range list.Items {
		out = append(out, j.Name)
	}
	return strings.Join(out, ",")
}

func (f *fixture) sync(t *testing.T) error {
	t.Helper()
	f.client.ClearActions()
	return f.c.sync(context.Background(), "ns/cj")
}

// everyMinute is a CronJob "* * * * *" created at 10:00:30 with a job template.
func everyMinute() *batchv1.CronJob {
	cj := cronJob("* * * * *", at(10, 0, 30))
	cj.Spec.JobTemplate = batchv1.JobTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "tick"}},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "tick", Image: "busybox"}},
		}}},
	}
	return cj
}

func activeNames(cj *batchv1.CronJob) string {
	var out []string
	for _, r := range cj.Status.Active {
		out = append(out, r.Name)
	}
	return strings.Join(out, ",")
}

var (
	minute10  = at(10, 1, 0)
	jobAt1001 = fmt.Sprintf("cj-%d", minute10.Unix()/60)
	jobAt1000 = fmt.Sprintf("cj-%d", at(10, 0, 0).Unix()/60)
)

func TestSyncCreatesTheDueJob(t *testing.T) {
	f := newFixture(t, at(10, 1, 0, 100*time.Millisecond), everyMinute())
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if got := f.writes(); got != "create jobs,update cronjobs/status" {
		t.Errorf("writes = %q, want the Job created and the status written through /status", got)
	}
	j, err := f.client.BatchV1().Jobs("ns").Get(context.Background(), jobAt1001, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("job of 10:01: %v", err)
	}
	if j.Labels["app"] != "tick" || j.Annotations[batchv1.CronJobScheduledTimestampAnnotation] != "2026-01-01T10:01:00Z" {
		t.Errorf("job labels %v annotations %v, want the template's labels and the scheduled timestamp", j.Labels, j.Annotations)
	}
	if ref := metav1.GetControllerOf(j); ref == nil || ref.UID != "cj-uid" {
		t.Errorf("job owners = %+v, want the CronJob as controller", j.OwnerReferences)
	}
	cj := f.cronJob(t)
	if len(cj.Status.Active) != 1 || cj.Status.Active[0].Name != jobAt1001 || cj.Status.Active[0].UID != j.UID ||
		cj.Status.Active[0].Kind != "Job" || cj.Status.Active[0].APIVersion != "batch/v1" || cj.Status.Active[0].Namespace != "ns" {
		t.Errorf("status.active = %+v, want a reference to %s", cj.Status.Active, jobAt1001)
	}
	if cj.Status.LastScheduleTime == nil || !cj.Status.LastScheduleTime.Time.Equal(minute10) {
		t.Errorf("lastScheduleTime = %v, want %v", cj.Status.LastScheduleTime, minute10)
	}
	if evs := f.events(); len(evs) != 1 || evs[0] != "Normal SuccessfulCreate Created job "+jobAt1001 {
		t.Errorf("events = %q, want SuccessfulCreate", evs)
	}
	if d, ok := f.queue.requeue("ns/cj"); !ok || d != 60*time.Second {
		t.Errorf("requeued after %v (%v), want 1m0s: 10:02:00.1", d, ok)
	}
}

func TestSyncNotDue(t *testing.T) {
	f := newFixture(t, at(10, 0, 30), everyMinute())
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if got := f.writes(); got != "" {
		t.Errorf("writes = %q, want none", got)
	}
	if d, ok := f.queue.requeue("ns/cj"); !ok || d != 30*time.Second+100*time.Millisecond {
		t.Errorf("requeued after %v (%v), want 30.1s", d, ok)
	}
}

func TestSyncSuspended(t *testing.T) {
	cj := everyMinute()
	cj.Spec.Suspend = ptr.To(true)
	f := newFixture(t, at(10, 5, 0), cj)
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if got := f.writes(); got != "" {
		t.Errorf("writes = %q, want none", got)
	}
	if d, ok := f.queue.requeue("ns/cj"); ok {
		t.Errorf("suspended CronJob requeued after %v, want only on its next change", d)
	}
}

func TestSyncGoneCronJob(t *testing.T) {
	f := newFixture(t, at(10, 5, 0))
	if err := f.sync(t); err != nil {
		t.Fatalf("sync of a deleted CronJob: %v", err)
	}
	if got := f.writes(); got != "" {
		t.Errorf("writes = %q, want none", got)
	}
}

func TestSyncAlreadyExists(t *testing.T) {
	ours := job(jobAt1001)
	ours.OwnerReferences[0].UID = "cj-uid"
	theirs := job(jobAt1001)
	theirs.OwnerReferences = nil
	for _, tc := range []struct {
		name        string
		existing    *batchv1.Job
		active      bool
		wantWrites  string
		wantActive  string
		wantRequeue bool
	}{
		// Created by an earlier sync whose status write was lost: listed again, no event.
		{name: "ours, not listed", existing: ours, wantWrites: "create jobs,get jobs,update cronjobs/status", wantActive: jobAt1001, wantRequeue: true},
		{name: "ours, listed", existing: ours, active: true, wantWrites: "create jobs,get jobs", wantActive: jobAt1001},
		// Someone else's: left alone.
		{name: "not ours", existing: theirs, wantWrites: "create jobs,get jobs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cj := everyMinute()
			if tc.active {
				// Listed under another name (a name in the list would mark the start time
				// handled before any create): the UID is what counts after AlreadyExists.
				cj.Status.Active = []corev1.ObjectReference{{Namespace: "ns", Name: "renamed", UID: tc.existing.UID}}
				tc.wantActive = "renamed"
			}
			var f *fixture
			if tc.active {
				f = newFixture(t, at(10, 1, 0, 100*time.Millisecond), cj, tc.existing)
			} else {
				f = newFixture(t, at(10, 1, 0, 100*time.Millisecond), cj)
				// In the API server, not yet in the cache.
				if _, err := f.client.BatchV1().Jobs("ns").Create(context.Background(), tc.existing, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.sync(t); err != nil {
				t.Fatal(err)
			}
			if got := f.writes(); got != tc.wantWrites {
				t.Errorf("writes = %q, want %q", got, tc.wantWrites)
			}
			if got := activeNames(f.cronJob(t)); got != tc.wantActive {
				t.Errorf("active = %q, want %q", got, tc.wantActive)
			}
			if evs := f.events(); len(evs) != 0 {
				t.Errorf("events = %q, want none", evs)
			}
			if _, ok := f.queue.requeue("ns/cj"); ok != tc.wantRequeue {
				t.Errorf("requeued = %v, want %v", ok, tc.wantRequeue)
			}
		})
	}
}

func TestSyncCompletedJobsAndHistory(t *testing.T) {
	cj := everyMinute()
	cj.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](3)
	cj.Spec.FailedJobsHistoryLimit = ptr.To[int32](1)
	cj.Status.LastScheduleTime = &metav1.Time{Time: at(10, 0, 0)}
	objs := []runtime.Object{cj}
	latest := finished(job(jobAt1000), batchv1.JobComplete, at(10, 0, 1), at(10, 0, 20))
	cj.Status.Active = []corev1.ObjectReference{activeRef(latest)}
	objs = append(objs, latest)
	for i := 1; i <= 4; i++ {
		objs = append(objs, finished(job(fmt.Sprintf("ok-%d", i)), batchv1.JobComplete, at(9, i, 0), at(9, i, 30)))
	}
	for i := 1; i <= 2; i++ {
		objs = append(objs, finished(job(fmt.Sprintf("failed-%d", i)), batchv1.JobFailed, at(9, i, 0), time.Time{}))
	}
	// Another CronJob's Job is not this one's history.
	other := finished(job("other-1"), batchv1.JobComplete, at(8, 0, 0), at(8, 0, 1))
	other.OwnerReferences[0].Name = "other"
	objs = append(objs, other)

	f := newFixture(t, at(10, 0, 40), objs...)
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if got := f.jobNames(t); got != jobAt1000+",failed-2,ok-3,ok-4,other-1" {
		t.Errorf("jobs left = %q, want the 3 latest successful, the latest failed and the other CronJob's", got)
	}
	for _, a := range f.client.Actions() {
		if d, ok := a.(clienttesting.DeleteAction); ok {
			if p := d.GetDeleteOptions().PropagationPolicy; p == nil || *p != metav1.DeletePropagationBackground {
				t.Errorf("delete of %s with propagation %v, want Background", d.GetName(), p)
			}
		}
	}
	got := f.cronJob(t)
	if len(got.Status.Active) != 0 {
		t.Errorf("active = %q, want none", activeNames(got))
	}
	if got.Status.LastSuccessfulTime == nil || !got.Status.LastSuccessfulTime.Time.Equal(at(10, 0, 20)) {
		t.Errorf("lastSuccessfulTime = %v, want 10:00:20", got.Status.LastSuccessfulTime)
	}
	evs := f.events()
	if r := eventReasons(evs); r != "SuccessfulDelete,SuccessfulDelete,SuccessfulDelete,SawCompletedJob" {
		t.Errorf("events = %q", evs)
	}
	if !containsString(evs, "Normal SawCompletedJob Saw completed job: "+jobAt1000+", condition: Complete") ||
		!containsString(evs, "Normal SuccessfulDelete Deleted job ok-1") {
		t.Errorf("events = %q, want SawCompletedJob and SuccessfulDelete with upstream messages", evs)
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestSyncMissingJob(t *testing.T) {
	for _, tc := range []struct {
		name       string
		inAPI      bool
		wantActive string
		wantEvents string
	}{
		{name: "gone", wantActive: "", wantEvents: "MissingJob"},
		// Only the cache has not seen it yet.
		{name: "not yet cached", inAPI: true, wantActive: "slow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cj := everyMinute()
			cj.Status.LastScheduleTime = &metav1.Time{Time: at(10, 0, 0)}
			slow := job("slow")
			cj.Status.Active = []corev1.ObjectReference{activeRef(slow)}
			f := newFixture(t, at(10, 0, 40), cj)
			if tc.inAPI {
				if _, err := f.client.BatchV1().Jobs("ns").Create(context.Background(), slow, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.sync(t); err != nil {
				t.Fatal(err)
			}
			if got := activeNames(f.cronJob(t)); got != tc.wantActive {
				t.Errorf("active = %q, want %q", got, tc.wantActive)
			}
			evs := f.events()
			if eventReasons(evs) != tc.wantEvents {
				t.Errorf("events = %q, want %q", evs, tc.wantEvents)
			}
			if tc.wantEvents != "" && evs[0] != "Normal MissingJob Active job went missing: slow" {
				t.Errorf("event = %q, want upstream's MissingJob message", evs[0])
			}
		})
	}
}

func TestSyncConcurrencyPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy     batchv1.ConcurrencyPolicy
		wantJobs   string
		wantActive string
		wantEvents string
	}{
		{policy: batchv1.AllowConcurrent, wantJobs: jobAt1000 + "," + jobAt1001, wantActive: jobAt1000 + "," + jobAt1001, wantEvents: "SuccessfulCreate"},
		{policy: batchv1.ForbidConcurrent, wantJobs: jobAt1000, wantActive: jobAt1000, wantEvents: "JobAlreadyActive"},
		{policy: batchv1.ReplaceConcurrent, wantJobs: jobAt1001, wantActive: jobAt1001, wantEvents: "SuccessfulDelete,SuccessfulCreate"},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			cj := everyMinute()
			cj.Spec.ConcurrencyPolicy = tc.policy
			cj.Status.LastScheduleTime = &metav1.Time{Time: at(10, 0, 0)}
			running := job(jobAt1000)
			cj.Status.Active = []corev1.ObjectReference{activeRef(running)}
			f := newFixture(t, at(10, 1, 0, 100*time.Millisecond), cj, running)
			if err := f.sync(t); err != nil {
				t.Fatal(err)
			}
			if got := f.jobNames(t); got != tc.wantJobs {
				t.Errorf("jobs = %q, want %q", got, tc.wantJobs)
			}
			if got := activeNames(f.cronJob(t)); got != tc.wantActive {
				t.Errorf("active = %q, want %q", got, tc.wantActive)
			}
			if got := eventReasons(f.events()); got != tc.wantEvents {
				t.Errorf("events = %q, want %q", got, tc.wantEvents)
			}
			if d, ok := f.queue.requeue("ns/cj"); !ok || d != 60*time.Second {
				t.Errorf("requeued after %v (%v), want 1m0s", d, ok)
			}
		})
	}
}

func TestSyncUnexpectedJob(t *testing.T) {
	stranger := job("stranger")
	for _, tc := range []struct {
		name       string
		apiActive  bool
		wantEvents string
	}{
		{name: "unknown everywhere", wantEvents: "UnexpectedJob"},
		// The cache has not seen the status write that listed it.
		{name: "listed in the API server", apiActive: true, wantEvents: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cached := everyMinute()
			cached.Status.LastScheduleTime = &metav1.Time{Time: at(10, 0, 0)}
			f := newFixture(t, at(10, 0, 40), cached, stranger)
			if tc.apiActive {
				fresh := cached.DeepCopy()
				fresh.Status.Active = []corev1.ObjectReference{activeRef(stranger)}
				if _, err := f.client.BatchV1().CronJobs("ns").UpdateStatus(context.Background(), fresh, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.sync(t); err != nil {
				t.Fatal(err)
			}
			evs := f.events()
			if got := eventReasons(evs); got != tc.wantEvents {
				t.Errorf("events = %q, want %q", evs, tc.wantEvents)
			}
			if tc.wantEvents != "" && evs[0] != "Warning UnexpectedJob Saw a job that the controller did not create or forgot: stranger" {
				t.Errorf("event = %q, want upstream's message", evs[0])
			}
			if tc.apiActive && activeNames(f.cronJob(t)) != "stranger" {
				t.Errorf("active = %q, want stranger kept", activeNames(f.cronJob(t)))
			}
		})
	}
}

func TestSyncTooManyMissed(t *testing.T) {
	cj := everyMinute()
	cj.CreationTimestamp = metav1.NewTime(at(6, 0, 0))
	f := newFixture(t, at(10, 1, 0, 100*time.Millisecond), cj)
	if err := f.sync(t); err != nil {
		t.Fatal(err)
	}
	if got := f.jobNames(t); got != jobAt1001 {
		t.Errorf("jobs = %q, want only the latest start time's", got)
	}
	evs := f.events()
	if len(evs) != 2 || evs[0] != "Warning TooManyMissedTimes too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew" ||
		!strings.HasPrefix(evs[1], "Normal SuccessfulCreate") {
		t.Errorf("events = %q, want TooManyMissedTimes then SuccessfulCreate", evs)
	}
}

func TestSyncCreateFails(t *testing.T) {
	terminating := apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "x", errors.New("namespace ns is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
	for _, tc := range []struct {
		name       string
		err        error
		wantEvents string
	}{
		{name: "refused", err: apierrors.NewInternalError(errors.New("etcd is down")), wantEvents: "FailedCreate"},
		{name: "namespace terminating", err: terminating, wantEvents: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, at(10, 1, 0, 100*time.Millisecond), everyMinute())
			f.client.PrependReactor("create", "jobs", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
			err := f.sync(t)
			if !errors.Is(err, tc.err) {
				t.Errorf("sync error = %v, want %v", err, tc.err)
			}
			if got := eventReasons(f.events()); got != tc.wantEvents {
				t.Errorf("events = %q, want %q", got, tc.wantEvents)
			}
			if _, ok := f.queue.requeue("ns/cj"); ok {
				t.Error("requeued at the next start time; want the rate-limited retry of the error")
			}
			if cj := f.cronJob(t); cj.Status.LastScheduleTime != nil {
				t.Errorf("lastScheduleTime = %v after a failed create, want none", cj.Status.LastScheduleTime)
			}
		})
	}
}

func TestUpdateCronJobRequeues(t *testing.T) {
	f := newFixture(t, at(10, 0, 30))
	old := everyMinute()
	// Schedule changed: queued for the new next start time.
	hourly := old.DeepCopy()
	hourly.Spec.Schedule = "@hourly"
	f.c.updateCronJob(old, hourly)
	if d, ok := f.queue.requeue("ns/cj"); !ok || d != 59*time.Minute+30*time.Second+100*time.Millisecond {
		t.Errorf("queued after %v (%v), want 59m30.1s", d, ok)
	}
	// Unparseable: an event, not queued.
	bad := old.DeepCopy()
	bad.Spec.Schedule = "often"
	f.queue.after = map[string]time.Duration{}
	f.c.updateCronJob(old, bad)
	if _, ok := f.queue.requeue("ns/cj"); ok || len(f.queue.added) != 0 {
		t.Error("CronJob with an unparseable schedule queued")
	}
	if evs := f.events(); len(evs) != 1 || evs[0] != "Warning UnParseableCronJobSchedule unparseable schedule for cronjob: often" {
		t.Errorf("events = %q, want UnParseableCronJobSchedule", evs)
	}
	// Anything else: at once.
	suspended := old.DeepCopy()
	suspended.Spec.Suspend = ptr.To(true)
	f.c.updateCronJob(old, suspended)
	if strings.Join(f.queue.added, ",") != "ns/cj" {
		t.Errorf("queued at once: %q, want ns/cj", f.queue.added)
	}
}

func TestJobEventsQueueTheirCronJob(t *testing.T) {
	cj := everyMinute()
	f := newFixture(t, at(10, 0, 30), cj)
	mine := job("mine")
	notMine := job("not-mine")
	notMine.OwnerReferences[0].UID = "other-uid" // a CronJob of that name deleted since
	orphan := job("orphan")
	orphan.OwnerReferences = nil
	f.c.addJob(mine)
	f.c.addJob(notMine)
	f.c.addJob(orphan)
	moved := mine.DeepCopy()
	moved.ResourceVersion = "2"
	f.c.updateJob(mine, moved)
	f.c.deleteJob(mine)
	if got := strings.Join(f.queue.added, ","); got != "ns/cj,ns/cj,ns/cj" {
		t.Errorf("queued %q, want ns/cj for add, update and delete of its own Job only", got)
	}
}

// timerClock is a fake clock that remembers when the timers made on it fire.
type timerClock struct {
	*testingclock.FakeClock
	mu      sync.Mutex
	targets []time.Time
}

func (c *timerClock) NewTimer(d time.Duration) clock.Timer {
	c.mu.Lock()
	c.targets = append(c.targets, c.Now().Add(d))
	c.mu.Unlock()
	return c.FakeClock.NewTimer(d)
}

func (c *timerClock) hasTimerAt(t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, x := range c.targets {
		if x.Equal(t) {
			return true
		}
	}
	return false
}

// A CronJob "every minute" gets its Job 100ms after each minute of the controller's
// clock, through the requeue at its next start time alone.
func TestRunCreatesJobsOnTheMinute(t *testing.T) {
	clk := &timerClock{FakeClock: testingclock.NewFakeClock(at(10, 0, 30))}
	client := fake.NewClientset(everyMinute())
	giveUIDs(client)
	var mu sync.Mutex
	createdAt := map[string]time.Time{}
	client.PrependReactor("create", "jobs", func(a clienttesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		createdAt[a.(clienttesting.CreateAction).GetObject().(*batchv1.Job).Name] = clk.Now()
		return false, nil, nil
	})
	controllertest.RunController(t, client, func(factory informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(Config{Clock: clk, Location: time.UTC, Logger: slog.New(slog.DiscardHandler)}, client, factory)
	})

	for i, next := range []time.Time{at(10, 1, 0), at(10, 2, 0)} {
		due := next.Add(nextScheduleDelta)
		testutil.Eventually(t, fmt.Sprintf("the CronJob queued for %v", due), func() (bool, error) { return clk.hasTimerAt(due), nil })
		clk.SetTime(due)
		name := fmt.Sprintf("cj-%d", next.Unix()/60)
		testutil.Eventually(t, "job "+name, func() (bool, error) {
			_, err := client.BatchV1().Jobs("ns").Get(context.Background(), name, metav1.GetOptions{})
			return err == nil, err
		})
		mu.Lock()
		got, n := createdAt[name], len(createdAt)
		mu.Unlock()
		if !got.Equal(due) || n != i+1 {
			t.Errorf("job %s created at %v (%d jobs), want at %v, the only new one", name, got, n, due)
		}
		testutil.Eventually(t, "status of "+name, func() (bool, error) {
			cj, err := client.BatchV1().CronJobs("ns").Get(context.Background(), "cj", metav1.GetOptions{})
			return err == nil && cj.Status.LastScheduleTime != nil && cj.Status.LastScheduleTime.Time.Equal(next), err
		})
	}
	testutil.Eventually(t, "SuccessfulCreate event", func() (bool, error) {
		return controllertest.HasEvent(t, client, "ns", "cj", "SuccessfulCreate"), nil
	})
}

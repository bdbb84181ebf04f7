package ttlafterfinished

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// finishedJob is a Job that finished (cond) at t0 with the TTL ttl (nil: none).
func finishedJob(name string, cond batchv1.JobConditionType, ttl *int32) *batchv1.Job {
	j := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name)},
		Spec: batchv1.JobSpec{TTLSecondsAfterFinished: ttl}}
	if cond != "" {
		j.Status.Conditions = []batchv1.JobCondition{
			{Type: batchv1.JobSuccessCriteriaMet, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(-time.Minute))},
			{Type: cond, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
		}
	}
	return j
}

func TestTimeLeft(t *testing.T) {
	for _, tc := range []struct {
		name    string
		job     *batchv1.Job
		now     time.Time
		want    time.Duration
		wantErr bool
	}{
		{"before", finishedJob("j", batchv1.JobComplete, ptr.To[int32](100)), t0.Add(30 * time.Second), 70 * time.Second, false},
		{"failed jobs too", finishedJob("j", batchv1.JobFailed, ptr.To[int32](100)), t0.Add(100 * time.Second), 0, false},
		{"past", finishedJob("j", batchv1.JobComplete, ptr.To[int32](0)), t0.Add(time.Second), -time.Second, false},
		{"finished in the future (clock skew)", finishedJob("j", batchv1.JobComplete, ptr.To[int32](10)), t0.Add(-5 * time.Second), 15 * time.Second, false},
		{"no TTL", finishedJob("j", batchv1.JobComplete, nil), t0, 0, true},
		{"not finished", finishedJob("j", "", ptr.To[int32](10)), t0, 0, true},
	} {
		got, err := timeLeft(tc.job, tc.now)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("%s: timeLeft = %v, %v; want %v, error %v", tc.name, got, err, tc.want, tc.wantErr)
		}
	}
	noTime := finishedJob("j", batchv1.JobComplete, ptr.To[int32](10))
	noTime.Status.Conditions[1].LastTransitionTime = metav1.Time{}
	if _, err := timeLeft(noTime, t0); err == nil {
		t.Error("a terminal condition without a time must not be decided")
	}
	if needsCleanup(finishedJob("j", "", ptr.To[int32](1))) || needsCleanup(finishedJob("j", batchv1.JobComplete, nil)) ||
		!needsCleanup(finishedJob("j", batchv1.JobFailed, ptr.To[int32](1))) {
		t.Error("needsCleanup: finished with a TTL only")
	}
}

// deletes records the Job deletions the client saw, with their options.
type deletes struct {
	mu   sync.Mutex
	opts map[string]metav1.DeleteOptions
}

func watchDeletes(client *fake.Clientset) *deletes {
	d := &deletes{opts: map[string]metav1.DeleteOptions{}}
	client.PrependReactor("delete", "jobs", func(a clienttesting.Action) (bool, runtime.Object, error) {
		da := a.(clienttesting.DeleteActionImpl)
		d.mu.Lock()
		d.opts[da.GetName()] = da.DeleteOptions
		d.mu.Unlock()
		return false, nil, nil
	})
	return d
}

func (d *deletes) get(name string) (metav1.DeleteOptions, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	o, ok := d.opts[name]
	return o, ok
}

func newController(t *testing.T, clk *clocktesting.FakeClock, client *fake.Clientset) (*Controller, informers.SharedInformerFactory) {
	t.Helper()
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(Config{Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, client, factory)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.queue.ShutDown)
	return c, factory
}

// TestSyncDeletesOnceTTLPassed: before the TTL the Job stays and its key comes back
// when the TTL passes; then it is deleted in the foreground, with its UID as a
// precondition. Jobs not finished or without a TTL stay.
func TestSyncDeletesOnceTTLPassed(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0.Add(30 * time.Second))
	client := fake.NewClientset(finishedJob("done", batchv1.JobComplete, ptr.To[int32](100)),
		finishedJob("running", "", ptr.To[int32](0)), finishedJob("keep", batchv1.JobFailed, nil))
	d := watchDeletes(client)
	c, factory := newController(t, clk, client)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	// Only the finished Job with a TTL is queued by the informer's add.
	testutil.Eventually(t, "the finished Job queued", func() (bool, error) { return c.queue.Len() > 0, nil })
	key, _ := c.queue.Get()
	c.queue.Done(key)
	if key != "ns/done" {
		t.Fatalf("queued %q, want ns/done", key)
	}
	for _, name := range []string{"done", "running", "keep"} {
		if err := c.sync(ctx, "ns/"+name); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := d.get("done"); ok {
		t.Fatal("deleted 70s before its TTL passed")
	}
	clk.Step(69 * time.Second)
	if c.queue.Len() != 0 {
		t.Fatal("requeued before the TTL passed")
	}
	clk.Step(time.Second)
	testutil.Eventually(t, "the key back when the TTL passes", func() (bool, error) { return c.queue.Len() == 1, nil })
	if err := c.sync(ctx, "ns/done"); err != nil {
		t.Fatal(err)
	}
	opts, ok := d.get("done")
	if !ok {
		t.Fatal("not deleted once its TTL passed")
	}
	if ptr.Deref(opts.PropagationPolicy, "") != metav1.DeletePropagationForeground || opts.Preconditions == nil || ptr.Deref(opts.Preconditions.UID, "") != "uid-done" {
		t.Errorf("delete options %+v, want Foreground with the Job's UID as precondition", opts)
	}
	for _, name := range []string{"running", "keep"} {
		if _, ok := d.get(name); ok {
			t.Errorf("Job %s deleted", name)
		}
	}
}

// TestSyncReadsTheTTLAfresh: a cached Job whose TTL has passed is not deleted when the
// API server's copy has a longer TTL.
func TestSyncReadsTheTTLAfresh(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0.Add(time.Hour))
	client := fake.NewClientset(finishedJob("j", batchv1.JobComplete, ptr.To[int32](7200)))
	d := watchDeletes(client)
	c, factory := newController(t, clk, client)
	// The informer is not started: its cache holds the stale copy.
	if err := factory.Batch().V1().Jobs().Informer().GetIndexer().Add(finishedJob("j", batchv1.JobComplete, ptr.To[int32](60))); err != nil {
		t.Fatal(err)
	}
	if err := c.sync(context.Background(), "ns/j"); err != nil {
		t.Fatal(err)
	}
	if _, ok := d.get("j"); ok {
		t.Error("deleted on the cache's stale TTL")
	}
	if _, err := client.BatchV1().Jobs("ns").Get(context.Background(), "j", metav1.GetOptions{}); err != nil {
		t.Errorf("job gone: %v", err)
	}
}

// TestRunDeletesExpiredJobs runs the controller: a Job whose TTL passes while it runs is
// deleted when the clock gets there; a Job being deleted already is left alone.
func TestRunDeletesExpiredJobs(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	deleting := finishedJob("deleting", batchv1.JobComplete, ptr.To[int32](0))
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	deleting.Finalizers = []string{"foregroundDeletion"}
	client := fake.NewClientset(deleting)
	d := watchDeletes(client)
	controllertest.RunController(t, client, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return New(Config{Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, client, f)
	})
	ctx := context.Background()
	if _, err := client.BatchV1().Jobs("ns").Create(ctx, finishedJob("short", batchv1.JobComplete, ptr.To[int32](10)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the Job deleted once the clock passes its TTL", func() (bool, error) {
		if clk.Now().Before(t0.Add(10 * time.Second)) {
			clk.Step(time.Second)
		}
		_, err := client.BatchV1().Jobs("ns").Get(ctx, "short", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if !clk.Now().Equal(t0.Add(10 * time.Second)) {
		t.Errorf("deleted at %v, want at its TTL %v", clk.Now(), t0.Add(10*time.Second))
	}
	if _, ok := d.get("deleting"); ok {
		t.Error("a Job being deleted was deleted again")
	}
}

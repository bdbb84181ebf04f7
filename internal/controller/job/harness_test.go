package job

import (
	"context"
	"io"
	"log/slog"
	"sort"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/testutil"
)

const testNS = "batch"

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type jobOpt func(*batchv1.Job)

// newJob is a Job as the API server stores it: defaulted, with the selector and the
// template labels it sets.
func newJob(name string, opts ...jobOpt) *batchv1.Job {
	uid := types.UID("job-uid-" + name)
	l := map[string]string{batchv1.ControllerUidLabel: string(uid), batchv1.JobNameLabel: name,
		"controller-uid": string(uid), "job-name": name, "app": "batch"}
	j := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNS, UID: uid, Generation: 1},
		Spec: batchv1.JobSpec{
			Parallelism: ptr.To[int32](1), Completions: ptr.To[int32](1), BackoffLimit: ptr.To[int32](6),
			CompletionMode: ptr.To(batchv1.NonIndexedCompletion), Suspend: ptr.To(false),
			PodReplacementPolicy: ptr.To(batchv1.TerminatingOrFailed),
			Selector:             &metav1.LabelSelector{MatchLabels: map[string]string{batchv1.ControllerUidLabel: string(uid)}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					Containers: []corev1.Container{{Name: "main", Image: "busybox:1.36"}}},
			},
		},
	}
	for _, o := range opts {
		o(j)
	}
	return j
}

func completions(n int32) jobOpt { return func(j *batchv1.Job) { j.Spec.Completions = ptr.To(n) } }
func parallelism(n int32) jobOpt { return func(j *batchv1.Job) { j.Spec.Parallelism = ptr.To(n) } }
func backoffLimit(n int32) jobOpt {
	return func(j *batchv1.Job) { j.Spec.BackoffLimit = ptr.To(n) }
}
func indexed() jobOpt {
	return func(j *batchv1.Job) { j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion) }
}

// harness runs the controller's informers and handlers on a fake clientset with a fake
// clock; tests call sync themselves, after the caches have caught up.
type harness struct {
	t      *testing.T
	ctx    context.Context
	clock  *clocktesting.FakeClock
	client *fake.Clientset
	c      *Controller
	events *record.FakeRecorder
}

func newHarness(t *testing.T, objs ...runtime.Object) *harness {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	client := newFakeClient(clk, objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	c, err := New(Config{Clock: clk, SyncBatchPeriod: -1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, client, factory)
	if err != nil {
		t.Fatal(err)
	}
	events := record.NewFakeRecorder(1000)
	c.recorder = events
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
		c.queue.ShutDown()
		c.orphans.ShutDown()
	})
	return &harness{t: t, ctx: context.Background(), clock: clk, client: client, c: c, events: events}
}

func (h *harness) createJob(j *batchv1.Job) {
	h.t.Helper()
	if _, err := h.client.BatchV1().Jobs(j.Namespace).Create(h.ctx, j, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// updateJob changes a Job's spec (its generation moves on).
func (h *harness) updateJob(name string, change func(*batchv1.Job)) {
	h.t.Helper()
	j := h.job(name)
	change(j)
	j.Generation++
	if _, err := h.client.BatchV1().Jobs(testNS).Update(h.ctx, j, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) job(name string) *batchv1.Job {
	h.t.Helper()
	j, err := h.client.BatchV1().Jobs(testNS).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return j
}

// pods are the namespace's pods as the API has them, by name.
func (h *harness) pods() []corev1.Pod {
	h.t.Helper()
	list, err := h.client.CoreV1().Pods(testNS).List(h.ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// activePods are the pods neither finished nor being deleted.
func (h *harness) activePods() []corev1.Pod {
	var out []corev1.Pod
	for _, p := range h.pods() {
		if podActive(&p) {
			out = append(out, p)
		}
	}
	return out
}

// settle waits until the informers hold what the API holds and the handlers have
// observed the pods the controller created and deleted.
func (h *harness) settle() {
	h.t.Helper()
	testutil.Eventually(h.t, "the caches to catch up", func() (bool, error) {
		apiPods, err := h.client.CoreV1().Pods(testNS).List(h.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		cached, _ := h.c.podLister.Pods(testNS).List(labels.Everything())
		if !sameVersions(apiPods.Items, cached) {
			return false, nil
		}
		apiJobs, err := h.client.BatchV1().Jobs(testNS).List(h.ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		cachedJobs, _ := h.c.jobLister.Jobs(testNS).List(labels.Everything())
		if len(apiJobs.Items) != len(cachedJobs) {
			return false, nil
		}
		rv := map[string]string{}
		for _, j := range cachedJobs {
			rv[j.Name] = j.ResourceVersion
		}
		for _, j := range apiJobs.Items {
			if rv[j.Name] != j.ResourceVersion || !h.c.expectations.Satisfied(testNS+"/"+j.Name) {
				return false, nil
			}
		}
		return true, nil
	})
}

func sameVersions(api []corev1.Pod, cached []*corev1.Pod) bool {
	if len(api) != len(cached) {
		return false
	}
	rv := map[string]string{}
	for _, p := range cached {
		rv[p.Name] = p.ResourceVersion
	}
	for _, p := range api {
		if rv[p.Name] != p.ResourceVersion {
			return false
		}
	}
	return true
}

// sync syncs Job name once the caches have caught up.
func (h *harness) sync(name string) error {
	h.t.Helper()
	h.settle()
	return h.c.sync(h.ctx, testNS+"/"+name)
}

func (h *harness) mustSync(name string) {
	h.t.Helper()
	if err := h.sync(name); err != nil {
		h.t.Fatalf("sync %s: %v", name, err)
	}
}

// syncUntil syncs Job name until cond holds (at most n times).
func (h *harness) syncUntil(name string, n int, what string, cond func(*batchv1.Job) bool) *batchv1.Job {
	h.t.Helper()
	for i := 0; i < n; i++ {
		h.mustSync(name)
		if j := h.job(name); cond(j) {
			return j
		}
	}
	h.t.Fatalf("after %d syncs: %s does not hold; status %+v", n, what, h.job(name).Status)
	return nil
}

// setPodStatus plays the kubelet: it writes the pod's status.
func (h *harness) setPodStatus(name string, change func(*corev1.Pod)) {
	h.t.Helper()
	p, err := h.client.CoreV1().Pods(testNS).Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	change(p)
	if _, err := h.client.CoreV1().Pods(testNS).UpdateStatus(h.ctx, p, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// running makes the pod Running (and Ready when ready) on a node.
func (h *harness) running(name string, ready bool) {
	h.t.Helper()
	h.setPodStatus(name, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodRunning
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(h.clock.Now())}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Ready: ready,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(h.clock.Now())}}}}
	})
}

// exit ends the pod's container with code now: Succeeded for 0, else Failed.
func (h *harness) exit(name string, code int32, conds ...corev1.PodCondition) {
	h.t.Helper()
	h.setPodStatus(name, func(p *corev1.Pod) {
		p.Status.Phase = corev1.PodSucceeded
		if code != 0 {
			p.Status.Phase = corev1.PodFailed
		}
		now := metav1.NewTime(h.clock.Now())
		p.Status.Conditions = append([]corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: now}}, conds...)
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, FinishedAt: now}}}}
	})
}

// drainEvents returns the Events recorded so far ("Normal SuccessfulCreate Created pod: x").
func (h *harness) drainEvents() []string {
	var out []string
	for {
		select {
		case e := <-h.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func hasEvent(events []string, prefix string) bool {
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}

func condition(j *batchv1.Job, t batchv1.JobConditionType) *batchv1.JobCondition {
	return findCondition(j.Status.Conditions, t)
}

// conditionTypes lists the Job's True conditions in order.
func conditionTypes(j *batchv1.Job) []batchv1.JobConditionType {
	var out []batchv1.JobConditionType
	for _, c := range j.Status.Conditions {
		if c.Status == corev1.ConditionTrue {
			out = append(out, c.Type)
		}
	}
	return out
}

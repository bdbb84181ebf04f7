package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/hollow"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestWorkloadAPIs runs, on one hollow cluster and side by side, the workload APIs
// beyond Deployments: a Job, a CronJob, a PodDisruptionBudget against kubectl drain,
// and a HorizontalPodAutoscaler. Hollow containers run for the time the pod's
// kubelab.dev/hollow-run-seconds says and use the CPU kubelab.dev/hollow-cpu-usage says.
func TestWorkloadAPIs(t *testing.T) {
	tc := startCluster(t, nil)
	t.Run("job", func(t *testing.T) { t.Parallel(); testJob(t, tc) })
	t.Run("cronjob", func(t *testing.T) { t.Parallel(); testCronJob(t, tc) })
	t.Run("drain stops at a pdb", func(t *testing.T) { t.Parallel(); testDrainStopsAtPDB(t, tc) })
	t.Run("hpa", func(t *testing.T) { t.Parallel(); testHPA(t, tc) })
	t.Run("control plane status", func(t *testing.T) { t.Parallel(); testControlPlaneStatus(t, tc) })
}

// testControlPlaneStatus: the scheduler and the controller-manager hold their Leases in
// kube-system, and componentstatuses reports them and etcd healthy.
func testControlPlaneStatus(t *testing.T, tc *testCluster) {
	ctx := context.Background()
	for _, name := range []string{"kube-scheduler", "kube-controller-manager"} {
		testutil.EventuallyWithin(t, clustertest.Timeout, "lease "+name+" held", func() (bool, error) {
			l, err := tc.Client.CoordinationV1().Leases(metav1.NamespaceSystem).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "", nil
		})
	}
	list, err := tc.Client.CoreV1().ComponentStatuses().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	healthy := map[string]bool{}
	for _, cs := range list.Items {
		for _, c := range cs.Conditions {
			healthy[cs.Name] = c.Type == corev1.ComponentHealthy && c.Status == corev1.ConditionTrue
		}
	}
	for _, name := range []string{"controller-manager", "scheduler", "etcd-0"} {
		if !healthy[name] {
			t.Errorf("componentstatus %s not healthy: %+v", name, list.Items)
		}
	}
}

func hollowPod(image string, annotations map[string]string, labels map[string]string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: image,
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
	}
}

// testJob: 5 completions at parallelism 2 complete, never more than 2 pods at once.
func testJob(t *testing.T, tc *testCluster) {
	ctx := context.Background()
	ns := tc.Namespace("job")
	tmpl := hollowPod("busybox", map[string]string{hollow.RunSecondsAnnotation: "1"}, nil)
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "five"},
		Spec: batchv1.JobSpec{Completions: ptr.To[int32](5), Parallelism: ptr.To[int32](2), Template: tmpl}}
	if _, err := tc.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	maxActive := int32(0)
	testutil.EventuallyWithin(t, clustertest.Timeout, "job five complete", func() (bool, error) {
		j, err := tc.Client.BatchV1().Jobs(ns).Get(ctx, "five", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		maxActive = max(maxActive, j.Status.Active)
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				return false, fmt.Errorf("job failed: %s: %s", c.Reason, c.Message)
			}
			if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
				if j.Status.Succeeded != 5 || j.Status.CompletionTime == nil {
					return false, fmt.Errorf("complete with succeeded %d, completionTime %v", j.Status.Succeeded, j.Status.CompletionTime)
				}
				return true, nil
			}
		}
		return false, nil
	})
	if maxActive > 2 {
		t.Errorf("job had %d pods active at once; parallelism is 2", maxActive)
	}
	pods, err := tc.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=five"})
	if err != nil {
		t.Fatal(err)
	}
	succeeded := 0
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded {
			succeeded++
		}
		if len(p.Finalizers) != 0 {
			t.Errorf("pod %s keeps finalizers %v after the job finished", p.Name, p.Finalizers)
		}
	}
	if succeeded != 5 {
		t.Errorf("%d succeeded pods, want 5", succeeded)
	}
}

// testCronJob: a CronJob every minute creates the Job of the next minute, in that
// minute.
func testCronJob(t *testing.T, tc *testCluster) {
	ctx := context.Background()
	ns := tc.Namespace("cronjob")
	tmpl := hollowPod("busybox", map[string]string{hollow.RunSecondsAnnotation: "1"}, nil)
	tmpl.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	cj := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "minutely"},
		Spec: batchv1.CronJobSpec{Schedule: "* * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tmpl}}}}
	created, err := tc.Client.BatchV1().CronJobs(ns).Create(ctx, cj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var job batchv1.Job
	testutil.EventuallyWithin(t, 2*time.Minute, "the cronjob's first job", func() (bool, error) {
		jobs, err := tc.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil || len(jobs.Items) == 0 {
			return false, err
		}
		job = jobs.Items[0]
		return true, nil
	})
	scheduled := created.CreationTimestamp.Time.Truncate(time.Minute).Add(time.Minute)
	if want := fmt.Sprintf("minutely-%d", scheduled.Unix()/60); job.Name != want {
		t.Errorf("first job %s, want %s (the minute after the CronJob was made)", job.Name, want)
	}
	if at := job.CreationTimestamp.Time; at.Before(scheduled) || !at.Before(scheduled.Add(time.Minute)) {
		t.Errorf("job %s created at %s, outside its minute %s", job.Name, at, scheduled)
	}
	if ref := metav1.GetControllerOf(&job); ref == nil || ref.Kind != "CronJob" || ref.Name != "minutely" {
		t.Errorf("job controller ref %+v", ref)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "cronjob status lists its job", func() (bool, error) {
		c, err := tc.Client.BatchV1().CronJobs(ns).Get(ctx, "minutely", metav1.GetOptions{})
		return err == nil && c.Status.LastScheduleTime != nil && c.Status.LastScheduleTime.Time.Equal(scheduled), err
	})
}

// testDrainStopsAtPDB: kubectl drain of a node that runs a pod of a Deployment whose
// budget allows no disruption is refused with upstream's message, and the pod stays.
func testDrainStopsAtPDB(t *testing.T, tc *testCluster) {
	ctx := context.Background()
	ns := tc.Namespace("drain")
	labels := map[string]string{"app": "guarded"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "guarded"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: hollowPod("nginx", nil, labels)}}
	if _, err := tc.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "guarded"}, Spec: policyv1.PodDisruptionBudgetSpec{
		MinAvailable: ptr.To(intstr.FromInt32(2)), Selector: &metav1.LabelSelector{MatchLabels: labels}}}
	if _, err := tc.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "budget with 2 healthy pods and no disruption allowed", func() (bool, error) {
		p, err := tc.Client.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, "guarded", metav1.GetOptions{})
		return err == nil && p.Status.ObservedGeneration == p.Generation && p.Status.CurrentHealthy == 2 &&
			p.Status.ExpectedPods == 2 && p.Status.DisruptionsAllowed == 0, err
	})
	pods, err := tc.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=guarded"})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("pods: %v", err)
	}
	pod := pods.Items[0]
	out, err := testutil.KubectlCommand(t, tc.Kubeconfig(), "drain", pod.Spec.NodeName,
		"--ignore-daemonsets", "--delete-emptydir-data", "--pod-selector=app=guarded", "--timeout=12s").CombinedOutput()
	if err == nil {
		t.Fatalf("drain succeeded past the budget:\n%s", out)
	}
	if !strings.Contains(string(out), "Cannot evict pod as it would violate the pod's disruption budget.") {
		t.Errorf("drain output lacks the budget's refusal:\n%s", out)
	}
	if _, err := testutil.KubectlCommand(t, tc.Kubeconfig(), "uncordon", pod.Spec.NodeName).CombinedOutput(); err != nil {
		t.Errorf("uncordon: %v", err)
	}
	p, err := tc.Client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil || p.UID != pod.UID || p.DeletionTimestamp != nil {
		t.Errorf("pod %s after the refused drain: %v, deleting %v", pod.Name, err, p.DeletionTimestamp)
	}
}

// testHPA: an autoscaler on CPU scales a Deployment up while its pods use twice their
// target, and back down once they idle.
func testHPA(t *testing.T, tc *testCluster) {
	ctx := context.Background()
	ns := tc.Namespace("hpa")
	labels := map[string]string{"app": "busy"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "busy"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: hollowPod("nginx", map[string]string{hollow.CPUUsageAnnotation: "100m"}, labels)}}
	if _, err := tc.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "busy"}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "busy"},
		MinReplicas:    ptr.To[int32](1), MaxReplicas: 3,
		Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
			Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}},
		Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)}},
	}}
	if _, err := tc.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	replicas := func(want int32) func() (bool, error) {
		return func() (bool, error) {
			d, err := tc.Client.AppsV1().Deployments(ns).Get(ctx, "busy", metav1.GetOptions{})
			return err == nil && ptr.Deref(d.Spec.Replicas, 0) == want, err
		}
	}
	// 100m used of 100m requested is 200% of the 50% target: the autoscaler doubles
	// the pods, and again, up to its maximum.
	testutil.EventuallyWithin(t, clustertest.Timeout, "busy scaled up to 3", replicas(3))
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:"5m"}}}}}`, hollow.CPUUsageAnnotation)
	if _, err := tc.Client.AppsV1().Deployments(ns).Patch(ctx, "busy", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "busy scaled down to 1", replicas(1))
	h, err := tc.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "busy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h.Status.LastScaleTime == nil || len(h.Status.CurrentMetrics) == 0 {
		t.Errorf("autoscaler status %+v lacks its last scale time or current metrics", h.Status)
	}
}

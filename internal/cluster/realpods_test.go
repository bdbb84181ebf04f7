package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/trace"
)

// busyboxPod is a pod of one busybox container running script with restartPolicy policy.
func busyboxPod(ns, name string, policy corev1.RestartPolicy, script string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{RestartPolicy: policy, TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sh", "-c", script}}}},
	}
}

// waitContainer waits until the pod's container name satisfies cond and returns the pod.
func (tc *testCluster) waitContainer(ns, pod, what string, cond func(corev1.ContainerStatus) bool) *corev1.Pod {
	tc.T.Helper()
	var p *corev1.Pod
	testutil.EventuallyWithin(tc.T, clustertest.Timeout, "pod "+pod+": "+what, func() (bool, error) {
		var err error
		if p, err = tc.Client.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{}); err != nil {
			return false, err
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cond(cs) {
				return true, nil
			}
		}
		return false, nil
	})
	return p
}

// testPods runs pods whose containers fail, finish, wait for images or run init
// containers on a real node, and checks what the kubelet reports as upstream's does.
func testPods(t *testing.T, tc *testCluster) {
	ctx := context.Background()
	ns := tc.Namespace("real-pods")
	create := func(p *corev1.Pod) {
		t.Helper()
		if _, err := tc.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// Init containers run one by one, in order, before the app container.
	initPod := busyboxPod(ns, "init-order", corev1.RestartPolicyAlways, "cat /work/order; sleep 3600")
	initPod.Spec.Volumes = []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	mount := []corev1.VolumeMount{{Name: "work", MountPath: "/work"}}
	initPod.Spec.Containers[0].VolumeMounts = mount
	for i := 1; i <= 2; i++ {
		initPod.Spec.InitContainers = append(initPod.Spec.InitContainers, corev1.Container{
			Name: "init-" + strconv.Itoa(i), Image: "busybox", VolumeMounts: mount,
			Command: []string{"sh", "-c", "[ $(wc -l < /work/order 2>/dev/null || echo 0) -eq " + strconv.Itoa(i-1) + " ] && echo init-" + strconv.Itoa(i) + " >> /work/order"}})
	}
	create(initPod)
	// A container that fails is restarted with back-off.
	create(busyboxPod(ns, "crash", corev1.RestartPolicyAlways, "exit 3"))
	oom := busyboxPod(ns, "oom", corev1.RestartPolicyAlways, "tail /dev/zero") // tail keeps the endless line in memory
	oom.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Mi")}
	create(oom)
	// A pod whose container ends with 0 and never restarts succeeds.
	create(busyboxPod(ns, "done", corev1.RestartPolicyNever, "exit 0"))
	// A namespaced sysctl of the pod's security context is set in its sandbox, and
	// busybox's sysctl is at /bin/sysctl, as in upstream's image.
	sysctl := busyboxPod(ns, "sysctl", corev1.RestartPolicyNever, "")
	sysctl.Spec.SecurityContext = &corev1.PodSecurityContext{Sysctls: []corev1.Sysctl{{Name: "kernel.shm_rmid_forced", Value: "1"}}}
	sysctl.Spec.Containers[0].Command = []string{"/bin/sysctl", "kernel.shm_rmid_forced"}
	create(sysctl)
	// An image that no registry has.
	missing := busyboxPod(ns, "no-image", corev1.RestartPolicyAlways, "true")
	missing.Spec.Containers[0].Image = "kubelab-test/no-such-image:v1"
	create(missing)

	// A command the image does not have: the start fails, as upstream names it.
	badCmd := busyboxPod(ns, "bad-command", corev1.RestartPolicyAlways, "")
	badCmd.Spec.Containers[0].Command = []string{"/kubelab/no-such-binary"}
	create(badCmd)

	p := tc.WaitPodRunning(ns, "init-order")
	for _, cs := range p.Status.InitContainerStatuses {
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 || cs.State.Terminated.Reason != "Completed" {
			t.Errorf("init container %s: %+v, want terminated Completed", cs.Name, cs.State)
		}
	}
	b, err := os.ReadFile(filepath.Join(tc.KubeletRoot(tc.Nodes()[0]), "pods", string(p.UID), "volumes/kubernetes.io~empty-dir/work/order"))
	if err != nil || string(b) != "init-1\ninit-2\n" {
		t.Errorf("emptyDir holds %q (%v), want the init containers' lines in order", b, err)
	}

	p = tc.waitContainer(ns, "crash", "CrashLoopBackOff after a restart", func(cs corev1.ContainerStatus) bool {
		return cs.RestartCount >= 1 && cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff"
	})
	if last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 3 || last.Reason != "Error" {
		t.Errorf("crash: last state %+v, want terminated with exit code 3 (Error)", last)
	}
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("crash: phase %s, want Running while it is restarted", p.Status.Phase)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "BackOff event of pod crash", func() (bool, error) { return tc.HasEvent(ns, "crash", "BackOff"), nil })
	tc.expectWhy(ns, "crash", trace.StageCrash, "exits with code 3")
	tc.expectWhy(ns, "oom", trace.StageOOM, "OOMKilled")

	testutil.EventuallyWithin(t, clustertest.Timeout, "pod done Succeeded", func() (bool, error) {
		p, err := tc.Client.CoreV1().Pods(ns).Get(ctx, "done", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodSucceeded, err
	})

	testutil.EventuallyWithin(t, clustertest.Timeout, "pod sysctl Succeeded", func() (bool, error) {
		p, err := tc.Client.CoreV1().Pods(ns).Get(ctx, "sysctl", metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("pod sysctl failed: %+v", p.Status.ContainerStatuses)
		}
		return err == nil && p.Status.Phase == corev1.PodSucceeded, err
	})
	if out := tc.Kubectl("logs", "-n", ns, "sysctl"); out != "kernel.shm_rmid_forced = 1\n" {
		t.Errorf("sysctl's log %q, want the sysctl set to 1", out)
	}

	p = tc.waitContainer(ns, "no-image", "ImagePullBackOff", func(cs corev1.ContainerStatus) bool {
		return cs.State.Waiting != nil && cs.State.Waiting.Reason == "ImagePullBackOff"
	})
	// The cluster runs offline (as every test's does unless it names stand-ins): the
	// message says why the image is missing.
	if msg := p.Status.ContainerStatuses[0].State.Waiting.Message; !strings.Contains(msg, `Back-off pulling image "kubelab-test/no-such-image:v1"`) ||
		!strings.Contains(msg, "ErrImagePull: ") || !strings.Contains(msg, "kubelab runs offline (kubelab up --offline)") {
		t.Errorf("no-image: waiting message %q, want the pull's error naming offline mode", msg)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "Failed event of pod no-image", func() (bool, error) { return tc.HasEvent(ns, "no-image", "Failed"), nil })
	tc.expectWhy(ns, "no-image", trace.StageImage, "kubelab-test/no-such-image:v1")
	if p.Status.Phase != corev1.PodPending {
		t.Errorf("no-image: phase %s, want Pending", p.Status.Phase)
	}

	tc.waitContainer(ns, "bad-command", "RunContainerError or its back-off", func(cs corev1.ContainerStatus) bool {
		w := cs.State.Waiting
		return w != nil && (w.Reason == "RunContainerError" || w.Reason == "CrashLoopBackOff" && cs.RestartCount >= 1)
	})
	tc.expectWhy(ns, "bad-command", trace.StageCreate, "no-such-binary")
	testutil.EventuallyWithin(t, clustertest.Timeout, "Failed event naming the missing binary", func() (bool, error) {
		for _, w := range tc.Warnings(ns, "bad-command") {
			if strings.HasPrefix(w, "Failed: ") && strings.Contains(w, "/kubelab/no-such-binary") {
				return true, nil
			}
		}
		return false, nil
	})

	// kubectl top's source: the running pod's usage, from its node's kubelet summary of
	// containerd's cgroup counters, through metrics.k8s.io.
	testutil.EventuallyWithin(t, clustertest.Timeout, "metrics of pod init-order", func() (bool, error) {
		raw, err := tc.Client.CoreV1().RESTClient().Get().
			AbsPath("/apis/metrics.k8s.io/v1beta1/namespaces", ns, "pods", "init-order").DoRaw(ctx)
		if err != nil {
			return false, nil
		}
		var m struct {
			Containers []struct {
				Name  string            `json:"name"`
				Usage map[string]string `json:"usage"`
			} `json:"containers"`
		}
		if err := json.Unmarshal(raw, &m); err != nil {
			return false, err
		}
		return len(m.Containers) == 1 && m.Containers[0].Name == "main" && m.Containers[0].Usage["memory"] != "" &&
			m.Containers[0].Usage["memory"] != "0", nil
	})

	// A Job's pods really run to completion: two completions, one at a time.
	tmpl := busyboxPod(ns, "", corev1.RestartPolicyNever, "echo done").Spec
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "twice"}, Spec: batchv1.JobSpec{
		Completions: ptr.To[int32](2), Parallelism: ptr.To[int32](1), Template: corev1.PodTemplateSpec{Spec: tmpl}}}
	if _, err := tc.Client.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "job twice complete", func() (bool, error) {
		j, err := tc.Client.BatchV1().Jobs(ns).Get(ctx, "twice", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range j.Status.Conditions {
			if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
				return false, fmt.Errorf("job failed: %s: %s", c.Reason, c.Message)
			}
		}
		return j.Status.Succeeded == 2 && slices.ContainsFunc(j.Status.Conditions, func(c batchv1.JobCondition) bool {
			return c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue
		}), nil
	})
	jobPods, err := tc.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=twice"})
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"init-order", "crash", "done", "sysctl", "no-image", "bad-command"}
	for _, p := range jobPods.Items {
		if p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("job pod %s is %s", p.Name, p.Status.Phase)
		}
		names = append(names, p.Name)
	}
	for _, name := range names {
		tc.deletePodAndWait(ns, name)
	}
}

package kubelet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/informers"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// rr is a ResourceRequirements from "cpu=20m,memory=35Mi"-style requests and limits.
func rr(requests, limits string) corev1.ResourceRequirements {
	list := func(s string) corev1.ResourceList {
		if s == "" {
			return nil
		}
		out := corev1.ResourceList{}
		for _, kv := range strings.Split(s, ",") {
			k, v, _ := strings.Cut(kv, "=")
			out[corev1.ResourceName(k)] = resource.MustParse(v)
		}
		return out
	}
	return corev1.ResourceRequirements{Requests: list(requests), Limits: list(limits)}
}

func podWith(uid string, rs ...corev1.ResourceRequirements) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: uid, UID: types.UID(uid)}}
	for i, r := range rs {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: string(rune('a' + i)), Image: "busybox", Resources: r})
	}
	return p
}

// TestResizeFit: a resize is taken when the node's allocatable covers it next to the
// other pods' allocations; it waits (Deferred) when they leave too little, and is
// Infeasible when the pod alone asks for more than the node has, with upstream's messages.
func TestResizeFit(t *testing.T) {
	node := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	others := []*corev1.Pod{podWith("o1", rr("cpu=300m,memory=256Mi", "")), podWith("o2", rr("cpu=200m", ""))}
	for _, tc := range []struct {
		name            string
		pod             *corev1.Pod
		fit             bool
		reason, message string
	}{
		{name: "room left", pod: podWith("p", rr("cpu=250m,memory=256Mi", ""), rr("cpu=250m", "")), fit: true},
		{name: "cpu taken by others", pod: podWith("p", rr("cpu=600m", "")), reason: "Deferred",
			message: "Node didn't have enough resource: cpu, requested: 600, used: 500, capacity: 1000"},
		{name: "memory taken by others", pod: podWith("p", rr("memory=800Mi", "")), reason: "Deferred",
			message: "Node didn't have enough resource: memory, requested: 838860800, used: 268435456, capacity: 1073741824"},
		{name: "more cpu than the node", pod: podWith("p", rr("cpu=1500m", "")), reason: "Infeasible",
			message: "Node didn't have enough capacity: cpu, requested: 1500, capacity: 1000"},
		{name: "more memory than the node", pod: podWith("p", rr("cpu=1500m,memory=2Gi", "")), reason: "Infeasible",
			message: "Node didn't have enough capacity: memory, requested: 2147483648, capacity: 1073741824"},
		{name: "a best-effort pod fits anywhere", pod: podWith("p", rr("", "")), fit: true},
	} {
		fit, reason, message := resizeFit(tc.pod, others, node)
		if fit != tc.fit || reason != tc.reason || message != tc.message {
			t.Errorf("%s: %v %q %q, want %v %q %q", tc.name, fit, reason, message, tc.fit, tc.reason, tc.message)
		}
	}
}

func quantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }

// TestWithContainerResources: a known container's status reports the requests allocated
// to it and, while it runs, the cpu and memory its cgroup has where the allocation has
// requests or limits; cpu values that are the same cgroup setting as the allocated ones
// report the allocated ones.
func TestWithContainerResources(t *testing.T) {
	for _, tc := range []struct {
		name              string
		allocated         corev1.ResourceRequirements
		state             ContainerState
		want              corev1.ResourceRequirements
		wantAllocatedNone bool
	}{
		{name: "running, runtime agrees", allocated: rr("cpu=25m,memory=40Mi", "cpu=35m,memory=50Mi"),
			state: ContainerState{Resources: &ContainerResources{CPURequest: quantity("25m"), CPULimit: quantity("35m"), MemoryLimit: quantity("50Mi")}},
			want:  rr("cpu=25m,memory=40Mi", "cpu=35m,memory=50Mi")},
		{name: "running, resize not applied yet", allocated: rr("cpu=25m,memory=40Mi", "cpu=35m,memory=50Mi"),
			state: ContainerState{Resources: &ContainerResources{CPURequest: quantity("20m"), CPULimit: quantity("30m"), MemoryLimit: quantity("45Mi")}},
			want:  rr("cpu=20m,memory=40Mi", "cpu=30m,memory=45Mi")},
		{name: "equivalent cpu values stay the allocated ones", allocated: rr("cpu=1m", "cpu=5m"),
			state: ContainerState{Resources: &ContainerResources{CPURequest: quantity("2m"), CPULimit: quantity("10m")}},
			want:  rr("cpu=1m", "cpu=5m")},
		{name: "only requests: the runtime's minimum shares are no request", allocated: rr("memory=35Mi", ""),
			state: ContainerState{Resources: &ContainerResources{CPURequest: quantity("2m")}},
			want:  rr("memory=35Mi", "")},
		{name: "not reported: the allocation", allocated: rr("cpu=20m", ""), state: ContainerState{}, want: rr("cpu=20m", "")},
		{name: "terminated: the allocation", allocated: rr("cpu=20m", "cpu=30m"),
			state: ContainerState{Terminated: true, Resources: &ContainerResources{CPULimit: quantity("50m")}}, want: rr("cpu=20m", "cpu=30m")},
		{name: "best effort", allocated: rr("", ""), state: ContainerState{Resources: &ContainerResources{CPURequest: quantity("2m")}},
			want: rr("", ""), wantAllocatedNone: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.state.Name = "c1"
			statuses := []corev1.ContainerStatus{{Name: "c1"}, {Name: "unknown"}}
			withContainerResources(statuses, []corev1.Container{{Name: "c1", Resources: tc.allocated}, {Name: "unknown"}}, []ContainerState{tc.state})
			got := statuses[0]
			if got.Resources == nil || !sameCPUMemory(got.Resources, &tc.want) || (got.Resources.Limits == nil) != (tc.want.Limits == nil) ||
				(got.Resources.Requests == nil) != (tc.want.Requests == nil) {
				t.Errorf("resources %+v, want %+v", got.Resources, tc.want)
			}
			if (got.AllocatedResources == nil) != tc.wantAllocatedNone || !sameCPUMemory(&corev1.ResourceRequirements{Requests: got.AllocatedResources}, &corev1.ResourceRequirements{Requests: tc.allocated.Requests}) {
				t.Errorf("allocatedResources %v, want %v", got.AllocatedResources, tc.allocated.Requests)
			}
			if statuses[1].Resources != nil || statuses[1].AllocatedResources != nil {
				t.Errorf("a container the runtime does not know: %+v", statuses[1])
			}
		})
	}
}

// TestResizeInProgress: a resize is in progress while a running container's applied
// resources differ from its allocated ones.
func TestResizeInProgress(t *testing.T) {
	pod := podWith("p", rr("cpu=25m", "cpu=35m"))
	applied := func(r corev1.ResourceRequirements) ContainerState { return ContainerState{Name: "a", Actuated: &r} }
	if resizeInProgress(pod, []ContainerState{applied(rr("cpu=25m", "cpu=35m"))}) {
		t.Error("in progress with the allocation applied")
	}
	if !resizeInProgress(pod, []ContainerState{applied(rr("cpu=20m", "cpu=35m"))}) {
		t.Error("not in progress with another cpu request applied")
	}
	exited := applied(rr("cpu=20m", ""))
	exited.Terminated = true
	if resizeInProgress(pod, []ContainerState{exited}) || resizeInProgress(pod, []ContainerState{{Name: "a"}}) {
		t.Error("in progress for an exited container, or one whose applied resources are not known")
	}
}

// TestResizeConditions: the resize conditions replace their earlier selves, keep their
// transition time while their reason stays, and leave the others be.
func TestResizeConditions(t *testing.T) {
	t0, t1 := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	deferred := resizeCondition(corev1.PodResizePending, nil, "Deferred", "m1", 2, t0)
	again := resizeCondition(corev1.PodResizePending, deferred, "Deferred", "m2", 3, t1)
	if !again.LastTransitionTime.Equal(&t0) || !again.LastProbeTime.Equal(&t1) || again.ObservedGeneration != 3 {
		t.Errorf("same reason, new message: %+v", again)
	}
	infeasible := resizeCondition(corev1.PodResizePending, again, "Infeasible", "m3", 3, t1)
	if !infeasible.LastTransitionTime.Equal(&t1) {
		t.Errorf("new reason keeps the transition time: %+v", infeasible)
	}
	conds := []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}, {Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue}}
	got := withResizeConditions(conds, infeasible, nil)
	if len(got) != 2 || got[0].Type != corev1.PodReady || got[1].Type != corev1.PodResizePending || got[1].Reason != "Infeasible" {
		t.Errorf("conditions %+v", got)
	}
}

// TestAllocations: allocations survive a restart of the kubelet (the file under its root
// dir), a pod runs at its allocation, and those of pods gone are forgotten.
func TestAllocations(t *testing.T) {
	path := filepath.Join(t.TempDir(), allocationFile)
	a, err := loadAllocations(path)
	if err != nil {
		t.Fatal(err)
	}
	p1, p2 := podWith("p1", rr("cpu=20m", "cpu=30m"), rr("memory=35Mi", "")), podWith("p2", rr("cpu=1", ""))
	for _, p := range []*corev1.Pod{p1, p2} {
		if err := a.set(p); err != nil {
			t.Fatal(err)
		}
	}
	b, err := loadAllocations(path)
	if err != nil {
		t.Fatal(err)
	}
	alloc, ok := b.get("p1")
	if !ok {
		t.Fatal("p1's allocation lost")
	}
	resized := p1.DeepCopy()
	resized.Spec.Containers[0].Resources = rr("cpu=25m", "cpu=35m")
	got, changed := withAllocation(resized, alloc)
	if !changed || !sameCPUMemory(&got.Spec.Containers[0].Resources, &p1.Spec.Containers[0].Resources) ||
		resized.Spec.Containers[0].Resources.Requests.Cpu().String() != "25m" {
		t.Errorf("pod at its allocation: changed %v, %v (spec %v)", changed, got.Spec.Containers[0].Resources, resized.Spec.Containers[0].Resources)
	}
	if _, changed := withAllocation(p1, alloc); changed {
		t.Error("a pod at its allocation changed")
	}
	if err := b.keepOnly(sets.New[types.UID]("p2")); err != nil {
		t.Fatal(err)
	}
	c, err := loadAllocations(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.get("p1"); ok {
		t.Error("the allocation of a pod gone is kept")
	}
	if _, ok := c.get("p2"); !ok {
		t.Error("p2's allocation lost")
	}
	if mem, err := loadAllocations(""); err != nil || mem.set(p1) != nil {
		t.Errorf("in memory: %v", err)
	}
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadAllocations(path); err == nil {
		t.Error("a damaged file read without an error")
	}
}

// resizingRuntime runs every app container at once and applies to it the resources of the
// pod it is given, reporting them as the runtime's (or fails the resize when told to).
type resizingRuntime struct {
	probedRuntime
	mu      sync.Mutex
	applied map[types.UID]map[string]corev1.ResourceRequirements
	fail    string
}

func (r *resizingRuntime) SyncPod(ctx context.Context, pod *corev1.Pod, v PodVolumes) (PodStatus, error) {
	st, _ := r.probedRuntime.SyncPod(ctx, pod, v)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.applied[pod.UID] == nil {
		r.applied[pod.UID] = map[string]corev1.ResourceRequirements{}
	}
	var err error
	for i := range st.Containers {
		s := &st.Containers[i]
		c := pod.Spec.Containers[i]
		old, ok := r.applied[pod.UID][c.Name]
		if ok && r.fail != "" && !sameCPUMemory(&old, &c.Resources) {
			err = &ResizeError{Container: c.Name, Message: r.fail}
		} else {
			r.applied[pod.UID][c.Name] = *c.Resources.DeepCopy()
		}
		a := r.applied[pod.UID][c.Name]
		s.Actuated = &a
		s.Resources = &ContainerResources{CPURequest: a.Requests.Cpu(), MemoryLimit: a.Limits.Memory()}
		if a.Limits.Cpu().IsZero() {
			s.Resources.CPULimit = nil
		} else {
			s.Resources.CPULimit = a.Limits.Cpu()
		}
	}
	return st, err
}

func (r *resizingRuntime) appliedCPU(uid types.UID) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.applied[uid]["app"]
	return a.Requests.Cpu().String()
}

// TestKubeletResizesPods: a real node's kubelet runs a pod resized through pods/resize at
// its new resources (the runtime gets them), reports them in the containers'
// resources and allocatedResources with the new generation observed; a resize the node
// has no room for is Deferred (PodResizePending) and the pod keeps its resources until
// another pod leaves; a runtime that fails the resize shows PodResizeInProgress with
// reason Error; and the allocations are kept in the kubelet's root dir.
func TestKubeletResizesPods(t *testing.T) {
	api := apiservertest.Start(t, apiservertest.Options{})
	c, ctx := api.Client, context.Background()
	rt := &resizingRuntime{probedRuntime: probedRuntime{restarts: map[string]int32{}, ready: true, alive: true},
		applied: map[types.UID]map[string]corev1.ResourceRequirements{}}
	factory := informers.NewSharedInformerFactory(c, 0)
	root := t.TempDir()
	k, err := New(Config{NodeName: "resize-a", Zone: "us-east-1a", InstanceID: "i-0r", RootDir: root, PodEvents: true,
		Capacity:             corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		StatusUpdateInterval: time.Second, LeaseDuration: 4 * time.Second, LeaseRenewInterval: time.Second},
		c, factory, Deps{Runtime: rt, Mounter: newHollowMounter(nil)})
	if err != nil {
		t.Fatal(err)
	}
	startInformers(t, factory)
	testutil.Start(t, "the kubelet", 0, k.Run, testutil.NoWait)

	pods := c.CoreV1().Pods("default")
	create := func(name, cpu string) *corev1.Pod {
		p := testPod(name, "resize-a")
		p.Spec.AutomountServiceAccountToken = ptr.To(false)
		p.Spec.Containers[0].Resources = rr("cpu="+cpu+",memory=64Mi", "memory=128Mi")
		p, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	get := func(name string) *corev1.Pod {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	resize := func(name, cpu string) *corev1.Pod {
		t.Helper()
		patch := fmt.Sprintf(`{"spec":{"containers":[{"name":"app","resources":{"requests":{"cpu":%q}}}]}}`, cpu)
		var p *corev1.Pod
		testutil.Eventually(t, "resize "+name+" to "+cpu, func() (bool, error) {
			p, err = pods.Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "resize")
			return err == nil, nil // the API's node cache may not have the node yet
		})
		return p
	}
	condition := func(p *corev1.Pod, typ corev1.PodConditionType) *corev1.PodCondition {
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == typ {
				return &p.Status.Conditions[i]
			}
		}
		return nil
	}
	// at says the pod's status reports cpu allocated and running, the generation observed
	// and no resize condition.
	at := func(name, cpu string) func() (bool, error) {
		return func() (bool, error) {
			p := get(name)
			cs := p.Status.ContainerStatuses
			return p.Status.Phase == corev1.PodRunning && p.Status.ObservedGeneration == p.Generation && len(cs) == 1 &&
				cs[0].Resources != nil && cs[0].Resources.Requests.Cpu().String() == cpu && cs[0].AllocatedResources.Cpu().String() == cpu &&
				cs[0].Resources.Limits.Memory().String() == "128Mi" && condition(p, corev1.PodResizePending) == nil &&
				condition(p, corev1.PodResizeInProgress) == nil, nil
		}
	}

	a := create("resized", "200m")
	testutil.Eventually(t, "resources reported for a running pod", at("resized", "200m"))
	if p := resize("resized", "300m"); p.Generation != 2 {
		t.Fatalf("generation after the resize %d, want 2", p.Generation)
	}
	testutil.Eventually(t, "the pod running at 300m", at("resized", "300m"))
	if got := rt.appliedCPU(a.UID); got != "300m" {
		t.Errorf("the runtime applied %s, want 300m", got)
	}

	// Another pod takes 500m: 600m no longer fits.
	create("filler", "500m")
	waitRunning(t, c, "filler")
	resize("resized", "600m")
	testutil.Eventually(t, "the resize deferred", func() (bool, error) {
		p := get("resized")
		pc := condition(p, corev1.PodResizePending)
		return pc != nil && pc.Reason == corev1.PodReasonDeferred && pc.ObservedGeneration == 3 &&
			pc.Message == "Node didn't have enough resource: cpu, requested: 600, used: 500, capacity: 1000" &&
			p.Status.ContainerStatuses[0].AllocatedResources.Cpu().String() == "300m", nil
	})
	if got := rt.appliedCPU(a.UID); got != "300m" {
		t.Errorf("the runtime applied %s while the resize waits, want 300m", got)
	}
	if err := pods.Delete(ctx, "filler", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "the deferred resize done once the other pod left", at("resized", "600m"))

	// The runtime fails the next resize.
	rt.mu.Lock()
	rt.fail = "failed to write cpu.shares: device or resource busy"
	rt.mu.Unlock()
	resize("resized", "400m")
	testutil.Eventually(t, "the resize error shown", func() (bool, error) {
		p := get("resized")
		pc := condition(p, corev1.PodResizeInProgress)
		return pc != nil && pc.Reason == corev1.PodReasonError && pc.Message == "failed to write cpu.shares: device or resource busy" &&
			p.Status.ContainerStatuses[0].Resources.Requests.Cpu().String() == "600m" &&
			p.Status.ContainerStatuses[0].AllocatedResources.Cpu().String() == "400m", nil
	})
	rt.mu.Lock()
	rt.fail = ""
	rt.mu.Unlock()
	k.queue.Add("default/resized") // as the PLEG would on the container's next change
	testutil.Eventually(t, "the resize done once the runtime takes it", at("resized", "400m"))

	b, err := os.ReadFile(filepath.Join(root, allocationFile))
	if err != nil || !strings.Contains(string(b), string(a.UID)) || !strings.Contains(string(b), `"cpu":"400m"`) {
		t.Errorf("allocations kept: %s, %v", b, err)
	}
	for _, reason := range []string{reasonResizeStarted, reasonResizeCompleted, reasonResizeDeferred, reasonResizeError} {
		testutil.Eventually(t, "a "+reason+" event", func() (bool, error) {
			evs, err := c.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=resized,reason=" + reason})
			return err == nil && len(evs.Items) > 0, err
		})
	}
}

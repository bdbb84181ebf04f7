package quotaeval

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	quota "k8s.io/apiserver/pkg/quota/v1"
	"k8s.io/utils/ptr"
)

func rl(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

// sameUsage compares lists by quantity, so that 1 and 1000m are equal.
func sameUsage(t *testing.T, what string, got, want corev1.ResourceList) {
	t.Helper()
	if !quota.Equals(got, want) {
		t.Errorf("%s: usage %v, want %v", what, got, want)
	}
}

func TestPodUsage(t *testing.T) {
	now := time.Now()
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "2")}}},
		Containers: []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "250m", "memory", "64Mi"), Limits: rl("cpu", "500m", "memory", "128Mi")}},
			{Name: "b", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "250m"), Limits: rl("memory", "64Mi")}},
		},
	}}
	sameUsage(t, "running pod", podUsage(pod, now), rl("count/pods", "1", "pods", "1",
		"cpu", "2", "requests.cpu", "2", "memory", "64Mi", "requests.memory", "64Mi", "limits.cpu", "500m", "limits.memory", "192Mi"))

	done := pod.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	sameUsage(t, "succeeded pod", podUsage(done, now), rl("count/pods", "1"))

	gone := pod.DeepCopy()
	gone.DeletionTimestamp, gone.DeletionGracePeriodSeconds = &metav1.Time{Time: now.Add(-time.Minute)}, ptr.To[int64](30)
	sameUsage(t, "pod past its deletion grace period", podUsage(gone, now), rl("count/pods", "1"))
	leaving := pod.DeepCopy()
	leaving.DeletionTimestamp, leaving.DeletionGracePeriodSeconds = &metav1.Time{Time: now}, ptr.To[int64](30)
	if u := podUsage(leaving, now); u.Pods().Value() != 1 {
		t.Errorf("pod within its grace period: pods %s, want 1", u.Pods())
	}
}

func TestPodConstraints(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init"}},
		Containers: []corev1.Container{
			{Name: "a", Resources: corev1.ResourceRequirements{Requests: rl("cpu", "1"), Limits: rl("cpu", "1")}},
			{Name: "b"},
		},
	}}
	e := newPodEvaluator(nil)
	err := e.Constraints([]corev1.ResourceName{"pods", "requests.cpu", "limits.memory"}, pod)
	if want := "must specify limits.memory for: a,b,init; requests.cpu for: b,init"; err == nil || err.Error() != want {
		t.Errorf("constraints: %v, want %q", err, want)
	}
	if err := e.Constraints([]corev1.ResourceName{"pods", "count/pods"}, pod); err != nil {
		t.Errorf("a pod count alone requires nothing: %v", err)
	}
}

func TestPodScopes(t *testing.T) {
	best := &corev1.Pod{}
	burst := &corev1.Pod{Spec: corev1.PodSpec{ActiveDeadlineSeconds: ptr.To[int64](60), PriorityClassName: "high",
		Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: rl("memory", "1Gi")}}}}}
	exists := func(s corev1.ResourceQuotaScope) corev1.ScopedResourceSelectorRequirement {
		return corev1.ScopedResourceSelectorRequirement{ScopeName: s, Operator: corev1.ScopeSelectorOpExists}
	}
	in := corev1.ScopedResourceSelectorRequirement{ScopeName: corev1.ResourceQuotaScopePriorityClass, Operator: corev1.ScopeSelectorOpIn, Values: []string{"high"}}
	cases := []struct {
		name  string
		pod   *corev1.Pod
		scope corev1.ScopedResourceSelectorRequirement
		want  bool
	}{
		{"best effort", best, exists(corev1.ResourceQuotaScopeBestEffort), true},
		{"burstable is not best effort", burst, exists(corev1.ResourceQuotaScopeBestEffort), false},
		{"not best effort", burst, exists(corev1.ResourceQuotaScopeNotBestEffort), true},
		{"terminating", burst, exists(corev1.ResourceQuotaScopeTerminating), true},
		{"not terminating", best, exists(corev1.ResourceQuotaScopeNotTerminating), true},
		{"priority class in", burst, in, true},
		{"no priority class", best, in, false},
		{"priority class exists", best, exists(corev1.ResourceQuotaScopePriorityClass), false},
	}
	for _, tc := range cases {
		got, err := podMatchesScope(tc.pod, tc.scope)
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

func TestServiceUsage(t *testing.T) {
	ports := []corev1.ServicePort{{Port: 80}, {Port: 443, NodePort: 30443}}
	sameUsage(t, "cluster IP", serviceUsage(&corev1.Service{}), rl("services", "1", "count/services", "1"))
	sameUsage(t, "node port", serviceUsage(&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Ports: ports}}),
		rl("services", "1", "count/services", "1", "services.nodeports", "2"))
	sameUsage(t, "load balancer", serviceUsage(&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports}}),
		rl("services", "1", "count/services", "1", "services.nodeports", "2", "services.loadbalancers", "1"))
	sameUsage(t, "load balancer without node ports",
		serviceUsage(&corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: ports, AllocateLoadBalancerNodePorts: ptr.To(false)}}),
		rl("services", "1", "count/services", "1", "services.nodeports", "1", "services.loadbalancers", "1"))
}

func TestClaimUsage(t *testing.T) {
	pvc := &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("gp3"),
		Resources: corev1.VolumeResourceRequirements{Requests: rl("storage", "10Gi")}}}
	sameUsage(t, "claim", claimUsage(pvc), rl("persistentvolumeclaims", "1", "count/persistentvolumeclaims", "1", "requests.storage", "10Gi",
		"gp3.storageclass.storage.k8s.io/persistentvolumeclaims", "1", "gp3.storageclass.storage.k8s.io/requests.storage", "10Gi"))
	grown := pvc.DeepCopy()
	grown.Status.AllocatedResources = rl("storage", "20Gi")
	if u := claimUsage(grown); u.Name("requests.storage", resource.BinarySI).String() != "20Gi" {
		t.Errorf("claim given more than it asked: requests.storage %s, want 20Gi", u.Name("requests.storage", resource.BinarySI))
	}
	e := newClaimEvaluator(nil)
	got := e.MatchingResources([]corev1.ResourceName{"requests.storage", "gp3.storageclass.storage.k8s.io/requests.storage", "pods", "count/persistentvolumeclaims"})
	if len(got) != 3 {
		t.Errorf("claim evaluator matches %v", got)
	}
}

func TestCountedResource(t *testing.T) {
	cases := map[corev1.ResourceName]schema.GroupResource{
		"count/deployments.apps":    {Group: "apps", Resource: "deployments"},
		"count/pods":                {Resource: "pods"},
		"count/widgets.example.com": {Group: "example.com", Resource: "widgets"},
	}
	for name, want := range cases {
		if got, ok := CountedResource(name); !ok || got != want {
			t.Errorf("%s: %v %v, want %v", name, got, ok, want)
		}
	}
	for _, name := range []corev1.ResourceName{"pods", "count/", "requests.cpu"} {
		if _, ok := CountedResource(name); ok {
			t.Errorf("%s counted as an object count", name)
		}
	}
}

// An extended resource is charged on its requests as requests.<name>, hugepages as
// hugepages-<size> and requests.hugepages-<size>; the pod evaluator takes those quota
// names (not limits.<extended>, nor names of kubernetes.io).
func TestPodExtendedResources(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Resources: corev1.ResourceRequirements{
		Requests: rl("cpu", "500m", "example.com/dongle", "2", "hugepages-2Mi", "4Mi"),
		Limits:   rl("example.com/dongle", "2", "hugepages-2Mi", "4Mi")}}}}}
	sameUsage(t, "pod with an extended resource", podUsage(pod, time.Now()), rl("count/pods", "1", "pods", "1",
		"cpu", "500m", "requests.cpu", "500m", "requests.example.com/dongle", "2", "hugepages-2Mi", "4Mi", "requests.hugepages-2Mi", "4Mi"))
	e := newPodEvaluator(nil)
	got := e.MatchingResources([]corev1.ResourceName{"pods", "requests.example.com/dongle", "limits.example.com/dongle",
		"example.com/dongle", "requests.kubernetes.io/thing", "hugepages-2Mi", "requests.hugepages-2Mi", "services"})
	want := []corev1.ResourceName{"pods", "requests.example.com/dongle", "hugepages-2Mi", "requests.hugepages-2Mi"}
	if !quota.ToSet(got).Equal(quota.ToSet(want)) {
		t.Errorf("pod evaluator matches %v, want %v", got, want)
	}
	quotaWith := &corev1.ResourceQuota{Status: corev1.ResourceQuotaStatus{Hard: rl("requests.example.com/dongle", "3")}}
	if ok, err := e.Matches(quotaWith, pod); !ok || err != nil {
		t.Errorf("a quota on requests.example.com/dongle does not match the pod: %v", err)
	}
}

// replicationcontrollers is the legacy name of count/replicationcontrollers; both are
// charged by one evaluator.
func TestReplicationControllerCount(t *testing.T) {
	var rcs quota.Evaluator
	for _, e := range Evaluators(nil) {
		if e.GroupResource() == corev1.Resource("replicationcontrollers") {
			rcs = e
		}
	}
	if rcs == nil {
		t.Fatal("no evaluator of replicationcontrollers")
	}
	got := rcs.MatchingResources([]corev1.ResourceName{"replicationcontrollers", "count/replicationcontrollers", "pods"})
	if !quota.ToSet(got).Equal(quota.ToSet([]corev1.ResourceName{"replicationcontrollers", "count/replicationcontrollers"})) {
		t.Errorf("replicationcontrollers evaluator matches %v", got)
	}
	u, err := rcs.Usage(&corev1.ReplicationController{})
	if err != nil {
		t.Fatal(err)
	}
	sameUsage(t, "replication controller", u, rl("replicationcontrollers", "1", "count/replicationcontrollers", "1"))
	found := false
	for _, gvr := range EvaluatedResources() {
		found = found || gvr.GroupResource() == corev1.Resource("replicationcontrollers")
	}
	if !found {
		t.Error("replicationcontrollers not among the evaluated resources the controller watches")
	}
}

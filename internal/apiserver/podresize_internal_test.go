package apiserver

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// reqs is a ResourceRequirements from "name=quantity" requests and limits.
func reqs(requests, limits string) corev1.ResourceRequirements {
	list := func(s string) corev1.ResourceList {
		if s == "" {
			return nil
		}
		out := corev1.ResourceList{}
		for _, kv := range strings.Split(s, ",") {
			k, v, _ := strings.Cut(kv, "=")
			out[corev1.ResourceName(k)] = apiresource.MustParse(v)
		}
		return out
	}
	return corev1.ResourceRequirements{Requests: list(requests), Limits: list(limits)}
}

// resizablePod is a pod whose containers run with the given resources, on a node whose
// kubelet reports them.
func resizablePod(cs ...corev1.Container) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"},
		Spec: corev1.PodSpec{Containers: cs, RestartPolicy: corev1.RestartPolicyAlways}}
	for _, c := range cs {
		r := c.Resources
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, Resources: &r})
	}
	return p
}

// TestValidatePodResize holds kube-apiserver's resize rules, with its messages: what may
// change is the cpu and memory of containers, within the pod's QoS class, without a
// request or limit removed.
func TestValidatePodResize(t *testing.T) {
	burstable := resizablePod(corev1.Container{Name: "c1", Image: "busybox", Resources: reqs("cpu=20m,memory=35Mi", "cpu=35m,memory=50Mi")})
	twoBurstable := resizablePod(corev1.Container{Name: "c1", Image: "busybox", Resources: reqs("cpu=20m", "")},
		corev1.Container{Name: "c2", Image: "busybox", Resources: reqs("cpu=20m", "")})
	guaranteed := resizablePod(corev1.Container{Name: "c1", Image: "busybox", Resources: reqs("cpu=20m,memory=35Mi", "cpu=20m,memory=35Mi")})
	bestEffort := resizablePod(corev1.Container{Name: "c1", Image: "busybox"})
	bestEffort.Status.QOSClass = corev1.PodQOSBestEffort

	for _, tc := range []struct {
		name   string
		old    *corev1.Pod
		change func(p *corev1.Pod)
		// want are "field: message" substrings of the errors, none when empty.
		want []string
	}{
		{name: "cpu and memory of a burstable pod", old: burstable, change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = reqs("cpu=25m,memory=40Mi", "cpu=40m,memory=60Mi")
		}},
		{name: "limits added to requests", old: twoBurstable, change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = reqs("cpu=25m", "cpu=35m")
			p.Spec.Containers[1].Resources = reqs("cpu=15m,memory=35Mi", "")
		}},
		{name: "memory limit lowered", old: guaranteed, change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = reqs("cpu=20m,memory=30Mi", "cpu=20m,memory=30Mi")
		}},
		{name: "best-effort pod asks for memory", old: bestEffort, change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = reqs("memory=35Mi", "")
		}, want: []string{"spec: Invalid value: \"BestEffort\": Pod QOS Class may not change as a result of resizing"}},
		{name: "burstable pod made guaranteed", old: burstable, change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = reqs("cpu=35m,memory=50Mi", "cpu=35m,memory=50Mi")
		}, want: []string{"Pod QOS Class may not change as a result of resizing"}},
		{name: "limits removed", old: guaranteed, change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = reqs("cpu=20m,memory=35Mi", "")
		}, want: []string{"spec.containers[0].resources.limits: Forbidden: resource limits cannot be removed"}},
		{name: "request removed", old: twoBurstable, change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = reqs("", "")
		}, want: []string{"spec.containers[0].resources.requests: Forbidden: resource requests cannot be removed"}},
		{name: "containers reordered", old: twoBurstable, change: func(p *corev1.Pod) {
			p.Spec.Containers[0], p.Spec.Containers[1] = p.Spec.Containers[1], p.Spec.Containers[0]
		}, want: []string{"spec.containers[0].name: Forbidden: containers may not be renamed or reordered on resize",
			"spec.containers[1].name: Forbidden: containers may not be renamed or reordered on resize"}},
		{name: "container added", old: burstable, change: func(p *corev1.Pod) {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "c2", Image: "busybox"})
		}, want: []string{"spec.containers: Forbidden: containers may not be added or removed on resize"}},
		{name: "ephemeral storage", old: burstable, change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources.Requests[corev1.ResourceEphemeralStorage] = apiresource.MustParse("1Gi")
		}, want: []string{"spec: Forbidden: only cpu and memory resources are mutable"}},
		{name: "image", old: burstable, change: func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx" },
			want: []string{"spec: Forbidden: only cpu and memory resources are mutable"}},
		{name: "static pod", old: func() *corev1.Pod {
			p := burstable.DeepCopy()
			p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"}
			return p
		}(), change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = reqs("cpu=25m,memory=40Mi", "cpu=40m,memory=60Mi")
		}, want: []string{"Forbidden: static pods cannot be resized"}},
		{name: "node without resize", old: func() *corev1.Pod {
			p := burstable.DeepCopy()
			p.Status.ContainerStatuses[0].Resources = nil
			return p
		}(), change: func(p *corev1.Pod) {
			p.Spec.Containers[0].Resources = reqs("cpu=25m,memory=40Mi", "cpu=40m,memory=60Mi")
		}, want: []string{"spec: Forbidden: Pod running on node without support for resize"}},
		{name: "pod-level resources", old: func() *corev1.Pod {
			p := burstable.DeepCopy()
			r := reqs("cpu=100m", "")
			p.Spec.Resources = &r
			return p
		}(), change: func(p *corev1.Pod) {}, want: []string{"resize of pods with pod-level resources is forbidden"}},
		{name: "non-sidecar init container that restarts", old: func() *corev1.Pod {
			p := burstable.DeepCopy()
			p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", Resources: reqs("cpu=10m", ""),
				ResizePolicy: []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.RestartContainer}}}}
			return p
		}(), change: func(p *corev1.Pod) { p.Spec.InitContainers[0].Resources = reqs("cpu=20m", "") },
			want: []string{"spec.initContainers[0]: Forbidden: non-sidecar init containers with a resize policy of RestartContainer cannot be resized"}},
		{name: "sidecar", old: func() *corev1.Pod {
			p := burstable.DeepCopy()
			p.Spec.InitContainers = []corev1.Container{{Name: "side", Image: "busybox", Resources: reqs("cpu=10m", ""),
				RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
				ResizePolicy:  []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.RestartContainer}}}}
			return p
		}(), change: func(p *corev1.Pod) { p.Spec.InitContainers[0].Resources = reqs("cpu=20m", "") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := tc.old.DeepCopy()
			tc.change(pod)
			got := validatePodResize(pod, tc.old).ToAggregate()
			if len(tc.want) == 0 {
				if got != nil {
					t.Fatalf("refused: %v", got)
				}
				return
			}
			if got == nil {
				t.Fatalf("allowed, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(got.Error(), w) {
					t.Errorf("errors %q lack %q", got.Error(), w)
				}
			}
		})
	}
}

// TestValidateResizePolicy: a container's resize policies name cpu or memory once each,
// with a known restart policy, NotRequired only in a pod that never restarts.
func TestValidateResizePolicy(t *testing.T) {
	p := field.NewPath("spec", "containers").Index(0).Child("resizePolicy")
	pol := func(name corev1.ResourceName, r corev1.ResourceResizeRestartPolicy) corev1.ContainerResizePolicy {
		return corev1.ContainerResizePolicy{ResourceName: name, RestartPolicy: r}
	}
	for _, tc := range []struct {
		policies []corev1.ContainerResizePolicy
		restart  corev1.RestartPolicy
		want     string
	}{
		{[]corev1.ContainerResizePolicy{pol("cpu", corev1.NotRequired), pol("memory", corev1.RestartContainer)}, corev1.RestartPolicyAlways, ""},
		{[]corev1.ContainerResizePolicy{pol("cpu", corev1.NotRequired), pol("cpu", corev1.NotRequired)}, corev1.RestartPolicyAlways,
			`spec.containers[0].resizePolicy[1]: Duplicate value: "cpu"`},
		{[]corev1.ContainerResizePolicy{pol("storage", corev1.NotRequired)}, corev1.RestartPolicyAlways,
			`spec.containers[0].resizePolicy: Unsupported value: "storage": supported values: "cpu", "memory"`},
		{[]corev1.ContainerResizePolicy{pol("cpu", "Sometimes")}, corev1.RestartPolicyAlways,
			`spec.containers[0].resizePolicy: Unsupported value: "Sometimes"`},
		{[]corev1.ContainerResizePolicy{pol("memory", corev1.RestartContainer)}, corev1.RestartPolicyNever,
			`spec.containers[0].resizePolicy: Invalid value: "RestartContainer": must be 'NotRequired' when pod ` + "`restartPolicy`" + ` is 'Never'`},
	} {
		got := validateResizePolicy(tc.policies, p, tc.restart).ToAggregate()
		switch {
		case tc.want == "" && got != nil:
			t.Errorf("%v: refused: %v", tc.policies, got)
		case tc.want != "" && (got == nil || !strings.Contains(got.Error(), tc.want)):
			t.Errorf("%v: %v, want %q", tc.policies, got, tc.want)
		}
	}
}

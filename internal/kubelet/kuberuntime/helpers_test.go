package kuberuntime

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	running = runtimeapi.ContainerState_CONTAINER_RUNNING
	exited  = runtimeapi.ContainerState_CONTAINER_EXITED
	created = runtimeapi.ContainerState_CONTAINER_CREATED
	unknown = runtimeapi.ContainerState_CONTAINER_UNKNOWN
)

var always = corev1.ContainerRestartPolicyAlways

// testPod is a pod with app containers named by apps and init containers by inits (a
// name starting with "side" is a sidecar).
func testPod(policy corev1.RestartPolicy, inits []string, apps ...string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: types.UID("uid-1")},
		Spec:       corev1.PodSpec{RestartPolicy: policy, NodeName: "node-1"},
	}
	for _, n := range inits {
		c := corev1.Container{Name: n, Image: "busybox:1.36", TerminationMessagePath: "/dev/termination-log"}
		if len(n) >= 4 && n[:4] == "side" {
			c.RestartPolicy = &always
		}
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c)
	}
	for _, n := range apps {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: n, Image: "busybox:1.36",
			TerminationMessagePath: "/dev/termination-log"})
	}
	return pod
}

// spec finds a container of the pod by name.
func spec(pod *corev1.Pod, name string) *corev1.Container {
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range cs {
			if cs[i].Name == name {
				return &cs[i]
			}
		}
	}
	return nil
}

// viewOf builds a view: a ready sandbox (unless sandboxes are given) and the instances,
// whose hash is the pod's current one unless set.
type viewOf struct {
	pod       *corev1.Pod
	sandboxes []sandbox
	insts     []instance
}

func (b viewOf) build() *podView {
	v := &podView{sandboxes: b.sandboxes, containers: map[string][]instance{}}
	if v.sandboxes == nil {
		v.sandboxes = []sandbox{{id: "sb0", ready: true}}
	}
	base := time.Unix(1000, 0)
	for i, in := range b.insts {
		if in.id == "" {
			in.id = in.name + "-" + string(rune('a'+in.attempt))
		}
		if in.sandboxID == "" {
			in.sandboxID = v.sandboxes[0].id
		}
		if c := spec(b.pod, in.name); c != nil && in.hash == "" {
			in.hash = containerHash(c)
		}
		if in.createdAt.IsZero() {
			in.createdAt = base.Add(time.Duration(i) * time.Second)
		}
		v.containers[in.name] = append(v.containers[in.name], in)
	}
	sortView(v)
	return v
}

func inst(name string, attempt uint32, state runtimeapi.ContainerState, exitCode int32) instance {
	return instance{name: name, attempt: attempt, state: state, exitCode: exitCode}
}

// fakeRuntimeClasses maps RuntimeClass names to handlers; others are not found.
type fakeRuntimeClasses map[string]string

func (f fakeRuntimeClasses) Handler(_ context.Context, name string) (string, error) {
	h, ok := f[name]
	if !ok {
		return "", apierrors.NewNotFound(nodev1.Resource("runtimeclasses"), name)
	}
	return h, nil
}

package server

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The labels the node's runtime puts on sandboxes and containers: they find a pod's
// objects in the CRI by the pod's UID.
const (
	labelPodUID        = "io.kubernetes.pod.uid"
	labelContainerName = "io.kubernetes.container.name"
)

// pod finds the pod; a uid from the path must match it.
func (s *Server) pod(namespace, name, uid string) (*corev1.Pod, error) {
	pod, err := s.cfg.PodLookup(namespace, name)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("look up pod %s/%s: %w", namespace, name, err)
	}
	if pod == nil || err != nil || (uid != "" && string(pod.UID) != uid) {
		return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
	}
	return pod, nil
}

// hasContainer says whether the pod's spec has a container (of any kind) of that name.
func hasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.Containers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return true
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
	}
	return false
}

// containerStatus finds the status of the container of that name.
func containerStatus(pod *corev1.Pod, name string) (corev1.ContainerStatus, bool) {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.ContainerStatuses,
		pod.Status.InitContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, st := range list {
			if st.Name == name {
				return st, true
			}
		}
	}
	return corev1.ContainerStatus{}, false
}

// runtimeID strips the runtime's name from a status container ID
// ("containerd://<id>" → "<id>").
func runtimeID(id string) string {
	if i := strings.Index(id, "://"); i >= 0 {
		return id[i+3:]
	}
	return id
}

// runningContainer finds the runtime's running instance of a pod's container.
func (s *Server) runningContainer(ctx context.Context, pod *corev1.Pod, name string) (string, error) {
	resp, err := s.cfg.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{labelPodUID: string(pod.UID), labelContainerName: name},
	}})
	if err != nil {
		return "", fmt.Errorf("list containers of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	cs := resp.GetContainers()
	if len(cs) == 0 {
		return "", apierrors.NewBadRequest(fmt.Sprintf("container %q in pod %q is not running", name, pod.Name))
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].GetCreatedAt() > cs[j].GetCreatedAt() })
	return cs[0].GetId(), nil
}

// readySandbox finds the pod's ready sandbox.
func (s *Server) readySandbox(ctx context.Context, pod *corev1.Pod) (string, error) {
	resp, err := s.cfg.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{labelPodUID: string(pod.UID)},
	}})
	if err != nil {
		return "", fmt.Errorf("list sandboxes of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	sbs := resp.GetItems()
	if len(sbs) == 0 {
		return "", apierrors.NewBadRequest(fmt.Sprintf("pod %q has no running sandbox", pod.Name))
	}
	sort.Slice(sbs, func(i, j int) bool { return sbs[i].GetCreatedAt() > sbs[j].GetCreatedAt() })
	return sbs[0].GetId(), nil
}

package kubelet

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/kubelab/kubelab/internal/util/atomicfile"
)

// allocationFile is the file under the kubelet's root dir that keeps the allocations, as
// upstream's allocation checkpoint.
const allocationFile = "allocated_pods_state"

// podAllocation is what the kubelet allocated to a pod: the resources of each of its
// containers and init containers, by name.
type podAllocation map[string]corev1.ResourceRequirements

// allocations are the resources the kubelet allocated to its pods: their spec's when it
// first ran them, then those of each resize it accepted. A real node keeps them in
// <root>/allocated_pods_state (JSON: pod UID → container → resources), written on every
// change, so that a restarted kubelet runs its pods at what it had allocated; a hollow
// node keeps them in memory.
type allocations struct {
	path string // "" keeps them in memory only
	mu   sync.Mutex
	pods map[types.UID]podAllocation
}

// loadAllocations reads the allocations kept at path (none when the file does not
// exist); path "" keeps them in memory.
func loadAllocations(path string) (*allocations, error) {
	a := &allocations{path: path, pods: map[types.UID]podAllocation{}}
	if path == "" {
		return a, nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return a, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pod allocations: %w", err)
	}
	if err := json.Unmarshal(b, &a.pods); err != nil {
		return nil, fmt.Errorf("read pod allocations %s: %w", path, err)
	}
	return a, nil
}

// get is the pod's allocation (ok false when it has none).
func (a *allocations) get(uid types.UID) (podAllocation, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.pods[uid]
	return p, ok
}

// set allocates the resources of pod's containers to it.
func (a *allocations) set(pod *corev1.Pod) error {
	alloc := allocationOf(pod)
	a.mu.Lock()
	defer a.mu.Unlock()
	if old, ok := a.pods[pod.UID]; ok && apiequality.Semantic.DeepEqual(old, alloc) {
		return nil
	}
	a.pods[pod.UID] = alloc
	return a.saveLocked()
}

// remove forgets the allocations of the pods uids.
func (a *allocations) remove(uids ...types.UID) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	changed := false
	for _, uid := range uids {
		if _, ok := a.pods[uid]; ok {
			delete(a.pods, uid)
			changed = true
		}
	}
	if !changed {
		return nil
	}
	return a.saveLocked()
}

// keepOnly forgets the allocations of the pods not in uids (pods deleted while the
// kubelet was down).
func (a *allocations) keepOnly(uids sets.Set[types.UID]) error {
	a.mu.Lock()
	var gone []types.UID
	for uid := range a.pods {
		if !uids.Has(uid) {
			gone = append(gone, uid)
		}
	}
	a.mu.Unlock()
	return a.remove(gone...)
}

func (a *allocations) saveLocked() error {
	if a.path == "" {
		return nil
	}
	b, err := json.Marshal(a.pods)
	if err != nil {
		return fmt.Errorf("save pod allocations: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(a.path), 0o750); err != nil {
		return fmt.Errorf("save pod allocations: %w", err)
	}
	if err := atomicfile.WriteFile(a.path, b, 0o600); err != nil {
		return fmt.Errorf("save pod allocations: %w", err)
	}
	return nil
}

// allocationOf is the allocation of a pod's spec: each container's resources.
func allocationOf(pod *corev1.Pod) podAllocation {
	out := make(podAllocation, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for _, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			out[c.Name] = *c.Resources.DeepCopy()
		}
	}
	return out
}

// withAllocation is pod with its containers' resources replaced by those allocated to
// them (a copy when one differs; changed says whether one did).
func withAllocation(pod *corev1.Pod, alloc podAllocation) (out *corev1.Pod, changed bool) {
	out = pod
	for _, init := range []bool{true, false} {
		cs := pod.Spec.Containers
		if init {
			cs = pod.Spec.InitContainers
		}
		for i := range cs {
			r, ok := alloc[cs[i].Name]
			if !ok || apiequality.Semantic.DeepEqual(cs[i].Resources, r) {
				continue
			}
			if !changed {
				out, changed = pod.DeepCopy(), true
			}
			if init {
				out.Spec.InitContainers[i].Resources = *r.DeepCopy()
			} else {
				out.Spec.Containers[i].Resources = *r.DeepCopy()
			}
		}
	}
	return out, changed
}

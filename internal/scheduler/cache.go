package scheduler

import (
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// schedCache is the scheduler's picture of the cluster: nodes and the pods on them, bound
// (from the informer) or assumed (chosen but not yet bound). The scheduling cycle reads it
// under the read lock; informer handlers and assume/forget write it.
type schedCache struct {
	mu    sync.RWMutex
	nodes map[string]*NodeInfo
	pods  map[types.UID]*cachedPod
	// nominated are unassigned pods preemption made room for, by node.
	nominated map[string][]*PodInfo
	snap      *Snapshot
	dirty     bool
	nsLabels  func(string) map[string]string
}

type cachedPod struct {
	info    *PodInfo
	node    string
	assumed bool
}

func newSchedCache(nsLabels func(string) map[string]string) *schedCache {
	return &schedCache{nodes: map[string]*NodeInfo{}, pods: map[types.UID]*cachedPod{}, nominated: map[string][]*PodInfo{}, dirty: true, nsLabels: nsLabels}
}

func (c *schedCache) nodeInfo(name string) *NodeInfo {
	ni := c.nodes[name]
	if ni == nil {
		ni = &NodeInfo{}
		c.nodes[name] = ni
	}
	return ni
}

// SetNode adds or updates a node.
func (c *schedCache) SetNode(node *corev1.Node) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ni := c.nodeInfo(node.Name)
	if ni.Node == nil {
		c.dirty = true
	}
	ni.setNode(node)
}

// RemoveNode forgets a node (its pods stay accounted until they go).
func (c *schedCache) RemoveNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ni, ok := c.nodes[name]
	if !ok {
		return
	}
	ni.Node = nil
	if len(ni.Pods) == 0 {
		delete(c.nodes, name)
	}
	c.dirty = true
}

// AddPod records a bound pod; it confirms an assumed one.
func (c *schedCache) AddPod(pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(pod.UID)
	c.addLocked(pod, false)
}

// UpdatePod replaces a bound pod.
func (c *schedCache) UpdatePod(pod *corev1.Pod) { c.AddPod(pod) }

// RemovePod forgets a pod.
func (c *schedCache) RemovePod(pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(pod.UID)
}

// AssumePod accounts for pod (spec.nodeName set) before it is bound.
func (c *schedCache) AssumePod(pod *corev1.Pod) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.pods[pod.UID]; ok {
		return fmt.Errorf("pod %s is already in the cache", podKey(pod))
	}
	c.addLocked(pod, true)
	return nil
}

// ForgetPod drops an assumed pod whose binding failed.
func (c *schedCache) ForgetPod(pod *corev1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cp, ok := c.pods[pod.UID]; ok && cp.assumed {
		c.removeLocked(pod.UID)
	}
}

// Has says whether the pod is bound or assumed.
func (c *schedCache) Has(uid types.UID) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.pods[uid]
	return ok
}

func (c *schedCache) addLocked(pod *corev1.Pod, assumed bool) {
	pi := NewPodInfo(pod)
	ni := c.nodeInfo(pod.Spec.NodeName)
	ni.AddPod(pi)
	c.pods[pod.UID] = &cachedPod{info: pi, node: pod.Spec.NodeName, assumed: assumed}
	if pi.hasAffinity() {
		c.dirty = true
	}
	c.removeNominatedLocked(pod)
}

func (c *schedCache) removeLocked(uid types.UID) {
	cp, ok := c.pods[uid]
	if !ok {
		return
	}
	delete(c.pods, uid)
	ni := c.nodes[cp.node]
	if ni == nil {
		return
	}
	ni.RemovePod(cp.info.Pod)
	if cp.info.hasAffinity() {
		c.dirty = true
	}
	if ni.Node == nil && len(ni.Pods) == 0 {
		delete(c.nodes, cp.node)
	}
}

// Nominate records that pod waits for room on node (preemption); "" clears it.
func (c *schedCache) Nominate(pod *corev1.Pod, node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeNominatedLocked(pod)
	if node != "" {
		c.nominated[node] = append(c.nominated[node], NewPodInfo(pod))
	}
}

func (c *schedCache) removeNominatedLocked(pod *corev1.Pod) {
	for node, list := range c.nominated {
		for i, pi := range list {
			if pi.Pod.UID == pod.UID {
				list = append(list[:i:i], list[i+1:]...)
				if len(list) == 0 {
					delete(c.nominated, node)
				} else {
					c.nominated[node] = list
				}
				return
			}
		}
	}
}

// nominatedFor lists the pods nominated to node that come before pod (priority ≥ pod's).
// Call with the read lock held.
func (c *schedCache) nominatedFor(node string, pod *PodInfo) []*PodInfo {
	var out []*PodInfo
	for _, pi := range c.nominated[node] {
		if pi.Pod.UID != pod.Pod.UID && pi.Priority >= pod.Priority {
			out = append(out, pi)
		}
	}
	return out
}

// readSnapshot returns the current snapshot with the read lock held; call the returned
// function to release it.
func (c *schedCache) readSnapshot() (*Snapshot, func()) {
	for {
		c.mu.RLock()
		if !c.dirty {
			return c.snap, c.mu.RUnlock
		}
		c.mu.RUnlock()
		c.mu.Lock()
		if c.dirty {
			c.rebuildLocked()
		}
		c.mu.Unlock()
	}
}

func (c *schedCache) rebuildLocked() {
	nodes := make([]*NodeInfo, 0, len(c.nodes))
	for _, ni := range c.nodes {
		if ni.Node != nil {
			nodes = append(nodes, ni)
		}
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Node.Name < nodes[j].Node.Name })
	c.snap = NewSnapshot(nodes)
	c.snap.NamespaceLabels = c.nsLabels
	c.dirty = false
}

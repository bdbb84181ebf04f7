package kubelet

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// plegPeriod is how often a real node relists its runtime.
const plegPeriod = time.Second

// runPLEG is the pod lifecycle event generator of a real node: every second it relists
// the runtime, syncs the pods whose containers changed (an exit, a restart), and ends
// the pods the runtime holds that the API no longer has (left by an earlier run).
func (k *Kubelet) runPLEG(ctx context.Context) {
	tick := time.NewTicker(plegPeriod)
	defer tick.Stop()
	seen := map[types.UID]string{}
	for {
		cur, err := k.runtime.Relist(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			k.log.Debug("relist", "err", err)
		} else {
			k.plegChanges(ctx, seen, cur)
			seen = cur
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// plegChanges queues the pods whose fingerprint changed and ends orphans.
func (k *Kubelet) plegChanges(ctx context.Context, seen, cur map[types.UID]string) {
	pods, err := k.podLister.List(labelsEverything())
	if err != nil {
		return
	}
	keys := make(map[types.UID]string, len(pods))
	for _, p := range pods {
		keys[p.UID] = p.Namespace + "/" + p.Name
	}
	for _, uid := range changedPods(seen, cur) {
		if key, ok := keys[uid]; ok {
			k.queue.Add(key)
			continue
		}
		if k.known(uid) {
			continue // the pod's worker tears it down
		}
		if _, ok := cur[uid]; !ok {
			continue
		}
		k.log.Info("ending a pod the API no longer has", "uid", uid)
		gone := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}}
		if _, err := k.runtime.KillPod(ctx, gone, 0); err != nil {
			k.log.Warn("end orphaned pod", "uid", uid, "err", err)
			delete(cur, uid) // unseen, so the next relist tries again
		}
	}
}

// known says whether a pod worker remembers the pod.
func (k *Kubelet) known(uid types.UID) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, st := range k.pods {
		if st.uid == uid {
			return true
		}
	}
	return false
}

// changedPods lists the pods that appeared, went or whose fingerprint changed.
func changedPods(seen, cur map[types.UID]string) []types.UID {
	var out []types.UID
	for uid, fp := range cur {
		if old, ok := seen[uid]; !ok || old != fp {
			out = append(out, uid)
		}
	}
	for uid := range seen {
		if _, ok := cur[uid]; !ok {
			out = append(out, uid)
		}
	}
	return out
}

package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"
)

// errNoNodesAvailable is upstream's message when the cluster has no node at all.
var errNoNodesAvailable = errors.New("no nodes available to schedule pods")

// scheduleResult is the outcome of the scheduling cycle's decision.
type scheduleResult struct {
	host string
	// evaluated and feasible count nodes filtered and found fit.
	evaluated, feasible int
}

// scheduleOne runs one scheduling cycle for qp and, on success, starts its binding cycle.
func (s *Scheduler) scheduleOne(ctx context.Context, qp *QueuedPod, cycle int64) {
	pod := qp.Pod
	if pod.DeletionTimestamp != nil || pod.Spec.NodeName != "" || s.cache.Has(pod.UID) {
		s.queue.Done(pod.UID)
		return
	}
	pi := NewPodInfo(pod)
	state := NewCycleState()
	res, err := s.schedulePod(ctx, state, pi)
	if err != nil {
		var nominated string
		var fitErr *FitError
		if errors.As(err, &fitErr) && s.preempt != nil {
			nominated = s.runPostFilter(ctx, state, pi, fitErr)
		}
		s.failed(ctx, qp, cycle, err, nominated)
		return
	}
	assumed := pod.DeepCopy()
	assumed.Spec.NodeName = res.host
	if err := s.cache.AssumePod(assumed); err != nil {
		s.failed(ctx, qp, cycle, err, "")
		return
	}
	for i, pl := range s.profile.Reserve {
		if st := pl.Reserve(ctx, state, pi, res.host); !st.IsSuccess() {
			for j := i; j >= 0; j-- {
				s.profile.Reserve[j].Unreserve(ctx, state, pi, res.host)
			}
			s.cache.ForgetPod(assumed)
			s.failed(ctx, qp, cycle, fmt.Errorf("running Reserve plugin %q: %w", pl.Name(), st.AsError()), "")
			return
		}
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.bindingCycle(ctx, state, qp, cycle, pi, assumed)
	}()
}

// schedulePod filters and scores the nodes and picks one; a *FitError says none fits.
func (s *Scheduler) schedulePod(ctx context.Context, state *CycleState, pi *PodInfo) (scheduleResult, error) {
	snap, release := s.cache.readSnapshot()
	defer release()
	n := len(snap.Nodes)
	if n == 0 {
		return scheduleResult{}, errNoNodesAvailable
	}
	diag := Diagnosis{NodeToStatus: map[string]*Status{}, UnschedulablePlugins: map[string]bool{}}
	if st := s.profile.RunPreFilter(ctx, state, pi, snap); !st.IsSuccess() {
		if !st.IsRejected() {
			return scheduleResult{}, fmt.Errorf("running PreFilter plugin %q: %w", st.Plugin(), st.AsError())
		}
		for _, ni := range snap.Nodes {
			diag.NodeToStatus[ni.Name()] = st
		}
		diag.UnschedulablePlugins[st.Plugin()] = true
		diag.PreFilterMsg = st.Message()
		return scheduleResult{}, &FitError{NumAllNodes: n, Diagnosis: diag}
	}
	// A node nominated by an earlier preemption, or already selected for the pod's claims
	// (by an earlier attempt or an earlier run of the scheduler), is tried first.
	for _, nn := range []string{pi.Pod.Status.NominatedNodeName, s.binding.selectedNode(pi)} {
		if nn == "" {
			continue
		}
		if ni := snap.Get(nn); ni != nil && s.runFilterWithNominated(ctx, state, pi, ni).IsSuccess() {
			return scheduleResult{host: nn, evaluated: 1, feasible: 1}, nil
		}
	}
	feasible, statuses, err := s.findFeasible(ctx, state, pi, snap)
	if err != nil {
		return scheduleResult{}, err
	}
	if len(feasible) == 0 {
		for name, st := range statuses {
			diag.NodeToStatus[name] = st
			diag.UnschedulablePlugins[st.Plugin()] = true
		}
		return scheduleResult{}, &FitError{NumAllNodes: n, Diagnosis: diag}
	}
	if len(feasible) == 1 {
		return scheduleResult{host: feasible[0].Name(), evaluated: len(statuses) + 1, feasible: 1}, nil
	}
	scores, st := s.profile.RunScore(ctx, state, pi, feasible, snap)
	if !st.IsSuccess() {
		return scheduleResult{}, fmt.Errorf("running Score plugin %q: %w", st.Plugin(), st.AsError())
	}
	return scheduleResult{host: selectHost(scores, rand.IntN), evaluated: len(statuses) + len(feasible), feasible: len(feasible)}, nil
}

// numFeasibleNodesToFind is upstream's: all nodes below 100; else a share of them (adaptive
// when pct is 0), never fewer than 100.
func numFeasibleNodesToFind(numAll, pct int) int {
	if numAll < 100 || pct >= 100 {
		return numAll
	}
	if pct <= 0 {
		pct = 50 - numAll/125
		if pct < 5 {
			pct = 5
		}
	}
	n := numAll * pct / 100
	if n < 100 {
		n = 100
	}
	return n
}

// findFeasible filters nodes in parallel, starting where the previous cycle stopped, until
// enough fit.
func (s *Scheduler) findFeasible(ctx context.Context, state *CycleState, pi *PodInfo, snap *Snapshot) ([]*NodeInfo, map[string]*Status, error) {
	n := len(snap.Nodes)
	want := numFeasibleNodesToFind(n, s.cfg.PercentageOfNodesToScore)
	feasible := make([]*NodeInfo, want)
	rejected := make([]*Status, n)
	var found atomic.Int32
	var firstErr error
	var errOnce sync.Once
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := s.nextStart
	chunk := int(math.Sqrt(float64(n)))
	if chunk < 1 {
		chunk = 1
	}
	workqueue.ParallelizeUntil(fctx, s.cfg.Parallelism, n, func(i int) {
		ni := snap.Nodes[(start+i)%n]
		st := s.runFilterWithNominated(fctx, state, pi, ni)
		switch {
		case st.IsSuccess():
			k := found.Add(1)
			if int(k) > want {
				cancel()
				return
			}
			feasible[k-1] = ni
			if int(k) == want {
				cancel()
			}
		case st.IsRejected():
			rejected[(start+i)%n] = st
		default:
			errOnce.Do(func() { firstErr = st.AsError(); cancel() })
		}
	}, workqueue.WithChunkSize(chunk))
	if firstErr != nil {
		return nil, nil, firstErr
	}
	k := int(found.Load())
	if k > want {
		k = want
	}
	statuses := map[string]*Status{}
	for i, st := range rejected {
		if st != nil {
			statuses[snap.Nodes[i].Name()] = st
		}
	}
	s.nextStart = nextStartAfter(start, k+len(statuses), n)
	return feasible[:k], statuses, nil
}

// nextStartAfter is where the cycle after one that started at start on n nodes begins:
// past the nodes it kept (the feasible ones it scored and the rejected ones). Nodes the
// parallel filter found fit beyond the count it wanted are not counted, so the next cycle
// looks at them first; skipping them would leave some nodes out of more cycles than others
// and spread pods unevenly over nodes.
func nextStartAfter(start, kept, n int) int {
	if n == 0 {
		return 0
	}
	return (start + kept) % n
}

// runFilterWithNominated runs the filters as if the pods nominated to the node that come
// before pod were already there.
func (s *Scheduler) runFilterWithNominated(ctx context.Context, state *CycleState, pi *PodInfo, ni *NodeInfo) *Status {
	nominated := s.cache.nominatedFor(ni.Name(), pi)
	if len(nominated) == 0 {
		return s.profile.RunFilter(ctx, state, pi, ni)
	}
	ni2, st2 := ni.Clone(), state.Clone()
	for _, np := range nominated {
		ni2.AddPod(np)
		s.podStateUpdate(st2, pi, np, ni2, true)
	}
	return s.profile.RunFilter(ctx, st2, pi, ni2)
}

// podStateUpdate tells the PreFilter states that a pod was added or removed on a node.
func (s *Scheduler) podStateUpdate(state *CycleState, pi, other *PodInfo, ni *NodeInfo, add bool) {
	for _, pl := range s.profile.PreFilter {
		if state.skipFilter.Has(pl.Name()) {
			continue
		}
		if u, ok := pl.(PodStateUpdater); ok {
			if add {
				u.AddPod(state, pi, other, ni)
			} else {
				u.RemovePod(state, pi, other, ni)
			}
		}
	}
}

// selectHost picks a highest-scored node, uniformly among ties.
func selectHost(scores []NodeScore, intn func(int) int) string {
	best, ties := "", 0
	var max int64
	for _, s := range scores {
		switch {
		case ties == 0 || s.Score > max:
			best, max, ties = s.Name, s.Score, 1
		case s.Score == max:
			ties++
			if intn(ties) == 0 {
				best = s.Name
			}
		}
	}
	return best
}

// bindingCycle runs PreBind and Bind for an assumed pod.
func (s *Scheduler) bindingCycle(ctx context.Context, state *CycleState, qp *QueuedPod, cycle int64, pi *PodInfo, assumed *corev1.Pod) {
	host := assumed.Spec.NodeName
	fail := func(err error) {
		for j := len(s.profile.Reserve) - 1; j >= 0; j-- {
			s.profile.Reserve[j].Unreserve(ctx, state, pi, host)
		}
		s.cache.ForgetPod(assumed)
		s.queue.MoveForEvent(interestAssignedPodDelete)
		if ctx.Err() != nil {
			return
		}
		s.failed(ctx, qp, cycle, err, "")
	}
	for _, pl := range s.profile.PreBind {
		if st := pl.PreBind(ctx, state, pi, host); !st.IsSuccess() {
			fail(fmt.Errorf("running PreBind plugin %q: %w", pl.Name(), st.AsError()))
			return
		}
	}
	select {
	case s.bindSlots <- struct{}{}:
	case <-ctx.Done():
		fail(ctx.Err())
		return
	}
	var st *Status
	for _, pl := range s.profile.Bind {
		if st = pl.Bind(ctx, state, pi, host); st.IsSuccess() {
			break
		}
	}
	<-s.bindSlots
	if !st.IsSuccess() {
		fail(fmt.Errorf("binding rejected: %w", st.AsError()))
		return
	}
	s.recorder.Eventf(assumed, corev1.EventTypeNormal, "Scheduled", "Successfully assigned %s/%s to %s", assumed.Namespace, assumed.Name, host)
	s.queue.Done(assumed.UID)
}

// failed reports a failed attempt (FailedScheduling event, PodScheduled=False condition,
// nominatedNodeName) and puts the pod back in the queue.
func (s *Scheduler) failed(ctx context.Context, qp *QueuedPod, cycle int64, err error, nominated string) {
	pod := qp.Pod
	var fitErr *FitError
	reason := corev1.PodReasonSchedulerError
	rejectedBy := sets.New[string]()
	isError := true
	if errors.Is(err, errNoNodesAvailable) {
		// Unschedulable, and any cluster event (a node added) may help.
		reason = corev1.PodReasonUnschedulable
		isError = false
	}
	if errors.As(err, &fitErr) {
		reason = corev1.PodReasonUnschedulable
		isError = false
		for p := range fitErr.Diagnosis.UnschedulablePlugins {
			if p != "" {
				rejectedBy.Insert(p)
			}
		}
	}
	msg := err.Error()
	slog.DebugContext(ctx, "pod not scheduled", "pod", podKey(pod), "reason", reason, "message", msg)
	// Requeue first, so that a cluster event after this point is not missed.
	if latest, lerr := s.podLister.Pods(pod.Namespace).Get(pod.Name); lerr == nil && latest.UID == pod.UID {
		qp.Pod = latest
		pod = latest
	}
	s.queue.Requeue(qp, cycle, rejectedBy, isError)
	if pod.Spec.NodeName != "" || pod.DeletionTimestamp != nil {
		return
	}
	s.recorder.Event(pod, corev1.EventTypeWarning, "FailedScheduling", msg)
	cond := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: reason, Message: msg}
	if nominated != "" {
		s.cache.Nominate(pod, nominated)
	}
	if !needsStatusUpdate(pod, cond, nominated) {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.patchPodStatus(ctx, pod, cond, nominated); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
			slog.WarnContext(ctx, "update pod status", "pod", podKey(pod), "err", err)
		}
	}()
}

// needsStatusUpdate: the condition or the nomination would change.
func needsStatusUpdate(pod *corev1.Pod, cond corev1.PodCondition, nominated string) bool {
	if nominated != "" && pod.Status.NominatedNodeName != nominated {
		return true
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == cond.Type {
			return c.Status != cond.Status || c.Reason != cond.Reason || c.Message != cond.Message
		}
	}
	return true
}

// patchPodStatus sets the PodScheduled condition (and nominatedNodeName) with a strategic
// merge patch on the status subresource.
func (s *Scheduler) patchPodStatus(ctx context.Context, pod *corev1.Pod, cond corev1.PodCondition, nominated string) error {
	cond.LastProbeTime = metav1.Time{}
	cond.LastTransitionTime = metav1.Now()
	for _, c := range pod.Status.Conditions {
		if c.Type == cond.Type && c.Status == cond.Status {
			cond.LastTransitionTime = c.LastTransitionTime
		}
	}
	status := map[string]any{"conditions": []corev1.PodCondition{cond}}
	if nominated != "" {
		status["nominatedNodeName"] = nominated
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status":   status,
	})
	if err != nil {
		return err
	}
	_, err = s.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

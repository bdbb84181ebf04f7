package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Messages of upstream's DefaultPreemption.
const (
	msgPreemptionNotHelpful = "Preemption is not helpful for scheduling"
	msgNoVictims            = "No preemption victims found for incoming pod"
	msgPolicyNever          = "not eligible due to preemptionPolicy=Never."
	msgTerminatingVictim    = "not eligible due to a terminating pod on the nominated node."
)

// defaultPreemption makes room for a pod that fits nowhere by evicting lower-priority pods
// from the node where that costs least, and nominates that node for the pod.
type defaultPreemption struct{ s *Scheduler }

func (*defaultPreemption) Name() string { return DefaultPreemptionName }

// preemptionPlan is the chosen node and the pods to evict there.
type preemptionPlan struct {
	node    string
	victims []*PodInfo
}

func (p *preemptionPlan) Clone() StateData { return p }

const preemptionPlanKey = DefaultPreemptionName + "/plan"

// PostFilter picks a node and victims (no I/O; the scheduler carries the plan out).
func (d *defaultPreemption) PostFilter(ctx context.Context, state *CycleState, pod *PodInfo, snap *Snapshot, statuses map[string]*Status) (string, *Status) {
	if ok, msg := eligibleToPreempt(pod.Pod, snap); !ok {
		return "", NewStatus(Unschedulable, "preemption: "+msg)
	}
	nodeStatuses := map[string]*Status{}
	var plans []*preemptionPlan
	for _, ni := range snap.Nodes {
		st, ok := statuses[ni.Name()]
		if !ok || st.Code() != Unschedulable {
			nodeStatuses[ni.Name()] = NewStatus(UnschedulableAndUnresolvable, msgPreemptionNotHelpful)
			continue
		}
		victims, vst := d.selectVictims(ctx, state, pod, ni)
		if !vst.IsSuccess() {
			nodeStatuses[ni.Name()] = vst
			continue
		}
		plans = append(plans, &preemptionPlan{node: ni.Name(), victims: victims})
	}
	if len(plans) == 0 {
		fe := &FitError{NumAllNodes: len(snap.Nodes), Diagnosis: Diagnosis{NodeToStatus: nodeStatuses}}
		return "", NewStatus(Unschedulable, "preemption: "+fe.Error())
	}
	best := pickPreemptionPlan(plans)
	state.Write(preemptionPlanKey, best)
	return best.node, nil
}

// eligibleToPreempt follows upstream: not with preemptionPolicy Never, and not while a
// victim of an earlier preemption is still terminating on the nominated node.
func eligibleToPreempt(pod *corev1.Pod, snap *Snapshot) (bool, string) {
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == corev1.PreemptNever {
		return false, msgPolicyNever
	}
	if nn := pod.Status.NominatedNodeName; nn != "" {
		if ni := snap.Get(nn); ni != nil {
			prio := NewPodInfo(pod).Priority
			for _, p := range ni.Pods {
				if p.Pod.DeletionTimestamp != nil && p.Priority < prio {
					return false, msgTerminatingVictim
				}
			}
		}
	}
	return true, ""
}

// selectVictims removes every lower-priority pod, checks the pod then fits, and adds back
// as many as still fit (highest priority first): the rest are the victims.
func (d *defaultPreemption) selectVictims(ctx context.Context, state *CycleState, pod *PodInfo, ni *NodeInfo) ([]*PodInfo, *Status) {
	var potential []*PodInfo
	for _, p := range ni.Pods {
		if p.Priority < pod.Priority && p.Pod.DeletionTimestamp == nil {
			potential = append(potential, p)
		}
	}
	if len(potential) == 0 {
		return nil, NewStatus(UnschedulableAndUnresolvable, msgNoVictims)
	}
	ni2, st2 := ni.Clone(), state.Clone()
	for _, p := range potential {
		ni2.RemovePod(p.Pod)
		d.s.podStateUpdate(st2, pod, p, ni2, false)
	}
	if st := d.s.profile.RunFilter(ctx, st2, pod, ni2); !st.IsSuccess() {
		return nil, st
	}
	sort.SliceStable(potential, func(i, j int) bool { return potential[i].Priority > potential[j].Priority })
	var victims []*PodInfo
	for _, p := range potential {
		ni2.AddPod(p)
		d.s.podStateUpdate(st2, pod, p, ni2, true)
		if d.s.profile.RunFilter(ctx, st2, pod, ni2).IsSuccess() {
			continue
		}
		ni2.RemovePod(p.Pod)
		d.s.podStateUpdate(st2, pod, p, ni2, false)
		victims = append(victims, p)
	}
	if len(victims) == 0 {
		return nil, NewStatus(UnschedulableAndUnresolvable, msgNoVictims)
	}
	return victims, nil
}

// pickPreemptionPlan prefers the lowest highest-victim priority, then the lowest sum of
// priorities, then the fewest victims, then the node name.
func pickPreemptionPlan(plans []*preemptionPlan) *preemptionPlan {
	key := func(p *preemptionPlan) (int32, int64) {
		top, sum := int32(-1<<31), int64(0)
		for _, v := range p.victims {
			if v.Priority > top {
				top = v.Priority
			}
			sum += int64(v.Priority) + (1 << 31) // keep sums positive as upstream does
		}
		return top, sum
	}
	sort.SliceStable(plans, func(i, j int) bool {
		ti, si := key(plans[i])
		tj, sj := key(plans[j])
		switch {
		case ti != tj:
			return ti < tj
		case si != sj:
			return si < sj
		case len(plans[i].victims) != len(plans[j].victims):
			return len(plans[i].victims) < len(plans[j].victims)
		}
		return plans[i].node < plans[j].node
	})
	return plans[0]
}

// runPostFilter runs preemption for a pod that fits nowhere, carries out its plan and
// returns the nominated node ("" if none). It records preemption's message in fitErr.
func (s *Scheduler) runPostFilter(ctx context.Context, state *CycleState, pi *PodInfo, fitErr *FitError) string {
	if fitErr.Diagnosis.PreFilterMsg != "" && firstStatus(fitErr.Diagnosis.NodeToStatus).Code() == UnschedulableAndUnresolvable {
		fe := &FitError{NumAllNodes: fitErr.NumAllNodes, Diagnosis: Diagnosis{NodeToStatus: notHelpful(fitErr.Diagnosis.NodeToStatus)}}
		fitErr.Diagnosis.PostFilterMsg = "preemption: " + fe.Error()
		return ""
	}
	snap, release := s.cache.readSnapshot()
	var nominated string
	var st *Status
	for _, pl := range s.profile.PostFilter {
		nominated, st = pl.PostFilter(ctx, state, pi, snap, fitErr.Diagnosis.NodeToStatus)
		if st.IsSuccess() && nominated != "" {
			break
		}
	}
	release()
	if !st.IsSuccess() {
		fitErr.Diagnosis.PostFilterMsg = st.Message()
		return ""
	}
	plan, _ := state.Read(preemptionPlanKey).(*preemptionPlan)
	if plan == nil {
		return ""
	}
	for _, v := range plan.victims {
		s.evict(ctx, pi.Pod, v.Pod, plan.node)
	}
	return nominated
}

func firstStatus(m map[string]*Status) *Status {
	for _, s := range m {
		return s
	}
	return nil
}

func notHelpful(m map[string]*Status) map[string]*Status {
	out := make(map[string]*Status, len(m))
	for k := range m {
		out[k] = NewStatus(UnschedulableAndUnresolvable, msgPreemptionNotHelpful)
	}
	return out
}

// evict marks the victim with the DisruptionTarget condition, tells it why (a "Preempted"
// event) and deletes it.
func (s *Scheduler) evict(ctx context.Context, preemptor, victim *corev1.Pod, node string) {
	cond := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: corev1.PodReasonPreemptionByScheduler, Message: fmt.Sprintf("%s: preempting to accommodate a higher priority pod", s.cfg.SchedulerName)}
	if err := s.patchPodStatus(ctx, victim, cond, ""); err != nil && !apierrors.IsNotFound(err) {
		slog.WarnContext(ctx, "mark preemption victim", "pod", podKey(victim), "err", err)
	}
	err := s.client.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &victim.UID}})
	if err != nil && !apierrors.IsNotFound(err) {
		slog.WarnContext(ctx, "delete preemption victim", "pod", podKey(victim), "err", err)
		return
	}
	s.recorder.Eventf(victim, corev1.EventTypeNormal, "Preempted", "Preempted by pod %s on node %s", preemptor.UID, node)
}

package apiserver

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	storeerr "k8s.io/apiserver/pkg/storage/errors"
	"k8s.io/apiserver/pkg/util/dryrun"
	policyv1client "k8s.io/client-go/kubernetes/typed/policy/v1"
	"k8s.io/client-go/util/retry"
	pdbhelper "k8s.io/component-helpers/apps/poddisruptionbudget"
	"k8s.io/kubectl/pkg/util/podutils"
	"k8s.io/utils/ptr"
)

// maxDisruptedPods is how many evictions not yet confirmed by the disruption
// controller a budget may have in status.disruptedPods before evictions are refused,
// as upstream.
const maxDisruptedPods = 2000

// evictionsRetry paces the retries of an eviction that lost a write race on its pod or
// budget, as upstream: 20 tries, half a second apart.
var evictionsRetry = wait.Backoff{Steps: 20, Duration: 500 * time.Millisecond, Factor: 1.0, Jitter: 0.1}

// evictionREST serves pods/eviction: an Eviction deletes its pod with the eviction's
// DeleteOptions if the PodDisruptionBudget covering the pod allows it, as upstream.
type evictionREST struct {
	pods *genericregistry.Store
	// pdbs reads and writes the budgets (the loopback client); when nil, no budget is
	// consulted and an eviction is a plain delete.
	pdbs policyv1client.PodDisruptionBudgetsGetter
}

var (
	_ rest.NamedCreater             = &evictionREST{}
	_ rest.GroupVersionKindProvider = &evictionREST{}
)

func (r *evictionREST) New() runtime.Object   { return &policyv1.Eviction{} }
func (r *evictionREST) Destroy()              {}
func (r *evictionREST) NamespaceScoped() bool { return true }
func (r *evictionREST) GroupVersionKind(schema.GroupVersion) schema.GroupVersionKind {
	return policyv1.SchemeGroupVersion.WithKind("Eviction")
}

func (r *evictionREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	ev, ok := obj.(*policyv1.Eviction)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not an Eviction object: %T", obj))
	}
	if name != ev.Name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Eviction object")
	}
	if ev.DeleteOptions != nil && ptr.Deref(ev.DeleteOptions.IgnoreStoreReadErrorWithClusterBreakingPotential, false) {
		return nil, apierrors.NewInvalid(policyv1.SchemeGroupVersion.WithKind("Eviction").GroupKind(), name, field.ErrorList{
			field.Invalid(field.NewPath("deleteOptions").Child("ignoreStoreReadErrorWithClusterBreakingPotential"), true,
				"can not be set for pod eviction, try after removing the option"),
		})
	}
	opts, err := evictionDeleteOptions(ev, options)
	if err != nil {
		return nil, err
	}
	if createValidation != nil {
		if err := createValidation(ctx, ev.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	pods := storePods{r.pods}
	if r.pdbs == nil {
		if err := pods.delete(ctx, name, opts); err != nil {
			return nil, err
		}
		return &metav1.Status{Status: metav1.StatusSuccess}, nil
	}
	e := evictor{pods: pods, pdbs: r.pdbs, backoff: evictionsRetry, now: time.Now}
	return e.evict(ctx, name, opts)
}

// evictionDeleteOptions are the options of the eviction's delete: the Eviction's, with
// the request's dryRun, which may not contradict them.
func evictionDeleteOptions(ev *policyv1.Eviction, options *metav1.CreateOptions) (*metav1.DeleteOptions, error) {
	if ev.DeleteOptions == nil {
		return &metav1.DeleteOptions{DryRun: options.DryRun}, nil
	}
	opts := ev.DeleteOptions.DeepCopy()
	switch {
	case len(opts.DryRun) == 0:
		opts.DryRun = options.DryRun
	case len(options.DryRun) > 0 && !reflect.DeepEqual(options.DryRun, opts.DryRun):
		return nil, fmt.Errorf("Non-matching dry-run options in request and content: %v and %v", options.DryRun, opts.DryRun) // upstream's message, capital included
	}
	return opts, nil
}

// evictionPods is what an eviction does to pods.
type evictionPods interface {
	get(ctx context.Context, name string) (*corev1.Pod, error)
	// markDisruptionTarget sets the pod's DisruptionTarget condition, checking pre
	// first (a Conflict if they fail), and returns the pod's new resourceVersion.
	markDisruptionTarget(ctx context.Context, name string, pre *metav1.Preconditions) (string, error)
	delete(ctx context.Context, name string, opts *metav1.DeleteOptions) error
}

// evictor evicts pods while keeping their PodDisruptionBudgets.
type evictor struct {
	pods    evictionPods
	pdbs    policyv1client.PodDisruptionBudgetsGetter
	backoff wait.Backoff
	now     func() time.Time
}

// evict evicts pod name with the delete options opts: pods that cannot disrupt
// anything any more are deleted outright; the others only if their budget allows it,
// which the eviction records in the budget's status before the delete.
func (e evictor) evict(ctx context.Context, name string, opts *metav1.DeleteOptions) (runtime.Object, error) {
	var pod *corev1.Pod
	deleted := false
	retriable := apierrors.IsConflict
	if !resourceVersionUnset(opts) {
		retriable = func(error) bool { return false } // the caller's precondition is final
	}
	err := retry.OnError(e.backoff, retriable, func() error {
		var err error
		if pod, err = e.pods.get(ctx, name); err != nil {
			return err
		}
		if !canIgnoreBudget(pod) {
			return nil
		}
		o := opts
		if enforceResourceVersion(pod) && resourceVersionUnset(opts) {
			o = withResourceVersion(opts, pod.ResourceVersion)
		}
		if err := e.markAndDelete(ctx, name, o); err != nil {
			return err
		}
		deleted = true
		return nil
	})
	if err != nil {
		return nil, err
	}
	if deleted {
		return &metav1.Status{Status: metav1.StatusSuccess}, nil
	}

	list, err := e.pdbs.PodDisruptionBudgets(pod.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pdbs := budgetsFor(pod, list.Items)
	plan, status := planEviction(pod, pdbs)
	if status != nil {
		return status, nil
	}
	switch plan {
	case deleteUnhealthy:
		// The pod must still be the unhealthy one the budget was read for.
		err := e.markAndDelete(ctx, name, withResourceVersion(opts, pod.ResourceVersion))
		if apierrors.IsConflict(err) && resourceVersionUnset(opts) {
			return nil, budgetBusyError(pdbs[0].Name)
		}
		if err != nil {
			return nil, err
		}
		return &metav1.Status{Status: metav1.StatusSuccess}, nil
	case takeFromBudget:
		if err := e.takeFromBudget(ctx, pod, &pdbs[0], dryrun.IsDryRun(opts.DryRun)); err != nil {
			return nil, err
		}
	}
	if err := e.markAndDelete(ctx, name, opts); err != nil {
		return nil, err
	}
	return &metav1.Status{Status: metav1.StatusSuccess}, nil
}

// takeFromBudget records the pod's eviction in pdb's status, reading the budget again
// after each lost write race.
func (e evictor) takeFromBudget(ctx context.Context, pod *corev1.Pod, pdb *policyv1.PodDisruptionBudget, dryRun bool) error {
	refresh := false
	err := retry.RetryOnConflict(e.backoff, func() error {
		if refresh {
			var err error
			if pdb, err = e.pdbs.PodDisruptionBudgets(pod.Namespace).Get(ctx, pdb.Name, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		updated, err := takeDisruption(pdb, pod.Name, e.now())
		if err == nil && !dryRun {
			_, err = e.pdbs.PodDisruptionBudgets(pod.Namespace).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		}
		if err != nil {
			refresh = true
		}
		return err
	})
	if wait.Interrupted(err) {
		return apierrors.NewTimeoutError(fmt.Sprintf("couldn't update PodDisruptionBudget %q due to conflicts", pdb.Name), 10)
	}
	return err
}

// markAndDelete deletes the pod with opts, first marking it with the DisruptionTarget
// condition unless the delete is a dry run.
func (e evictor) markAndDelete(ctx context.Context, name string, opts *metav1.DeleteOptions) error {
	if !dryrun.IsDryRun(opts.DryRun) {
		rv, err := e.pods.markDisruptionTarget(ctx, name, opts.Preconditions)
		if err != nil {
			return err
		}
		if !resourceVersionUnset(opts) {
			// The condition moved the resourceVersion the caller or we asked for.
			opts = withResourceVersion(opts, rv)
		}
	}
	return e.pods.delete(ctx, name, opts)
}

func resourceVersionUnset(opts *metav1.DeleteOptions) bool {
	return opts.Preconditions == nil || opts.Preconditions.ResourceVersion == nil
}

// withResourceVersion is a copy of opts with the resourceVersion precondition rv.
func withResourceVersion(opts *metav1.DeleteOptions, rv string) *metav1.DeleteOptions {
	out := opts.DeepCopy()
	if out.Preconditions == nil {
		out.Preconditions = &metav1.Preconditions{}
	}
	out.Preconditions.ResourceVersion = &rv
	return out
}

// canIgnoreBudget says whether the pod is evicted without consulting its budget: it is
// finished, not running yet, or already being deleted, so it disrupts nothing.
func canIgnoreBudget(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed, corev1.PodPending:
		return true
	}
	return !pod.DeletionTimestamp.IsZero()
}

// enforceResourceVersion says whether the delete of a pod evicted without its budget
// must find the pod unchanged: a pending pod could have started and become healthy.
func enforceResourceVersion(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return false
	}
	return pod.DeletionTimestamp.IsZero()
}

// budgetsFor are the budgets of the pod's namespace whose selector matches it (an
// empty selector matches every pod; an invalid one none).
func budgetsFor(pod *corev1.Pod, all []policyv1.PodDisruptionBudget) []policyv1.PodDisruptionBudget {
	var out []policyv1.PodDisruptionBudget
	for _, pdb := range all {
		if pdb.Namespace != pod.Namespace {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, pdb)
	}
	return out
}

// evictionPlan is how the eviction of a pod that counts for its budget goes on.
type evictionPlan int

const (
	// deleteFreely: no budget covers the pod.
	deleteFreely evictionPlan = iota
	// deleteUnhealthy: the pod is not Ready and its budget lets such pods go without
	// spending a disruption, provided the pod is still the one seen.
	deleteUnhealthy
	// takeFromBudget: the eviction spends one of the budget's allowed disruptions.
	takeFromBudget
)

// planEviction decides how a running pod covered by pdbs is evicted; a non-nil
// status is the answer instead (the pod has several budgets).
func planEviction(pod *corev1.Pod, pdbs []policyv1.PodDisruptionBudget) (evictionPlan, *metav1.Status) {
	switch {
	case len(pdbs) > 1:
		return 0, &metav1.Status{
			Status:  metav1.StatusFailure,
			Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.",
			Code:    500,
		}
	case len(pdbs) == 0:
		return deleteFreely, nil
	}
	pdb := &pdbs[0]
	if !podutils.IsPodReady(pod) {
		if ptr.Deref(pdb.Spec.UnhealthyPodEvictionPolicy, policyv1.IfHealthyBudget) == policyv1.AlwaysAllow {
			return deleteUnhealthy, nil
		}
		// IfHealthyBudget: an unready pod may go while the application is not disrupted.
		if pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0 {
			return deleteUnhealthy, nil
		}
	}
	return takeFromBudget, nil
}

// takeDisruption is pdb after the eviction of podName at now: one disruption fewer
// allowed and the pod in status.disruptedPods, for the disruption controller not to
// count it while its deletion is under way. The error, when the budget refuses, is
// upstream's: 429 TooManyRequests or 403 Forbidden with a DisruptionBudget cause.
func takeDisruption(pdb *policyv1.PodDisruptionBudget, podName string, now time.Time) (*policyv1.PodDisruptionBudget, error) {
	if pdb.Status.ObservedGeneration < pdb.Generation {
		return nil, budgetBusyError(pdb.Name)
	}
	if pdb.Status.DisruptionsAllowed < 0 {
		return nil, budgetForbidden(pdb.Name, "pdb disruptions allowed is negative",
			fmt.Sprintf("The disruption budget %s does not allow evicting pods currently: pdb disruptions allowed is negative", pdb.Name))
	}
	if len(pdb.Status.DisruptedPods) > maxDisruptedPods {
		return nil, budgetForbidden(pdb.Name, "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
			fmt.Sprintf("The disruption budget %s does not allow evicting pods currently: too many pending evictions not confirmed by PDB controller", pdb.Name))
	}
	if pdb.Status.DisruptionsAllowed == 0 {
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		cond := apimeta.FindStatusCondition(pdb.Status.Conditions, policyv1.DisruptionAllowedCondition)
		refused := cond != nil && cond.Status == metav1.ConditionFalse && cond.Message != ""
		var msg string
		switch {
		case refused && cond.Reason == policyv1.SyncFailedReason:
			// The counts are not to be trusted when the controller could not compute them.
			msg = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently because it failed sync: %s", pdb.Name, cond.Message)
		case pdb.Status.CurrentHealthy <= pdb.Status.DesiredHealthy:
			msg = fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy)
		case refused:
			msg = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently (%s): %s", pdb.Name, cond.Reason, cond.Message)
		default:
			msg = fmt.Sprintf("The disruption budget %s does not allow evicting pods currently", pdb.Name)
		}
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: msg})
		return nil, err
	}
	out := pdb.DeepCopy()
	out.Status.DisruptionsAllowed--
	if out.Status.DisruptionsAllowed == 0 {
		pdbhelper.UpdateDisruptionAllowedCondition(out)
	}
	if out.Status.DisruptedPods == nil {
		out.Status.DisruptedPods = map[string]metav1.Time{}
	}
	out.Status.DisruptedPods[podName] = metav1.Time{Time: now}
	return out, nil
}

// budgetBusyError is the 429 of an eviction whose budget the disruption controller
// has not caught up with.
func budgetBusyError(name string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause,
		Message: fmt.Sprintf("The disruption budget %s is still being processed by the server.", name)})
	return err
}

func budgetForbidden(name, reason, cause string) error {
	err := apierrors.NewForbidden(policyv1.Resource("poddisruptionbudget"), name, errors.New(reason))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: cause})
	return err
}

// storePods are the pods of the API server's storage.
type storePods struct{ store *genericregistry.Store }

func (s storePods) get(ctx context.Context, name string) (*corev1.Pod, error) {
	obj, err := s.store.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return obj.(*corev1.Pod), nil
}

func (s storePods) markDisruptionTarget(ctx context.Context, name string, pre *metav1.Preconditions) (string, error) {
	key, err := s.store.KeyFunc(ctx, name)
	if err != nil {
		return "", err
	}
	out := &corev1.Pod{}
	err = s.store.Storage.GuaranteedUpdate(ctx, key, out, false, nil, func(in runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
		pod := in.(*corev1.Pod).DeepCopy()
		if err := checkPreconditions(pod, pre); err != nil {
			return nil, nil, err
		}
		setPodCondition(&pod.Status, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting", LastTransitionTime: metav1.NewTime(time.Now().Truncate(time.Second))})
		return pod, nil, nil
	}, false, nil)
	if err != nil {
		return "", storeerr.InterpretUpdateError(err, s.store.DefaultQualifiedResource, name)
	}
	return out.ResourceVersion, nil
}

func (s storePods) delete(ctx context.Context, name string, opts *metav1.DeleteOptions) error {
	_, _, err := s.store.Delete(ctx, name, rest.ValidateAllObjectFunc, opts)
	return err
}

// checkPreconditions is the Conflict of a pod that is not the one pre names.
func checkPreconditions(pod *corev1.Pod, pre *metav1.Preconditions) error {
	if pre == nil {
		return nil
	}
	gr := schema.GroupResource{Resource: "Pod"}
	if uid := pre.UID; uid != nil && *uid != "" && *uid != pod.UID {
		return apierrors.NewConflict(gr, pod.Name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *uid, pod.UID))
	}
	if rv := pre.ResourceVersion; rv != nil && *rv != "" && *rv != pod.ResourceVersion {
		return apierrors.NewConflict(gr, pod.Name, fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *rv, pod.ResourceVersion))
	}
	return nil
}

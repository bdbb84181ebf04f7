package admission

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	resourcehelper "k8s.io/component-helpers/resource"
)

// limitRangerAnnotation records on a pod which defaults the LimitRanger set.
const limitRangerAnnotation = "kubernetes.io/limit-ranger"

// limitRangeLiveTTL is how long a namespace's LimitRanges read from the API server
// (because the cache had none yet) are reused.
const limitRangeLiveTTL = 30 * time.Second

// limitRanger is the admission step upstream calls LimitRanger: the LimitRanges of a
// namespace give its new pods' containers default requests and limits (mutating), and
// bound what containers, pods and claims may ask for (validating). Pods are handled
// when created (their containers' resources never change afterwards), claims when
// created and updated.
type limitRanger struct {
	*admission.Handler
	lister corelisters.LimitRangeLister
	client kubernetes.Interface

	// live holds, per namespace, the LimitRanges read from the API server when the
	// cache had none: a LimitRange created a moment before a pod may not have reached
	// the cache yet.
	mu   sync.Mutex
	live map[string]liveLimitRanges
}

type liveLimitRanges struct {
	expiry time.Time
	items  []*corev1.LimitRange
}

var (
	_ admission.MutationInterface   = (*limitRanger)(nil)
	_ admission.ValidationInterface = (*limitRanger)(nil)
)

func newLimitRanger(factory informers.SharedInformerFactory, client kubernetes.Interface) *limitRanger {
	inf := factory.Core().V1().LimitRanges()
	p := &limitRanger{Handler: admission.NewHandler(admission.Create, admission.Update), lister: inf.Lister(),
		client: client, live: map[string]liveLimitRanges{}}
	p.SetReadyFunc(inf.Informer().HasSynced)
	return p
}

// applies: pods on create, claims on create and update, never subresources nor objects
// being deleted.
func (p *limitRanger) applies(a admission.Attributes) bool {
	if a.GetSubresource() != "" {
		return false
	}
	switch a.GetResource().GroupResource() {
	case corev1.Resource("pods"):
		if a.GetOperation() != admission.Create {
			return false
		}
	case corev1.Resource("persistentvolumeclaims"):
	default:
		return false
	}
	if old := a.GetOldObject(); old != nil {
		if m, err := meta.Accessor(old); err == nil && m.GetDeletionTimestamp() != nil {
			return false
		}
	}
	return true
}

func (p *limitRanger) Admit(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if !p.applies(a) {
		return nil
	}
	pod, ok := a.GetObject().(*corev1.Pod)
	if !ok {
		return nil
	}
	ranges, err := p.limitRanges(ctx, a)
	if err != nil {
		return err
	}
	for _, lr := range ranges {
		applyLimitRangeDefaults(lr, pod)
	}
	return nil
}

func (p *limitRanger) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if !p.applies(a) {
		return nil
	}
	ranges, err := p.limitRanges(ctx, a)
	if err != nil {
		return err
	}
	for _, lr := range ranges {
		switch o := a.GetObject().(type) {
		case *corev1.Pod:
			err = podLimitErrors(lr, o)
		case *corev1.PersistentVolumeClaim:
			err = claimLimitErrors(lr, o)
		}
		if err != nil {
			return admission.NewForbidden(a, err)
		}
	}
	return nil
}

// limitRanges are the LimitRanges of the request's namespace, from the cache, or from
// the API server when the cache has none.
func (p *limitRanger) limitRanges(ctx context.Context, a admission.Attributes) ([]*corev1.LimitRange, error) {
	if !p.WaitForReady() {
		return nil, admission.NewForbidden(a, errors.New("not yet ready to handle request"))
	}
	ns := a.GetNamespace()
	items, err := p.lister.LimitRanges(ns).List(labels.Everything())
	if err != nil {
		return nil, admission.NewForbidden(a, fmt.Errorf("unable to %s %v at this time because there was an error enforcing limit ranges", a.GetOperation(), a.GetResource()))
	}
	if len(items) > 0 {
		return items, nil
	}
	p.mu.Lock()
	entry, ok := p.live[ns]
	p.mu.Unlock()
	if ok && time.Now().Before(entry.expiry) {
		return entry.items, nil
	}
	list, err := p.client.CoreV1().LimitRanges(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, admission.NewForbidden(a, fmt.Errorf("list limit ranges: %w", err))
	}
	entry = liveLimitRanges{expiry: time.Now().Add(limitRangeLiveTTL)}
	for i := range list.Items {
		entry.items = append(entry.items, &list.Items[i])
	}
	p.mu.Lock()
	for k, e := range p.live {
		if time.Now().After(e.expiry) {
			delete(p.live, k)
		}
	}
	p.live[ns] = entry
	p.mu.Unlock()
	return entry.items, nil
}

// applyLimitRangeDefaults gives the containers and init containers of pod the default
// requests and limits of lr's Container items that they lack, and records what it set
// in the kubernetes.io/limit-ranger annotation
// ("LimitRanger plugin set: cpu, memory request for container web; ...").
func applyLimitRangeDefaults(lr *corev1.LimitRange, pod *corev1.Pod) {
	requests, limits := corev1.ResourceList{}, corev1.ResourceList{}
	for _, item := range lr.Spec.Limits {
		if item.Type != corev1.LimitTypeContainer {
			continue
		}
		for k, v := range item.DefaultRequest {
			requests[k] = v.DeepCopy()
		}
		for k, v := range item.Default {
			limits[k] = v.DeepCopy()
		}
	}
	var notes []string
	merge := func(c *corev1.Container, kind string) {
		var setRequests, setLimits []string
		if c.Resources.Limits == nil {
			c.Resources.Limits = corev1.ResourceList{}
		}
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		for k, v := range limits {
			if _, ok := c.Resources.Limits[k]; !ok {
				c.Resources.Limits[k] = v.DeepCopy()
				setLimits = append(setLimits, string(k))
			}
		}
		for k, v := range requests {
			if _, ok := c.Resources.Requests[k]; !ok {
				c.Resources.Requests[k] = v.DeepCopy()
				setRequests = append(setRequests, string(k))
			}
		}
		if len(setRequests) > 0 {
			sort.Strings(setRequests)
			notes = append(notes, fmt.Sprintf("%s request for %s %s", strings.Join(setRequests, ", "), kind, c.Name))
		}
		if len(setLimits) > 0 {
			sort.Strings(setLimits)
			notes = append(notes, fmt.Sprintf("%s limit for %s %s", strings.Join(setLimits, ", "), kind, c.Name))
		}
	}
	for i := range pod.Spec.Containers {
		merge(&pod.Spec.Containers[i], "container")
	}
	for i := range pod.Spec.InitContainers {
		merge(&pod.Spec.InitContainers[i], "init container")
	}
	if len(notes) > 0 {
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[limitRangerAnnotation] = "LimitRanger plugin set: " + strings.Join(notes, "; ")
	}
}

// podLimitErrors checks pod against lr: every container and init container against the
// Container items, the pod's total (the larger of its containers' sum and any init
// container) against the Pod items.
func podLimitErrors(lr *corev1.LimitRange, pod *corev1.Pod) error {
	var errs []error
	for _, item := range lr.Spec.Limits {
		switch item.Type {
		case corev1.LimitTypeContainer:
			for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
				for i := range list {
					errs = append(errs, itemErrors(item, list[i].Resources.Requests, list[i].Resources.Limits)...)
				}
			}
		case corev1.LimitTypePod:
			opts := resourcehelper.PodResourcesOptions{ExcludeOverhead: true}
			errs = append(errs, itemErrors(item, resourcehelper.PodRequests(pod, opts), resourcehelper.PodLimits(pod, opts))...)
		}
	}
	return utilerrors.NewAggregate(errs)
}

// itemErrors checks requests and limits against an item's min, max and
// maxLimitRequestRatio, in the order of the resource names.
func itemErrors(item corev1.LimitRangeItem, requests, limits corev1.ResourceList) []error {
	var errs []error
	kind := string(item.Type)
	for _, k := range sortedNames(item.Min) {
		if err := minConstraint(kind, k, item.Min[k], requests, limits); err != nil {
			errs = append(errs, err)
		}
	}
	for _, k := range sortedNames(item.Max) {
		if err := maxConstraint(kind, k, item.Max[k], requests, limits); err != nil {
			errs = append(errs, err)
		}
	}
	for _, k := range sortedNames(item.MaxLimitRequestRatio) {
		if err := ratioConstraint(kind, k, item.MaxLimitRequestRatio[k], requests, limits); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// claimLimitErrors checks a claim's requests against lr's PersistentVolumeClaim items
// (a claim has no limits and gets no defaults).
func claimLimitErrors(lr *corev1.LimitRange, pvc *corev1.PersistentVolumeClaim) error {
	var errs []error
	requests := pvc.Spec.Resources.Requests
	for _, item := range lr.Spec.Limits {
		if item.Type != corev1.LimitTypePersistentVolumeClaim {
			continue
		}
		kind := string(item.Type)
		for _, k := range sortedNames(item.Min) {
			if err := minConstraint(kind, k, item.Min[k], requests, nil); err != nil {
				errs = append(errs, err)
			}
		}
		for _, k := range sortedNames(item.Max) {
			req, ok := requests[k]
			switch {
			case !ok:
				errs = append(errs, fmt.Errorf("maximum %s usage per %s is %s.  No request is specified", k, kind, quantityString(item.Max[k])))
			case compare(req, item.Max[k]) > 0:
				errs = append(errs, fmt.Errorf("maximum %s usage per %s is %s, but request is %s", k, kind, quantityString(item.Max[k]), quantityString(req)))
			}
		}
	}
	return utilerrors.NewAggregate(errs)
}

func minConstraint(kind string, name corev1.ResourceName, min resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	switch {
	case !hasReq:
		return fmt.Errorf("minimum %s usage per %s is %s.  No request is specified", name, kind, quantityString(min))
	case compare(req, min) < 0:
		return fmt.Errorf("minimum %s usage per %s is %s, but request is %s", name, kind, quantityString(min), quantityString(req))
	case hasLim && compare(lim, min) < 0:
		return fmt.Errorf("minimum %s usage per %s is %s, but limit is %s", name, kind, quantityString(min), quantityString(lim))
	}
	return nil
}

func maxConstraint(kind string, name corev1.ResourceName, max resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	switch {
	case !hasLim:
		return fmt.Errorf("maximum %s usage per %s is %s.  No limit is specified", name, kind, quantityString(max))
	case compare(lim, max) > 0:
		return fmt.Errorf("maximum %s usage per %s is %s, but limit is %s", name, kind, quantityString(max), quantityString(lim))
	case hasReq && compare(req, max) > 0:
		return fmt.Errorf("maximum %s usage per %s is %s, but request is %s", name, kind, quantityString(max), quantityString(req))
	}
	return nil
}

func ratioConstraint(kind string, name corev1.ResourceName, maxRatio resource.Quantity, requests, limits corev1.ResourceList) error {
	req, hasReq := requests[name]
	lim, hasLim := limits[name]
	if !hasReq || req.IsZero() {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no request is specified or request is 0", name, kind, quantityString(maxRatio))
	}
	if !hasLim || lim.IsZero() {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but no limit is specified or limit is 0", name, kind, quantityString(maxRatio))
	}
	r, l, _ := comparable(req, lim, maxRatio)
	ratio := float64(l) / float64(r)
	observed, max := ratio, float64(maxRatio.Value())
	if maxRatio.Value() <= resource.MaxMilliValue {
		observed, max = ratio*1000, float64(maxRatio.MilliValue())
	}
	if observed > max {
		return fmt.Errorf("%s max limit to request ratio per %s is %s, but provided ratio is %f", name, kind, quantityString(maxRatio), ratio)
	}
	return nil
}

// comparable are a, b and c as integers of one precision: thousandths when none
// overflows that way, whole units otherwise.
func comparable(a, b, c resource.Quantity) (int64, int64, int64) {
	if a.Value() <= resource.MaxMilliValue && b.Value() <= resource.MaxMilliValue && c.Value() <= resource.MaxMilliValue {
		return a.MilliValue(), b.MilliValue(), c.MilliValue()
	}
	return a.Value(), b.Value(), c.Value()
}

// compare is a.Cmp(b) at the precision of comparable.
func compare(a, b resource.Quantity) int {
	x, y, _ := comparable(a, b, resource.Quantity{})
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func quantityString(q resource.Quantity) string { return q.String() }

func sortedNames(list corev1.ResourceList) []corev1.ResourceName {
	out := make([]corev1.ResourceName, 0, len(list))
	for k := range list {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

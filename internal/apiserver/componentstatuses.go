package apiserver

import (
	"context"
	"fmt"
	"sort"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// componentStatusREST serves v1 componentstatuses (get, list; deprecated upstream but
// still served): etcd-0… from the etcd members' status, scheduler and controller-manager
// from their leader-election Leases in kube-system, each Healthy or not with a message.
type componentStatusREST struct {
	leases rest.Getter
	etcd   *clientv3.Client
	now    func() time.Time
}

var (
	_ rest.Getter               = (*componentStatusREST)(nil)
	_ rest.Lister               = (*componentStatusREST)(nil)
	_ rest.Scoper               = (*componentStatusREST)(nil)
	_ rest.ShortNamesProvider   = (*componentStatusREST)(nil)
	_ rest.SingularNameProvider = (*componentStatusREST)(nil)
	_ rest.TableConvertor       = (*componentStatusREST)(nil)
)

func (r *componentStatusREST) New() runtime.Object     { return &corev1.ComponentStatus{} }
func (r *componentStatusREST) NewList() runtime.Object { return &corev1.ComponentStatusList{} }
func (r *componentStatusREST) Destroy()                {}
func (r *componentStatusREST) NamespaceScoped() bool   { return false }
func (r *componentStatusREST) ShortNames() []string    { return []string{"cs"} }
func (r *componentStatusREST) GetSingularName() string { return "componentstatus" }

func (r *componentStatusREST) Get(ctx context.Context, name string, _ *metav1.GetOptions) (runtime.Object, error) {
	for _, cs := range r.statuses(ctx) {
		if cs.Name == name {
			return &cs, nil
		}
	}
	return nil, apierrors.NewNotFound(corev1.Resource("componentstatuses"), name)
}

func (r *componentStatusREST) List(ctx context.Context, opts *metainternalversion.ListOptions) (runtime.Object, error) {
	out := &corev1.ComponentStatusList{}
	for _, cs := range r.statuses(ctx) {
		if opts != nil && opts.LabelSelector != nil && !opts.LabelSelector.Empty() {
			continue // component statuses have no labels
		}
		if opts != nil && opts.FieldSelector != nil && !opts.FieldSelector.Matches(fieldsOfComponentStatus(&cs)) {
			continue
		}
		out.Items = append(out.Items, cs)
	}
	return out, nil
}

func fieldsOfComponentStatus(cs *corev1.ComponentStatus) fields.Set {
	return fields.Set{"metadata.name": cs.Name}
}

// statuses probes every component, in name order.
func (r *componentStatusREST) statuses(ctx context.Context) []corev1.ComponentStatus {
	var out []corev1.ComponentStatus
	for _, name := range []string{"controller-manager", "scheduler"} {
		healthy, msg := r.leaseHealth(ctx, "kube-"+name)
		out = append(out, componentStatus(name, healthy, msg))
	}
	if r.etcd != nil {
		for i, ep := range r.etcd.Endpoints() {
			pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := r.etcd.Status(pctx, ep)
			cancel()
			if err != nil {
				out = append(out, componentStatus(fmt.Sprintf("etcd-%d", i), false, err.Error()))
				continue
			}
			out = append(out, componentStatus(fmt.Sprintf("etcd-%d", i), true, `{"health":"true","reason":""}`))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// leaseHealth: a component is healthy while a holder renews its Lease within the
// Lease's duration.
func (r *componentStatusREST) leaseHealth(ctx context.Context, lease string) (bool, string) {
	obj, err := r.leases.Get(genericapirequest.WithNamespace(ctx, metav1.NamespaceSystem), lease, &metav1.GetOptions{})
	if err != nil {
		return false, fmt.Sprintf("no Lease kube-system/%s: %v", lease, err)
	}
	return leaseFresh(obj.(*coordinationv1.Lease), r.now())
}

// leaseFresh decides whether a leader-election Lease is held and renewed in time.
func leaseFresh(l *coordinationv1.Lease, now time.Time) (bool, string) {
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return false, fmt.Sprintf("no leader holds the Lease kube-system/%s", l.Name)
	}
	if deadline := s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second); now.After(deadline) {
		return false, fmt.Sprintf("the leader %s has not renewed the Lease kube-system/%s since %s", *s.HolderIdentity, l.Name, s.RenewTime.UTC().Format(time.RFC3339))
	}
	return true, "ok"
}

func componentStatus(name string, healthy bool, msg string) corev1.ComponentStatus {
	cond := corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionTrue, Message: msg}
	if !healthy {
		cond = corev1.ComponentCondition{Type: corev1.ComponentHealthy, Status: corev1.ConditionFalse, Error: msg}
	}
	return corev1.ComponentStatus{ObjectMeta: metav1.ObjectMeta{Name: name}, Conditions: []corev1.ComponentCondition{cond}}
}

// ConvertToTable prints upstream's columns: NAME STATUS MESSAGE ERROR.
func (r *componentStatusREST) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{nameCol(),
		col("Status", "string", "Whether the component is healthy."), col("Message", "string", "What the probe said."),
		col("Error", "string", "Why the probe failed.")}}
	add := func(cs *corev1.ComponentStatus) {
		status, msg, errMsg := "Unknown", "", ""
		for _, c := range cs.Conditions {
			if c.Type == corev1.ComponentHealthy {
				status, msg, errMsg = "Unhealthy", c.Message, c.Error
				if c.Status == corev1.ConditionTrue {
					status = "Healthy"
				}
			}
		}
		t.Rows = append(t.Rows, metav1.TableRow{Cells: []interface{}{cs.Name, status, msg, errMsg}, Object: runtime.RawExtension{Object: cs}})
	}
	switch o := obj.(type) {
	case *corev1.ComponentStatus:
		add(o)
	case *corev1.ComponentStatusList:
		for i := range o.Items {
			add(&o.Items[i])
		}
	default:
		return nil, fmt.Errorf("not a component status: %T", obj)
	}
	return t, nil
}

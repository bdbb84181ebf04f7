package clusterroleaggregation

import (
	"context"
	"fmt"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubelab/kubelab/internal/util/worker"
)

// Controller keeps aggregated ClusterRoles' rules.
type Controller struct {
	client kubernetes.Interface
	roles  rbaclisters.ClusterRoleLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
}

// New registers the controller's informer and handlers on factory.
func New(client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	inf := factory.Rbac().V1().ClusterRoles()
	c := &Controller{client: client, roles: inf.Lister(), synced: inf.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "clusterrole-aggregation"})}
	// Any change of any ClusterRole may change what an aggregated one selects.
	enqueueAll := func(interface{}) { c.enqueueAggregated() }
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueueAll, UpdateFunc: func(_, obj interface{}) { enqueueAll(obj) }, DeleteFunc: enqueueAll,
	}); err != nil {
		return nil, fmt.Errorf("clusterrole aggregation: %w", err)
	}
	return c, nil
}

func (c *Controller) enqueueAggregated() {
	roles, err := c.roles.List(labels.Everything())
	if err != nil {
		return
	}
	for _, r := range roles {
		if r.AggregationRule != nil {
			c.queue.Add(r.Name)
		}
	}
}

// Run waits for the cache, then syncs aggregated roles until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.queue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced) {
		return fmt.Errorf("clusterrole aggregation: cache did not sync: %w", ctx.Err())
	}
	worker.Start(ctx, 1, c.queue, c.sync, worker.Failed("clusterrole-aggregation", "clusterrole", nil))
	<-ctx.Done()
	return nil
}

// sync writes the aggregated rules of ClusterRole name when they differ.
func (c *Controller) sync(ctx context.Context, name string) error {
	role, err := c.roles.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || role.AggregationRule == nil {
		return err
	}
	all, err := c.roles.List(labels.Everything())
	if err != nil {
		return err
	}
	rules, err := Aggregate(role, all)
	if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(rules, role.Rules) {
		return nil
	}
	updated := role.DeepCopy()
	updated.Rules = rules
	if _, err := c.client.RbacV1().ClusterRoles().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update clusterrole %s: %w", name, err)
	}
	return nil
}

// Aggregate is the union of the rules of the roles in all (other than role) that
// role's selectors match, in the order of the roles' names, each rule once.
func Aggregate(role *rbacv1.ClusterRole, all []*rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	var selectors []labels.Selector
	for _, s := range role.AggregationRule.ClusterRoleSelectors {
		sel, err := metav1.LabelSelectorAsSelector(&s)
		if err != nil {
			return nil, fmt.Errorf("clusterrole %s: aggregation selector: %w", role.Name, err)
		}
		selectors = append(selectors, sel)
	}
	sorted := append([]*rbacv1.ClusterRole(nil), all...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	var rules []rbacv1.PolicyRule
	for _, other := range sorted {
		if other.Name == role.Name || !anyMatches(selectors, other.Labels) {
			continue
		}
		for _, r := range other.Rules {
			if !containsRule(rules, r) {
				rules = append(rules, r)
			}
		}
	}
	return rules, nil
}

func anyMatches(selectors []labels.Selector, l map[string]string) bool {
	for _, s := range selectors {
		if s.Matches(labels.Set(l)) {
			return true
		}
	}
	return false
}

func containsRule(rules []rbacv1.PolicyRule, r rbacv1.PolicyRule) bool {
	for _, have := range rules {
		if equality.Semantic.DeepEqual(have, r) {
			return true
		}
	}
	return false
}

package podgc

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Component is the controller's name, as upstream.
const Component = "pod-garbage-collector"

// Config tunes the collector.
type Config struct {
	// Period is how often the pods are looked at (20 s when zero).
	Period time.Duration
	// Quarantine is how long a node must stay missing before its pods go (40 s when zero).
	Quarantine time.Duration
	// TerminatedPodThreshold is how many terminated pods are kept (12,500 when zero;
	// negative keeps them all).
	TerminatedPodThreshold int
	// Clock is the time source (the real clock when nil).
	Clock clock.WithTicker
	// Logger receives structured logs (default slog.Default()).
	Logger *slog.Logger
}

// Controller is the pod garbage collector.
type Controller struct {
	cfg          Config
	client       kubernetes.Interface
	pods         corelisters.PodLister
	nodes        corelisters.NodeLister
	synced       []cache.InformerSynced
	missingSince map[string]time.Time
}

// New registers the collector's informers on factory; the caller starts it.
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	if cfg.Period <= 0 {
		cfg.Period = 20 * time.Second
	}
	if cfg.Quarantine <= 0 {
		cfg.Quarantine = 40 * time.Second
	}
	if cfg.TerminatedPodThreshold == 0 {
		cfg.TerminatedPodThreshold = 12500
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	pods, nodes := factory.Core().V1().Pods(), factory.Core().V1().Nodes()
	return &Controller{cfg: cfg, client: client, pods: pods.Lister(), nodes: nodes.Lister(),
		synced:       []cache.InformerSynced{pods.Informer().HasSynced, nodes.Informer().HasSynced},
		missingSince: map[string]time.Time{}}, nil
}

// Run collects every Period until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("pod garbage collector: caches did not sync: %w", ctx.Err())
	}
	t := c.cfg.Clock.NewTicker(c.cfg.Period)
	defer t.Stop()
	for {
		c.collect(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// collect runs one pass.
func (c *Controller) collect(ctx context.Context) {
	pods, err := c.pods.List(labels.Everything())
	if err != nil {
		return
	}
	nodeList, err := c.nodes.List(labels.Everything())
	if err != nil {
		return
	}
	nodes := make(map[string]bool, len(nodeList))
	for _, n := range nodeList {
		nodes[n.Name] = true
	}
	for _, p := range orphans(pods, nodes, c.missingSince, c.cfg.Clock.Now(), c.cfg.Quarantine) {
		c.deleteOrphan(ctx, p)
	}
	for _, p := range unscheduledTerminating(pods) {
		c.delete(ctx, p, "a terminating pod that was never scheduled")
	}
	for _, p := range excessTerminated(pods, c.cfg.TerminatedPodThreshold) {
		c.delete(ctx, p, "a terminated pod beyond the threshold")
	}
}

// deleteOrphan deletes p once the API server confirms its node is gone, marking it
// Failed with the DisruptionTarget condition first.
func (c *Controller) deleteOrphan(ctx context.Context, p *corev1.Pod) {
	_, err := c.client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		if err == nil {
			delete(c.missingSince, p.Spec.NodeName)
		}
		return
	}
	if !terminated(p) {
		// A strategic merge patch: the condition merges by its type with the others.
		patch, _ := json.Marshal(map[string]any{"status": map[string]any{"phase": corev1.PodFailed,
			"conditions": []corev1.PodCondition{{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "DeletionByPodGC",
				Message: "PodGC: node no longer exists", LastTransitionTime: metav1.NewTime(c.cfg.Clock.Now())}}}})
		_, err := c.client.CoreV1().Pods(p.Namespace).Patch(ctx, p.Name, k8stypes.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
		if err != nil && !apierrors.IsNotFound(err) {
			c.cfg.Logger.WarnContext(ctx, "pod garbage collector: mark an orphan Failed", "pod", p.Namespace+"/"+p.Name, "err", err)
			return
		}
	}
	c.delete(ctx, p, "its node "+p.Spec.NodeName+" no longer exists")
}

// delete removes p at once (grace period 0), if it is still the pod the cache saw.
func (c *Controller) delete(ctx context.Context, p *corev1.Pod, why string) {
	c.cfg.Logger.InfoContext(ctx, "pod garbage collector: deleting pod", "pod", p.Namespace+"/"+p.Name, "why", why)
	err := c.client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0),
		Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		c.cfg.Logger.WarnContext(ctx, "pod garbage collector: delete", "pod", p.Namespace+"/"+p.Name, "err", err)
	}
}

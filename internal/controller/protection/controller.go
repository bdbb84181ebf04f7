package protection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/kubelab/kubelab/internal/util/volumeutil"
	"github.com/kubelab/kubelab/internal/util/worker"
)

const podsByClaim = "protection-pod-claim"

// Controller runs the pvc-protection and pv-protection controllers.
type Controller struct {
	cfg    Config
	client kubernetes.Interface
	log    *slog.Logger

	claims  corelisters.PersistentVolumeClaimLister
	volumes corelisters.PersistentVolumeLister
	podIdx  cache.Indexer
	synced  []cache.InformerSynced

	claimQueue  workqueue.TypedRateLimitingInterface[string]
	volumeQueue workqueue.TypedRateLimitingInterface[string]
}

// New builds both controllers and registers their handlers on factory (the caller
// starts it after all New calls).
func New(cfg Config, client kubernetes.Interface, factory informers.SharedInformerFactory) (*Controller, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if client == nil || factory == nil {
		return nil, errors.New("protection: client and informer factory are required")
	}
	cfg.setDefaults()
	pvcInf := factory.Core().V1().PersistentVolumeClaims()
	pvInf := factory.Core().V1().PersistentVolumes()
	podInf := factory.Core().V1().Pods()
	if err := podInf.Informer().AddIndexers(cache.Indexers{podsByClaim: func(obj interface{}) ([]string, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return nil, nil
		}
		var out []string
		for _, v := range p.Spec.Volumes {
			switch {
			case v.PersistentVolumeClaim != nil:
				out = append(out, p.Namespace+"/"+v.PersistentVolumeClaim.ClaimName)
			case v.Ephemeral != nil:
				out = append(out, p.Namespace+"/"+p.Name+"-"+v.Name)
			}
		}
		return out, nil
	}}); err != nil {
		return nil, fmt.Errorf("protection: pod index: %w", err)
	}
	c := &Controller{
		cfg: cfg, client: client, log: cfg.Logger.With("controller", "pvc-protection-controller"),
		claims: pvcInf.Lister(), volumes: pvInf.Lister(), podIdx: podInf.Informer().GetIndexer(),
		synced: []cache.InformerSynced{pvcInf.Informer().HasSynced, pvInf.Informer().HasSynced, podInf.Informer().HasSynced},
		claimQueue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "pvcprotection"}),
		volumeQueue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "pvprotection"}),
	}
	claimFn := func(obj interface{}) {
		if pvc, ok := obj.(*corev1.PersistentVolumeClaim); ok && decide(pvc.Finalizers, pvc.DeletionTimestamp != nil, volumeutil.PVCProtectionFinalizer) != stepNothing {
			c.claimQueue.Add(pvc.Namespace + "/" + pvc.Name)
		}
	}
	if _, err := pvcInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: claimFn, UpdateFunc: func(_, obj interface{}) { claimFn(obj) },
	}); err != nil {
		return nil, err
	}
	volumeFn := func(obj interface{}) {
		if pv, ok := obj.(*corev1.PersistentVolume); ok && decide(pv.Finalizers, pv.DeletionTimestamp != nil, volumeutil.PVProtectionFinalizer) != stepNothing {
			c.volumeQueue.Add(pv.Name)
		}
	}
	if _, err := pvInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: volumeFn, UpdateFunc: func(_, obj interface{}) { volumeFn(obj) },
	}); err != nil {
		return nil, err
	}
	podFn := func(obj interface{}, deleted bool) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		// Only a pod that went away (or was never scheduled, or is shut down) can
		// free a claim.
		if !deleted && p.Spec.NodeName != "" && !podShutDown(p) &&
			p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			return
		}
		for _, v := range p.Spec.Volumes {
			switch {
			case v.PersistentVolumeClaim != nil:
				c.claimQueue.Add(p.Namespace + "/" + v.PersistentVolumeClaim.ClaimName)
			case v.Ephemeral != nil:
				c.claimQueue.Add(p.Namespace + "/" + p.Name + "-" + v.Name)
			}
		}
	}
	if _, err := podInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { podFn(obj, false) },
		UpdateFunc: func(_, obj interface{}) { podFn(obj, false) },
		DeleteFunc: func(obj interface{}) { podFn(obj, true) },
	}); err != nil {
		return nil, err
	}
	return c, nil
}

// Run works until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	defer c.claimQueue.ShutDown()
	defer c.volumeQueue.ShutDown()
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return ctx.Err()
	}
	worker.Start(ctx, c.cfg.Workers, c.claimQueue, c.syncClaim, c.failed)
	worker.Start(ctx, c.cfg.Workers, c.volumeQueue, c.syncVolume, c.failed)
	<-ctx.Done()
	return nil
}

func (c *Controller) failed(ctx context.Context, key string, err error) {
	c.log.InfoContext(ctx, "sync failed, will retry", "key", key, "err", err)
}

// syncClaim adds the claim's finalizer, or removes it from a deleted claim no pod uses.
func (c *Controller) syncClaim(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pvc, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	switch decide(pvc.Finalizers, pvc.DeletionTimestamp != nil, volumeutil.PVCProtectionFinalizer) {
	case stepAddFinalizer:
		_, err := c.client.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, name, types.StrategicMergePatchType, addFinalizerPatch(volumeutil.PVCProtectionFinalizer), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("add %s to claim %s: %w", volumeutil.PVCProtectionFinalizer, key, err)
		}
	case stepCheckRemove:
		used, err := c.claimInUse(ctx, pvc)
		if err != nil {
			return err
		}
		if used {
			c.log.DebugContext(ctx, "keeping claim in use", "claim", key)
			return nil
		}
		_, err = c.client.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, name, types.StrategicMergePatchType, removeFinalizerPatch(volumeutil.PVCProtectionFinalizer), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("remove %s from claim %s: %w", volumeutil.PVCProtectionFinalizer, key, err)
		}
		c.log.InfoContext(ctx, "claim no longer in use, finalizer removed", "claim", key)
	}
	return nil
}

// claimInUse asks the cache, then (as the cache may lag) the API server, whether a
// pod uses the claim.
func (c *Controller) claimInUse(ctx context.Context, pvc *corev1.PersistentVolumeClaim) (bool, error) {
	objs, err := c.podIdx.ByIndex(podsByClaim, pvc.Namespace+"/"+pvc.Name)
	if err != nil {
		return false, err
	}
	for _, o := range objs {
		if podUsesClaim(o.(*corev1.Pod), pvc.Name) {
			return true, nil
		}
	}
	pods, err := c.client.CoreV1().Pods(pvc.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, fmt.Errorf("list pods in %s: %w", pvc.Namespace, err)
	}
	for i := range pods.Items {
		if podUsesClaim(&pods.Items[i], pvc.Name) {
			return true, nil
		}
	}
	return false, nil
}

// syncVolume adds the volume's finalizer, or removes it from a deleted volume that
// is not Bound.
func (c *Controller) syncVolume(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	switch decide(pv.Finalizers, pv.DeletionTimestamp != nil, volumeutil.PVProtectionFinalizer) {
	case stepAddFinalizer:
		_, err := c.client.CoreV1().PersistentVolumes().Patch(ctx, name, types.StrategicMergePatchType, addFinalizerPatch(volumeutil.PVProtectionFinalizer), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("add %s to volume %s: %w", volumeutil.PVProtectionFinalizer, name, err)
		}
	case stepCheckRemove:
		if volumeInUse(pv) {
			return nil
		}
		_, err := c.client.CoreV1().PersistentVolumes().Patch(ctx, name, types.StrategicMergePatchType, removeFinalizerPatch(volumeutil.PVProtectionFinalizer), metav1.PatchOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("remove %s from volume %s: %w", volumeutil.PVProtectionFinalizer, name, err)
		}
	}
	return nil
}

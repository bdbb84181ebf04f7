package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestStatefulSetAcrossZones: a StatefulSet with a volumeClaimTemplate and a zone
// topology spread runs one pod per zone, and each pod's volume is made in its pod's zone.
func TestStatefulSetAcrossZones(t *testing.T) {
	tc := startCluster(t, func(c *cluster.Config) { c.Nodes = 6 })
	ctx := context.Background()
	ns := tc.Namespace("sts")
	sel := map[string]string{"app": "db"}
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To[int32](3), ServiceName: "db",
			Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "db", Image: "postgres:16",
						VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/postgresql/data"}}}},
					TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
						MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.DoNotSchedule,
						LabelSelector: &metav1.LabelSelector{MatchLabels: sel},
					}},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: ptr.To(cluster.DefaultStorageClass),
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("4Gi")}},
				},
			}},
		},
	}
	if _, err := tc.Client.AppsV1().StatefulSets(ns).Create(ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "StatefulSet db 3/3 ready", func() (bool, error) {
		s, err := tc.Client.AppsV1().StatefulSets(ns).Get(ctx, "db", metav1.GetOptions{})
		return err == nil && s.Status.ReadyReplicas == 3, err
	})
	zones := map[string]string{} // zone → pod
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("db-%d", i)
		pod := tc.WaitPodRunning(ns, name)
		zone := tc.ZoneOf[pod.Spec.NodeName]
		if other, ok := zones[zone]; ok {
			t.Errorf("%s and %s both in %s: the spread wants one per zone", other, name, zone)
		}
		zones[zone] = name
		claim, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-"+name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		vols := tc.CloudVolumes(claim.Spec.VolumeName)
		if len(vols) != 1 {
			t.Fatalf("cloud volumes of %s: %d, want 1", claim.Spec.VolumeName, len(vols))
		}
		if z := aws.ToString(vols[0].AvailabilityZone); z != zone || aws.ToInt32(vols[0].Size) != 4 {
			t.Errorf("%s: volume %s in %s of %d GiB, pod in %s (want 4 GiB there)", name, aws.ToString(vols[0].VolumeId), z, aws.ToInt32(vols[0].Size), zone)
		}
	}
}

// TestDeploymentScalesRollsOutAndIsGarbageCollected: the Deployment of 3 in examples/seed gets a ReplicaSet and pods
// owned by it; it scales to 5 and to 1; a rolling image update keeps it available;
// deleting it garbage-collects the ReplicaSets and pods.
func TestDeploymentScalesRollsOutAndIsGarbageCollected(t *testing.T) {
	tc := startCluster(t, nil)
	ctx := context.Background()
	ns := tc.Namespace("deployment")
	d := clustertest.SeedObject[*appsv1.Deployment](t, "30-deployment.yaml")
	d.Namespace = ns
	d, err := tc.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	selector := labels.SelectorFromSet(d.Spec.Selector.MatchLabels).String()
	waitReady := func(n int32) {
		t.Helper()
		testutil.EventuallyWithin(t, clustertest.Timeout, fmt.Sprintf("deployment web %d/%d available", n, n), func() (bool, error) {
			d, err := tc.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			s := d.Status
			return s.ObservedGeneration == d.Generation && s.Replicas == n && s.UpdatedReplicas == n && s.AvailableReplicas == n, nil
		})
	}
	waitReady(3)

	// Ownership: Deployment → ReplicaSet → Pods.
	rss, err := tc.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil || len(rss.Items) != 1 {
		t.Fatalf("ReplicaSets: %v %v, want one", rss, err)
	}
	rs := rss.Items[0]
	if ref := metav1.GetControllerOf(&rs); ref == nil || ref.UID != d.UID || ref.Kind != "Deployment" {
		t.Errorf("ReplicaSet controller ref %+v, want Deployment web", ref)
	}
	pods, _ := tc.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	for _, p := range pods.Items {
		if ref := metav1.GetControllerOf(&p); ref == nil || ref.UID != rs.UID {
			t.Errorf("pod %s controller ref %+v, want ReplicaSet %s", p.Name, ref, rs.Name)
		}
		if p.Spec.NodeName == "" || p.Status.PodIP == "" {
			t.Errorf("pod %s: node %q IP %q", p.Name, p.Spec.NodeName, p.Status.PodIP)
		}
	}

	scale := func(n int32) {
		t.Helper()
		// The Scale carries the Deployment's resourceVersion, which status writes move on.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			s, err := tc.Client.AppsV1().Deployments(ns).GetScale(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			s.Spec.Replicas = n
			_, err = tc.Client.AppsV1().Deployments(ns).UpdateScale(ctx, "web", s, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		waitReady(n)
	}
	scale(5)
	scale(1)
	scale(3)

	// Rolling update: the default strategy (25% surge and unavailable) never has fewer
	// than 3 - 0 (25% of 3 rounded down) ready pods. Every pod change the watch shows
	// is counted.
	var minReady atomic.Int32
	minReady.Store(3)
	var mu sync.Mutex
	var tracking atomic.Bool // set once the informer has listed the pods
	ready := map[string]bool{}
	count := func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if p.DeletionTimestamp == nil && clustertest.PodRunning(p) {
			ready[p.Name] = true
		} else {
			delete(ready, p.Name)
		}
		if n := int32(len(ready)); tracking.Load() && n < minReady.Load() {
			minReady.Store(n)
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(tc.Client, 0, informers.WithNamespace(ns))
	if _, err := factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: count, UpdateFunc: func(_, o any) { count(o) }, DeleteFunc: func(o any) {
			if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			if p, ok := o.(*corev1.Pod); ok {
				p = p.DeepCopy()
				p.DeletionTimestamp = &metav1.Time{}
				count(p)
			}
		}}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	// The informer's first list may be served from the watch cache a little behind what
	// waitReady saw: start counting once it shows the 3 ready pods.
	testutil.EventuallyWithin(t, clustertest.Timeout, "the pod watch shows 3 ready pods", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(ready) == 3, nil
	})
	tracking.Store(true)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		d, err := tc.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
		_, err = tc.Client.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	waitReady(3)
	testutil.EventuallyWithin(t, clustertest.Timeout, "old pods gone", func() (bool, error) {
		pods, err := tc.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.Spec.Containers[0].Image != "nginx:1.28" {
				return false, nil
			}
		}
		return len(pods.Items) == 3, nil
	})
	close(stop)
	factory.Shutdown()
	if m := minReady.Load(); m < 3 {
		t.Errorf("during the rollout only %d pods were ready; maxUnavailable 25%% of 3 rounds down to 0", m)
	}
	rss, _ = tc.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if len(rss.Items) != 2 {
		t.Errorf("ReplicaSets after one rollout: %d, want the old (scaled to 0) and the new", len(rss.Items))
	}

	// Deleting the Deployment (background propagation) garbage-collects the rest.
	if err := tc.Client.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "ReplicaSets and pods collected", func() (bool, error) {
		rss, err := tc.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pods, err := tc.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(rss.Items) == 0 && len(pods.Items) == 0, err
	})
	if _, err := tc.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("deployment after delete: %v", err)
	}
}

// TestClaimWithoutClassGetsTheDefault: most charts leave storageClassName out. Such a
// claim gets the default class gp2 — from the API server's admission when it is created,
// from the PV controller when it was created before a default class existed — and is
// provisioned and Bound once its pod is scheduled; a claim that says "" asks for no class
// and keeps none.
func TestClaimWithoutClassGetsTheDefault(t *testing.T) {
	tc := startCluster(t, nil)
	ctx := context.Background()
	ns := tc.Namespace("noclass")
	claims := tc.Client.CoreV1().PersistentVolumeClaims(ns)
	classOf := func(c *corev1.PersistentVolumeClaim) string {
		if c.Spec.StorageClassName == nil {
			return "<nil>"
		}
		return *c.Spec.StorageClassName
	}
	seedClaim := func(name string, class *string) *corev1.PersistentVolumeClaim {
		pvc := clustertest.SeedObject[*corev1.PersistentVolumeClaim](t, "10-pvc.yaml")
		pvc.Name, pvc.Namespace, pvc.Spec.StorageClassName = name, ns, class
		return pvc
	}
	seedPod := func(name, claim string) {
		p := clustertest.SeedObject[*corev1.Pod](t, "20-pod.yaml")
		p.Name, p.Namespace = name, ns
		p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName = claim
		if _, err := tc.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	markDefault := func(value string) {
		t.Helper()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, cluster.AnnDefaultStorageClass, value)
		if _, err := tc.Client.StorageV1().StorageClasses().Patch(ctx, cluster.DefaultStorageClass, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		// Admission reads classes from an informer; a dry run shows when it has the change.
		want := map[string]string{"true": cluster.DefaultStorageClass, "false": "<nil>"}[value]
		testutil.EventuallyWithin(t, clustertest.Timeout, "admission to see gp2's default annotation "+value, func() (bool, error) {
			got, err := claims.Create(ctx, seedClaim("probe", nil), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err == nil && classOf(got) == want, err
		})
	}

	// Created while gp2 is the default: admission names it.
	created, err := claims.Create(ctx, seedClaim("at-create", nil), metav1.CreateOptions{})
	if err != nil || classOf(created) != cluster.DefaultStorageClass {
		t.Fatalf("claim created without a class: class %s, %v; want %s", classOf(created), err, cluster.DefaultStorageClass)
	}
	// Created while there is no default: the PV controller names it once there is one.
	markDefault("false")
	late, err := claims.Create(ctx, seedClaim("late", nil), metav1.CreateOptions{})
	if err != nil || classOf(late) != "<nil>" {
		t.Fatalf("claim created with no default class: class %s, %v; want none", classOf(late), err)
	}
	markDefault("true")
	if _, err := claims.Create(ctx, seedClaim("no-class", ptr.To("")), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	seedPod("at-create", "at-create")
	seedPod("late", "late")
	for _, name := range []string{"at-create", "late"} {
		tc.WaitPodRunning(ns, name)
		got, err := claims.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if classOf(got) != cluster.DefaultStorageClass || got.Status.Phase != corev1.ClaimBound {
			t.Errorf("claim %s: class %s, phase %s; want %s, Bound", name, classOf(got), got.Status.Phase, cluster.DefaultStorageClass)
		}
	}
	testutil.EventuallyWithin(t, clustertest.Timeout, "the claim that asks for no class reported unbindable", func() (bool, error) {
		return tc.HasEvent(ns, "no-class", "FailedBinding"), nil
	})
	if got, err := claims.Get(ctx, "no-class", metav1.GetOptions{}); err != nil || classOf(got) != "" {
		t.Errorf("claim with class \"\": class %s, %v; want it kept", classOf(got), err)
	}
}

// TestResizeInUse: a claim grown while its pod runs, as on EKS: the resizer grows the
// cloud volume and the PV and asks for the node's part (FileSystemResizePending); the
// node's kubelet grows the filesystem and records the new capacity; the pod and the
// claim are told (FileSystemResizeSuccessful).
func TestResizeInUse(t *testing.T) {
	tc := startCluster(t, nil)
	pod, pvc := tc.growInUse("resize")
	tc.waitResized(pod, pvc)
}

// growInUse runs the claim and pod of examples/seed in namespace ns on a class that
// allows expansion and asks for 3Gi while the pod runs; it returns the pod and the claim.
func (tc *testCluster) growInUse(ns string) (*corev1.Pod, *corev1.PersistentVolumeClaim) {
	t := tc.T
	ctx := context.Background()
	tc.Namespace(ns)
	wffc := storagev1.VolumeBindingWaitForFirstConsumer
	if _, err := tc.Client.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: "gp3-expandable"}, Provisioner: cluster.DriverName,
		VolumeBindingMode: &wffc, AllowVolumeExpansion: ptr.To(true),
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pvc, _ := tc.seedPair(ns, "data", "app", "gp3-expandable")
	pod := tc.WaitPodRunning(ns, "app")
	patch := []byte(`{"spec":{"resources":{"requests":{"storage":"3Gi"}}}}`)
	if _, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, pvc.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	return pod, pvc
}

// waitResized waits until the claim of pod has grown to 3Gi, the pod and the claim have
// been told, and the cloud volume is 3 GiB.
func (tc *testCluster) waitResized(pod *corev1.Pod, pvc *corev1.PersistentVolumeClaim) {
	t, ctx, ns := tc.T, context.Background(), pvc.Namespace
	testutil.EventuallyWithin(t, clustertest.Timeout, "the claim's capacity at 3Gi with no resize pending", func() (bool, error) {
		got, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, pvc.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		size := got.Status.Capacity[corev1.ResourceStorage]
		_, pending := got.Status.AllocatedResourceStatuses[corev1.ResourceStorage]
		return size.Cmp(resource.MustParse("3Gi")) == 0 && len(got.Status.Conditions) == 0 && !pending,
			fmt.Errorf("capacity %s, conditions %v, resize statuses %v", size.String(), got.Status.Conditions, got.Status.AllocatedResourceStatuses)
	})
	testutil.EventuallyWithin(t, clustertest.Timeout, "FileSystemResizeSuccessful on the pod and on the claim", func() (bool, error) {
		return tc.HasEvent(ns, pod.Name, "FileSystemResizeSuccessful") && tc.HasEvent(ns, pvc.Name, "FileSystemResizeSuccessful"), nil
	})
	vols := tc.CloudVolumes("pvc-" + string(pvc.UID))
	if len(vols) != 1 || aws.ToInt32(vols[0].Size) != 3 {
		t.Errorf("cloud volumes of the claim: %d, want one of 3 GiB", len(vols))
	}
}

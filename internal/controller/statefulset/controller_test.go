package statefulset

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/util/podutil"
)

func TestOrderedStartWithClaims(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	c := s.Client
	ns := "sts"
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// web-0 is held Pending until released.
	var release atomic.Bool
	controllertest.RunKubelet(t, c, ns, &controllertest.Kubelet{Hold: func(p *corev1.Pod) bool { return p.Name == "web-0" && !release.Load() }})
	factory := informers.NewSharedInformerFactory(c, 0)
	ctrl, err := New(Config{}, c, factory)
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	t.Cleanup(func() { cancel(); factory.Shutdown() })
	testutil.Start(t, "the statefulset controller", 0, ctrl.Run, testutil.NoWait)

	l := map[string]string{"app": "nginx"}
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](3), ServiceName: "nginx", Selector: &metav1.LabelSelector{MatchLabels: l},
		// (No volumeMounts of "www" in the template: kubelab's API server still refuses
		// mounts of claim-template volumes, which upstream accepts.)
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: l}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "nginx", Image: "nginx:1.27"}}}},
		VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "www"}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To("gp2"),
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}},
	}}
	firstRV := map[string]int64{}
	rvWatch, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rvDone := make(chan struct{})
	var rvMu sync.Mutex
	go func() {
		defer close(rvDone)
		for ev := range rvWatch.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Added {
				rv, _ := strconv.ParseInt(p.ResourceVersion, 10, 64)
				rvMu.Lock()
				if firstRV[p.Name] == 0 {
					firstRV[p.Name] = rv
				}
				rvMu.Unlock()
			}
		}
	}()
	created, err := c.AppsV1().StatefulSets(ns).Create(ctx, set, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "web-0", func() (bool, error) {
		_, err := c.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{})
		return err == nil, err
	})
	// While web-0 is not Ready, web-1 does not appear.
	testutil.Consistently(t, time.Second, "no web-1 while web-0 is not Ready", func() error {
		if _, err := c.CoreV1().Pods(ns).Get(ctx, "web-1", metav1.GetOptions{}); err == nil {
			return errors.New("web-1 created before web-0 was Ready")
		}
		return nil
	})
	release.Store(true)
	testutil.Eventually(t, "3 ready replicas", func() (bool, error) {
		got, err := c.AppsV1().StatefulSets(ns).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && got.Status.ReadyReplicas == 3 && got.Status.ObservedGeneration == got.Generation &&
			got.Status.UpdatedReplicas == 3 && got.Status.CurrentRevision == got.Status.UpdateRevision, err
	})
	rvWatch.Stop()
	<-rvDone
	// Each pod's claim existed before the pod; started in order.
	var prevReady time.Time
	for i := 0; i < 3; i++ {
		name := fmt.Sprintf("web-%d", i)
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "www-"+name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("claim of %s: %v", name, err)
		}
		// resourceVersions are etcd revisions: the claim's creation came first.
		pvcRV, _ := strconv.ParseInt(pvc.ResourceVersion, 10, 64)
		if firstRV[name] == 0 || pvcRV > firstRV[name] {
			t.Errorf("claim %s (rv %d) not created before pod %s (rv %d)", pvc.Name, pvcRV, name, firstRV[name])
		}
		if p.Spec.Hostname != name || p.Spec.Subdomain != "nginx" || p.Labels[PodNameLabel] != name {
			t.Errorf("%s identity: hostname %q subdomain %q labels %v", name, p.Spec.Hostname, p.Spec.Subdomain, p.Labels)
		}
		// Besides the service account token volume the API server adds, the claim's.
		var v []corev1.Volume
		for _, vol := range p.Spec.Volumes {
			if !strings.HasPrefix(vol.Name, "kube-api-access-") {
				v = append(v, vol)
			}
		}
		if len(v) != 1 || v[0].PersistentVolumeClaim == nil || v[0].PersistentVolumeClaim.ClaimName != "www-"+name {
			t.Errorf("%s volumes %+v", name, v)
		}
		if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != created.UID {
			t.Errorf("%s owner %+v", name, p.OwnerReferences)
		}
		if len(pvc.OwnerReferences) != 0 {
			t.Errorf("retained claim %s has owners", pvc.Name)
		}
		var ready time.Time
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady {
				ready = cond.LastTransitionTime.Time
			}
		}
		if p.CreationTimestamp.Time.Before(prevReady.Truncate(time.Second)) {
			t.Errorf("%s created (%v) before its predecessor was ready (%v)", name, p.CreationTimestamp, prevReady)
		}
		prevReady = ready
	}

	// Scale down to 1: web-2 goes before web-1; claims stay.
	var order []string
	w, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{LabelSelector: "app=nginx"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := c.AppsV1().StatefulSets(ns).Patch(ctx, "web", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(30 * time.Second)
	for len(order) < 2 {
		select {
		case ev := <-w.ResultChan():
			if p, ok := ev.Object.(*corev1.Pod); ok && p.DeletionTimestamp != nil && (len(order) == 0 || order[len(order)-1] != p.Name) {
				order = append(order, p.Name)
			}
		case <-deadline:
			t.Fatalf("scale-down incomplete: %v", order)
		}
	}
	if order[0] != "web-2" || order[1] != "web-1" {
		t.Errorf("scale-down order %v, want web-2 then web-1", order)
	}
	testutil.Eventually(t, "1 replica", func() (bool, error) {
		list, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 1, err
	})
	claims, _ := c.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if len(claims.Items) != 3 {
		t.Errorf("%d claims after scale-down, want 3 (retained)", len(claims.Items))
	}

	// A template change rolls the remaining pod.
	if _, err := c.AppsV1().StatefulSets(ns).Patch(ctx, "web", types.StrategicMergePatchType,
		[]byte(`{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.28"}]}}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "web-0 on the new template", func() (bool, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, "web-0", metav1.GetOptions{})
		return err == nil && p.Spec.Containers[0].Image == "nginx:1.28" && podutil.IsRunningAndReady(p), err
	})
}

package job

import (
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

var podsResource = corev1.SchemeGroupVersion.WithResource("pods")

// newFakeClient is client-go's fake clientset with what the Job controller relies on
// from the API server: pods get a name from generateName, a UID and a creation time;
// every write moves metadata.resourceVersion; a pod with finalizers is only marked for
// deletion (deletionTimestamp) and goes once its last finalizer is removed.
func newFakeClient(clk clock.Clock, objs ...runtime.Object) *fake.Clientset {
	client := fake.NewClientset(objs...)
	tracker := client.Tracker()
	var rv, seq atomic.Int64
	rv.Store(1000)
	bump := func(obj runtime.Object) {
		if m, ok := obj.(metav1.Object); ok {
			m.SetResourceVersion(strconv.FormatInt(rv.Add(1), 10))
		}
	}
	client.PrependReactor("create", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		obj := a.(clienttesting.CreateAction).GetObject()
		if pod, ok := obj.(*corev1.Pod); ok {
			pod = pod.DeepCopy()
			n := seq.Add(1)
			if pod.Name == "" {
				pod.Name = fmt.Sprintf("%s%05d", pod.GenerateName, n)
			}
			pod.UID = types.UID(fmt.Sprintf("uid-%s", pod.Name))
			pod.CreationTimestamp = metav1.NewTime(clk.Now())
			bump(pod)
			if err := tracker.Create(podsResource, pod, pod.Namespace); err != nil {
				return true, nil, err
			}
			return true, pod, nil
		}
		bump(obj)
		return false, nil, nil
	})
	client.PrependReactor("update", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		ua := a.(clienttesting.UpdateAction)
		if ua.GetSubresource() != "status" {
			bump(ua.GetObject())
			return false, nil, nil
		}
		// A status write changes the status only, as the API server's status strategy.
		m := ua.GetObject().(metav1.Object)
		stored, err := tracker.Get(ua.GetResource(), ua.GetNamespace(), m.GetName())
		if err != nil {
			return true, nil, err
		}
		switch in := ua.GetObject().(type) {
		case *batchv1.Job:
			stored.(*batchv1.Job).Status = *in.Status.DeepCopy()
		case *corev1.Pod:
			stored.(*corev1.Pod).Status = *in.Status.DeepCopy()
		default:
			return false, nil, nil
		}
		bump(stored)
		if err := tracker.Update(ua.GetResource(), stored, ua.GetNamespace()); err != nil {
			return true, nil, err
		}
		return true, stored, nil
	})
	client.PrependReactor("patch", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		pa := a.(clienttesting.PatchAction)
		if pa.GetPatchType() != types.StrategicMergePatchType {
			return false, nil, nil
		}
		obj, err := tracker.Get(podsResource, pa.GetNamespace(), pa.GetName())
		if err != nil {
			return true, nil, err
		}
		old, _ := json.Marshal(obj)
		merged, err := strategicpatch.StrategicMergePatch(old, pa.GetPatch(), &corev1.Pod{})
		if err != nil {
			return true, nil, err
		}
		pod := &corev1.Pod{}
		if err := json.Unmarshal(merged, pod); err != nil {
			return true, nil, err
		}
		bump(pod)
		if pod.DeletionTimestamp != nil && len(pod.Finalizers) == 0 {
			return true, pod, tracker.Delete(podsResource, pod.Namespace, pod.Name)
		}
		return true, pod, tracker.Update(podsResource, pod, pod.Namespace)
	})
	client.PrependReactor("delete", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		da := a.(clienttesting.DeleteAction)
		obj, err := tracker.Get(podsResource, da.GetNamespace(), da.GetName())
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod)
		if len(pod.Finalizers) == 0 {
			return false, nil, nil
		}
		if pod.DeletionTimestamp == nil {
			pod.DeletionTimestamp = &metav1.Time{Time: clk.Now()}
			pod.DeletionGracePeriodSeconds = new(int64)
			bump(pod)
			if err := tracker.Update(podsResource, pod, pod.Namespace); err != nil {
				return true, nil, err
			}
		}
		return true, nil, nil
	})
	return client
}

package flowtest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	csiclient "github.com/kubelab/kubelab/internal/csi/client"
	"github.com/kubelab/kubelab/internal/csi/sidecar/resizer"
	"github.com/kubelab/kubelab/internal/testutil"
)

func (e *env) startResizer() *running {
	return e.start(func(client kubernetes.Interface, f informers.SharedInformerFactory) []runner {
		r, err := resizer.New(resizer.Config{DriverName: driverName, Tuning: csiclient.Tuning{Logger: e.log}}, client, f, e.dial())
		if err != nil {
			e.t.Fatal(err)
		}
		return []runner{r}
	})
}

func (e *env) request(ns, name, size string) {
	patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"resources": map[string]any{"requests": map[string]string{"storage": size}}}})
	if _, err := e.client.CoreV1().PersistentVolumeClaims(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// TestResize grows a bound claim from 1Gi to 3Gi: the cloud volume grows, the PV
// takes the size, and the claim waits for the node to grow the filesystem
// (FileSystemResizePending); an impossible size is refused as infeasible.
func TestResize(t *testing.T) {
	e := newEnv(t)
	ctrl := e.startControllers()
	defer ctrl.stop(t)
	side := e.startSidecars()
	defer side.stop(t)
	rs := e.startResizer()
	defer rs.stop(t)
	ctx := context.Background()
	ns := e.namespace("resize")
	e.storageClass("gp3", storagev1.VolumeBindingImmediate, corev1.PersistentVolumeReclaimDelete, nil)
	pvc := e.claim(ns, "data", "gp3", "1Gi")
	pvName := "pvc-" + string(pvc.UID)
	testutil.EventuallyWithin(t, flowTimeout, "claim Bound", func() (bool, error) { return e.getClaim(ns, "data").Status.Phase == corev1.ClaimBound, nil })

	e.request(ns, "data", "3Gi")
	var c *corev1.PersistentVolumeClaim
	testutil.EventuallyWithin(t, flowTimeout, "FileSystemResizePending", func() (bool, error) {
		c = e.getClaim(ns, "data")
		for _, cond := range c.Status.Conditions {
			if cond.Type == corev1.PersistentVolumeClaimFileSystemResizePending && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
	if st := c.Status.AllocatedResourceStatuses[corev1.ResourceStorage]; st != corev1.PersistentVolumeClaimNodeResizePending {
		t.Errorf("allocatedResourceStatuses = %v, want NodeResizePending", c.Status.AllocatedResourceStatuses)
	}
	if q := c.Status.AllocatedResources[corev1.ResourceStorage]; q.Cmp(resource.MustParse("3Gi")) != 0 {
		t.Errorf("allocatedResources = %s, want 3Gi", q.String())
	}
	if q := c.Status.Capacity[corev1.ResourceStorage]; q.Cmp(resource.MustParse("1Gi")) != 0 {
		t.Errorf("claim capacity %s, want 1Gi until the node grows the filesystem", q.String())
	}
	pv, err := e.client.CoreV1().PersistentVolumes().Get(ctx, pvName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := pv.Spec.Capacity[corev1.ResourceStorage]; q.Cmp(resource.MustParse("3Gi")) != 0 {
		t.Errorf("PV capacity %s, want 3Gi", q.String())
	}
	if v := e.cloudVolumes(pvName); len(v) != 1 || aws.ToInt32(v[0].Size) != 3 {
		t.Fatalf("cloud volume size %d, want 3", aws.ToInt32(v[0].Size))
	}
	for _, r := range []string{resizer.ReasonResizing, resizer.ReasonFileSystemResizeRequired} {
		e.waitEvent(ns, "data", r)
	}

	// 100 TiB is beyond any EBS volume: refused, and not retried.
	e.request(ns, "data", "100Ti")
	testutil.EventuallyWithin(t, flowTimeout, "ControllerResizeInfeasible", func() (bool, error) {
		c = e.getClaim(ns, "data")
		return c.Status.AllocatedResourceStatuses[corev1.ResourceStorage] == corev1.PersistentVolumeClaimControllerResizeInfeasible, nil
	})
	e.waitEvent(ns, "data", resizer.ReasonVolumeResizeFailed)
	if v := e.cloudVolumes(pvName); aws.ToInt32(v[0].Size) != 3 {
		t.Errorf("cloud volume size %d after a refused resize, want 3", aws.ToInt32(v[0].Size))
	}
}

package apiserver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

// TestDynamicResourceAllocationAPI: resource.k8s.io/v1 is served as kube-apiserver
// serves it: claims are defaulted, their spec is immutable and their status written
// through /status only once allocated; slices are listed by node, driver and pool, and
// keep their driver, pool and node; a taint rule's timeAdded follows its effect, and its
// status holds conditions; invalid objects are refused with upstream's fields.
func TestDynamicResourceAllocationAPI(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	api := s.Client.ResourceV1()
	ns := "default"
	invalid := func(t *testing.T, err error, fields ...string) {
		t.Helper()
		if !apierrors.IsInvalid(err) {
			t.Fatalf("got %v, want 422 Invalid on %v", err, fields)
		}
		for _, f := range fields {
			if !strings.Contains(err.Error(), f) {
				t.Errorf("error %q does not name %s", err, f)
			}
		}
	}

	t.Run("DeviceClass", func(t *testing.T) {
		c, err := api.DeviceClasses().Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "dra-test-class"},
			Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "false"}}}}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = api.DeviceClasses().Delete(context.Background(), c.Name, metav1.DeleteOptions{}) })
		c.Spec.Selectors[0].CEL.Expression = "1 == 0"
		if c, err = api.DeviceClasses().Update(ctx, c, metav1.UpdateOptions{}); err != nil || c.Generation != 2 {
			t.Fatalf("update: generation %d, %v; want 2", c.Generation, err)
		}
		_, err = api.DeviceClasses().Create(ctx, &resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "dra-test-bad-class"},
			Spec: resourcev1.DeviceClassSpec{ExtendedResourceName: ptr.To("gpu"),
				Selectors: []resourcev1.DeviceSelector{{}, {CEL: &resourcev1.CELDeviceSelector{Expression: "device.driver =="}}}}}, metav1.CreateOptions{})
		invalid(t, err, "spec.selectors[0].cel", "spec.selectors[1].cel.expression", "spec.extendedResourceName")
	})

	t.Run("ResourceClaim", func(t *testing.T) {
		claims := api.ResourceClaims(ns)
		claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "dra-test-claim"},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "req-0", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "dra.example.com",
					Tolerations: []resourcev1.DeviceToleration{{Key: "k", Value: "v"}}}}}}},
			Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{}}}
		c, err := claims.Create(ctx, claim, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = claims.Delete(context.Background(), c.Name, metav1.DeleteOptions{}) })
		e := c.Spec.Devices.Requests[0].Exactly
		if e.AllocationMode != resourcev1.DeviceAllocationModeExactCount || e.Count != 1 || e.Tolerations[0].Operator != resourcev1.DeviceTolerationOpEqual {
			t.Errorf("request defaulted to mode %q count %d toleration operator %q; want ExactCount, 1, Equal", e.AllocationMode, e.Count, e.Tolerations[0].Operator)
		}
		if c.Status.Allocation != nil {
			t.Errorf("status kept on create: %+v", c.Status)
		}
		changed := c.DeepCopy()
		changed.Spec.Devices.Requests[0].Exactly.DeviceClassName = "other.example.com"
		_, err = claims.Update(ctx, changed, metav1.UpdateOptions{})
		invalid(t, err, "spec", "field is immutable")
		c.Labels = map[string]string{"test.dra.example.com": "test"}
		if c, err = claims.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("a label on a claim: %v", err)
		}

		reserved := c.DeepCopy()
		reserved.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "u1"}}
		_, err = claims.UpdateStatus(ctx, reserved, metav1.UpdateOptions{})
		invalid(t, err, "status.reservedFor")
		// Server-side apply of the status, as kube-apiserver's conformance CRUD test does it.
		c, err = claims.Patch(ctx, c.Name, types.ApplyPatchType,
			[]byte(`{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","status":{"allocation":{}}}`),
			metav1.PatchOptions{FieldManager: "dra-test", Force: ptr.To(true)}, "status")
		if err != nil || c.Status.Allocation == nil {
			t.Fatalf("allocation applied through /status: %+v, %v", c, err)
		}
		c.Status.Allocation.Devices.Results = []resourcev1.DeviceRequestAllocationResult{{Request: "req-0", Driver: "dra.example.com", Pool: "p", Device: "d"}}
		_, err = claims.UpdateStatus(ctx, c, metav1.UpdateOptions{})
		invalid(t, err, "status.allocation", "field is immutable")

		bad := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "dra-test-bad-claim"},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
				Requests:    []resourcev1.DeviceRequest{{Name: "req-0"}, {Name: "Req_1", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "c", AllocationMode: resourcev1.DeviceAllocationModeAll, Count: 2}}},
				Constraints: []resourcev1.DeviceConstraint{{Requests: []string{"nope"}, MatchAttribute: ptr.To[resourcev1.FullyQualifiedName]("model")}},
			}}}
		_, err = claims.Create(ctx, bad, metav1.CreateOptions{})
		invalid(t, err, "spec.devices.requests[0]: Required", "spec.devices.requests[1].name", "spec.devices.requests[1].exactly.count",
			"spec.devices.constraints[0].requests[0]", "spec.devices.constraints[0].matchAttribute")
	})

	t.Run("ResourceClaimTemplate", func(t *testing.T) {
		templates := api.ResourceClaimTemplates(ns)
		tmpl, err := templates.Create(ctx, &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "dra-test-template"},
			Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
				Name: "req-0", FirstAvailable: []resourcev1.DeviceSubRequest{{Name: "a", DeviceClassName: "dra.example.com"}}}}}}}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = templates.Delete(context.Background(), tmpl.Name, metav1.DeleteOptions{}) })
		if sub := tmpl.Spec.Spec.Devices.Requests[0].FirstAvailable[0]; sub.AllocationMode != resourcev1.DeviceAllocationModeExactCount || sub.Count != 1 {
			t.Errorf("subrequest defaulted to %q %d", sub.AllocationMode, sub.Count)
		}
		tmpl.Spec.ObjectMeta.Labels = map[string]string{"a": "b"}
		_, err = templates.Update(ctx, tmpl, metav1.UpdateOptions{})
		invalid(t, err, "spec", "field is immutable")
		_, err = templates.Create(ctx, &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "dra-test-bad-template"},
			Spec: resourcev1.ResourceClaimTemplateSpec{ObjectMeta: metav1.ObjectMeta{Name: "x"}}}, metav1.CreateOptions{})
		invalid(t, err, "spec.metadata.name: Forbidden")
	})

	t.Run("ResourceSlice", func(t *testing.T) {
		slices := api.ResourceSlices()
		for i, node := range []string{"dra-node-a", "dra-node-b"} {
			s, err := slices.Create(ctx, &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "dra-test-slice-" + node},
				Spec: resourcev1.ResourceSliceSpec{Driver: fmt.Sprintf("driver-%d.example.com", i), NodeName: ptr.To(node),
					Pool: resourcev1.ResourcePool{Name: "pool-" + node, Generation: 1, ResourceSliceCount: 1}}}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = slices.Delete(context.Background(), s.Name, metav1.DeleteOptions{}) })
		}
		for _, sel := range []string{"spec.nodeName=dra-node-b", "spec.driver=driver-1.example.com", "spec.pool.name=pool-dra-node-b"} {
			list, err := slices.List(ctx, metav1.ListOptions{FieldSelector: sel})
			if err != nil || len(list.Items) != 1 || list.Items[0].Name != "dra-test-slice-dra-node-b" {
				t.Errorf("slices with %s: %v, %v", sel, list, err)
			}
		}
		s, err := slices.Get(ctx, "dra-test-slice-dra-node-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Spec.Devices = []resourcev1.Device{{Name: "device-0", Taints: []resourcev1.DeviceTaint{{Key: "k", Effect: resourcev1.DeviceTaintEffectNoSchedule}}}}
		if s, err = slices.Update(ctx, s, metav1.UpdateOptions{}); err != nil || s.Generation != 2 || s.Spec.Devices[0].Taints[0].TimeAdded == nil {
			t.Fatalf("devices added: generation %d, %+v, %v", s.Generation, s.Spec.Devices, err)
		}
		s.Spec.Driver, s.Spec.NodeName = "other.example.com", nil
		s.Spec.AllNodes = ptr.To(true)
		_, err = slices.Update(ctx, s, metav1.UpdateOptions{})
		invalid(t, err, "spec.driver", "spec.nodeName")
		_, err = slices.Create(ctx, &resourcev1.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "dra-test-bad-slice"},
			Spec: resourcev1.ResourceSliceSpec{Driver: "d.example.com", Pool: resourcev1.ResourcePool{Name: "p"},
				Devices: []resourcev1.Device{{Name: "dev", Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {}}}, {Name: "dev"}}}},
			metav1.CreateOptions{})
		invalid(t, err, "spec: Required", "spec.pool.resourceSliceCount", "spec.devices[0].attributes[model]", "spec.devices[1]: Duplicate")
	})

	t.Run("DeviceTaintRule", func(t *testing.T) {
		rules := api.DeviceTaintRules()
		added := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
		r, err := rules.Create(ctx, &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "dra-test-taint"},
			Spec: resourcev1.DeviceTaintRuleSpec{Taint: resourcev1.DeviceTaint{Key: "testing", Effect: resourcev1.DeviceTaintEffectNone, TimeAdded: &added}}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rules.Delete(context.Background(), r.Name, metav1.DeleteOptions{}) })
		r.Spec.Taint.Effect = resourcev1.DeviceTaintEffectNoExecute
		if r, err = rules.Update(ctx, r, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if !r.Spec.Taint.TimeAdded.After(added.Time) || r.Generation != 2 {
			t.Errorf("after the effect changed: timeAdded %v (was %v), generation %d", r.Spec.Taint.TimeAdded, added, r.Generation)
		}
		cond := metav1.Condition{Type: "Testing", Status: metav1.ConditionTrue, LastTransitionTime: metav1.Now(), Reason: "E2E_test_running", Message: "m"}
		r.Status.Conditions = []metav1.Condition{cond}
		if r, err = rules.UpdateStatus(ctx, r, metav1.UpdateOptions{}); err != nil || len(r.Status.Conditions) != 1 {
			t.Fatalf("status: %+v, %v", r.Status, err)
		}
		r.Status.Conditions[0].Reason = "not a reason"
		_, err = rules.UpdateStatus(ctx, r, metav1.UpdateOptions{})
		invalid(t, err, "status.conditions[0].reason")
		_, err = rules.Create(ctx, &resourcev1.DeviceTaintRule{ObjectMeta: metav1.ObjectMeta{Name: "dra-test-bad-taint"},
			Spec: resourcev1.DeviceTaintRuleSpec{Taint: resourcev1.DeviceTaint{Key: "bad key", Effect: "Evict"},
				DeviceSelector: &resourcev1.DeviceTaintSelector{Driver: ptr.To("Bad_Driver")}}}, metav1.CreateOptions{})
		invalid(t, err, "spec.taint.key", "spec.taint.effect", "spec.deviceSelector.driver")
	})
}

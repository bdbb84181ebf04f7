package apiserver_test

import (
	"context"
	"testing"
	"time"

	storagemigrationv1 "k8s.io/api/storagemigration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

// TestStorageVersionMigrations: StorageVersionMigrations are served with a status
// subresource: create ignores status, the spec never changes, every kind of patch works
// on the object and on /status, and status writes follow kube-apiserver's rules.
func TestStorageVersionMigrations(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	svms := s.Client.StoragemigrationV1().StorageVersionMigrations()
	cond := func(typ string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "TestReason", Message: "TestMessage",
			LastTransitionTime: metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))}
	}

	created, err := svms.Create(ctx, &storagemigrationv1.StorageVersionMigration{
		ObjectMeta: metav1.ObjectMeta{Name: "foo-migration"},
		Spec:       storagemigrationv1.StorageVersionMigrationSpec{Resource: metav1.GroupResource{Resource: "foo"}},
		Status:     storagemigrationv1.StorageVersionMigrationStatus{Conditions: []metav1.Condition{cond("Succeeded")}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(created.Status.Conditions) != 0 {
		t.Errorf("status on create kept: %v", created.Status.Conditions)
	}
	for name, gr := range map[string]metav1.GroupResource{
		"no-resource": {Group: "apps"}, "resource-uppercase": {Resource: "Foo"}, "group-bad": {Group: "a_b", Resource: "foo"},
	} {
		_, err := svms.Create(ctx, &storagemigrationv1.StorageVersionMigration{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: storagemigrationv1.StorageVersionMigrationSpec{Resource: gr}}, metav1.CreateOptions{})
		if !apierrors.IsInvalid(err) {
			t.Errorf("StorageVersionMigration of %+v: %v, want Invalid", gr, err)
		}
	}
	other := created.DeepCopy()
	other.Spec.Resource.Resource = "bar"
	if _, err := svms.Update(ctx, other, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("changing the spec: %v, want Invalid (immutable)", err)
	}

	labelled := created.DeepCopy()
	labelled.Labels = map[string]string{"test.storagemigration.example.com": "test"}
	labelled.Status.Conditions = []metav1.Condition{cond("Running")}
	updated, err := svms.Update(ctx, labelled, metav1.UpdateOptions{})
	if err != nil || updated.Labels["test.storagemigration.example.com"] != "test" || len(updated.Status.Conditions) != 0 {
		t.Fatalf("update: %v %v", updated, err)
	}
	updated.Status.Conditions = []metav1.Condition{cond("TestCondition")}
	withStatus, err := svms.UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil || !apimeta.IsStatusConditionTrue(withStatus.Status.Conditions, "TestCondition") {
		t.Fatalf("update status: %v %v", withStatus, err)
	}

	const label = `{"metadata": {"labels": {"test.storagemigration.example.com": "patched"}}}`
	const status = `{"status": {"conditions": [{"type": "Patched", "status": "True", "reason": "TestReason", "message": "TestMessage", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}`
	for _, p := range []struct {
		typ         types.PatchType
		spec, state string
	}{
		{types.StrategicMergePatchType, label, status},
		{types.MergePatchType, label, status},
		{types.JSONPatchType, `[{"op": "add", "path": "/metadata/labels/test.storagemigration.example.com", "value": "patched"}]`,
			`[{"op": "add", "path": "/status/conditions", "value": [{"type": "Patched", "status": "True", "reason": "TestReason", "message": "TestMessage", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}]`},
		{types.ApplyPatchType, `{"apiVersion": "storagemigration.k8s.io/v1", "kind": "StorageVersionMigration", "metadata": {"name": "foo-migration", "labels": {"test.storagemigration.example.com": "patched"}}}`,
			`{"apiVersion": "storagemigration.k8s.io/v1", "kind": "StorageVersionMigration", "metadata": {"name": "foo-migration"}, "status": {"conditions": [{"type": "Patched", "status": "True", "reason": "TestReason", "message": "TestMessage", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}`},
	} {
		opts := metav1.PatchOptions{}
		if p.typ == types.ApplyPatchType {
			opts = metav1.PatchOptions{FieldManager: "test", Force: ptr.To(true)}
		}
		got, err := svms.Patch(ctx, "foo-migration", p.typ, []byte(p.spec), opts)
		if err != nil || got.Labels["test.storagemigration.example.com"] != "patched" {
			t.Errorf("%s patch of the object: %v", p.typ, err)
		}
		got, err = svms.Patch(ctx, "foo-migration", p.typ, []byte(p.state), opts, "status")
		if err != nil || !apimeta.IsStatusConditionTrue(got.Status.Conditions, "Patched") {
			t.Errorf("%s patch of /status: %v %v", p.typ, got, err)
		}
		if _, err := svms.Patch(ctx, "foo-migration", types.MergePatchType, []byte(`{"metadata":{"labels":{"test.storagemigration.example.com":"reset"}},"status":null}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dyn := dynamic.NewForConfigOrDie(s.Config)
	if _, err := dyn.Resource(storagemigrationv1.SchemeGroupVersion.WithResource("storageversionmigrations")).Get(ctx, "foo-migration", metav1.GetOptions{}, "status"); err != nil {
		t.Errorf("GET /status: %v", err)
	}

	// Status rules: a resource version, set once; Succeeded and Failed exclusive and final.
	writeStatus := func(st storagemigrationv1.StorageVersionMigrationStatus) error {
		cur, err := svms.Get(ctx, "foo-migration", metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Status = st
		_, err = svms.UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		return err
	}
	for what, st := range map[string]storagemigrationv1.StorageVersionMigrationStatus{
		"a resource version that is none": {ResourceVersion: "abc"},
		"succeeded and failed":            {Conditions: []metav1.Condition{cond("Succeeded"), cond("Failed")}},
		"a condition without reason":      {Conditions: []metav1.Condition{{Type: "Running", Status: metav1.ConditionTrue, LastTransitionTime: metav1.Now()}}},
	} {
		if err := writeStatus(st); !apierrors.IsInvalid(err) {
			t.Errorf("status with %s: %v, want Invalid", what, err)
		}
	}
	if err := writeStatus(storagemigrationv1.StorageVersionMigrationStatus{ResourceVersion: "42", Conditions: []metav1.Condition{cond("Succeeded")}}); err != nil {
		t.Fatal(err)
	}
	for what, st := range map[string]storagemigrationv1.StorageVersionMigrationStatus{
		"another resource version": {ResourceVersion: "43", Conditions: []metav1.Condition{cond("Succeeded")}},
		"Succeeded taken back":     {ResourceVersion: "42", Conditions: []metav1.Condition{cond("Running")}},
	} {
		if err := writeStatus(st); !apierrors.IsInvalid(err) {
			t.Errorf("status with %s: %v, want Invalid", what, err)
		}
	}
	if err := svms.Delete(ctx, "foo-migration", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

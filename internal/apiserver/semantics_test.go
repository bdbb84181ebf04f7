package apiserver_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/storageclass"
	"github.com/kubelab/kubelab/internal/testutil"
)

func claim(name, size string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	}
}

func pod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	}
}

// causeFields are the fields a 422 names.
func causeFields(err error) []string {
	var out []string
	if s, ok := err.(apierrors.APIStatus); ok && s.Status().Details != nil {
		for _, c := range s.Status().Details.Causes {
			out = append(out, c.Field)
		}
	}
	return out
}

func TestConflictsAndInvalidObjects(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	pvcs := s.Client.CoreV1().PersistentVolumeClaims("default")

	created, err := pvcs.Create(ctx, claim("data", "1Gi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.CreationTimestamp.IsZero() || created.ResourceVersion == "" {
		t.Fatalf("create did not set uid, creationTimestamp and resourceVersion: %+v", created.ObjectMeta)
	}
	if created.Status.Phase != corev1.ClaimPending {
		t.Errorf("new claim phase = %q, want Pending", created.Status.Phase)
	}

	_, err = pvcs.Create(ctx, claim("data", "1Gi"), metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) || apierrors.ReasonForError(err) != metav1.StatusReasonAlreadyExists {
		t.Errorf("duplicate create: got %v, want 409 AlreadyExists", err)
	}

	// An update carrying a stale resourceVersion is refused.
	fresh := created.DeepCopy()
	fresh.Labels = map[string]string{"a": "1"}
	if _, err := pvcs.Update(ctx, fresh, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale := created.DeepCopy()
	stale.Labels = map[string]string{"a": "2"}
	_, err = pvcs.Update(ctx, stale, metav1.UpdateOptions{})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "the object has been modified") {
		t.Errorf("stale update: got %v, want 409 Conflict", err)
	}

	cases := []struct {
		name   string
		create func() error
		get    func() error
		field  string
	}{
		{"bad name", func() error { _, err := pvcs.Create(ctx, claim("Bad_Name", "1Gi"), metav1.CreateOptions{}); return err },
			func() error { _, err := pvcs.Get(ctx, "Bad_Name", metav1.GetOptions{}); return err }, "metadata.name"},
		{"negative storage", func() error {
			_, err := pvcs.Create(ctx, claim("negative", "-1Gi"), metav1.CreateOptions{})
			return err
		},
			func() error { _, err := pvcs.Get(ctx, "negative", metav1.GetOptions{}); return err }, "spec.resources[storage]"},
		{"pod without containers", func() error {
			p := pod("empty")
			p.Spec.Containers = nil
			_, err := s.Client.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{})
			return err
		}, func() error {
			_, err := s.Client.CoreV1().Pods("default").Get(ctx, "empty", metav1.GetOptions{})
			return err
		}, "spec.containers"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.create()
			if !apierrors.IsInvalid(err) {
				t.Fatalf("got %v, want 422 Invalid", err)
			}
			if fields := causeFields(err); !contains(fields, tc.field) {
				t.Errorf("causes name %v, want %s", fields, tc.field)
			}
			if err := tc.get(); !apierrors.IsNotFound(err) {
				t.Errorf("invalid object was stored: get returned %v", err)
			}
		})
	}
}

func TestStrictFieldValidationRefusesUnknownFields(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	body := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"strict"},"data":{"a":"b"},"bogus":1}`
	res := s.Client.CoreV1().RESTClient().Post().Namespace("default").Resource("configmaps").
		Param("fieldValidation", "Strict").SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(context.Background())
	err := res.Error()
	if !apierrors.IsBadRequest(err) || !strings.Contains(err.Error(), `unknown field "bogus"`) {
		t.Fatalf("got %v, want 400 naming the unknown field", err)
	}
	if _, err := s.Client.CoreV1().ConfigMaps("default").Get(context.Background(), "strict", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("refused object was stored: %v", err)
	}
	// Warn stores it and says why.
	res = s.Client.CoreV1().RESTClient().Post().Namespace("default").Resource("configmaps").
		Param("fieldValidation", "Warn").SetHeader("Content-Type", "application/json").Body([]byte(body)).Do(context.Background())
	if res.Error() != nil {
		t.Fatalf("Warn: %v", res.Error())
	}
	if w := res.Warnings(); len(w) == 0 || !strings.Contains(w[0].Text, "bogus") {
		t.Errorf("Warn: warnings %v, want one naming bogus", w)
	}
}

func TestObjectLifecycleRules(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	pods := s.Client.CoreV1().Pods("default")

	// generateName, generation, status reset on create.
	p := pod("")
	p.GenerateName = "web-"
	p.Status.Phase = corev1.PodRunning
	got, err := pods.Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.Name, "web-") || len(got.Name) != len("web-")+5 {
		t.Errorf("generated name %q, want web- and 5 characters", got.Name)
	}
	if got.Generation != 1 || got.Status.Phase != corev1.PodPending {
		t.Errorf("generation %d phase %q, want 1 Pending", got.Generation, got.Status.Phase)
	}

	// Creating in a namespace that does not exist is refused.
	_, err = s.Client.CoreV1().Pods("nowhere").Create(ctx, pod("x"), metav1.CreateOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("create in a missing namespace: got %v, want 404", err)
	}

	// pods/binding sets the node once.
	bind := func() error {
		return pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: got.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-a"}}, metav1.CreateOptions{})
	}
	if err := bind(); err != nil {
		t.Fatal(err)
	}
	bound, _ := pods.Get(ctx, got.Name, metav1.GetOptions{})
	if bound.Spec.NodeName != "node-a" || !hasCondition(bound, corev1.PodScheduled) {
		t.Errorf("after binding: node %q conditions %v", bound.Spec.NodeName, bound.Status.Conditions)
	}
	if err := bind(); !apierrors.IsConflict(err) {
		t.Errorf("second binding: got %v, want 409", err)
	}

	// A scheduled pod is deleted gracefully: it stays, marked, until a grace-0 delete.
	if err := pods.Delete(ctx, got.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	terminating, err := pods.Get(ctx, got.Name, metav1.GetOptions{})
	if err != nil || terminating.DeletionTimestamp == nil || terminating.DeletionGracePeriodSeconds == nil || *terminating.DeletionGracePeriodSeconds != 30 {
		t.Fatalf("graceful delete: %v %+v", err, terminating.ObjectMeta)
	}
	zero := int64(0)
	if err := pods.Delete(ctx, got.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, got.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after grace-0 delete: %v", err)
	}

	// Finalizers hold deletion until the last one is removed.
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "held", Finalizers: []string{"example.com/hold"}}}
	cms := s.Client.CoreV1().ConfigMaps("default")
	if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	held, err := cms.Get(ctx, "held", metav1.GetOptions{})
	if err != nil || held.DeletionTimestamp == nil {
		t.Fatalf("finalized object: %v %+v", err, held)
	}
	if _, err := cms.Patch(ctx, "held", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "held", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after the last finalizer went: %v", err)
	}

	// Status: the main resource ignores it, /status ignores the rest.
	pvc, err := s.Client.CoreV1().PersistentVolumeClaims("default").Create(ctx, claim("st", "1Gi"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pvc.Status.Phase = corev1.ClaimBound
	pvc.Labels = map[string]string{"x": "y"}
	upd, err := s.Client.CoreV1().PersistentVolumeClaims("default").Update(ctx, pvc, metav1.UpdateOptions{})
	if err != nil || upd.Status.Phase != corev1.ClaimPending || upd.Labels["x"] != "y" {
		t.Fatalf("update of main resource: %v phase %q labels %v", err, upd.Status.Phase, upd.Labels)
	}
	upd.Status.Phase = corev1.ClaimBound
	upd.Spec.VolumeName = "pv-1"
	st, err := s.Client.CoreV1().PersistentVolumeClaims("default").UpdateStatus(ctx, upd, metav1.UpdateOptions{})
	if err != nil || st.Status.Phase != corev1.ClaimBound || st.Spec.VolumeName != "" {
		t.Fatalf("status update: %v phase %q volumeName %q", err, st.Status.Phase, st.Spec.VolumeName)
	}
}

// TestNamespaceDeletionEmptiesIt: a deleted namespace is Terminating, refuses new
// content, says in its conditions what holds its deletion up, deletes its pods before the
// rest, and goes once empty.
func TestNamespaceDeletionEmptiesIt(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	startNamespaceController(t, s)
	ns := "doomed"
	if _, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"a", "b"} {
		if _, err := s.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(i, err)
		}
	}
	held := pod("p")
	held.Finalizers = []string{"example.com/hold"}
	if _, err := s.Client.CoreV1().Pods(ns).Create(ctx, held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err == nil && got.Status.Phase != corev1.NamespaceTerminating {
		t.Errorf("deleted namespace phase %q, want Terminating", got.Status.Phase)
	}
	if _, err := s.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{}); err == nil {
		t.Errorf("create in a terminating namespace was accepted")
	}
	// While the pod's finalizer holds it, the namespace's status says so and its other
	// content stays (pods go first).
	testutil.EventuallyWithin(t, waitTimeout, "the namespace's deletion conditions", func() bool {
		got, err := s.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return false
		}
		types := map[corev1.NamespaceConditionType]corev1.ConditionStatus{}
		for _, c := range got.Status.Conditions {
			types[c.Type] = c.Status
		}
		return len(types) == 5 && types[corev1.NamespaceDeletionContentFailure] == corev1.ConditionFalse &&
			types[corev1.NamespaceFinalizersRemaining] == corev1.ConditionTrue
	})
	if cms, err := s.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{}); err != nil || len(cms.Items) != 2 {
		t.Errorf("configmaps while a pod remains: %v %d, want both", err, len(cms.Items))
	}
	p, err := s.Client.CoreV1().Pods(ns).Get(ctx, "p", metav1.GetOptions{})
	if err != nil || p.DeletionTimestamp == nil {
		t.Fatalf("pod while its namespace is deleted: %v %+v, want it terminating", err, p)
	}
	p.Finalizers = nil
	if _, err := s.Client.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, waitTimeout, "namespace gone", func() bool {
		_, err := s.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	cms, err := s.Client.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil || len(cms.Items) != 0 {
		t.Errorf("content left: %v %d", err, len(cms.Items))
	}
}

func hasCondition(p *corev1.Pod, c corev1.PodConditionType) bool {
	for _, x := range p.Status.Conditions {
		if x.Type == c && x.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestClaimClassSetOnceIfNone: a claim's spec is immutable, but one that names no class
// may be given one (the PV controller gives it the default class); a class, or an
// explicit "" (no class), stays.
func TestClaimClassSetOnceIfNone(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	pvcs := s.Client.CoreV1().PersistentVolumeClaims("default")
	setClass := func(name, class string) error {
		c, err := pvcs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.Spec.StorageClassName = &class
		_, err = pvcs.Update(ctx, c, metav1.UpdateOptions{})
		return err
	}
	if _, err := pvcs.Create(ctx, claim("unnamed", "1Gi"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := setClass("unnamed", "gp2"); err != nil {
		t.Fatalf("giving a class to a claim without one: %v", err)
	}
	if err := setClass("unnamed", "io1"); !apierrors.IsInvalid(err) {
		t.Errorf("changing the class it was given: %v, want 422", err)
	}
	none := claim("none", "1Gi")
	none.Spec.StorageClassName = new(string)
	if _, err := pvcs.Create(ctx, none, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := setClass("none", "gp2"); !apierrors.IsInvalid(err) {
		t.Errorf("giving a class to a claim that asked for none: %v, want 422", err)
	}
}

// TestDefaultStorageClassAdmission: a claim created without a class gets the default
// class; one that says "" keeps none; without a default class nothing is set.
func TestDefaultStorageClassAdmission(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	pvcs := s.Client.CoreV1().PersistentVolumeClaims("default")
	classOf := func(c *corev1.PersistentVolumeClaim) string {
		if c.Spec.StorageClassName == nil {
			return "<nil>"
		}
		return *c.Spec.StorageClassName
	}
	if got, err := pvcs.Create(ctx, claim("before", "1Gi"), metav1.CreateOptions{}); err != nil || classOf(got) != "<nil>" {
		t.Fatalf("claim created with no default class: class %s, %v; want none", classOf(got), err)
	}
	for _, sc := range []*storagev1.StorageClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "standard"}, Provisioner: "ebs.csi.aws.com"},
		{ObjectMeta: metav1.ObjectMeta{Name: "gp2", Annotations: map[string]string{storageclass.AnnDefault: "true"}}, Provisioner: "ebs.csi.aws.com"},
	} {
		if _, err := s.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The admission step reads classes from an informer: a dry run shows when it has the new one.
	testutil.Eventually(t, "the default class seen by admission", func() (bool, error) {
		got, err := pvcs.Create(ctx, claim("probe", "1Gi"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && classOf(got) == "gp2", err
	})
	got, err := pvcs.Create(ctx, claim("after", "1Gi"), metav1.CreateOptions{})
	if err != nil || classOf(got) != "gp2" {
		t.Errorf("claim created without a class: class %s, %v; want gp2", classOf(got), err)
	}
	none := claim("none", "1Gi")
	none.Spec.StorageClassName = new(string)
	if got, err := pvcs.Create(ctx, none, metav1.CreateOptions{}); err != nil || classOf(got) != "" {
		t.Errorf("claim created with class \"\": class %s, %v; want it kept", classOf(got), err)
	}
	if got, err := pvcs.Get(ctx, "before", metav1.GetOptions{}); err != nil || classOf(got) != "<nil>" {
		t.Errorf("claim created before the default: class %s, %v; admission only acts on create", classOf(got), err)
	}
}

// TestImmutableConfigMapsAndSecrets: once `immutable: true`, a ConfigMap's data and
// binaryData and a Secret's data (stringData included) are refused with kube-apiserver's
// message, as is setting immutable back to false; metadata may still change, and the
// object may be deleted. A Secret's type never changes.
func TestImmutableConfigMapsAndSecrets(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	const msg = "field is immutable when `immutable` is set"
	refused := func(what string, err error, fields ...string) {
		t.Helper()
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), msg) || strings.Join(causeFields(err), ",") != strings.Join(fields, ",") {
			t.Errorf("%s: %v (fields %v), want 422 naming %v", what, err, causeFields(err), fields)
		}
	}

	cms := s.Client.CoreV1().ConfigMaps("default")
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "frozen"}, Immutable: ptr.To(true),
		Data: map[string]string{"a": "1"}, BinaryData: map[string][]byte{"b": {2}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	change := func(mut func(*corev1.ConfigMap)) error {
		c := cm.DeepCopy()
		mut(c)
		_, err := cms.Update(ctx, c, metav1.UpdateOptions{})
		return err
	}
	refused("configmap data", change(func(c *corev1.ConfigMap) { c.Data["a"] = "2" }), "data")
	refused("configmap binaryData", change(func(c *corev1.ConfigMap) { c.BinaryData = nil }), "binaryData")
	refused("configmap immutable false", change(func(c *corev1.ConfigMap) { c.Immutable = ptr.To(false) }), "immutable")
	refused("configmap immutable unset, data", change(func(c *corev1.ConfigMap) { c.Immutable, c.Data = nil, nil }), "immutable", "data")
	if err := change(func(c *corev1.ConfigMap) { c.Labels = map[string]string{"k": "v"} }); err != nil {
		t.Errorf("configmap labels: %v", err)
	}
	if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete the configmap: %v", err)
	}

	secrets := s.Client.CoreV1().Secrets("default")
	sec, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "frozen"}, Immutable: ptr.To(true),
		Data: map[string][]byte{"a": []byte("1")}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	changeSecret := func(mut func(*corev1.Secret)) error {
		c := sec.DeepCopy()
		mut(c)
		_, err := secrets.Update(ctx, c, metav1.UpdateOptions{})
		return err
	}
	refused("secret data", changeSecret(func(c *corev1.Secret) { c.Data["b"] = []byte("2") }), "data")
	refused("secret stringData", changeSecret(func(c *corev1.Secret) { c.StringData = map[string]string{"a": "2"} }), "data")
	refused("secret immutable false", changeSecret(func(c *corev1.Secret) { c.Immutable = ptr.To(false) }), "immutable")
	if err := changeSecret(func(c *corev1.Secret) { c.StringData = map[string]string{"a": "1"} }); err != nil {
		t.Errorf("secret stringData equal to its data: %v", err)
	}
	if err := changeSecret(func(c *corev1.Secret) { c.Type = "example.com/custom" }); !apierrors.IsInvalid(err) ||
		strings.Join(causeFields(err), ",") != "type" || !strings.Contains(err.Error(), "field is immutable") {
		t.Errorf("secret type: %v, want 422 naming type", err)
	}
	if err := secrets.Delete(ctx, sec.Name, metav1.DeleteOptions{}); err != nil {
		t.Errorf("delete the secret: %v", err)
	}
}

// TestPodGeneration: a pod starts at generation 1 whatever the client says; each
// change of its spec (tolerations, activeDeadlineSeconds, images) adds one, while
// metadata, status, the client's own generation and binding do not; a graceful delete
// adds one; status.observedGeneration (the kubelet's) is kept when a status update
// leaves it out.
func TestPodGeneration(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	pods := s.Client.CoreV1().Pods("default")
	p := pod("generations")
	p.Generation = 100
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
	p, err := pods.Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Generation != 1 {
		t.Fatalf("created with generation 100: %d, want 1", p.Generation)
	}
	want := int64(1)
	for _, step := range []struct {
		name string
		mut  func(*corev1.Pod)
		bump bool
	}{
		{"empty update", func(*corev1.Pod) {}, false},
		{"tolerations", func(p *corev1.Pod) {
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "foo", Operator: corev1.TolerationOpEqual, Value: "bar", Effect: corev1.TaintEffectNoSchedule})
		}, true},
		{"activeDeadlineSeconds", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](5000) }, true},
		{"activeDeadlineSeconds lowered", func(p *corev1.Pod) { p.Spec.ActiveDeadlineSeconds = ptr.To[int64](4000) }, true},
		{"container image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "nginx" }, true},
		{"init container image", func(p *corev1.Pod) { p.Spec.InitContainers[0].Image = "pause" }, true},
		{"annotations", func(p *corev1.Pod) { p.Annotations = map[string]string{"key": "value"} }, false},
		{"the client's generation", func(p *corev1.Pod) { p.Generation = 1 }, false},
	} {
		cur, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		step.mut(cur)
		got, err := pods.Update(ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if step.bump {
			want++
		}
		if got.Generation != want {
			t.Errorf("after %s: generation %d, want %d", step.name, got.Generation, want)
		}
	}

	// activeDeadlineSeconds may not be raised or removed.
	for _, tc := range []struct {
		deadline *int64
		want     string
	}{
		{ptr.To[int64](4001), "spec.activeDeadlineSeconds: Invalid value: 4001: must be less than or equal to previous value"},
		{nil, "spec.activeDeadlineSeconds: Invalid value: null: must not update from a positive integer to nil value"},
		{ptr.To[int64](-1), "spec.activeDeadlineSeconds: Invalid value: -1: must be between 0 and 2147483647, inclusive"},
	} {
		cur, err := pods.Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cur.Spec.ActiveDeadlineSeconds = tc.deadline
		if _, err := pods.Update(ctx, cur, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("activeDeadlineSeconds 4000 → %v: %v, want 422 %q", ptr.Deref(tc.deadline, 0), err, tc.want)
		}
	}

	// The kubelet reports the generation it acted on; a status write that leaves it
	// out keeps it, and does not change the generation.
	cur, _ := pods.Get(ctx, p.Name, metav1.GetOptions{})
	cur.Status.ObservedGeneration = want
	cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, ObservedGeneration: want}}
	if cur, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil || cur.Status.ObservedGeneration != want || cur.Generation != want {
		t.Fatalf("status update: %v, observedGeneration %d generation %d, want both %d", err, cur.Status.ObservedGeneration, cur.Generation, want)
	}
	cur.Status.ObservedGeneration = 0
	cur.Status.Conditions[0].ObservedGeneration = 0
	if cur, err = pods.UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil || cur.Status.ObservedGeneration != want || cur.Status.Conditions[0].ObservedGeneration != want {
		t.Errorf("status update without observedGeneration: %v, %d and condition %d, want %d kept", err, cur.Status.ObservedGeneration,
			cur.Status.Conditions[0].ObservedGeneration, want)
	}

	if err := pods.Bind(ctx, &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: p.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: "node-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if bound, _ := pods.Get(ctx, p.Name, metav1.GetOptions{}); bound.Generation != want {
		t.Errorf("after binding: generation %d, want %d", bound.Generation, want)
	}
	if err := pods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](60)}); err != nil {
		t.Fatal(err)
	}
	if terminating, _ := pods.Get(ctx, p.Name, metav1.GetOptions{}); terminating.Generation != want+1 {
		t.Errorf("after a graceful delete: generation %d, want %d", terminating.Generation, want+1)
	}
	t.Cleanup(func() {
		_ = pods.Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
}

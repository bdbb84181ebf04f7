package admission_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/controller/controllertest"
	"github.com/kubelab/kubelab/internal/controller/resourcequota"
	"github.com/kubelab/kubelab/internal/testutil"
)

// builtinWait is how long the API-level checks of the built-in plugins wait for the
// informers and the quota controller.
const builtinWait = 30 * time.Second

// TestBuiltinPlugins drives the built-in admission plugins through a real API server
// (with the resourcequota controller running against it), as a client sees them.
func TestBuiltinPlugins(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	startQuotaController(t, s.Client)
	t.Run("LimitRanger", func(t *testing.T) { testLimitRanger(t, s) })
	t.Run("PodSecurity", func(t *testing.T) { testPodSecurity(t, s) })
	t.Run("Priority", func(t *testing.T) { testPriority(t, s) })
	t.Run("DefaultTolerationSecondsAndProtection", func(t *testing.T) { testTolerationsAndFinalizers(t, s) })
	t.Run("PersistentVolumeClaimResize", func(t *testing.T) { testClaimResize(t, s) })
	t.Run("ResourceQuota", func(t *testing.T) { testResourceQuota(t, s) })
}

func startQuotaController(t *testing.T, client kubernetes.Interface) {
	t.Helper()
	controllertest.RunController(t, client, func(f informers.SharedInformerFactory) (controllertest.Runner, error) {
		return resourcequota.New(resourcequota.Config{}, client, f)
	})
}

// builtinNamespace creates a namespace with labels for one subtest, deleted at its end.
func builtinNamespace(t *testing.T, s *apiservertest.Server, name string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if _, err := s.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	// Pods run as the "default" ServiceAccount, which no controller creates here.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	if _, err := s.Client.CoreV1().ServiceAccounts(name).Create(context.Background(), sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return name
}

func quantities(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return out
}

func plainPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "busybox"}}}}
}

func privileged(p *corev1.Pod) *corev1.Pod {
	p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	return p
}

func testLimitRanger(t *testing.T, s *apiservertest.Server) {
	ctx, c := context.Background(), s.Client
	ns := builtinNamespace(t, s, "builtin-limits", nil)
	bad := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, Min: quantities("cpu", "1"), Max: quantities("cpu", "500m")}}}}
	_, err := c.CoreV1().LimitRanges(ns).Create(ctx, bad, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "min value 1 is greater than max value 500m") {
		t.Fatalf("LimitRange with min > max: %v", err)
	}
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "limits"}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{
		{Type: corev1.LimitTypeContainer, Max: quantities("cpu", "500m"), Default: quantities("cpu", "200m", "memory", "128Mi"),
			DefaultRequest: quantities("cpu", "100m", "memory", "64Mi")}}}}
	if _, err := c.CoreV1().LimitRanges(ns).Create(ctx, lr, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod, err := c.CoreV1().Pods(ns).Create(ctx, plainPod("defaulted"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res := pod.Spec.Containers[0].Resources
	if res.Requests.Cpu().String() != "100m" || res.Limits.Cpu().String() != "200m" || res.Limits.Memory().String() != "128Mi" {
		t.Errorf("defaulted resources %v", res)
	}
	if got, want := pod.Annotations["kubernetes.io/limit-ranger"], "LimitRanger plugin set: cpu, memory request for container x; cpu, memory limit for container x"; got != want {
		t.Errorf("annotation %q, want %q", got, want)
	}
	if pod.Status.QOSClass != corev1.PodQOSBurstable {
		t.Errorf("QoS class %s, want Burstable (from the defaults)", pod.Status.QOSClass)
	}
	big := plainPod("big")
	big.Spec.Containers[0].Resources.Limits = quantities("cpu", "1")
	_, err = c.CoreV1().Pods(ns).Create(ctx, big, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || err.Error() != `pods "big" is forbidden: maximum cpu usage per Container is 500m, but limit is 1` {
		t.Errorf("pod above the max: %v", err)
	}
}

// warningsSeen records the warnings the server sends a client.
type warningsSeen struct {
	mu   sync.Mutex
	list []string
}

func (w *warningsSeen) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func testPodSecurity(t *testing.T, s *apiservertest.Server) {
	ctx, c := context.Background(), s.Client
	strict := builtinNamespace(t, s, "builtin-restricted", map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})
	_, err := c.CoreV1().Pods(strict).Create(ctx, privileged(plainPod("x")), metav1.CreateOptions{})
	want := `pods "x" is forbidden: violates PodSecurity "restricted:latest": privileged (container "x" must not set securityContext.privileged=true), `
	if !apierrors.IsForbidden(err) || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("privileged pod under restricted:\n got %v\nwant prefix %s", err, want)
	}

	warned := builtinNamespace(t, s, "builtin-warned", map[string]string{"pod-security.kubernetes.io/warn": "baseline"})
	seen := &warningsSeen{}
	cfg := *s.Config
	cfg.WarningHandler = seen
	wc := kubernetes.NewForConfigOrDie(&cfg)
	if _, err := wc.CoreV1().Pods(warned).Create(ctx, privileged(plainPod("x")), metav1.CreateOptions{}); err != nil {
		t.Fatalf("warn-only namespace refused the pod: %v", err)
	}
	seen.mu.Lock()
	got := strings.Join(seen.list, "\n")
	seen.mu.Unlock()
	if !strings.Contains(got, `would violate PodSecurity "baseline:latest": privileged (container "x" must not set securityContext.privileged=true)`) {
		t.Errorf("warnings to the client: %q", got)
	}

	manifest := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"y","namespace":"` + warned + `"},` +
		`"spec":{"containers":[{"name":"y","image":"busybox","securityContext":{"privileged":true}}]}}`
	cmd := testutil.KubectlCommand(t, s.Kubeconfig, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	cmd.Env = append(cmd.Env, "KUBECTL_NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), `Warning: would violate PodSecurity "baseline:latest": privileged (container "y" must not set securityContext.privileged=true)`) {
		t.Errorf("kubectl apply output lacks the warning:\n%s", out)
	}
}

func testPriority(t *testing.T, s *apiservertest.Server) {
	ctx, c := context.Background(), s.Client
	ns := builtinNamespace(t, s, "builtin-priority", nil)
	critical := plainPod("critical")
	critical.Spec.PriorityClassName = "system-cluster-critical"
	pod, err := c.CoreV1().Pods(ns).Create(ctx, critical, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if pod.Spec.Priority == nil || *pod.Spec.Priority != 2000000000 {
		t.Errorf("priority of a system-cluster-critical pod: %v", pod.Spec.Priority)
	}
	plain, err := c.CoreV1().Pods(ns).Create(ctx, plainPod("plain"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Spec.Priority == nil || *plain.Spec.Priority != 0 {
		t.Errorf("priority of a pod without class: %v", plain.Spec.Priority)
	}
	unknown := plainPod("unknown")
	unknown.Spec.PriorityClassName = "gold"
	_, err = c.CoreV1().Pods(ns).Create(ctx, unknown, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || err.Error() != `pods "unknown" is forbidden: no PriorityClass with name gold was found` {
		t.Errorf("unknown class: %v", err)
	}
}

func testTolerationsAndFinalizers(t *testing.T, s *apiservertest.Server) {
	ctx, c := context.Background(), s.Client
	ns := builtinNamespace(t, s, "builtin-defaults", nil)
	pod, err := c.CoreV1().Pods(ns).Create(ctx, plainPod("p"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"} {
		found := false
		for _, tol := range pod.Spec.Tolerations {
			if tol.Key == key && tol.Effect == corev1.TaintEffectNoExecute && tol.Operator == corev1.TolerationOpExists &&
				tol.TolerationSeconds != nil && *tol.TolerationSeconds == 300 {
				found = true
			}
		}
		if !found {
			t.Errorf("pod tolerations %v lack %s:NoExecute for 300s", pod.Spec.Tolerations, key)
		}
	}
	pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To(""),
		Resources: corev1.VolumeResourceRequirements{Requests: quantities("storage", "1Gi")}}}
	got, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(got.Finalizers, "kubernetes.io/pvc-protection") {
		t.Errorf("claim finalizers %v", got.Finalizers)
	}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "builtin-defaults-pv"}, Spec: corev1.PersistentVolumeSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, Capacity: quantities("storage", "1Gi"),
		PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/builtin-defaults-pv"}}}}
	gotPV, err := c.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Nothing removes the finalizer here: take it off so that the volume goes.
		_, _ = c.CoreV1().PersistentVolumes().Patch(context.Background(), pv.Name, "application/merge-patch+json",
			[]byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
		_ = c.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
	})
	if !slices.Contains(gotPV.Finalizers, "kubernetes.io/pv-protection") {
		t.Errorf("volume finalizers %v", gotPV.Finalizers)
	}
}

func testClaimResize(t *testing.T, s *apiservertest.Server) {
	ctx, c := context.Background(), s.Client
	ns := builtinNamespace(t, s, "builtin-resize", nil)
	for name, expand := range map[string]*bool{"builtin-fixed": nil, "builtin-growing": ptr.To(true)} {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "ebs.csi.aws.com", AllowVolumeExpansion: expand}
		if _, err := c.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.StorageV1().StorageClasses().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	grow := func(claim, class string) error {
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claim}, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}, StorageClassName: ptr.To(class),
			Resources: corev1.VolumeResourceRequirements{Requests: quantities("storage", "1Gi")}}}
		got, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		got.Spec.VolumeName = "pv-" + claim
		if got, err = c.CoreV1().PersistentVolumeClaims(ns).Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			return err
		}
		got.Status = corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: quantities("storage", "1Gi"),
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}}
		if got, err = c.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
			return err
		}
		got.Spec.Resources.Requests = quantities("storage", "2Gi")
		_, err = c.CoreV1().PersistentVolumeClaims(ns).Update(ctx, got, metav1.UpdateOptions{})
		return err
	}
	// The plugin reads classes from its informer: the new classes may take a moment.
	attempt := 0
	testutil.EventuallyWithin(t, builtinWait, "growing a claim of an expandable class", func() error {
		attempt++
		return grow(fmt.Sprintf("growing-%d", attempt), "builtin-growing")
	})
	err := grow("fixed", "builtin-fixed")
	want := `persistentvolumeclaims "fixed" is forbidden: only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize`
	if !apierrors.IsForbidden(err) || err.Error() != want {
		t.Errorf("growing a claim of a class without allowVolumeExpansion:\n got %v\nwant %s", err, want)
	}
}

func testResourceQuota(t *testing.T, s *apiservertest.Server) {
	ctx, c := context.Background(), s.Client
	ns := builtinNamespace(t, s, "builtin-quota", nil)
	rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "pods"}, Spec: corev1.ResourceQuotaSpec{Hard: quantities("pods", "3")}}
	if _, err := c.CoreV1().ResourceQuotas(ns).Create(ctx, rq, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, builtinWait, "the quota's status", func() error {
		got, err := c.CoreV1().ResourceQuotas(ns).Get(ctx, "pods", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ok := got.Status.Used[corev1.ResourcePods]; !ok {
			return fmt.Errorf("status %v", got.Status)
		}
		return nil
	})
	for i := 1; i <= 3; i++ {
		if _, err := c.CoreV1().Pods(ns).Create(ctx, plainPod(fmt.Sprintf("p%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatalf("pod %d of 3: %v", i, err)
		}
	}
	_, err := c.CoreV1().Pods(ns).Create(ctx, plainPod("p4"), metav1.CreateOptions{})
	if want := `pods "p4" is forbidden: exceeded quota: pods, requested: pods=1, used: pods=3, limited: pods=3`; !apierrors.IsForbidden(err) || err.Error() != want {
		t.Fatalf("4th pod:\n got %v\nwant %s", err, want)
	}
	if err := c.CoreV1().Pods(ns).Delete(ctx, "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, builtinWait, "a pod admitted after one was deleted", func() error {
		_, err := c.CoreV1().Pods(ns).Create(ctx, plainPod("p4"), metav1.CreateOptions{})
		return err
	})
}

package kubelet

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestObjects looks ConfigMaps, Secrets and Service variables up through Objects against
// a real API server, as the kubelet of a node the pods using them are bound to (the Node
// authorizer lets it read those, by name, and nothing else): before Run (direct requests)
// and after (watched objects), with the change notifications, the kube-root-ca.crt
// stand-in and Retain.
func TestObjects(t *testing.T) {
	api := apiservertest.Start(t, apiservertest.Options{})
	c, ctx := api.Client, context.Background()
	const node = "objs-node"
	kubelet := api.ClientAs(t, "system:node:"+node, "system:nodes")
	for _, ns := range []string{"objs-a", "objs-b"} {
		if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.CoreV1().ConfigMaps("objs-a").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Data: map[string]string{"k": "v1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Secrets("objs-a").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"},
		Data: map[string][]byte{"p": []byte("s")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoreV1().Services("objs-a").Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "backend"},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The node's pods, which use what the kubelet looks up.
	configMaps := func(names ...string) (vols []corev1.Volume) {
		for _, n := range names {
			vols = append(vols, corev1.Volume{Name: "cm-" + strings.ReplaceAll(n, ".", "-"), VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: n}}}})
		}
		return vols
	}
	secrets := func(names ...string) (vols []corev1.Volume) {
		for _, n := range names {
			vols = append(vols, corev1.Volume{Name: "secret-" + n, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: n}}})
		}
		return vols
	}
	for ns, vols := range map[string][]corev1.Volume{
		"objs-a": append(configMaps("app", "fresh", "gone"), secrets("creds", "nope")...),
		"objs-b": configMaps("kube-root-ca.crt"),
	} {
		pod := testPod("user", node)
		pod.Namespace, pod.Spec.Volumes = ns, vols
		if _, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, "the node may read its pods' objects", func() (bool, error) {
		_, err := kubelet.CoreV1().ConfigMaps("objs-b").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err == nil || apierrors.IsNotFound(err), nil
	})

	o, err := NewObjects(ObjectsConfig{RootCA: []byte("-----BEGIN CERTIFICATE-----\n"), SyncTimeout: time.Second}, kubelet)
	if err != nil {
		t.Fatal(err)
	}
	// Before Run: answers come from the API server.
	if cm, err := o.ConfigMap("objs-a", "app"); err != nil || cm.Data["k"] != "v1" {
		t.Fatalf("configmap before Run: %v %v", cm, err)
	}
	if _, err := o.Secret("objs-a", "nope"); !apierrors.IsNotFound(err) || err.Error() != `secret "nope" not found` {
		t.Errorf("missing secret: %v", err)
	}
	if len(o.Watched()) != 0 {
		t.Errorf("watching %v before Run", o.Watched())
	}

	var mu sync.Mutex
	var changes []ObjectRef
	o.OnChange(func(r ObjectRef) {
		mu.Lock()
		changes = append(changes, r)
		mu.Unlock()
	})
	// Run is stopped by the test itself, which then checks what it leaves.
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- o.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Objects did not stop")
		}
	})
	testutil.Eventually(t, "Objects running", func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.ctx != nil
	})

	if s, err := o.Secret("objs-a", "creds"); err != nil || string(s.Data["p"]) != "s" {
		t.Fatalf("secret: %v %v", s, err)
	}
	if cm, err := o.ConfigMap("objs-a", "app"); err != nil || cm.Data["k"] != "v1" {
		t.Fatalf("configmap: %v %v", cm, err)
	}
	// What no pod of the node uses is refused, and not watched.
	if _, err := o.Secret("objs-a", "other"); !apierrors.IsForbidden(err) {
		t.Errorf("a secret no pod of the node uses: %v", err)
	}
	o.caches["objs-a"].mu.Lock()
	_, watching := o.caches["objs-a"].objects[ObjectRef{Kind: "Secret", Namespace: "objs-a", Name: "other"}]
	o.caches["objs-a"].mu.Unlock()
	if watching {
		t.Error("still watching a secret the node may not read")
	}
	if got := o.Watched(); !slices.Equal(got, []string{"objs-a"}) {
		t.Errorf("watched %v, want objs-a", got)
	}
	// A ConfigMap created after the namespace is watched is found at once (the cache may
	// not have it yet: the API server is asked).
	if _, err := c.CoreV1().ConfigMaps("objs-a").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.ConfigMap("objs-a", "fresh"); err != nil {
		t.Errorf("fresh configmap: %v", err)
	}
	if _, err := o.ConfigMap("objs-a", "gone"); err == nil || err.Error() != `configmap "gone" not found` {
		t.Errorf("missing configmap: %v", err)
	}

	// Updates are heard and served from the cache.
	testutil.Eventually(t, "initial ConfigMaps heard", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(changes, ObjectRef{Kind: "ConfigMap", Namespace: "objs-a", Name: "app"}), nil
	})
	mu.Lock()
	changes = nil
	mu.Unlock()
	cm, _ := c.CoreV1().ConfigMaps("objs-a").Get(ctx, "app", metav1.GetOptions{})
	cm.Data["k"] = "v2"
	if _, err := c.CoreV1().ConfigMaps("objs-a").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, "update of app heard", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(changes, ObjectRef{Kind: "ConfigMap", Namespace: "objs-a", Name: "app"}), nil
	})
	if cm, err := o.ConfigMap("objs-a", "app"); err != nil || cm.Data["k"] != "v2" {
		t.Errorf("after the update: %v %v", cm, err)
	}

	// No kube-root-ca.crt in the namespace: the cluster CA stands in.
	if cm, err := o.ConfigMap("objs-b", "kube-root-ca.crt"); err != nil || cm.Data["ca.crt"] != "-----BEGIN CERTIFICATE-----\n" {
		t.Errorf("kube-root-ca.crt: %v %v", cm, err)
	}

	// Service variables: the namespace's Services and the API server's.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "objs-a", Name: "p"}}
	env, err := o.ServiceEnv(pod)
	if err != nil {
		t.Fatal(err)
	}
	if env["BACKEND_SERVICE_PORT"] != "8080" || env["BACKEND_SERVICE_HOST"] == "" || env["KUBERNETES_SERVICE_PORT"] != "443" {
		t.Errorf("service env: %v", env)
	}
	pod.Spec.EnableServiceLinks = ptr.To(false)
	if env, err := o.ServiceEnv(pod); err != nil || env["BACKEND_SERVICE_HOST"] != "" || env["KUBERNETES_SERVICE_HOST"] == "" {
		t.Errorf("service env without links: %v %v", env, err)
	}

	// Namespaces without pods are no longer watched; default always is.
	o.Retain(func(ns string) bool { return ns == "objs-a" })
	if got := o.Watched(); !slices.Equal(got, []string{"default", "objs-a"}) {
		t.Errorf("watched after Retain: %v", got)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("run: %v", err)
	}
	done <- nil // for the cleanup
	if got := o.Watched(); len(got) != 0 {
		t.Errorf("still watching %v after Run", got)
	}
}

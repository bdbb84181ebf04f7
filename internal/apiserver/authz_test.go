package apiserver_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kubelab/kubelab/internal/apiserver"
	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestRBAC: a user with a certificate of the cluster CA and no bindings may not read
// Secrets; a RoleBinding grants exactly its Role's rules in its namespace; kubectl's
// auth can-i (SelfSubjectAccessReview, and --list through SelfSubjectRulesReview) and
// auth whoami (SelfSubjectReview) answer for that user; a SubjectAccessReview asks the
// same for another user.
func TestRBAC(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	ns := "rbac-" + strings.ToLower(t.Name()[len(t.Name())-4:])
	if _, err := s.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token"},
		StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	alice := s.ClientAs(t, "alice", "developers")

	_, err := alice.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `User "alice" cannot list resource "secrets"`) {
		t.Fatalf("list secrets without bindings: %v, want Forbidden naming the user and the resource", err)
	}
	if _, err := alice.CoreV1().Secrets(ns).Get(ctx, "token", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("get secret without bindings: %v, want Forbidden", err)
	}

	if _, err := s.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "secret-reader"},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get", "list"}, APIGroups: []string{""}, Resources: []string{"secrets"}}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-reads"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "secret-reader"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, waitTimeout, "alice to read secrets through her RoleBinding", func() bool {
		_, err := alice.CoreV1().Secrets(ns).Get(ctx, "token", metav1.GetOptions{})
		return err == nil
	})
	for what, err := range map[string]error{
		"delete the secret": alice.CoreV1().Secrets(ns).Delete(ctx, "token", metav1.DeleteOptions{}),
		"list secrets in kube-system": func() error {
			_, err := alice.CoreV1().Secrets("kube-system").List(ctx, metav1.ListOptions{})
			return err
		}(),
		"list configmaps": func() error {
			_, err := alice.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
			return err
		}(),
	} {
		if !apierrors.IsForbidden(err) {
			t.Errorf("alice may %s: %v, want Forbidden", what, err)
		}
	}

	// Another user asked about alice, as a webhook or a proxy would.
	sar, err := s.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: "list", Resource: "secrets"}}}, metav1.CreateOptions{})
	if err != nil || !sar.Status.Allowed || !strings.Contains(sar.Status.Reason, "alice-reads") {
		t.Fatalf("SubjectAccessReview for alice listing secrets: %+v, %v; want allowed by alice-reads", sar, err)
	}
	if _, err := s.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice"}}, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("SubjectAccessReview without attributes: %v, want Invalid", err)
	}

	kubeconfig := filepath.Join(t.TempDir(), "alice.kubeconfig")
	if err := (apiserver.PKI{Dir: filepath.Join(s.DataDir, "pki")}).WriteKubeconfig(kubeconfig, s.URL, "alice", "developers"); err != nil {
		t.Fatal(err)
	}
	run := func(kubeconfig string, args ...string) (string, error) {
		out, err := testutil.KubectlCommand(t, kubeconfig, args...).CombinedOutput()
		return string(out), err
	}
	if out, err := run(kubeconfig, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username} {.status.userInfo.groups}"); err != nil ||
		out != `alice ["developers","system:authenticated"]` {
		t.Errorf("kubectl auth whoami as alice: %q, %v", out, err)
	}
	if out, err := run(kubeconfig, "auth", "can-i", "get", "secrets", "-n", ns); err != nil || strings.TrimSpace(out) != "yes" {
		t.Errorf("kubectl auth can-i get secrets as alice: %q, %v; want yes", out, err)
	}
	if out, err := run(kubeconfig, "auth", "can-i", "delete", "secrets", "-n", ns); err == nil || strings.TrimSpace(out) != "no" {
		t.Errorf("kubectl auth can-i delete secrets as alice: %q, %v; want no (exit 1)", out, err)
	}
	out, err := run(s.Kubeconfig, "auth", "can-i", "--list", "--as=alice", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl auth can-i --list --as=alice: %v\n%s", err, out)
	}
	if !hasRuleLine(out, "secrets", "[get list]") || !hasRuleLine(out, "selfsubjectaccessreviews.authorization.k8s.io", "[create]") {
		t.Errorf("kubectl auth can-i --list --as=alice: want secrets [get list] and the basic-user rules:\n%s", out)
	}
	if hasRuleLine(out, "configmaps", "") {
		t.Errorf("kubectl auth can-i --list --as=alice lists configmaps, which no binding grants:\n%s", out)
	}
	if out, err := run(s.Kubeconfig, "auth", "can-i", "list", "secrets", "-n", "kube-system", "--as=alice"); err == nil || strings.TrimSpace(out) != "no" {
		t.Errorf("kubectl auth can-i list secrets -n kube-system --as=alice: %q, %v; want no", out, err)
	}
}

// hasRuleLine reports whether a line of `kubectl auth can-i --list` names resource
// (first column) with verbs (last column; any when empty).
func hasRuleLine(out, resource, verbs string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == resource && (verbs == "" || strings.HasSuffix(strings.TrimSpace(line), verbs)) {
			return true
		}
	}
	return false
}

// TestAnonymous: a request without credentials is system:anonymous on the public
// health and version paths (200) and unauthenticated elsewhere (401).
func TestAnonymous(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	caPEM, err := os.ReadFile(filepath.Join(s.DataDir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	c := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	for path, want := range map[string]int{"/version": 200, "/healthz": 200, "/livez": 200, "/readyz": 200,
		"/api": 401, "/api/v1/namespaces/default/secrets": 401, "/apis": 401, "/metrics": 401, "/openapi/v2": 401,
		// Authenticated as system:anonymous, but the bootstrap policy binds the issuer's
		// discovery to service accounts only.
		"/.well-known/openid-configuration": 403, "/openid/v1/jwks": 403, "/openid/v1/jwks/x": 401} {
		resp, err := c.Get(s.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("anonymous GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}

// TestNodeAuthorizer: a kubelet (system:node:<name> in system:nodes) reads a Secret a
// pod on its node uses and no other, cannot list Secrets, writes only its own Node, and
// updates the status only of pods bound to it.
func TestNodeAuthorizer(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	ctx := context.Background()
	ns := "default"
	for _, name := range []string{"used", "unused"} {
		if _, err := s.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node,
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			Volumes:    []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "used"}}}}}}
	}
	onA, err := s.Client.CoreV1().Pods(ns).Create(ctx, pod("on-a", "node-a"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	onB, err := s.Client.CoreV1().Pods(ns).Create(ctx, pod("on-b", "node-b"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubeletA := s.ClientAs(t, "system:node:node-a", "system:nodes")
	kubeletC := s.ClientAs(t, "system:node:node-c", "system:nodes")
	for _, n := range []string{"node-a", "node-b"} {
		if _, err := kubeletClient(s, t, n).CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("kubelet of %s registers its node: %v", n, err)
		}
	}

	testutil.EventuallyWithin(t, waitTimeout, "node-a's kubelet to read the secret its pod uses", func() bool {
		_, err := kubeletA.CoreV1().Secrets(ns).Get(ctx, "used", metav1.GetOptions{})
		return err == nil
	})
	if _, err := kubeletA.CoreV1().Secrets(ns).Get(ctx, "unused", metav1.GetOptions{}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "no relationship found between node") {
		t.Errorf("node-a reads a secret no pod of it uses: %v, want Forbidden (no relationship)", err)
	}
	if _, err := kubeletC.CoreV1().Secrets(ns).Get(ctx, "used", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("node-c (no pods) reads a pod's secret: %v, want Forbidden", err)
	}
	if _, err := kubeletA.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a kubelet lists secrets: %v, want Forbidden", err)
	}
	patch := []byte(`{"metadata":{"labels":{"touched":"yes"}}}`)
	if _, err := kubeletA.CoreV1().Nodes().Patch(ctx, "node-b", types.MergePatchType, patch, metav1.PatchOptions{}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), `node "node-a" is not allowed to modify node "node-b"`) {
		t.Errorf("node-a patches node-b: %v, want Forbidden by NodeRestriction", err)
	}
	if _, err := kubeletA.CoreV1().Nodes().Patch(ctx, "node-a", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Errorf("node-a patches itself: %v", err)
	}
	status := []byte(`{"status":{"message":"from node-a"}}`)
	if _, err := kubeletA.CoreV1().Pods(ns).Patch(ctx, onB.Name, types.MergePatchType, status, metav1.PatchOptions{}, "status"); !apierrors.IsForbidden(err) {
		t.Errorf("node-a updates the status of a pod on node-b: %v, want Forbidden", err)
	}
	if _, err := kubeletA.CoreV1().Pods(ns).Patch(ctx, onA.Name, types.MergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
		t.Errorf("node-a updates the status of its own pod: %v", err)
	}
	if _, err := kubeletA.CoreV1().Pods(ns).Create(ctx, pod("made-by-kubelet", "node-a"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "can only create mirror pods") {
		t.Errorf("node-a creates a pod that is no mirror pod: %v, want Forbidden", err)
	}
	// A kubelet resolves its pods' RuntimeClasses.
	if _, err := kubeletA.NodeV1().RuntimeClasses().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("a kubelet lists RuntimeClasses: %v", err)
	}
	if _, err := kubeletA.NodeV1().RuntimeClasses().Get(ctx, "none", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a kubelet gets a RuntimeClass that does not exist: %v, want NotFound", err)
	}
}

func kubeletClient(s *apiservertest.Server, t *testing.T, node string) kubernetes.Interface {
	return s.ClientAs(t, "system:node:"+node, "system:nodes")
}

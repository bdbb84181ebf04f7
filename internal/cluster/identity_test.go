package cluster_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/kubelab/kubelab/internal/apiserver"
	"github.com/kubelab/kubelab/internal/apiserver/auth"
	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/testutil"
)

// Every component of a hollow cluster reaches the API server as itself, never as the
// admin, and each identity may do what its role gives and no more.
func TestComponentIdentities(t *testing.T) {
	tc := startCluster(t, nil)
	ctx := context.Background()
	nodes := tc.Nodes()
	if len(nodes) == 0 {
		t.Fatal("no nodes")
	}

	// Who each component is.
	used := map[string]cluster.Identity{}
	for _, ci := range tc.ClientIdentities() {
		used[ci.Component] = ci.Identity
	}
	want := map[string]cluster.Identity{
		"kube-scheduler":          cluster.SchedulerIdentity,
		"kube-controller-manager": cluster.ControllerManagerIdentity,
		"csi-provisioner":         cluster.CSIControllerIdentity,
		"csi-attacher":            cluster.CSIControllerIdentity,
		"csi-resizer":             cluster.CSIControllerIdentity,
		"csi-snapshotter":         cluster.CSIControllerIdentity,
		"kube-controller-manager/attachdetach-controller":  cluster.ServiceAccountIdentity("kube-system", "attachdetach-controller"),
		"kube-controller-manager/persistent-volume-binder": cluster.ServiceAccountIdentity("kube-system", "persistent-volume-binder"),
		"kube-controller-manager/deployment-controller":    cluster.ServiceAccountIdentity("kube-system", "deployment-controller"),
		"pod-identity-webhook":                             cluster.PodIdentityIdentity,
	}
	for _, n := range nodes {
		want["kubelet/"+n.Name] = cluster.Identity{User: "system:node:" + n.Name, Groups: []string{"system:nodes"}}
	}
	for component, id := range want {
		if got, ok := used[component]; !ok || got.String() != id.String() {
			t.Errorf("%s is %v (used: %t), want %v", component, got, ok, id)
		}
	}
	controllers := auth.ControllerNames()
	for component, id := range used {
		if id.User == apiserver.AdminUser || slices.Contains(id.Groups, apiserver.AdminGroup) || slices.Contains(id.Groups, user.SystemPrivilegedGroup) {
			t.Errorf("%s is %v: the admin's rights", component, id)
		}
		// Each controller is a service account the bootstrap policy has a role for.
		if sa, ok := strings.CutPrefix(component, "kube-controller-manager/"); ok {
			if id.String() != cluster.ServiceAccountIdentity("kube-system", sa).String() || !slices.Contains(controllers, sa) {
				t.Errorf("controller %s is %v; the bootstrap policy's controllers are %v", sa, id, controllers)
			}
		}
	}

	// The certificates under pki/clients are the components' and name no privileged group.
	certs, err := filepath.Glob(filepath.Join(tc.DataDir(), "pki", "clients", "*.crt"))
	if err != nil || len(certs) == 0 {
		t.Fatalf("client certificates: %v %v", certs, err)
	}
	issued := map[string]bool{}
	for _, f := range certs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		block, _ := pem.Decode(b)
		if block == nil {
			t.Fatalf("%s: no PEM", f)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		issued[cert.Subject.CommonName] = true
		if cert.Subject.CommonName == apiserver.AdminUser || slices.Contains(cert.Subject.Organization, apiserver.AdminGroup) {
			t.Errorf("%s: %s in %v", f, cert.Subject.CommonName, cert.Subject.Organization)
		}
	}
	for component, id := range used {
		if !issued[id.User] {
			t.Errorf("%s: no certificate of %s under pki/clients", component, id.User)
		}
	}

	// What each may do, as the API server's authorizers answer the admin.
	node := cluster.NodeIdentity(nodes[0].Name)
	csiNode := cluster.ServiceAccountIdentity("kube-system", cluster.CSINodeSA)
	deployments := cluster.ServiceAccountIdentity("kube-system", "deployment-controller")
	type attrs = authorizationv1.ResourceAttributes
	type check struct {
		who   cluster.Identity
		what  attrs
		allow bool
	}
	cases := []check{
		{cluster.CSIControllerIdentity, attrs{Verb: "create", Resource: "persistentvolumes"}, true},
		{cluster.CSIControllerIdentity, attrs{Verb: "patch", Group: "storage.k8s.io", Resource: "volumeattachments", Subresource: "status"}, true},
		{cluster.CSIControllerIdentity, attrs{Verb: "update", Group: "snapshot.storage.k8s.io", Resource: "volumesnapshotcontents", Subresource: "status"}, true},
		{cluster.CSIControllerIdentity, attrs{Verb: "patch", Resource: "persistentvolumeclaims", Subresource: "status", Namespace: "default"}, true},
		{cluster.CSIControllerIdentity, attrs{Verb: "list", Resource: "secrets"}, false},
		{cluster.CSIControllerIdentity, attrs{Verb: "get", Resource: "secrets", Namespace: "kube-system"}, false},
		{cluster.CSIControllerIdentity, attrs{Verb: "update", Group: "storage.k8s.io", Resource: "volumeattachments"}, false},
		{cluster.CSIControllerIdentity, attrs{Verb: "update", Resource: "persistentvolumes"}, false},
		{cluster.CSIControllerIdentity, attrs{Verb: "delete", Resource: "nodes"}, false},
		{csiNode, attrs{Verb: "get", Resource: "nodes"}, true},
		{csiNode, attrs{Verb: "list", Resource: "secrets"}, false},
		{cluster.SchedulerIdentity, attrs{Verb: "create", Resource: "pods", Subresource: "binding", Namespace: "default"}, true},
		{cluster.SchedulerIdentity, attrs{Verb: "patch", Resource: "persistentvolumeclaims", Namespace: "default"}, true},
		{cluster.SchedulerIdentity, attrs{Verb: "delete", Resource: "nodes"}, false},
		{cluster.SchedulerIdentity, attrs{Verb: "get", Resource: "secrets", Namespace: "default"}, false},
		{cluster.ControllerManagerIdentity, attrs{Verb: "list", Group: "apps", Resource: "deployments"}, true},
		{cluster.ControllerManagerIdentity, attrs{Verb: "delete", Resource: "pods", Namespace: "default"}, false},
		{deployments, attrs{Verb: "create", Group: "apps", Resource: "replicasets", Namespace: "default"}, true},
		{deployments, attrs{Verb: "get", Resource: "secrets", Namespace: "default"}, false},
		{node, attrs{Verb: "get", Resource: "nodes", Name: nodes[0].Name}, true},
		{node, attrs{Verb: "list", Resource: "secrets", Namespace: "default"}, false},
		{node, attrs{Verb: "list", Resource: "secrets"}, false},
		{node, attrs{Verb: "list", Resource: "persistentvolumeclaims"}, false},
		{cluster.KubeProxyIdentity, attrs{Verb: "list", Group: "discovery.k8s.io", Resource: "endpointslices"}, true},
		{cluster.KubeProxyIdentity, attrs{Verb: "get", Resource: "secrets", Namespace: "default"}, false},
		{cluster.ClusterDNSIdentity, attrs{Verb: "watch", Resource: "namespaces"}, true},
		{cluster.ClusterDNSIdentity, attrs{Verb: "list", Group: "discovery.k8s.io", Resource: "endpointslices"}, true},
		{cluster.ClusterDNSIdentity, attrs{Verb: "get", Resource: "secrets", Namespace: "kube-system"}, false},
		{cluster.OverlayIdentity, attrs{Verb: "patch", Resource: "nodes", Name: nodes[0].Name}, true},
		{cluster.OverlayIdentity, attrs{Verb: "list", Resource: "pods"}, false},
		{cluster.NetpolIdentity, attrs{Verb: "list", Group: "networking.k8s.io", Resource: "networkpolicies"}, true},
		{cluster.NetpolIdentity, attrs{Verb: "create", Resource: "pods", Namespace: "default"}, false},
		{cluster.PodIdentityIdentity, attrs{Verb: "watch", Resource: "serviceaccounts"}, true},
		{cluster.PodIdentityIdentity, attrs{Verb: "get", Resource: "secrets", Namespace: "kube-system"}, false},
	}
	// The calls of the components of real nodes and of the VPC (not run by hollow
	// clusters), each allowed.
	for _, need := range []struct {
		who       cluster.Identity
		verbs     []string
		group     string
		resources []string
	}{
		{cluster.KubeProxyIdentity, []string{"list", "watch"}, "", []string{"services"}},
		{cluster.KubeProxyIdentity, []string{"list", "watch"}, "discovery.k8s.io", []string{"endpointslices"}},
		{cluster.ClusterDNSIdentity, []string{"list", "watch"}, "", []string{"services", "namespaces"}},
		{cluster.ClusterDNSIdentity, []string{"list", "watch"}, "discovery.k8s.io", []string{"endpointslices"}},
		{cluster.OverlayIdentity, []string{"list", "watch", "patch"}, "", []string{"nodes"}},
		{cluster.NetpolIdentity, []string{"list", "watch"}, "", []string{"pods", "namespaces"}},
		{cluster.NetpolIdentity, []string{"list", "watch"}, "networking.k8s.io", []string{"networkpolicies"}},
		{cluster.CSIControllerIdentity, []string{"list", "watch", "update"}, "snapshot.storage.k8s.io", []string{"volumesnapshotcontents"}},
		{cluster.CSIControllerIdentity, []string{"list", "watch"}, "snapshot.storage.k8s.io", []string{"volumesnapshotclasses"}},
		{cluster.CSIControllerIdentity, []string{"create", "patch"}, "", []string{"events"}},
	} {
		for _, verb := range need.verbs {
			for _, r := range need.resources {
				cases = append(cases, check{need.who, attrs{Verb: verb, Group: need.group, Resource: r}, true})
			}
		}
	}
	for _, c := range cases {
		what := c.what
		review, err := tc.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: c.who.User, Groups: c.who.Groups, ResourceAttributes: &what}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != c.allow {
			t.Errorf("%v may %s %s/%s %s in %q: %t (%s), want %t", c.who, what.Verb, what.Group, what.Resource, what.Subresource,
				what.Namespace, review.Status.Allowed, review.Status.Reason, c.allow)
		}
	}
	checkPodIdentity(t, tc)
}

// checkPodIdentity: the pod identity webhook runs with the control plane (a pod of a
// ServiceAccount annotated with a role is created with the role's environment), and
// anonymous requests may read the service account issuer's discovery paths and nothing
// more.
func checkPodIdentity(t *testing.T, tc *testCluster) {
	t.Helper()
	ctx := context.Background()
	mwc, err := tc.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, "pod-identity-webhook", metav1.GetOptions{})
	if err != nil || len(mwc.Webhooks) != 1 || mwc.Webhooks[0].ClientConfig.URL == nil ||
		!strings.HasPrefix(*mwc.Webhooks[0].ClientConfig.URL, "https://127.0.0.1:") {
		t.Fatalf("MutatingWebhookConfiguration pod-identity-webhook: %v %+v", err, mwc)
	}
	const role = "arn:aws:iam::111122223333:role/irsa-test"
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "irsa-test",
		Annotations: map[string]string{"eks.amazonaws.com/role-arn": role}}}
	if _, err := tc.Client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = tc.Client.CoreV1().ServiceAccounts("default").Delete(context.Background(), sa.Name, metav1.DeleteOptions{})
	})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "irsa-test"}, Spec: corev1.PodSpec{ServiceAccountName: sa.Name,
		Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
	var env []corev1.EnvVar
	mutated := func() bool {
		// A dry run: the webhook has no side effects, and nothing is left to delete.
		p, err := tc.Client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false
		}
		env = p.Spec.Containers[0].Env
		return slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == "AWS_ROLE_ARN" && e.Value == role })
	}
	testutil.EventuallyWithin(t, time.Minute, "a pod of the annotated service account to get its role", mutated)
	if !slices.ContainsFunc(env, func(e corev1.EnvVar) bool { return e.Name == "AWS_REGION" && e.Value == "us-east-1" }) {
		t.Errorf("env %v, want AWS_REGION us-east-1", env)
	}
	// Stopped, pods are created as they are (failurePolicy Ignore); started again, it
	// serves where the configuration points.
	if err := tc.Stop(ctx, "pod-identity-webhook"); err != nil {
		t.Fatal(err)
	}
	if mutated() {
		t.Error("a pod was mutated while the webhook was stopped")
	}
	if err := tc.Start(ctx, "pod-identity-webhook"); err != nil {
		t.Fatal(err)
	}
	testutil.EventuallyWithin(t, time.Minute, "a pod of the annotated service account to get its role once the webhook is back", mutated)

	for path, allow := range map[string]bool{"/.well-known/openid-configuration": true, "/openid/v1/jwks": true, "/api": false} {
		review, err := tc.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: "system:anonymous", Groups: []string{"system:unauthenticated"},
				NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if review.Status.Allowed != allow {
			t.Errorf("anonymous may get %s: %t, want %t", path, review.Status.Allowed, allow)
		}
	}
}

// TestAggregatedRoles: the controller-manager's clusterrole-aggregation controller fills
// view, edit and admin from the system:aggregate-to-* roles, and a ClusterRole a user
// labels aggregate-to-view extends view.
func TestAggregatedRoles(t *testing.T) {
	tc := startCluster(t, nil)
	ctx := context.Background()
	extra := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "widgets-view",
		Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{"example.com"}, Resources: []string{"widgets"}}}}
	if _, err := tc.Client.RbacV1().ClusterRoles().Create(ctx, extra, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	allows := func(role string, verb, group, resource string) bool {
		r, err := tc.Client.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
		if err != nil {
			return false
		}
		a := authorizer.AttributesRecord{ResourceRequest: true, Verb: verb, APIGroup: group, Resource: resource}
		return auth.RulesAllow(a, r.Rules...)
	}
	testutil.EventuallyWithin(t, time.Minute, "view, edit and admin to be aggregated", func() (bool, error) {
		return allows("view", "list", "", "pods") && allows("view", "get", "example.com", "widgets") &&
			allows("edit", "create", "apps", "deployments") && allows("edit", "get", "example.com", "widgets") &&
			allows("admin", "create", "rbac.authorization.k8s.io", "rolebindings"), nil
	})
	if allows("view", "get", "", "secrets") {
		t.Error("view grants reading secrets")
	}
}

package cluster

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubelab/kubelab/internal/podidentitywebhook"
)

// TestCSIAddonOnIRSA: on a data dir of an earlier kubelab, whose add-on ran with static
// keys from the Secret aws-secret, the add-on's pods get no keys any more (the controller
// plugin trusts the cluster CA for STS and the cloud's APIs) and the Secret goes; the
// controller's service account, made without the annotation, gets its role, once.
func TestCSIAddonOnIRSA(t *testing.T) {
	ctx := context.Background()
	a := csiAddon{nodesDir: "/data/nodes", runDir: "/run/kubelab", region: "us-east-1", ec2Endpoint: "http://172.31.0.2"}
	old := a.controller()
	keyEnv := func(name, key string) corev1.EnvVar {
		return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: awsSecret}, Key: key}}}
	}
	old.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{keyEnv("AWS_ACCESS_KEY_ID", "key_id"), keyEnv("AWS_SECRET_ACCESS_KEY", "access_key")}
	client := fake.NewClientset(old,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: awsSecret, Namespace: metav1.NamespaceSystem}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: csiControllerSA, Namespace: metav1.NamespaceSystem}})
	if _, err := ensureCSIAddon(ctx, client, a); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, awsSecret, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Secret %s after ensureCSIAddon: %v, want it gone", awsSecret, err)
	}
	dep, err := client.AppsV1().Deployments(metav1.NamespaceSystem).Get(ctx, appCSIController, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ds, err := client.AppsV1().DaemonSets(metav1.NamespaceSystem).Get(ctx, appCSINode, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkNoKeys(t, dep.Name, dep.Spec.Template.Spec.Containers)
	checkNoKeys(t, ds.Name, ds.Spec.Template.Spec.Containers)
	bundle := ""
	for _, e := range dep.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "AWS_CA_BUNDLE" {
			bundle = e.Value
		}
	}
	if bundle != serviceAccountCA {
		t.Errorf("the controller plugin's AWS_CA_BUNDLE is %q, want %s", bundle, serviceAccountCA)
	}
	// A second run finds the Secret gone.
	if _, err := ensureCSIAddon(ctx, client, a); err != nil {
		t.Fatal(err)
	}

	const role = "arn:aws:iam::111122223333:role/" + CSIDriverRole
	for range 2 {
		if err := annotateServiceAccount(ctx, client, metav1.NamespaceSystem, csiControllerSA, role); err != nil {
			t.Fatal(err)
		}
	}
	sa, err := client.CoreV1().ServiceAccounts(metav1.NamespaceSystem).Get(ctx, csiControllerSA, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := sa.Annotations[podidentitywebhook.RoleARNAnnotation]; got != role {
		t.Errorf("%s's role annotation is %q, want %s", csiControllerSA, got, role)
	}
	updates := 0
	for _, act := range client.Actions() {
		if act.GetVerb() == "update" && act.GetResource().Resource == "serviceaccounts" {
			updates++
		}
	}
	if updates != 1 {
		t.Errorf("%d updates of the service account, want 1 (the second run finds the annotation)", updates)
	}
}

// checkNoKeys fails the test for a container of what given AWS keys in its environment.
func checkNoKeys(t *testing.T, what string, containers []corev1.Container) {
	t.Helper()
	for _, c := range containers {
		for _, e := range c.Env {
			if e.Name == "AWS_ACCESS_KEY_ID" || e.Name == "AWS_SECRET_ACCESS_KEY" || e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				t.Errorf("%s's container %s has %s in its environment", what, c.Name, e.Name)
			}
		}
	}
}

package cluster

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awscreds "github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kubelab/kubelab/internal/cloud"
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

// TestCSIDriverIdentityIdempotent: kubelab up makes the issuer's OIDC provider, the EBS
// CSI controller's role with its managed policy and the nodes' role and instance profile
// in the cloud's IAM; run again (a restart on the same data dir), it makes nothing twice
// and brings back what a user took away: the role's managed policy, the profile's role.
// The nodes' instances of an earlier kubelab get the profile and IMDSv2.
func TestCSIDriverIdentityIdempotent(t *testing.T) {
	ctx := context.Background()
	cl, err := cloud.New(cloud.Config{DataDir: t.TempDir(), Region: "us-east-1", Zones: []string{"us-east-1a"}, Hollow: true,
		NoIMDSListeners: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cl.Run(runCtx) }()
	t.Cleanup(func() { stop(); <-done })
	select {
	case <-cl.Ready():
	case err := <-done:
		t.Fatalf("cloud: %v", err)
	}
	ic := newIAMClient(cl)
	client := fake.NewClientset(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: csiControllerSA, Namespace: metav1.NamespaceSystem}})
	const issuer = "https://172.31.0.2"
	up := func() {
		t.Helper()
		if err := ensureCSIDriverIdentity(ctx, ic, client, issuer, []byte("the cluster CA")); err != nil {
			t.Fatal(err)
		}
		if err := ensureNodeRole(ctx, ic); err != nil {
			t.Fatal(err)
		}
	}
	up()
	role, err := ic.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(CSIDriverRole)})
	if err != nil {
		t.Fatal(err)
	}
	trust, _ := url.QueryUnescape(aws.ToString(role.Role.AssumeRolePolicyDocument))
	for _, want := range []string{`"172.31.0.2:sub":"system:serviceaccount:kube-system:ebs-csi-controller-sa"`,
		`"172.31.0.2:aud":"sts.amazonaws.com"`, `:oidc-provider/172.31.0.2"`} {
		if !strings.Contains(trust, want) {
			t.Errorf("trust policy of %s %s lacks %s", CSIDriverRole, trust, want)
		}
	}
	// What a user may have done between two runs.
	if _, err := ic.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: aws.String(CSIDriverRole), PolicyArn: aws.String(CSIDriverPolicyARN)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ic.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String(NodeRole),
		RoleName: aws.String(NodeRole)}); err != nil {
		t.Fatal(err)
	}
	up()

	providers, err := ic.ListOpenIDConnectProviders(ctx, &iam.ListOpenIDConnectProvidersInput{})
	if err != nil || len(providers.OpenIDConnectProviderList) != 1 {
		t.Errorf("OIDC providers %+v (%v), want the issuer's only", providers, err)
	}
	attached, err := ic.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String(CSIDriverRole)})
	if err != nil || len(attached.AttachedPolicies) != 1 || aws.ToString(attached.AttachedPolicies[0].PolicyArn) != CSIDriverPolicyARN {
		t.Errorf("policies of %s: %+v (%v), want %s", CSIDriverRole, attached, err, CSIDriverPolicyARN)
	}
	nodeAttached, err := ic.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String(NodeRole)})
	if err != nil || len(nodeAttached.AttachedPolicies) != len(nodeRolePolicies) {
		t.Errorf("policies of %s: %+v (%v), want %v", NodeRole, nodeAttached, err, nodeRolePolicies)
	}
	profile, err := ic.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(NodeRole)})
	if err != nil || len(profile.InstanceProfile.Roles) != 1 || aws.ToString(profile.InstanceProfile.Roles[0].RoleName) != NodeRole {
		t.Errorf("instance profile %s: %+v (%v), want its role %s", NodeRole, profile, err, NodeRole)
	}
	sa, err := client.CoreV1().ServiceAccounts(metav1.NamespaceSystem).Get(ctx, csiControllerSA, metav1.GetOptions{})
	if err != nil || sa.Annotations[podidentitywebhook.RoleARNAnnotation] != aws.ToString(role.Role.Arn) {
		t.Errorf("%s: %v %v, want annotated with %s", csiControllerSA, sa.Annotations, err, aws.ToString(role.Role.Arn))
	}

	// A node's instance that an earlier kubelab launched (no profile, IMDSv1 allowed) is
	// given the nodes' profile and IMDSv2 required, once.
	ak, sk := cl.Credentials()
	ec := ec2.New(ec2.Options{Region: cl.Region(), BaseEndpoint: aws.String(cl.Endpoint()),
		Credentials: awscreds.NewStaticCredentialsProvider(ak, sk, "")})
	run, err := ec.RunInstances(ctx, &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(run.Instances[0].InstanceId)
	for range 2 {
		d, err := ec.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err != nil {
			t.Fatal(err)
		}
		if err := adoptNodeIdentity(ctx, ec, map[int]ec2types.Instance{0: d.Reservations[0].Instances[0]}); err != nil {
			t.Fatal(err)
		}
	}
	d, err := ec.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	got := d.Reservations[0].Instances[0]
	if got.IamInstanceProfile == nil || !strings.HasSuffix(aws.ToString(got.IamInstanceProfile.Arn), ":instance-profile/"+NodeRole) ||
		got.MetadataOptions.HttpTokens != ec2types.HttpTokensStateRequired || aws.ToInt32(got.MetadataOptions.HttpPutResponseHopLimit) != 1 {
		t.Errorf("an earlier kubelab's instance: profile %+v, metadata options %+v; want %s, IMDSv2 required, hop limit 1",
			got.IamInstanceProfile, got.MetadataOptions, NodeRole)
	}
}

package cluster_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/cloud"
	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/cluster/clustertest"
	"github.com/kubelab/kubelab/internal/image"
	"github.com/kubelab/kubelab/internal/testutil"
)

// awsClientRef is the IRSA test image: testutil.AWSClient's program at /awsclient, with
// busybox for a shell.
const awsClientRef = "kubelab.test/awsclient:1"

// awsClientImage builds the IRSA test image into the cluster's registry, as `kubelab
// image build` does, and returns its reference.
func awsClientImage(t *testing.T, tc *testCluster) string {
	t.Helper()
	dir := filepath.Join(tc.DataDir(), "images")
	addr, err := image.RecordedAddr(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := image.HostImage{Refs: []string{awsClientRef}, Busybox: true,
		Files:  []image.HostFile{{Src: testutil.AWSClient(t), Dest: "/awsclient"}},
		Config: v1.Config{Entrypoint: []string{"/awsclient"}}}
	if _, err := image.BuildHost(context.Background(), addr, image.LayoutDir(dir), image.CacheDir(dir), h); err != nil {
		t.Fatalf("build the IRSA test image: %v", err)
	}
	return awsClientRef
}

// irsaPod is a pod of service account sa running the IRSA test program (args), then
// printing its web identity token on a line of its own; AWS_CA_BUNDLE is the cluster CA
// of the pod's service account volume, which signed the cloud endpoint's certificate.
func irsaPod(ns, name, node, sa string, args ...string) *corev1.Pod {
	script := "/awsclient " + strings.Join(args, " ") + "; echo; cat /var/run/secrets/eks.amazonaws.com/serviceaccount/token"
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, NodeName: node, ServiceAccountName: sa,
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "main", Image: awsClientRef, Command: []string{"sh", "-c", script},
				Env: []corev1.EnvVar{{Name: "AWS_CA_BUNDLE", Value: "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"}}}}},
	}
}

// irsaOutput is what an irsaPod printed: the program's JSON and the token's claims.
type irsaOutput struct {
	Result map[string]any
	Claims struct {
		Issuer   string   `json:"iss"`
		Audience []string `json:"aud"`
		Subject  string   `json:"sub"`
	}
}

// parseIRSAOutput reads an irsaPod's log.
func parseIRSAOutput(t *testing.T, log string) irsaOutput {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(log), "\n")
	var out irsaOutput
	if len(lines) < 2 || json.Unmarshal([]byte(lines[0]), &out.Result) != nil {
		t.Fatalf("IRSA pod's log %q: want the program's JSON, then the token", log)
	}
	parts := strings.Split(lines[len(lines)-1], ".")
	if len(parts) != 3 {
		t.Fatalf("IRSA pod's token %q is not a JWT", lines[len(lines)-1])
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(payload, &out.Claims) != nil {
		t.Fatalf("IRSA pod's token payload %q: %v", parts[1], err)
	}
	return out
}

// irsaRole makes, in the cluster's cloud, the OIDC provider of the cluster's issuer
// (trusted by the thumbprint of the cluster CA, which signed the API server's
// certificate) unless it exists, and the role name that service account ns/sa of that
// issuer may assume for the audience sts.amazonaws.com, allowed the EC2 actions given;
// it returns the role's ARN.
func irsaRole(t *testing.T, tc *testCluster, issuer, ns, sa, name string, actions ...string) string {
	t.Helper()
	ctx := context.Background()
	ic := cloudIAM(tc)
	caPEM, err := os.ReadFile(filepath.Join(tc.DataDir(), "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(caPEM)
	if block == nil {
		t.Fatal("no cluster CA certificate")
	}
	host := strings.TrimPrefix(issuer, "https://")
	var providerARN string
	prov, err := ic.CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{Url: aws.String(issuer),
		ClientIDList: []string{"sts.amazonaws.com"}, ThumbprintList: []string{cloud.Thumbprint(block.Bytes)}})
	switch {
	case err == nil:
		providerARN = aws.ToString(prov.OpenIDConnectProviderArn)
	case strings.Contains(err.Error(), "EntityAlreadyExists"):
		list, lerr := ic.ListOpenIDConnectProviders(ctx, &iam.ListOpenIDConnectProvidersInput{})
		if lerr != nil {
			t.Fatal(lerr)
		}
		for _, p := range list.OpenIDConnectProviderList {
			if strings.HasSuffix(aws.ToString(p.Arn), ":oidc-provider/"+host) {
				providerARN = aws.ToString(p.Arn)
			}
		}
	default:
		t.Fatalf("create the OIDC provider of %s: %v", issuer, err)
	}
	trust, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{
		"Effect": "Allow", "Principal": map[string]string{"Federated": providerARN}, "Action": "sts:AssumeRoleWithWebIdentity",
		"Condition": map[string]any{"StringEquals": map[string]string{
			host + ":sub": "system:serviceaccount:" + ns + ":" + sa, host + ":aud": "sts.amazonaws.com"}}}}})
	role, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name), AssumeRolePolicyDocument: aws.String(string(trust))})
	if err != nil {
		t.Fatalf("create role %s: %v", name, err)
	}
	if len(actions) > 0 {
		policy, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{
			"Effect": "Allow", "Action": actions, "Resource": "*"}}})
		if _, err := ic.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(name), PolicyName: aws.String(name),
			PolicyDocument: aws.String(string(policy))}); err != nil {
			t.Fatalf("put the policy of role %s: %v", name, err)
		}
	}
	return aws.ToString(role.Role.Arn)
}

// cloudIAM is an IAM client of the cluster's cloud with its own key pair.
func cloudIAM(tc *testCluster) *iam.Client {
	ak, sk := tc.Cloud().Credentials()
	return iam.New(iam.Options{Region: tc.Cloud().Region(), BaseEndpoint: aws.String(tc.Cloud().Endpoint()),
		Credentials: credentials.NewStaticCredentialsProvider(ak, sk, "")})
}

// assertCSIDriverOnIRSA checks that the EBS CSI controller runs on its role: its plugin
// containers have AWS_ROLE_ARN (the role kubelab up made) and the token, and no keys.
// Then, with the role's managed policy swapped for one lacking ec2:CreateVolume, a new
// claim of namespace ns (of an Immediate class) fails to provision with
// UnauthorizedOperation in its Events, which only the role's credentials can meet; with
// the policy back, the claim is provisioned.
func (tc *testCluster) assertCSIDriverOnIRSA(ns string) {
	t := tc.T
	t.Helper()
	ctx := context.Background()
	pods, err := tc.Client.CoreV1().Pods(metav1.NamespaceSystem).List(ctx, metav1.ListOptions{LabelSelector: "app=" + cluster.AppCSIController})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) == 0 {
		t.Fatal("no ebs-csi-controller pods")
	}
	for _, p := range pods.Items {
		env := map[string]string{}
		for _, c := range p.Spec.Containers {
			for _, e := range c.Env {
				if c.Name == "ebs-plugin" {
					env[e.Name] = e.Value
				}
				if strings.HasPrefix(e.Name, "AWS_ACCESS_KEY") || strings.HasPrefix(e.Name, "AWS_SECRET") || e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					t.Errorf("controller pod %s: container %s has %s in its environment", p.Name, c.Name, e.Name)
				}
			}
		}
		if !strings.HasSuffix(env["AWS_ROLE_ARN"], ":role/"+cluster.CSIDriverRole) || env["AWS_WEB_IDENTITY_TOKEN_FILE"] == "" {
			t.Errorf("controller pod %s's ebs-plugin: AWS_ROLE_ARN %q, AWS_WEB_IDENTITY_TOKEN_FILE %q; want the role %s and its token",
				p.Name, env["AWS_ROLE_ARN"], env["AWS_WEB_IDENTITY_TOKEN_FILE"], cluster.CSIDriverRole)
		}
	}

	ic := cloudIAM(tc)
	role := aws.String(cluster.CSIDriverRole)
	restore := func() {
		if _, err := ic.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: role, PolicyArn: aws.String(cluster.CSIDriverPolicyARN)}); err != nil {
			t.Errorf("attach %s again: %v", cluster.CSIDriverPolicyARN, err)
		}
		if _, err := ic.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: role, PolicyName: aws.String("no-create-volume")}); err != nil &&
			!strings.Contains(err.Error(), "NoSuchEntity") {
			t.Errorf("delete the policy no-create-volume: %v", err)
		}
	}
	t.Cleanup(restore)
	if _, err := ic.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: role, PolicyArn: aws.String(cluster.CSIDriverPolicyARN)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ic.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: role, PolicyName: aws.String("no-create-volume"),
		PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["ec2:Describe*","ec2:CreateTags"],"Resource":"*"}]}`)}); err != nil {
		t.Fatal(err)
	}
	immediate := storagev1.VolumeBindingImmediate
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: ns + "-immediate"}, Provisioner: cluster.DriverName,
		VolumeBindingMode: &immediate, Parameters: map[string]string{"type": "gp3"}}
	if _, err := tc.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		tc.Client.StorageV1().StorageClasses().Delete(context.Background(), sc.Name, metav1.DeleteOptions{})
	})
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "denied-pvc", Namespace: ns},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &sc.Name, Resources: corev1.VolumeResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}
	if _, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var failed string
	testutil.EventuallyWithin(t, clustertest.Timeout, "ProvisioningFailed naming UnauthorizedOperation on "+claim.Name, func() (bool, error) {
		for _, w := range tc.Warnings(ns, claim.Name) {
			if strings.HasPrefix(w, "ProvisioningFailed: ") && strings.Contains(w, "UnauthorizedOperation") {
				failed = w
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("with the role lacking ec2:CreateVolume: %s", failed)
	restore()
	testutil.EventuallyWithin(t, clustertest.Timeout, claim.Name+" bound once the role has its policy again", func() (bool, error) {
		c, err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, claim.Name, metav1.GetOptions{})
		return err == nil && c.Status.Phase == corev1.ClaimBound, nil
	})
	if err := tc.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

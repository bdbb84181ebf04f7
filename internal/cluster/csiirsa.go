package cluster

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awscreds "github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/smithy-go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kubelab/kubelab/internal/cloud"
	"github.com/kubelab/kubelab/internal/podidentitywebhook"
)

// The EBS CSI add-on's identity on real nodes, as EKS sets it up with IAM Roles for
// Service Accounts: the cluster's issuer registered as an IAM OIDC provider (audience
// sts.amazonaws.com, trusted by the thumbprint of the cluster CA, which signed the API
// server's certificate), the role AmazonEKS_EBS_CSI_DriverRole that only
// kube-system/ebs-csi-controller-sa of that issuer may assume, with the managed policy
// AmazonEBSCSIDriverPolicy attached, and the service account annotated with the role.
// The pod identity webhook then gives the controller's pods the token and AWS_ROLE_ARN;
// the driver's SDK trades them with STS for the role's credentials. Every step keeps what
// exists, so that `kubelab up` on an existing data dir brings it to this state.

const (
	// CSIDriverRole is the role of the EBS CSI controller, named as EKS's docs name it.
	CSIDriverRole = "AmazonEKS_EBS_CSI_DriverRole"
	// CSIDriverPolicyARN is the managed policy the role has attached.
	CSIDriverPolicyARN = "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"
	// stsAudience is the audience of the tokens STS accepts, the OIDC provider's client ID.
	stsAudience = "sts.amazonaws.com"
)

// webIdentityTrustPolicy is the trust policy letting service account ns/sa of issuer
// (registered as providerARN) assume a role with a token for sts.amazonaws.com.
func webIdentityTrustPolicy(providerARN, issuer, ns, sa string) string {
	host := strings.TrimPrefix(issuer, "https://")
	doc, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{
		"Effect": "Allow", "Principal": map[string]string{"Federated": providerARN},
		"Action": "sts:AssumeRoleWithWebIdentity",
		"Condition": map[string]any{"StringEquals": map[string]string{
			host + ":sub": "system:serviceaccount:" + ns + ":" + sa,
			host + ":aud": stsAudience,
		}},
	}}})
	return string(doc)
}

// iamClient is an AWS SDK IAM client of the cluster's cloud, with its own key pair.
func (c *Cluster) iamClient() *iam.Client { return newIAMClient(c.cloud) }

// newIAMClient is an AWS SDK IAM client of cloud cl, with its own key pair.
func newIAMClient(cl *cloud.Cloud) *iam.Client {
	ak, sk := cl.Credentials()
	return iam.New(iam.Options{Region: cl.Region(), BaseEndpoint: aws.String(cl.Endpoint()),
		Credentials: awscreds.NewStaticCredentialsProvider(ak, sk, "")})
}

// iamCode is the code of an IAM error ("" for another error).
func iamCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// ensureIssuerProvider registers issuer as an IAM OIDC provider for sts.amazonaws.com,
// trusted by the thumbprint of caDER (the cluster CA's certificate), unless it is, and
// returns the provider's ARN.
func ensureIssuerProvider(ctx context.Context, client *iam.Client, issuer string, caDER []byte) (string, error) {
	out, err := client.CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{Url: aws.String(issuer),
		ClientIDList: []string{stsAudience}, ThumbprintList: []string{cloud.Thumbprint(caDER)}})
	if err == nil {
		return aws.ToString(out.OpenIDConnectProviderArn), nil
	}
	if iamCode(err) != "EntityAlreadyExists" {
		return "", fmt.Errorf("create the OIDC provider of %s: %w", issuer, err)
	}
	list, err := client.ListOpenIDConnectProviders(ctx, &iam.ListOpenIDConnectProvidersInput{})
	if err != nil {
		return "", fmt.Errorf("list OIDC providers: %w", err)
	}
	for _, p := range list.OpenIDConnectProviderList {
		if strings.HasSuffix(aws.ToString(p.Arn), ":oidc-provider/"+strings.TrimPrefix(issuer, "https://")) {
			return aws.ToString(p.Arn), nil
		}
	}
	return "", fmt.Errorf("the OIDC provider of %s exists but is not listed", issuer)
}

// ensureCSIDriverRole sets up the EBS CSI controller's identity (see above) for the
// cluster's issuer.
func (c *Cluster) ensureCSIDriverRole(ctx context.Context, admin kubernetes.Interface) error {
	caFile := c.cp.APIServer.PKI().CACert()
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	block, _ := pem.Decode(caPEM)
	if block == nil {
		return fmt.Errorf("cluster: no certificate in %s", caFile)
	}
	return ensureCSIDriverIdentity(ctx, c.iamClient(), admin, c.cp.APIServer.Issuer(), block.Bytes)
}

// ensureCSIDriverIdentity makes the issuer's OIDC provider and the EBS CSI controller's
// role and annotates its service account with it; an existing role gets its trust
// policy and managed policy again, an existing annotation the role's ARN.
func ensureCSIDriverIdentity(ctx context.Context, client *iam.Client, admin kubernetes.Interface, issuer string, caDER []byte) error {
	providerARN, err := ensureIssuerProvider(ctx, client, issuer, caDER)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	trust := webIdentityTrustPolicy(providerARN, issuer, metav1.NamespaceSystem, csiControllerSA)
	var roleARN string
	created, err := client.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(CSIDriverRole), AssumeRolePolicyDocument: aws.String(trust),
		Description: aws.String("The EBS CSI driver's controller (kube-system/" + csiControllerSA + "), by IAM Roles for Service Accounts")})
	switch {
	case err == nil:
		roleARN = aws.ToString(created.Role.Arn)
	case iamCode(err) == "EntityAlreadyExists":
		got, err := client.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(CSIDriverRole)})
		if err != nil {
			return fmt.Errorf("cluster: get role %s: %w", CSIDriverRole, err)
		}
		roleARN = aws.ToString(got.Role.Arn)
		if _, err := client.UpdateAssumeRolePolicy(ctx, &iam.UpdateAssumeRolePolicyInput{RoleName: aws.String(CSIDriverRole),
			PolicyDocument: aws.String(trust)}); err != nil {
			return fmt.Errorf("cluster: update the trust policy of %s: %w", CSIDriverRole, err)
		}
	default:
		return fmt.Errorf("cluster: create role %s: %w", CSIDriverRole, err)
	}
	if _, err := client.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String(CSIDriverRole),
		PolicyArn: aws.String(CSIDriverPolicyARN)}); err != nil {
		return fmt.Errorf("cluster: attach %s to %s: %w", CSIDriverPolicyARN, CSIDriverRole, err)
	}
	return annotateServiceAccount(ctx, admin, metav1.NamespaceSystem, csiControllerSA, roleARN)
}

// annotateServiceAccount gives service account ns/name the role roleARN
// (eks.amazonaws.com/role-arn), which its pods created from now on get.
func annotateServiceAccount(ctx context.Context, client kubernetes.Interface, ns, name, roleARN string) error {
	accounts := client.CoreV1().ServiceAccounts(ns)
	if err := createAddon(ctx, "the annotation of ServiceAccount "+ns+"/"+name, func(ctx context.Context) error {
		sa, err := accounts.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if sa.Annotations[podidentitywebhook.RoleARNAnnotation] == roleARN {
			return nil
		}
		if sa.Annotations == nil {
			sa.Annotations = map[string]string{}
		}
		sa.Annotations[podidentitywebhook.RoleARNAnnotation] = roleARN
		_, err = accounts.Update(ctx, sa, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

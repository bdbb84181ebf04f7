package cluster

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// The real nodes' IAM identity, as EKS gives its nodes: the role AmazonEKSNodeRole,
// which EC2 may assume, with the managed policies of an EKS node role attached, in the
// instance profile of the same name that the nodes' instances are launched with. Their
// metadata service requires IMDSv2 tokens with a hop limit of 1, EKS's recommended
// setting: the node and its host-network pods read the instance's metadata and
// credentials, other pods get no token (the answer dies one hop away) and IMDSv1 is
// refused, so a pod takes an identity only from its service account. The instances an
// earlier kubelab launched without a profile are given both (adoptNodeIdentity).

const (
	// NodeRole is the nodes' role and instance profile, named as EKS's docs name it.
	NodeRole = "AmazonEKSNodeRole"
	// nodeHopLimit is the IMDSv2 token's hop limit on the nodes' instances.
	nodeHopLimit = 1
)

// nodeRolePolicies are the managed policies an EKS node role has attached.
var nodeRolePolicies = []string{
	"arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
	"arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
	"arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
}

// ec2TrustPolicy lets EC2 assume a role for an instance.
const ec2TrustPolicy = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`

// nodeMetadataOptions are the nodes' instances' metadata settings.
func nodeMetadataOptions() *ec2types.InstanceMetadataOptionsRequest {
	return &ec2types.InstanceMetadataOptionsRequest{HttpTokens: ec2types.HttpTokensStateRequired,
		HttpPutResponseHopLimit: aws.Int32(nodeHopLimit)}
}

// ensureNodeRole makes the nodes' role and instance profile (see above), keeping what
// exists: an existing role gets the trust policy and the managed policies again, an
// existing profile its role when it has none.
func ensureNodeRole(ctx context.Context, client *iam.Client) error {
	role := aws.String(NodeRole)
	_, err := client.CreateRole(ctx, &iam.CreateRoleInput{RoleName: role, AssumeRolePolicyDocument: aws.String(ec2TrustPolicy),
		Description: aws.String("The cluster's nodes, by their instance profile")})
	switch {
	case iamCode(err) == "EntityAlreadyExists":
		if _, err := client.UpdateAssumeRolePolicy(ctx, &iam.UpdateAssumeRolePolicyInput{RoleName: role, PolicyDocument: aws.String(ec2TrustPolicy)}); err != nil {
			return fmt.Errorf("cluster: update the trust policy of %s: %w", NodeRole, err)
		}
	case err != nil:
		return fmt.Errorf("cluster: create role %s: %w", NodeRole, err)
	}
	for _, arn := range nodeRolePolicies {
		if _, err := client.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: role, PolicyArn: aws.String(arn)}); err != nil {
			return fmt.Errorf("cluster: attach %s to %s: %w", arn, NodeRole, err)
		}
	}
	if _, err := client.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: role}); err != nil &&
		iamCode(err) != "EntityAlreadyExists" {
		return fmt.Errorf("cluster: create instance profile %s: %w", NodeRole, err)
	}
	got, err := client.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: role})
	if err != nil {
		return fmt.Errorf("cluster: get instance profile %s: %w", NodeRole, err)
	}
	if len(got.InstanceProfile.Roles) == 0 {
		if _, err := client.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: role, RoleName: role}); err != nil {
			return fmt.Errorf("cluster: add role %s to its instance profile: %w", NodeRole, err)
		}
	}
	return nil
}

// adoptNodeIdentity gives the nodes' instances that an earlier kubelab launched without
// an instance profile the nodes' profile and metadata settings, as launch gives new ones.
// Instances with a profile are left as they are.
func adoptNodeIdentity(ctx context.Context, client *ec2.Client, instances map[int]ec2types.Instance) error {
	for _, inst := range instances {
		if inst.IamInstanceProfile != nil {
			continue
		}
		id := inst.InstanceId
		opts := nodeMetadataOptions()
		if _, err := client.ModifyInstanceMetadataOptions(ctx, &ec2.ModifyInstanceMetadataOptionsInput{InstanceId: id,
			HttpTokens: opts.HttpTokens, HttpPutResponseHopLimit: opts.HttpPutResponseHopLimit}); err != nil {
			return fmt.Errorf("cluster: metadata options of instance %s: %w", aws.ToString(id), err)
		}
		if _, err := client.AssociateIamInstanceProfile(ctx, &ec2.AssociateIamInstanceProfileInput{InstanceId: id,
			IamInstanceProfile: &ec2types.IamInstanceProfileSpecification{Name: aws.String(NodeRole)}}); err != nil {
			return fmt.Errorf("cluster: instance profile of instance %s: %w", aws.ToString(id), err)
		}
	}
	return nil
}

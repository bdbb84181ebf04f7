package cloud

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	elb "github.com/aws/aws-sdk-go-v2/service/elasticloadbalancingv2"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// sessionCreds assumes roleARN with a token of the issuer and returns a provider of the
// temporary credentials.
func sessionCreds(t *testing.T, r *running, is *testIssuer, roleARN string) aws.CredentialsProvider {
	t.Helper()
	out, err := anonymousSTS(r.Cloud).AssumeRoleWithWebIdentity(context.Background(), &sts.AssumeRoleWithWebIdentityInput{
		RoleArn: aws.String(roleARN), RoleSessionName: aws.String("s1"), WebIdentityToken: aws.String(is.token(t, nil))})
	if err != nil {
		t.Fatalf("assume %s: %v", roleARN, err)
	}
	c := out.Credentials
	return credentials.NewStaticCredentialsProvider(*c.AccessKeyId, *c.SecretAccessKey, *c.SessionToken)
}

// TestSessionAuthorization checks a role's policies at each API: explicit denies, tag
// conditions, DryRun, and the refusals of ELB and IAM.
func TestSessionAuthorization(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	is := newTestIssuer(t)
	ctx := context.Background()
	roleARN := irsaRole(t, r.Cloud, is, "ops")
	_, err := newIAMClient(t, r.Cloud).PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String("ops"), PolicyName: aws.String("p"),
		PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[
			{"Effect":"Allow","Action":"ec2:*","Resource":"*"},
			{"Effect":"Deny","Action":"ec2:DeleteVolume","Resource":"*","Condition":{"StringEquals":{"ec2:ResourceTag/protected":"yes"}}},
			{"Effect":"Allow","Action":"elasticloadbalancing:Describe*","Resource":"*"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	creds := sessionCreds(t, r, is, roleARN)
	role := ec2.New(ec2.Options{Region: r.Region(), BaseEndpoint: aws.String(r.Endpoint()), RetryMaxAttempts: 1, Credentials: creds})
	zone := r.cfg.Zones[0]

	_, err = role.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(zone), Size: aws.Int32(1), DryRun: aws.Bool(true)})
	wantCode(t, err, "DryRunOperation")
	tagged := func(v string) []types.TagSpecification {
		return []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("protected"), Value: aws.String(v)}}}}
	}
	keep, err := role.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(zone), Size: aws.Int32(1), TagSpecifications: tagged("yes")})
	if err != nil {
		t.Fatal(err)
	}
	scratch, err := role.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(zone), Size: aws.Int32(1), TagSpecifications: tagged("no")})
	if err != nil {
		t.Fatal(err)
	}
	r.waitVolume(t, *keep.VolumeId, func(v types.Volume) bool { return v.State == types.VolumeStateAvailable })
	r.waitVolume(t, *scratch.VolumeId, func(v types.Volume) bool { return v.State == types.VolumeStateAvailable })
	_, err = role.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: keep.VolumeId})
	wantCode(t, err, "UnauthorizedOperation")
	if !strings.Contains(err.Error(), "on resource: arn:aws:ec2:"+r.Region()+":"+r.ownerID+":volume/"+*keep.VolumeId+" with an explicit deny in an identity-based policy") {
		t.Errorf("explicit deny: %v", err)
	}
	_, err = role.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: keep.VolumeId, DryRun: aws.Bool(true)})
	wantCode(t, err, "UnauthorizedOperation")
	if _, err := role.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: scratch.VolumeId}); err != nil {
		t.Errorf("delete an unprotected volume: %v", err)
	}

	lb := elb.New(elb.Options{Region: r.Region(), BaseEndpoint: aws.String(r.Endpoint()), RetryMaxAttempts: 1, Credentials: creds})
	if _, err := lb.DescribeLoadBalancers(ctx, &elb.DescribeLoadBalancersInput{}); err != nil {
		t.Errorf("describe load balancers: %v", err)
	}
	_, err = lb.CreateTargetGroup(ctx, &elb.CreateTargetGroupInput{Name: aws.String("tg")})
	wantCode(t, err, "AccessDenied")
	if !strings.Contains(err.Error(), "is not authorized to perform: elasticloadbalancing:CreateTargetGroup") {
		t.Errorf("ELB refusal: %v", err)
	}
	_, err = iam.New(iam.Options{Region: "us-east-1", BaseEndpoint: aws.String(r.Endpoint()), RetryMaxAttempts: 1, Credentials: creds}).
		ListRoles(ctx, &iam.ListRolesInput{})
	wantCode(t, err, "AccessDenied")
}

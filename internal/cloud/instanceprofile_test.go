package cloud

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials/ec2rolecreds"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

const ec2Trust = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`

// nodeProfile makes a role EC2 may assume with an inline policy, in an instance profile.
func nodeProfile(t testing.TB, c *Cloud, name, trust, policy string) string {
	t.Helper()
	ctx := context.Background()
	ic := newIAMClient(t, c)
	if _, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name), AssumeRolePolicyDocument: aws.String(trust)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ic.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(name), PolicyName: aws.String("node"), PolicyDocument: aws.String(policy)}); err != nil {
		t.Fatal(err)
	}
	ip, err := ic.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ic.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(name)}); err != nil {
		t.Fatal(err)
	}
	return *ip.InstanceProfile.Arn
}

// TestInstanceProfileCredentials: an instance launched with an instance profile gets
// its role's credentials from IMDS, as the SDK's EC2 role provider reads them, and the
// EC2 API answers them by the role's policy.
func TestInstanceProfileCredentials(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ctx := context.Background()
	arn := nodeProfile(t, r.Cloud, "node-role", ec2Trust, `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ec2:DescribeInstances","Resource":"*"}]}`)
	out, err := r.ec2.RunInstances(ctx, &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		IamInstanceProfile: &types.IamInstanceProfileSpecification{Name: aws.String("node-role")},
		MetadataOptions:    &types.InstanceMetadataOptionsRequest{HttpTokens: types.HttpTokensStateRequired, HttpPutResponseHopLimit: aws.Int32(2)}})
	if err != nil {
		t.Fatalf("run instance with a profile: %v", err)
	}
	inst := *out.Instances[0].InstanceId
	d, err := r.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{inst}})
	if err != nil {
		t.Fatal(err)
	}
	got := d.Reservations[0].Instances[0]
	if got.IamInstanceProfile == nil || *got.IamInstanceProfile.Arn != arn || !strings.HasPrefix(*got.IamInstanceProfile.Id, "AIPA") {
		t.Errorf("iamInstanceProfile %+v, want %s", got.IamInstanceProfile, arn)
	}
	if got.MetadataOptions == nil || aws.ToInt32(got.MetadataOptions.HttpPutResponseHopLimit) != 2 {
		t.Errorf("metadata options %+v, want hop limit 2", got.MetadataOptions)
	}

	client := imds.New(imds.Options{Endpoint: r.IMDSEndpoint(inst)})
	md, err := client.GetMetadata(ctx, &imds.GetMetadataInput{Path: "iam/security-credentials/"})
	if err != nil {
		t.Fatalf("iam/security-credentials/: %v", err)
	}
	if b, _ := io.ReadAll(md.Content); string(b) != "node-role" {
		t.Errorf("iam/security-credentials/ lists %q, want node-role", b)
	}
	info, err := client.GetIAMInfo(ctx, &imds.GetIAMInfoInput{})
	if err != nil || info.InstanceProfileArn != arn || info.Code != "Success" {
		t.Errorf("iam/info %+v, %v", info, err)
	}
	provider := ec2rolecreds.New(func(o *ec2rolecreds.Options) { o.Client = client })
	creds, err := provider.Retrieve(ctx)
	if err != nil {
		t.Fatalf("EC2 role credentials: %v", err)
	}
	if !strings.HasPrefix(creds.AccessKeyID, "ASIA") || creds.SessionToken == "" {
		t.Errorf("credentials %s (token %t), want temporary ones", creds.AccessKeyID, creds.SessionToken != "")
	}
	md, err = client.GetMetadata(ctx, &imds.GetMetadataInput{Path: "iam/security-credentials/node-role"})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Code, Type, AccessKeyId, Expiration string }
	if err := json.NewDecoder(md.Content).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	exp, err := time.Parse(time.RFC3339, doc.Expiration)
	if err != nil || doc.Code != "Success" || doc.Type != "AWS-HMAC" || doc.AccessKeyId != creds.AccessKeyID || time.Until(exp) < 5*time.Hour {
		t.Errorf("credentials document %+v (%v), want the same key valid for hours", doc, err)
	}
	node := ec2.New(ec2.Options{Region: r.Region(), BaseEndpoint: aws.String(r.Endpoint()), RetryMaxAttempts: 1, Credentials: provider})
	if _, err := node.DescribeInstances(ctx, &ec2.DescribeInstancesInput{}); err != nil {
		t.Errorf("describe instances as the node: %v", err)
	}
	_, err = node.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(r.cfg.Zones[0]), Size: aws.Int32(1)})
	wantCode(t, err, "UnauthorizedOperation")
	if !strings.Contains(err.Error(), "assumed-role/node-role/"+inst) {
		t.Errorf("refusal names %v, want the instance's session of node-role", err)
	}

	// Near expiry, IMDS hands out new credentials.
	r.mu.Lock()
	r.sessions[creds.AccessKeyID].Expiration = time.Now().Add(10 * time.Minute)
	r.mu.Unlock()
	again, err := ec2rolecreds.New(func(o *ec2rolecreds.Options) { o.Client = client }).Retrieve(ctx)
	if err != nil || again.AccessKeyID == creds.AccessKeyID {
		t.Errorf("credentials near expiry: %s (%v), want new ones", again.AccessKeyID, err)
	}
}

// TestInstanceProfileRefused checks RunInstances' answers to profiles it cannot use and
// IMDS's to a role EC2 may not assume.
func TestInstanceProfileRefused(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		in   *ec2.RunInstancesInput
		code string
	}{
		{"unknown name", &ec2.RunInstancesInput{IamInstanceProfile: &types.IamInstanceProfileSpecification{Name: aws.String("nope")}}, "InvalidParameterValue"},
		{"unknown arn", &ec2.RunInstancesInput{IamInstanceProfile: &types.IamInstanceProfileSpecification{Arn: aws.String("arn:aws:iam::" + r.ownerID + ":instance-profile/nope")}}, "InvalidParameterValue"},
		{"hop limit", &ec2.RunInstancesInput{MetadataOptions: &types.InstanceMetadataOptionsRequest{HttpPutResponseHopLimit: aws.Int32(65)}}, "InvalidParameterValue"},
	} {
		tc.in.MinCount, tc.in.MaxCount = aws.Int32(1), aws.Int32(1)
		_, err := r.ec2.RunInstances(ctx, tc.in)
		if apiCode(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	r.mu.Lock()
	n := len(r.instances)
	r.mu.Unlock()
	if n != 0 {
		t.Errorf("%d instances after refusals", n)
	}

	nodeProfile(t, r.Cloud, "not-for-ec2", testTrust, testPolicy)
	out, err := r.ec2.RunInstances(ctx, &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		IamInstanceProfile: &types.IamInstanceProfileSpecification{Name: aws.String("not-for-ec2")}})
	if err != nil {
		t.Fatal(err)
	}
	client := imds.New(imds.Options{Endpoint: r.IMDSEndpoint(*out.Instances[0].InstanceId)})
	md, err := client.GetMetadata(ctx, &imds.GetMetadataInput{Path: "iam/info"})
	if err != nil {
		t.Fatal(err)
	}
	var info struct{ Code string }
	json.NewDecoder(md.Content).Decode(&info)
	if info.Code != "AssumeRoleUnauthorizedAccess" {
		t.Errorf("iam/info code %q, want AssumeRoleUnauthorizedAccess", info.Code)
	}
	if _, err := client.GetMetadata(ctx, &imds.GetMetadataInput{Path: "iam/security-credentials/not-for-ec2"}); err == nil {
		t.Error("credentials served for a role EC2 may not assume")
	}
}

package cloud

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// TestInstanceMetadataChanges: an instance launched without a profile and with IMDSv1
// allowed gets, by ModifyInstanceMetadataOptions, IMDSv2 required (IMDSv1 then answers
// 401) and, by AssociateIamInstanceProfile, a profile whose role IMDS serves; a second
// association, unknown instances and bad values are refused with EC2's codes.
func TestInstanceMetadataChanges(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ctx := context.Background()
	arn := nodeProfile(t, r.Cloud, "late-role", ec2Trust, `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ec2:DescribeInstances","Resource":"*"}]}`)
	out, err := r.ec2.RunInstances(ctx, &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	inst := *out.Instances[0].InstanceId
	v1 := func() int {
		resp, err := http.Get(r.IMDSEndpoint(inst) + "/latest/meta-data/instance-id")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := v1(); code != http.StatusOK {
		t.Fatalf("IMDSv1 at launch: %d, want 200", code)
	}
	mod, err := r.ec2.ModifyInstanceMetadataOptions(ctx, &ec2.ModifyInstanceMetadataOptionsInput{InstanceId: aws.String(inst),
		HttpTokens: types.HttpTokensStateRequired, HttpPutResponseHopLimit: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	if o := mod.InstanceMetadataOptions; aws.ToString(mod.InstanceId) != inst || o == nil || o.HttpTokens != types.HttpTokensStateRequired || aws.ToInt32(o.HttpPutResponseHopLimit) != 1 {
		t.Errorf("ModifyInstanceMetadataOptions answered %+v", mod)
	}
	if code := v1(); code != http.StatusUnauthorized {
		t.Errorf("IMDSv1 with tokens required: %d, want 401", code)
	}
	assoc, err := r.ec2.AssociateIamInstanceProfile(ctx, &ec2.AssociateIamInstanceProfileInput{InstanceId: aws.String(inst),
		IamInstanceProfile: &types.IamInstanceProfileSpecification{Name: aws.String("late-role")}})
	if err != nil {
		t.Fatal(err)
	}
	if a := assoc.IamInstanceProfileAssociation; a == nil || aws.ToString(a.IamInstanceProfile.Arn) != arn || !strings.HasPrefix(aws.ToString(a.AssociationId), "iip-assoc-") {
		t.Errorf("AssociateIamInstanceProfile answered %+v", assoc.IamInstanceProfileAssociation)
	}
	d, err := r.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{inst}})
	if err != nil {
		t.Fatal(err)
	}
	got := d.Reservations[0].Instances[0]
	if got.IamInstanceProfile == nil || aws.ToString(got.IamInstanceProfile.Arn) != arn || got.MetadataOptions.HttpTokens != types.HttpTokensStateRequired {
		t.Errorf("the instance: profile %+v, metadata options %+v", got.IamInstanceProfile, got.MetadataOptions)
	}
	md, err := imds.New(imds.Options{Endpoint: r.IMDSEndpoint(inst)}).GetMetadata(ctx, &imds.GetMetadataInput{Path: "iam/security-credentials/"})
	if err != nil {
		t.Fatalf("IMDSv2 iam/security-credentials/: %v", err)
	}
	if b, _ := io.ReadAll(md.Content); string(b) != "late-role" {
		t.Errorf("iam/security-credentials/ lists %q, want late-role", b)
	}

	for what, call := range map[string]func() error{
		"IncorrectState": func() error {
			_, err := r.ec2.AssociateIamInstanceProfile(ctx, &ec2.AssociateIamInstanceProfileInput{InstanceId: aws.String(inst),
				IamInstanceProfile: &types.IamInstanceProfileSpecification{Name: aws.String("late-role")}})
			return err
		},
		"InvalidInstanceID.NotFound": func() error {
			_, err := r.ec2.ModifyInstanceMetadataOptions(ctx, &ec2.ModifyInstanceMetadataOptionsInput{InstanceId: aws.String("i-0123456789abcdef0"),
				HttpTokens: types.HttpTokensStateRequired})
			return err
		},
		"InvalidParameterValue": func() error {
			_, err := r.ec2.ModifyInstanceMetadataOptions(ctx, &ec2.ModifyInstanceMetadataOptionsInput{InstanceId: aws.String(inst),
				HttpPutResponseHopLimit: aws.Int32(65)})
			return err
		},
	} {
		if err := call(); err == nil || !strings.Contains(err.Error(), what) {
			t.Errorf("want %s, got %v", what, err)
		}
	}
}

package cloud

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
)

const testTrust = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Federated":"arn:aws:iam::123456789012:oidc-provider/example.com"},"Action":"sts:AssumeRoleWithWebIdentity"}]}`

const testPolicy = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ec2:Describe*","Resource":"*"}]}`

// iamCounts is how many IAM objects the cloud holds.
func (r *running) iamCounts() [4]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return [4]int{len(r.oidcProviders), len(r.roles), len(r.policies), len(r.profiles)}
}

// TestIAMActions runs each IAM action through the SDK and checks its answer.
func TestIAMActions(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ic := newIAMClient(t, r.Cloud)
	ctx := context.Background()

	prov, err := ic.CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{Url: aws.String("https://issuer.example.com/cluster"),
		ClientIDList: []string{"sts.amazonaws.com"}, ThumbprintList: []string{strings.Repeat("AB", 20)}})
	if err != nil {
		t.Fatalf("create provider: %v", err)
	}
	if want := "arn:aws:iam::" + r.ownerID + ":oidc-provider/issuer.example.com/cluster"; *prov.OpenIDConnectProviderArn != want {
		t.Errorf("provider ARN %s, want %s", *prov.OpenIDConnectProviderArn, want)
	}
	gp, err := ic.GetOpenIDConnectProvider(ctx, &iam.GetOpenIDConnectProviderInput{OpenIDConnectProviderArn: prov.OpenIDConnectProviderArn})
	if err != nil || *gp.Url != "issuer.example.com/cluster" || gp.ClientIDList[0] != "sts.amazonaws.com" || gp.ThumbprintList[0] != strings.Repeat("ab", 20) {
		t.Errorf("get provider: %+v, %v", gp, err)
	}
	lp, err := ic.ListOpenIDConnectProviders(ctx, &iam.ListOpenIDConnectProvidersInput{})
	if err != nil || len(lp.OpenIDConnectProviderList) != 1 {
		t.Errorf("list providers: %+v, %v", lp, err)
	}

	role, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("r1"), Path: aws.String("/kubelab/"),
		AssumeRolePolicyDocument: aws.String(testTrust), Tags: []iamtypes.Tag{{Key: aws.String("team"), Value: aws.String("a")}}})
	if err != nil {
		t.Fatalf("create role: %v", err)
	}
	if !strings.HasPrefix(*role.Role.RoleId, "AROA") || *role.Role.Arn != "arn:aws:iam::"+r.ownerID+":role/kubelab/r1" || *role.Role.MaxSessionDuration != 3600 {
		t.Errorf("role: %+v", role.Role)
	}
	gr, err := ic.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("R1")})
	if err != nil {
		t.Fatalf("get role (names are case-insensitive): %v", err)
	}
	if doc, _ := url.QueryUnescape(*gr.Role.AssumeRolePolicyDocument); doc != testTrust {
		t.Errorf("trust policy as returned: %q, decoded %q", *gr.Role.AssumeRolePolicyDocument, doc)
	}
	newTrust := strings.Replace(testTrust, "example.com", "example.org", 1)
	if _, err := ic.UpdateAssumeRolePolicy(ctx, &iam.UpdateAssumeRolePolicyInput{RoleName: aws.String("r1"), PolicyDocument: aws.String(newTrust)}); err != nil {
		t.Fatalf("update trust policy: %v", err)
	}
	_, err = ic.UpdateAssumeRolePolicy(ctx, &iam.UpdateAssumeRolePolicyInput{RoleName: aws.String("r1"), PolicyDocument: aws.String(testPolicy)})
	wantCode(t, err, "MalformedPolicyDocument")
	if gr, err := ic.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("r1")}); err != nil || !strings.Contains(*gr.Role.AssumeRolePolicyDocument, "example.org") {
		t.Errorf("trust policy after the update: %v, %v", gr, err)
	}
	if _, err := ic.UpdateOpenIDConnectProviderThumbprint(ctx, &iam.UpdateOpenIDConnectProviderThumbprintInput{
		OpenIDConnectProviderArn: prov.OpenIDConnectProviderArn, ThumbprintList: []string{strings.Repeat("cd", 20)}}); err != nil {
		t.Fatalf("update thumbprints: %v", err)
	}
	if gp, err := ic.GetOpenIDConnectProvider(ctx, &iam.GetOpenIDConnectProviderInput{OpenIDConnectProviderArn: prov.OpenIDConnectProviderArn}); err != nil || gp.ThumbprintList[0] != strings.Repeat("cd", 20) {
		t.Errorf("thumbprints after the update: %v, %v", gp, err)
	}
	if lr, err := ic.ListRoles(ctx, &iam.ListRolesInput{}); err != nil || len(lr.Roles) != 1 {
		t.Errorf("list roles: %v, %v", lr, err)
	}

	if _, err := ic.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String("r1"), PolicyName: aws.String("inline"), PolicyDocument: aws.String(testPolicy)}); err != nil {
		t.Fatalf("put role policy: %v", err)
	}
	grp, err := ic.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String("r1"), PolicyName: aws.String("inline")})
	if err != nil {
		t.Fatalf("get role policy: %v", err)
	}
	if doc, _ := url.QueryUnescape(*grp.PolicyDocument); doc != testPolicy {
		t.Errorf("inline policy %q", doc)
	}
	if lrp, err := ic.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: aws.String("r1")}); err != nil || len(lrp.PolicyNames) != 1 || lrp.PolicyNames[0] != "inline" {
		t.Errorf("list role policies: %+v, %v", lrp, err)
	}

	pol, err := ic.CreatePolicy(ctx, &iam.CreatePolicyInput{PolicyName: aws.String("p1"), PolicyDocument: aws.String(testPolicy)})
	if err != nil {
		t.Fatalf("create policy: %v", err)
	}
	if _, err := ic.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String("r1"), PolicyArn: pol.Policy.Arn}); err != nil {
		t.Fatalf("attach: %v", err)
	}
	if _, err := ic.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String("r1"), PolicyArn: aws.String("arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy")}); err != nil {
		t.Fatalf("attach the AWS managed policy: %v", err)
	}
	gpol, err := ic.GetPolicy(ctx, &iam.GetPolicyInput{PolicyArn: pol.Policy.Arn})
	if err != nil || *gpol.Policy.AttachmentCount != 1 || *gpol.Policy.DefaultVersionId != "v1" {
		t.Errorf("get policy: %+v, %v", gpol, err)
	}
	gpv, err := ic.GetPolicyVersion(ctx, &iam.GetPolicyVersionInput{PolicyArn: aws.String("arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"), VersionId: aws.String("v1")})
	if err != nil {
		t.Fatalf("get policy version: %v", err)
	}
	if doc, _ := url.QueryUnescape(*gpv.PolicyVersion.Document); !strings.Contains(doc, "ebs.csi.aws.com/cluster") {
		t.Errorf("the driver's policy document: %q", doc)
	}
	la, err := ic.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String("r1")})
	if err != nil || len(la.AttachedPolicies) != 2 || *la.AttachedPolicies[1].PolicyName != "AmazonEBSCSIDriverPolicy" {
		t.Errorf("attached: %+v, %v", la, err)
	}

	ip, err := ic.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("node")})
	if err != nil || !strings.HasPrefix(*ip.InstanceProfile.InstanceProfileId, "AIPA") {
		t.Fatalf("create instance profile: %+v, %v", ip, err)
	}
	if _, err := ic.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("node"), RoleName: aws.String("r1")}); err != nil {
		t.Fatalf("add role: %v", err)
	}
	gip, err := ic.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("node")})
	if err != nil || len(gip.InstanceProfile.Roles) != 1 || *gip.InstanceProfile.Roles[0].RoleName != "r1" {
		t.Errorf("get instance profile: %+v, %v", gip, err)
	}

	// Deletion in the order IAM wants it.
	_, err = ic.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String("r1")})
	wantCode(t, err, "DeleteConflict")
	_, err = ic.DeletePolicy(ctx, &iam.DeletePolicyInput{PolicyArn: pol.Policy.Arn})
	wantCode(t, err, "DeleteConflict")
	for _, arn := range []string{*pol.Policy.Arn, "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy"} {
		if _, err := ic.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: aws.String("r1"), PolicyArn: aws.String(arn)}); err != nil {
			t.Fatalf("detach: %v", err)
		}
	}
	if _, err := ic.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: aws.String("r1"), PolicyName: aws.String("inline")}); err != nil {
		t.Fatalf("delete role policy: %v", err)
	}
	_, err = ic.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String("r1")})
	wantCode(t, err, "DeleteConflict") // still in the instance profile
	_, err = ic.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String("node")})
	wantCode(t, err, "DeleteConflict") // it holds the role
	if _, err := ic.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String("node"), RoleName: aws.String("r1")}); err != nil {
		t.Fatalf("remove role from profile: %v", err)
	}
	_, err = ic.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{InstanceProfileName: aws.String("node"), RoleName: aws.String("r1")})
	wantCode(t, err, "NoSuchEntity")
	if _, err := ic.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String("r1")}); err != nil {
		t.Errorf("delete role: %v", err)
	}
	if _, err := ic.DeletePolicy(ctx, &iam.DeletePolicyInput{PolicyArn: pol.Policy.Arn}); err != nil {
		t.Errorf("delete policy: %v", err)
	}
	if _, err := ic.DeleteOpenIDConnectProvider(ctx, &iam.DeleteOpenIDConnectProviderInput{OpenIDConnectProviderArn: prov.OpenIDConnectProviderArn}); err != nil {
		t.Errorf("delete provider: %v", err)
	}
	if _, err := ic.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String("node")}); err != nil {
		t.Errorf("delete instance profile: %v", err)
	}
	if got := r.iamCounts(); got != [4]int{} {
		t.Errorf("left: %v providers, roles, policies, profiles; want none", got)
	}
}

// TestIAMErrors checks IAM's error answers; a refused request leaves nothing behind.
func TestIAMErrors(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ic := newIAMClient(t, r.Cloud)
	ctx := context.Background()
	if _, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("exists"), AssumeRolePolicyDocument: aws.String(testTrust)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ic.CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{Url: aws.String("https://exists.example.com"), ClientIDList: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ic.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("full")}); err != nil {
		t.Fatal(err)
	}
	if _, err := ic.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("full"), RoleName: aws.String("exists")}); err != nil {
		t.Fatal(err)
	}
	before := r.iamCounts()
	missingPolicy := "arn:aws:iam::" + r.ownerID + ":policy/nope"
	for _, tc := range []struct {
		name string
		call func() error
		code string
	}{
		{"role exists", func() error {
			_, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("EXISTS"), AssumeRolePolicyDocument: aws.String(testTrust)})
			return err
		}, "EntityAlreadyExists"},
		{"trust not json", func() error {
			_, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("new"), AssumeRolePolicyDocument: aws.String("{")})
			return err
		}, "MalformedPolicyDocument"},
		{"trust without principal", func() error {
			_, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("new"), AssumeRolePolicyDocument: aws.String(testPolicy)})
			return err
		}, "MalformedPolicyDocument"},
		{"bad role name", func() error {
			_, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("no spaces"), AssumeRolePolicyDocument: aws.String(testTrust)})
			return err
		}, "ValidationError"},
		{"session too long", func() error {
			_, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("new"), AssumeRolePolicyDocument: aws.String(testTrust), MaxSessionDuration: aws.Int32(50000)})
			return err
		}, "ValidationError"},
		{"trust too big", func() error {
			big := strings.Replace(testTrust, `"Action"`, `"Sid":"`+strings.Repeat("x", 2100)+`","Action"`, 1)
			_, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("new"), AssumeRolePolicyDocument: aws.String(big)})
			return err
		}, "LimitExceeded"},
		{"get missing role", func() error { _, err := ic.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("nope")}); return err }, "NoSuchEntity"},
		{"delete missing role", func() error {
			_, err := ic.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String("nope")})
			return err
		}, "NoSuchEntity"},
		{"inline on missing role", func() error {
			_, err := ic.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String("nope"), PolicyName: aws.String("p"), PolicyDocument: aws.String(testPolicy)})
			return err
		}, "NoSuchEntity"},
		{"inline malformed", func() error {
			_, err := ic.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String("exists"), PolicyName: aws.String("p"), PolicyDocument: aws.String(testTrust)})
			return err
		}, "MalformedPolicyDocument"},
		{"inline too big", func() error {
			big := strings.Replace(testPolicy, `"Action"`, `"Sid":"`+strings.Repeat("x", 10300)+`","Action"`, 1)
			_, err := ic.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String("exists"), PolicyName: aws.String("p"), PolicyDocument: aws.String(big)})
			return err
		}, "LimitExceeded"},
		{"get missing inline", func() error {
			_, err := ic.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String("exists"), PolicyName: aws.String("p")})
			return err
		}, "NoSuchEntity"},
		{"delete missing inline", func() error {
			_, err := ic.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: aws.String("exists"), PolicyName: aws.String("p")})
			return err
		}, "NoSuchEntity"},
		{"policy malformed", func() error {
			_, err := ic.CreatePolicy(ctx, &iam.CreatePolicyInput{PolicyName: aws.String("p"), PolicyDocument: aws.String(`{"Statement":[{"Effect":"Allow","Action":"ec2:*"}]}`)})
			return err
		}, "MalformedPolicyDocument"},
		{"get missing policy", func() error {
			_, err := ic.GetPolicy(ctx, &iam.GetPolicyInput{PolicyArn: aws.String(missingPolicy)})
			return err
		}, "NoSuchEntity"},
		{"missing policy version", func() error {
			_, err := ic.GetPolicyVersion(ctx, &iam.GetPolicyVersionInput{PolicyArn: aws.String("arn:aws:iam::aws:policy/AdministratorAccess"), VersionId: aws.String("v9")})
			return err
		}, "NoSuchEntity"},
		{"attach missing policy", func() error {
			_, err := ic.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String("exists"), PolicyArn: aws.String(missingPolicy)})
			return err
		}, "NoSuchEntity"},
		{"attach to missing role", func() error {
			_, err := ic.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String("nope"), PolicyArn: aws.String("arn:aws:iam::aws:policy/AdministratorAccess")})
			return err
		}, "NoSuchEntity"},
		{"detach not attached", func() error {
			_, err := ic.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: aws.String("exists"), PolicyArn: aws.String("arn:aws:iam::aws:policy/AdministratorAccess")})
			return err
		}, "NoSuchEntity"},
		{"provider exists", func() error {
			_, err := ic.CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{Url: aws.String("https://exists.example.com"), ClientIDList: []string{"a"}})
			return err
		}, "EntityAlreadyExists"},
		{"provider not https", func() error {
			_, err := ic.CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{Url: aws.String("http://plain.example.com")})
			return err
		}, "ValidationError"},
		{"provider bad thumbprint", func() error {
			_, err := ic.CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{Url: aws.String("https://new.example.com"), ThumbprintList: []string{"abc"}})
			return err
		}, "ValidationError"},
		{"provider too many thumbprints", func() error {
			tp := strings.Repeat("a", 40)
			_, err := ic.CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{Url: aws.String("https://new.example.com"), ThumbprintList: []string{tp, tp, tp, tp, tp, tp}})
			return err
		}, "LimitExceeded"},
		{"get missing provider", func() error {
			_, err := ic.GetOpenIDConnectProvider(ctx, &iam.GetOpenIDConnectProviderInput{OpenIDConnectProviderArn: aws.String("arn:aws:iam::" + r.ownerID + ":oidc-provider/nope")})
			return err
		}, "NoSuchEntity"},
		{"delete missing provider", func() error {
			_, err := ic.DeleteOpenIDConnectProvider(ctx, &iam.DeleteOpenIDConnectProviderInput{OpenIDConnectProviderArn: aws.String("arn:aws:iam::" + r.ownerID + ":oidc-provider/nope")})
			return err
		}, "NoSuchEntity"},
		{"profile exists", func() error {
			_, err := ic.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String("full")})
			return err
		}, "EntityAlreadyExists"},
		{"second role in profile", func() error {
			_, err := ic.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String("full"), RoleName: aws.String("exists")})
			return err
		}, "LimitExceeded"},
		{"missing profile", func() error {
			_, err := ic.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String("nope")})
			return err
		}, "NoSuchEntity"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, tc.call(), tc.code)
			if got := r.iamCounts(); got != before {
				t.Errorf("objects %v after the refusal, want %v", got, before)
			}
		})
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.roles["exists"].Inline) != 0 || len(r.roles["exists"].Attached) != 0 {
		t.Errorf("role changed by refused requests: %+v", r.roles["exists"])
	}
}

// TestIAMLimits checks the quota of managed policies per role.
func TestIAMLimits(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ic := newIAMClient(t, r.Cloud)
	ctx := context.Background()
	if _, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("r"), AssumeRolePolicyDocument: aws.String(testTrust)}); err != nil {
		t.Fatal(err)
	}
	for i := range 11 {
		p, err := ic.CreatePolicy(ctx, &iam.CreatePolicyInput{PolicyName: aws.String("p" + string(rune('a'+i))), PolicyDocument: aws.String(testPolicy)})
		if err != nil {
			t.Fatal(err)
		}
		_, err = ic.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String("r"), PolicyArn: p.Policy.Arn})
		if i < 10 && err != nil {
			t.Fatalf("attach %d: %v", i, err)
		}
		if i == 10 {
			wantCode(t, err, "LimitExceeded")
		}
	}
	_, err := ic.CreatePolicy(ctx, &iam.CreatePolicyInput{PolicyName: aws.String("PA"), PolicyDocument: aws.String(testPolicy)})
	wantCode(t, err, "EntityAlreadyExists")
}

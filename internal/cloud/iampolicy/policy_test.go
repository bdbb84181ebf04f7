package iampolicy

import (
	"errors"
	"os"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		trust     bool
		wantErr   string
	}{
		{"statement object", `{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"ec2:*","Resource":"*"}}`, false, ""},
		{"statement list", `{"Version":"2012-10-17","Statement":[{"Effect":"Deny","NotAction":["ec2:Describe*"],"NotResource":"*"}]}`, false, ""},
		{"no version", `{"Statement":[{"Effect":"Allow","Action":"ec2:*","Resource":"*"}]}`, false, ""},
		{"not json", `{"Version":`, false, "Syntax errors in policy."},
		{"trailing garbage", `{"Statement":[]} x`, false, "Syntax errors in policy."},
		{"bad version", `{"Version":"2020-01-01","Statement":[{"Effect":"Allow","Action":"ec2:*","Resource":"*"}]}`, false, "The policy document Version 2020-01-01 is not valid."},
		{"no statement", `{"Version":"2012-10-17"}`, false, "Missing required field Statement"},
		{"bad effect", `{"Statement":{"Effect":"Maybe","Action":"ec2:*","Resource":"*"}}`, false, "Invalid effect: Maybe"},
		{"no action", `{"Statement":{"Effect":"Allow","Resource":"*"}}`, false, "Policy statement must contain actions."},
		{"no vendor", `{"Statement":{"Effect":"Allow","Action":"CreateVolume","Resource":"*"}}`, false, "Actions/Conditions must be prefaced by a vendor, e.g., iam, sdb, ec2, etc."},
		{"no resource", `{"Statement":{"Effect":"Allow","Action":"ec2:*"}}`, false, "Policy statement must contain resources."},
		{"principal in identity policy", `{"Statement":{"Effect":"Allow","Principal":"*","Action":"ec2:*","Resource":"*"}}`, false, "Policy document should not specify a principal."},
		{"unknown operator", `{"Statement":{"Effect":"Allow","Action":"ec2:*","Resource":"*","Condition":{"StringSorta":{"a":"b"}}}}`, false, "Invalid Condition type : StringSorta."},
		{"unknown element", `{"Statement":{"Effect":"Allow","Action":"ec2:*","Resource":"*","Colour":"red"}}`, false, "Statement contains an unknown element Colour."},
		{"trust", `{"Statement":{"Effect":"Allow","Principal":{"Federated":"arn:aws:iam::1:oidc-provider/x"},"Action":"sts:AssumeRoleWithWebIdentity"}}`, true, ""},
		{"trust without principal", `{"Statement":{"Effect":"Allow","Action":"sts:AssumeRoleWithWebIdentity"}}`, true, "Missing required field Principal"},
		{"trust with resource", `{"Statement":{"Effect":"Allow","Principal":"*","Action":"sts:AssumeRole","Resource":"*"}}`, true, "Has prohibited field Resource"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.doc, ParseOptions{Trust: tc.trust})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			var perr *Error
			if !errors.As(err, &perr) || perr.Msg != tc.wantErr {
				t.Fatalf("Parse: got %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true},
		{"ec2:*", "ec2:CreateVolume", true},
		{"ec2:Describe*", "ec2:CreateVolume", false},
		{"arn:aws:ec2:*:*:volume/*", "arn:aws:ec2:us-east-1:123456789012:volume/vol-1", true},
		{"arn:aws:ec2:*:*:volume/*", "arn:aws:ec2:us-east-1:123456789012:snapshot/snap-1", false},
		{"vol-?", "vol-1", true},
		{"vol-?", "vol-12", false},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXbY", false},
	} {
		if got := Match(tc.p, tc.s); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.p, tc.s, got, tc.want)
		}
	}
}

func mustParse(t *testing.T, doc string, trust bool) *Document {
	t.Helper()
	d, err := Parse(doc, ParseOptions{Trust: trust})
	if err != nil {
		t.Fatalf("Parse(%s): %v", doc, err)
	}
	return d
}

func TestEvaluate(t *testing.T) {
	allowEC2 := `{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"EC2:*","Resource":"*"}}`
	denyCreate := `{"Version":"2012-10-17","Statement":{"Effect":"Deny","Action":"ec2:CreateVolume","Resource":"*"}}`
	notAction := `{"Version":"2012-10-17","Statement":{"Effect":"Allow","NotAction":"ec2:Delete*","Resource":"*"}}`
	notResource := `{"Version":"2012-10-17","Statement":{"Effect":"Allow","Action":"ec2:*","NotResource":"arn:aws:ec2:*:*:instance/*"}}`
	cond := `{"Version":"2012-10-17","Statement":[
		{"Effect":"Allow","Action":"ec2:DeleteVolume","Resource":"*","Condition":{"StringEquals":{"ec2:ResourceTag/team":["a","b"]}}},
		{"Effect":"Allow","Action":"ec2:DetachVolume","Resource":"*","Condition":{"StringNotEquals":{"ec2:ResourceTag/team":"c"}}},
		{"Effect":"Allow","Action":"ec2:AttachVolume","Resource":"*","Condition":{"StringLikeIfExists":{"ec2:ResourceTag/team":"x*"}}},
		{"Effect":"Allow","Action":"ec2:ModifyVolume","Resource":"*","Condition":{"Null":{"aws:RequestTag/owner":"false"},"StringLike":{"aws:RequestTag/owner":"*"}}}]}`
	vol := "arn:aws:ec2:us-east-1:123456789012:volume/vol-0123456789abcdef0"
	inst := "arn:aws:ec2:us-east-1:123456789012:instance/i-0123456789abcdef0"
	for _, tc := range []struct {
		name string
		docs []string
		req  Request
		want Decision
	}{
		{"nothing allows", nil, Request{Action: "ec2:DescribeVolumes", Resource: "*"}, ImplicitDeny},
		{"allow, action case-insensitive", []string{allowEC2}, Request{Action: "ec2:describevolumes", Resource: "*"}, Allow},
		{"other service", []string{allowEC2}, Request{Action: "elasticloadbalancing:DescribeLoadBalancers", Resource: "*"}, ImplicitDeny},
		{"explicit deny wins", []string{allowEC2, denyCreate}, Request{Action: "ec2:CreateVolume", Resource: vol}, ExplicitDeny},
		{"deny of other action", []string{allowEC2, denyCreate}, Request{Action: "ec2:DeleteVolume", Resource: vol}, Allow},
		{"not action excludes", []string{notAction}, Request{Action: "ec2:DeleteVolume", Resource: vol}, ImplicitDeny},
		{"not action allows others", []string{notAction}, Request{Action: "ec2:CreateVolume", Resource: vol}, Allow},
		{"not resource excludes", []string{notResource}, Request{Action: "ec2:StopInstances", Resource: inst}, ImplicitDeny},
		{"not resource allows others", []string{notResource}, Request{Action: "ec2:DeleteVolume", Resource: vol}, Allow},
		{"string equals matches one", []string{cond}, Request{Action: "ec2:DeleteVolume", Resource: vol, Context: map[string][]string{"ec2:ResourceTag/team": {"b"}}}, Allow},
		{"string equals other value", []string{cond}, Request{Action: "ec2:DeleteVolume", Resource: vol, Context: map[string][]string{"ec2:ResourceTag/team": {"z"}}}, ImplicitDeny},
		{"string equals absent key", []string{cond}, Request{Action: "ec2:DeleteVolume", Resource: vol}, ImplicitDeny},
		{"condition key case-insensitive", []string{cond}, Request{Action: "ec2:DeleteVolume", Resource: vol, Context: map[string][]string{"EC2:resourcetag/TEAM": {"a"}}}, Allow},
		{"string not equals other", []string{cond}, Request{Action: "ec2:DetachVolume", Resource: vol, Context: map[string][]string{"ec2:ResourceTag/team": {"d"}}}, Allow},
		{"string not equals same", []string{cond}, Request{Action: "ec2:DetachVolume", Resource: vol, Context: map[string][]string{"ec2:ResourceTag/team": {"c"}}}, ImplicitDeny},
		{"string not equals absent key", []string{cond}, Request{Action: "ec2:DetachVolume", Resource: vol}, Allow},
		{"if exists absent", []string{cond}, Request{Action: "ec2:AttachVolume", Resource: vol}, Allow},
		{"if exists present, no match", []string{cond}, Request{Action: "ec2:AttachVolume", Resource: vol, Context: map[string][]string{"ec2:ResourceTag/team": {"y"}}}, ImplicitDeny},
		{"null false and like", []string{cond}, Request{Action: "ec2:ModifyVolume", Resource: vol, Context: map[string][]string{"aws:RequestTag/owner": {"me"}}}, Allow},
		{"null false, key absent", []string{cond}, Request{Action: "ec2:ModifyVolume", Resource: vol}, ImplicitDeny},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var docs []*Document
			for _, d := range tc.docs {
				docs = append(docs, mustParse(t, d, false))
			}
			if got := Evaluate(tc.req, docs...); got != tc.want {
				t.Errorf("Evaluate = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestEvaluateTrust(t *testing.T) {
	provider := "arn:aws:iam::123456789012:oidc-provider/127.0.0.1:6443/cluster"
	trust := mustParse(t, `{"Version":"2012-10-17","Statement":[{"Effect":"Allow",
		"Principal":{"Federated":"`+provider+`"},"Action":"sts:AssumeRoleWithWebIdentity",
		"Condition":{"StringEquals":{"127.0.0.1:6443/cluster:sub":"system:serviceaccount:kube-system:ebs-csi-controller-sa",
		"127.0.0.1:6443/cluster:aud":"sts.amazonaws.com"}}}]}`, true)
	ctx := map[string][]string{
		"127.0.0.1:6443/cluster:sub": {"system:serviceaccount:kube-system:ebs-csi-controller-sa"},
		"127.0.0.1:6443/cluster:aud": {"sts.amazonaws.com"},
	}
	req := Request{PrincipalType: "Federated", Principal: provider, Action: "sts:AssumeRoleWithWebIdentity", Context: ctx}
	if got := Evaluate(req, trust); got != Allow {
		t.Errorf("matching token: %v, want Allow", got)
	}
	other := req
	other.Principal = "arn:aws:iam::123456789012:oidc-provider/other"
	if got := Evaluate(other, trust); got != ImplicitDeny {
		t.Errorf("other provider: %v, want ImplicitDeny", got)
	}
	sub := req
	sub.Context = map[string][]string{"127.0.0.1:6443/cluster:sub": {"system:serviceaccount:default:app"}, "127.0.0.1:6443/cluster:aud": {"sts.amazonaws.com"}}
	if got := Evaluate(sub, trust); got != ImplicitDeny {
		t.Errorf("other subject: %v, want ImplicitDeny", got)
	}
	wrongAction := req
	wrongAction.Action = "sts:AssumeRole"
	if got := Evaluate(wrongAction, trust); got != ImplicitDeny {
		t.Errorf("other action: %v, want ImplicitDeny", got)
	}
}

// TestEBSCSIDriverPolicy checks the managed policy the EBS CSI driver runs with: it may
// create volumes only with its tags, delete only volumes it tagged.
func TestEBSCSIDriverPolicy(t *testing.T) {
	data, err := os.ReadFile("../managedpolicies/AmazonEBSCSIDriverPolicy.json")
	if err != nil {
		t.Fatal(err)
	}
	doc := mustParse(t, string(data), false)
	vol := "arn:aws:ec2:us-east-1:123456789012:volume/*"
	for _, tc := range []struct {
		name string
		req  Request
		want Decision
	}{
		{"describe", Request{Action: "ec2:DescribeVolumes", Resource: "*"}, Allow},
		{"create with cluster tag", Request{Action: "ec2:CreateVolume", Resource: vol, Context: map[string][]string{"aws:RequestTag/ebs.csi.aws.com/cluster": {"true"}}}, Allow},
		{"create with volume name tag", Request{Action: "ec2:CreateVolume", Resource: vol, Context: map[string][]string{"aws:RequestTag/CSIVolumeName": {"pvc-1"}}}, Allow},
		{"create untagged", Request{Action: "ec2:CreateVolume", Resource: vol}, ImplicitDeny},
		{"tag on create", Request{Action: "ec2:CreateTags", Resource: vol, Context: map[string][]string{"ec2:CreateAction": {"CreateVolume"}}}, Allow},
		{"tag later", Request{Action: "ec2:CreateTags", Resource: vol}, ImplicitDeny},
		{"delete its volume", Request{Action: "ec2:DeleteVolume", Resource: "arn:aws:ec2:us-east-1:123456789012:volume/vol-1", Context: map[string][]string{"ec2:ResourceTag/ebs.csi.aws.com/cluster": {"true"}}}, Allow},
		{"delete other volume", Request{Action: "ec2:DeleteVolume", Resource: "arn:aws:ec2:us-east-1:123456789012:volume/vol-1"}, ImplicitDeny},
		{"attach", Request{Action: "ec2:AttachVolume", Resource: "arn:aws:ec2:us-east-1:123456789012:instance/i-1"}, Allow},
		{"run instances", Request{Action: "ec2:RunInstances", Resource: "*"}, ImplicitDeny},
	} {
		if got := Evaluate(tc.req, doc); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

package cloud

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestIAMAWSCLI drives IAM and STS with the aws CLI: an OIDC provider and a role made
// with `aws iam`, the role assumed with `aws sts assume-role-with-web-identity`, and its
// credentials used by `aws ec2` and `aws sts get-caller-identity`.
func TestIAMAWSCLI(t *testing.T) {
	cli := awsCLI(t)
	r := startCloud(t, Config{Hollow: true})
	is := newTestIssuer(t)
	dir := t.TempDir()
	aws := func(env []string, args ...string) ([]byte, error) {
		t.Helper()
		cmd := exec.Command(cli, append([]string{"--endpoint-url", r.Endpoint(), "--output", "json"}, args...)...)
		cmd.Env = append([]string{"AWS_CONFIG_FILE=" + r.ConfigFile(), "AWS_PAGER=", "HOME=" + dir}, env...)
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "HOME=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		return cmd.CombinedOutput()
	}
	admin := []string{"AWS_SHARED_CREDENTIALS_FILE=" + r.CredentialsFile()}
	must := func(env []string, args ...string) map[string]any {
		t.Helper()
		out, err := aws(env, args...)
		if err != nil {
			t.Fatalf("aws %v: %v\n%s", args, err, out)
		}
		var m map[string]any
		if len(out) > 0 {
			if err := json.Unmarshal(out, &m); err != nil {
				t.Fatalf("aws %v: %v\n%s", args, err, out)
			}
		}
		return m
	}
	host := strings.TrimPrefix(is.srv.URL, "https://")
	prov := must(admin, "iam", "create-open-id-connect-provider", "--url", is.srv.URL, "--client-id-list", "sts.amazonaws.com",
		"--thumbprint-list", is.thumbprint())
	provARN, _ := prov["OpenIDConnectProviderArn"].(string)
	trust := filepath.Join(dir, "trust.json")
	os.WriteFile(trust, []byte(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Federated":"`+provARN+`"},
		"Action":"sts:AssumeRoleWithWebIdentity","Condition":{"StringEquals":{"`+host+`:sub":"system:serviceaccount:default:app"}}}]}`), 0o600)
	role := must(admin, "iam", "create-role", "--role-name", "cli-role", "--assume-role-policy-document", "file://"+trust)
	roleARN := role["Role"].(map[string]any)["Arn"].(string)
	// The CLI decodes the URL-encoded trust policy it gets back into JSON.
	if doc, ok := role["Role"].(map[string]any)["AssumeRolePolicyDocument"].(map[string]any); !ok || doc["Version"] != "2012-10-17" {
		t.Errorf("create-role's trust policy: %v", role["Role"])
	}
	must(admin, "iam", "put-role-policy", "--role-name", "cli-role", "--policy-name", "describe",
		"--policy-document", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"ec2:Describe*","Resource":"*"}]}`)

	noCreds := []string{"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none")}
	out := must(noCreds, "sts", "assume-role-with-web-identity", "--role-arn", roleARN, "--role-session-name", "cli",
		"--web-identity-token", is.token(t, nil))
	creds := out["Credentials"].(map[string]any)
	session := append(noCreds, "AWS_ACCESS_KEY_ID="+creds["AccessKeyId"].(string), "AWS_SECRET_ACCESS_KEY="+creds["SecretAccessKey"].(string),
		"AWS_SESSION_TOKEN="+creds["SessionToken"].(string))
	id := must(session, "sts", "get-caller-identity")
	if id["Arn"] != "arn:aws:sts::"+r.ownerID+":assumed-role/cli-role/cli" {
		t.Errorf("get-caller-identity: %v", id)
	}
	must(session, "ec2", "describe-volumes")
	msg, err := aws(session, "ec2", "create-volume", "--availability-zone", r.cfg.Zones[0], "--size", "1")
	if err == nil || !strings.Contains(string(msg), "(UnauthorizedOperation)") {
		t.Errorf("create-volume as the role: %v\n%s", err, msg)
	}
	msg, err = aws(noCreds, "sts", "assume-role-with-web-identity", "--role-arn", roleARN, "--role-session-name", "cli",
		"--web-identity-token", is.token(t, map[string]any{"aud": "other"}))
	if err == nil || !strings.Contains(string(msg), "(InvalidIdentityToken)") {
		t.Errorf("a token for another audience: %v\n%s", err, msg)
	}
}

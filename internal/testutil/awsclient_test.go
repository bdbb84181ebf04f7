package testutil

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// fakeAWS answers, on one endpoint as kubelab's cloud does, STS's
// AssumeRoleWithWebIdentity (unsigned, for the one token and role it knows) and
// GetCallerIdentity, and EC2's DescribeVolumes and CreateVolume (refused as a role
// without ec2:CreateVolume is): the signed calls only with the temporary credentials it
// handed out.
type fakeAWS struct {
	token, role string

	mu    sync.Mutex
	calls []string
}

const (
	fakeKeyID   = "ASIAKUBELABTEST00001"
	fakeSession = "the-session-token"
)

func (f *fakeAWS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	action := r.PostForm.Get("Action")
	f.mu.Lock()
	f.calls = append(f.calls, action)
	f.mu.Unlock()
	signed := strings.Contains(r.Header.Get("Authorization"), "Credential="+fakeKeyID+"/") &&
		r.Header.Get("X-Amz-Security-Token") == fakeSession
	sts := func(status int, body string) {
		w.Header().Set("Content-Type", "text/xml")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}
	switch {
	case action == "AssumeRoleWithWebIdentity":
		if r.Header.Get("Authorization") != "" || r.PostForm.Get("WebIdentityToken") != f.token || r.PostForm.Get("RoleArn") != f.role {
			sts(http.StatusBadRequest, `<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>`+
				`<Code>InvalidIdentityToken</Code><Message>not the token or role of the test</Message></Error><RequestId>1</RequestId></ErrorResponse>`)
			return
		}
		sts(http.StatusOK, `<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><AssumeRoleWithWebIdentityResult>`+
			`<SubjectFromWebIdentityToken>system:serviceaccount:team:builder</SubjectFromWebIdentityToken><Audience>sts.amazonaws.com</Audience>`+
			`<AssumedRoleUser><Arn>arn:aws:sts::111122223333:assumed-role/irsa-test/s1</Arn><AssumedRoleId>AROAKUBELAB:s1</AssumedRoleId></AssumedRoleUser>`+
			`<Credentials><AccessKeyId>`+fakeKeyID+`</AccessKeyId><SecretAccessKey>secret</SecretAccessKey><SessionToken>`+fakeSession+`</SessionToken>`+
			`<Expiration>2099-01-01T00:00:00Z</Expiration></Credentials></AssumeRoleWithWebIdentityResult>`+
			`<ResponseMetadata><RequestId>2</RequestId></ResponseMetadata></AssumeRoleWithWebIdentityResponse>`)
	case !signed:
		http.Error(w, "not signed with the temporary credentials", http.StatusForbidden)
	case action == "GetCallerIdentity":
		sts(http.StatusOK, `<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><GetCallerIdentityResult>`+
			`<Arn>arn:aws:sts::111122223333:assumed-role/irsa-test/s1</Arn><UserId>AROAKUBELAB:s1</UserId><Account>111122223333</Account>`+
			`</GetCallerIdentityResult><ResponseMetadata><RequestId>3</RequestId></ResponseMetadata></GetCallerIdentityResponse>`)
	case action == "DescribeVolumes":
		sts(http.StatusOK, `<DescribeVolumesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>4</requestId>`+
			`<volumeSet><item><volumeId>vol-0123456789abcdef0</volumeId></item></volumeSet></DescribeVolumesResponse>`)
	case action == "CreateVolume":
		sts(http.StatusForbidden, `<Response><Errors><Error><Code>UnauthorizedOperation</Code>`+
			`<Message>You are not authorized to perform this operation.</Message></Error></Errors><RequestID>5</RequestID></Response>`)
	default:
		http.Error(w, "unknown action "+action, http.StatusBadRequest)
	}
}

// The test image's program takes web identity credentials from the SDK's default chain
// (AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE, as the pod identity webhook sets them),
// trusts the CA of AWS_CA_BUNDLE, and reports the caller, the volumes and AWS's error
// codes as JSON.
func TestAWSClient(t *testing.T) {
	bin := AWSClient(t)
	dir := t.TempDir()
	fake := &fakeAWS{token: "header.payload.signature", role: "arn:aws:iam::111122223333:role/irsa-test"}
	srv := httptest.NewTLSServer(fake)
	t.Cleanup(srv.Close)
	caFile := filepath.Join(dir, "ca.crt")
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tokenFile, []byte(fake.token), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(env []string, args ...string) (map[string]any, error) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		// The service endpoints by name (the web identity provider's STS client is made
		// before the global AWS_ENDPOINT_URL applies); and, so that nothing the test
		// misses ever resolves or reaches a real AWS name, a proxy that refuses all
		// (requests to the loopback fake bypass it).
		cmd.Env = append([]string{"HOME=" + dir, "AWS_CONFIG_FILE=" + filepath.Join(dir, "none"),
			"AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none"), "AWS_EC2_METADATA_DISABLED=true",
			"AWS_REGION=us-east-1", "AWS_ENDPOINT_URL_STS=" + srv.URL, "AWS_ENDPOINT_URL_EC2=" + srv.URL,
			"AWS_CA_BUNDLE=" + caFile, "HTTPS_PROXY=http://" + closedAddr(t), "HTTP_PROXY=http://" + closedAddr(t)}, env...)
		out, err := cmd.Output()
		var res map[string]any
		if jerr := json.Unmarshal(out, &res); jerr != nil {
			t.Fatalf("output %q (%v): %v", out, err, jerr)
		}
		return res, err
	}

	res, err := run([]string{"AWS_ROLE_ARN=" + fake.role, "AWS_WEB_IDENTITY_TOKEN_FILE=" + tokenFile,
		"AWS_STS_REGIONAL_ENDPOINTS=regional"}, "-create-volume")
	if err == nil {
		t.Error("the program exited 0 although CreateVolume was refused")
	}
	got, _ := json.Marshal(res)
	for _, want := range []string{
		`"source":"WebIdentityCredentials"`, `"accessKeyId":"` + fakeKeyID + `"`, `"sessionToken":true`,
		`"arn":"arn:aws:sts::111122223333:assumed-role/irsa-test/s1"`, `"account":"111122223333"`,
		`"volumes":["vol-0123456789abcdef0"]`, `"ec2:CreateVolume":{"code":"UnauthorizedOperation","httpStatus":403`,
	} {
		if !strings.Contains(string(got), want) {
			t.Errorf("output %s\nlacks %s", got, want)
		}
	}
	if errs, _ := res["errors"].(map[string]any); len(errs) != 1 {
		t.Errorf("errors %v, want CreateVolume's only", errs)
	}
	fake.mu.Lock()
	calls := strings.Join(fake.calls, ",")
	fake.mu.Unlock()
	if calls != "AssumeRoleWithWebIdentity,GetCallerIdentity,DescribeVolumes,CreateVolume" {
		t.Errorf("calls %s", calls)
	}

	// Without the webhook's environment there are no credentials at all.
	res, err = run(nil)
	if errs, _ := res["errors"].(map[string]any); err == nil || errs["credentials"] == nil || res["identity"] != nil {
		t.Errorf("without a role: %v %v, want no credentials", err, res)
	}
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

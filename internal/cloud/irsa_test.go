package cloud

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sts"
)

// testIssuer is an OIDC issuer over HTTPS, as a cluster's API server serves service
// account issuer discovery: its discovery document, its JWKS, and tokens signed by its key.
type testIssuer struct {
	srv *httptest.Server
	key *rsa.PrivateKey
	kid string
}

func newTestIssuer(t testing.TB) *testIssuer {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is := &testIssuer{key: key, kid: "test-" + hexID(8)}
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"issuer": "https://" + r.Host, "jwks_uri": "https://" + r.Host + "/openid/v1/jwks",
			"response_types_supported": []string{"id_token"}, "subject_types_supported": []string{"public"},
			"id_token_signing_alg_values_supported": []string{"RS256"}})
	})
	mux.HandleFunc("/openid/v1/jwks", func(w http.ResponseWriter, r *http.Request) {
		b64 := base64.RawURLEncoding.EncodeToString
		json.NewEncoder(w).Encode(map[string]any{"keys": []map[string]string{{
			"kty": "RSA", "use": "sig", "alg": "RS256", "kid": is.kid,
			"n": b64(key.N.Bytes()), "e": b64([]byte{1, 0, 1}),
		}}})
	})
	is.srv = httptest.NewTLSServer(mux)
	t.Cleanup(is.srv.Close)
	return is
}

func (is *testIssuer) thumbprint() string {
	return Thumbprint(is.srv.Certificate().Raw)
}

// token is a service account token of the issuer: claims over the defaults (iss, sub,
// aud sts.amazonaws.com, an hour of life).
func (is *testIssuer) token(t testing.TB, claims map[string]any) string {
	t.Helper()
	now := time.Now()
	c := map[string]any{"iss": is.srv.URL, "sub": "system:serviceaccount:default:app", "aud": []string{"sts.amazonaws.com"},
		"exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "nbf": now.Unix()}
	for k, v := range claims {
		c[k] = v
	}
	return signJWT(t, is.key, is.kid, c)
}

func signJWT(t testing.TB, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return base64.RawURLEncoding.EncodeToString(b)
	}
	signed := enc(map[string]string{"alg": "RS256", "kid": kid, "typ": "JWT"}) + "." + enc(claims)
	h := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, h[:])
	if err != nil {
		t.Fatal(err)
	}
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// newIAMClient is an IAM client with the cloud's static keys.
func newIAMClient(t testing.TB, c *Cloud) *iam.Client {
	t.Helper()
	ak, sk := c.Credentials()
	return iam.New(iam.Options{Region: "us-east-1", BaseEndpoint: aws.String(c.Endpoint()), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(ak, sk, "")})
}

// anonymousSTS is an STS client without credentials, as the SDK calls
// AssumeRoleWithWebIdentity.
func anonymousSTS(c *Cloud) *sts.Client {
	return sts.New(sts.Options{Region: c.Region(), BaseEndpoint: aws.String(c.Endpoint()), RetryMaxAttempts: 1})
}

// irsaRole makes an OIDC provider for the issuer and a role that service account
// default/app of that issuer may assume, with the managed policies given attached.
func irsaRole(t testing.TB, c *Cloud, is *testIssuer, name string, policyARNs ...string) string {
	t.Helper()
	ctx := context.Background()
	ic := newIAMClient(t, c)
	prov, err := ic.CreateOpenIDConnectProvider(ctx, &iam.CreateOpenIDConnectProviderInput{
		Url: aws.String(is.srv.URL), ClientIDList: []string{"sts.amazonaws.com"}, ThumbprintList: []string{is.thumbprint()}})
	if err != nil && !strings.Contains(err.Error(), "EntityAlreadyExists") {
		t.Fatalf("create oidc provider: %v", err)
	}
	provARN := "arn:aws:iam::" + c.ownerID + ":oidc-provider/" + strings.TrimPrefix(is.srv.URL, "https://")
	if prov != nil && *prov.OpenIDConnectProviderArn != provARN {
		t.Fatalf("provider ARN %s, want %s", *prov.OpenIDConnectProviderArn, provARN)
	}
	host := strings.TrimPrefix(is.srv.URL, "https://")
	trust := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Federated":"` + provARN + `"},
		"Action":"sts:AssumeRoleWithWebIdentity","Condition":{"StringEquals":{"` + host + `:sub":"system:serviceaccount:default:app","` + host + `:aud":"sts.amazonaws.com"}}}]}`
	out, err := ic.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name), AssumeRolePolicyDocument: aws.String(trust)})
	if err != nil {
		t.Fatalf("create role: %v", err)
	}
	for _, arn := range policyARNs {
		if _, err := ic.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String(name), PolicyArn: aws.String(arn)}); err != nil {
			t.Fatalf("attach %s: %v", arn, err)
		}
	}
	return *out.Role.Arn
}

// podConfig loads the SDK's default configuration as a pod with IRSA does: only the
// environment the pod identity webhook sets (and the endpoints of the cloud), and the
// token file.
func podConfig(t *testing.T, c *Cloud, roleARN, token string) aws.Config {
	t.Helper()
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"AWS_ROLE_ARN": roleARN, "AWS_WEB_IDENTITY_TOKEN_FILE": tokenFile, "AWS_REGION": c.Region(),
		"AWS_DEFAULT_REGION": c.Region(), "AWS_STS_REGIONAL_ENDPOINTS": "regional", "AWS_ENDPOINT_URL": c.Endpoint(),
		// The SDK's web identity provider builds its STS client before it reads
		// AWS_ENDPOINT_URL: only the service's own variable reaches it.
		"AWS_ENDPOINT_URL_STS": c.Endpoint(),
		"AWS_CONFIG_FILE":      filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "none"),
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_ROLE_SESSION_NAME": "",
	} {
		t.Setenv(k, v)
	}
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRetryMaxAttempts(1))
	if err != nil {
		t.Fatalf("load default config: %v", err)
	}
	return cfg
}

// TestIRSA is a pod's IAM role for its service account, end to end with the AWS SDK: the
// default credential chain assumes the role with the service account token, and the
// cloud's EC2 API answers the role's session by the role's policies.
func TestIRSA(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	is := newTestIssuer(t)
	ctx := context.Background()
	ic := newIAMClient(t, r.Cloud)
	pol, err := ic.CreatePolicy(ctx, &iam.CreatePolicyInput{PolicyName: aws.String("describe-volumes"),
		PolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["ec2:DescribeVolumes"],"Resource":"*"}]}`)})
	if err != nil {
		t.Fatalf("create policy: %v", err)
	}
	roleARN := irsaRole(t, r.Cloud, is, "app-role", *pol.Policy.Arn)

	cfg := podConfig(t, r.Cloud, roleARN, is.token(t, nil))
	id, err := sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		t.Fatalf("get caller identity: %v", err)
	}
	if !strings.HasPrefix(*id.Arn, "arn:aws:sts::"+r.ownerID+":assumed-role/app-role/") || *id.Account != r.ownerID {
		t.Errorf("caller identity %s (account %s), want the assumed role app-role of %s", *id.Arn, *id.Account, r.ownerID)
	}
	creds, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(creds.AccessKeyID, "ASIA") || creds.SessionToken == "" || !creds.CanExpire {
		t.Errorf("credentials %s (token %t, expire %t), want temporary ones", creds.AccessKeyID, creds.SessionToken != "", creds.CanExpire)
	}
	pod := ec2.NewFromConfig(cfg)
	if _, err := pod.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{}); err != nil {
		t.Errorf("describe volumes as the role: %v", err)
	}
	_, err = pod.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(r.cfg.Zones[0]), Size: aws.Int32(1)})
	wantCode(t, err, "UnauthorizedOperation")
	want := "User: " + *id.Arn + " is not authorized to perform: ec2:CreateVolume on resource: arn:aws:ec2:" + r.Region() + ":" + r.ownerID +
		":volume/* because no identity-based policy allows the ec2:CreateVolume action"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("CreateVolume error %q does not say %q", err, want)
	}
	if out, err := r.ec2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{}); err != nil || len(out.Volumes) != 0 {
		t.Errorf("after the refused CreateVolume: %v volumes (err %v), want none", len(out.Volumes), err)
	}

	// The static key is the account's root.
	root, err := sts.New(sts.Options{Region: r.Region(), BaseEndpoint: aws.String(r.Endpoint()),
		Credentials: credentials.NewStaticCredentialsProvider(r.accessKey, r.secretKey, "")}).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil || *root.Arn != "arn:aws:iam::"+r.ownerID+":root" {
		t.Errorf("static key's identity: %v, %v; want the account root", root, err)
	}
}

// TestIRSAEBSCSIDriverPolicy runs the EBS CSI driver's calls with the managed policy
// AWS publishes for it: volumes it tags on create, not others.
func TestIRSAEBSCSIDriverPolicy(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	is := newTestIssuer(t)
	ctx := context.Background()
	roleARN := irsaRole(t, r.Cloud, is, "ebs-csi", "arn:aws:iam::aws:policy/service-role/AmazonEBSCSIDriverPolicy")
	pod := ec2.NewFromConfig(podConfig(t, r.Cloud, roleARN, is.token(t, nil)))
	zone := r.cfg.Zones[0]
	tagged := &ec2.CreateVolumeInput{AvailabilityZone: aws.String(zone), Size: aws.Int32(1), TagSpecifications: []types.TagSpecification{{
		ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("ebs.csi.aws.com/cluster"), Value: aws.String("true")},
			{Key: aws.String("CSIVolumeName"), Value: aws.String("pvc-1")}}}}}
	out, err := pod.CreateVolume(ctx, tagged)
	if err != nil {
		t.Fatalf("create a tagged volume with the driver's policy: %v", err)
	}
	_, err = pod.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(zone), Size: aws.Int32(1)})
	wantCode(t, err, "UnauthorizedOperation")
	r.waitVolume(t, *out.VolumeId, func(v types.Volume) bool { return v.State == types.VolumeStateAvailable })
	inst := r.runInstance(t, zone)
	if _, err := pod.AttachVolume(ctx, &ec2.AttachVolumeInput{VolumeId: out.VolumeId, InstanceId: aws.String(inst), Device: aws.String("/dev/xvdba")}); err != nil {
		t.Errorf("attach: %v", err)
	}
	_, err = pod.RunInstances(ctx, &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1)})
	wantCode(t, err, "UnauthorizedOperation")
	// A volume the driver did not tag is not its to delete.
	other := r.createVolume(t, zone, 1)
	_, err = pod.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: aws.String(other)})
	wantCode(t, err, "UnauthorizedOperation")
	if _, err := pod.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{other}}); err != nil {
		t.Errorf("describe: %v", err)
	}
}

// TestAssumeRoleWithWebIdentityRefused checks STS's answers to tokens it must refuse.
func TestAssumeRoleWithWebIdentityRefused(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	is := newTestIssuer(t)
	roleARN := irsaRole(t, r.Cloud, is, "app-role")
	stranger := newTestIssuer(t) // another cluster's issuer, no provider for it
	otherKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for _, tc := range []struct {
		name, token, role, code string
	}{
		{"other audience", is.token(t, map[string]any{"aud": "vault"}), roleARN, "InvalidIdentityToken"},
		{"expired", is.token(t, map[string]any{"exp": now.Add(-time.Minute).Unix(), "iat": now.Add(-time.Hour).Unix()}), roleARN, "ExpiredTokenException"},
		{"other issuer", stranger.token(t, nil), roleARN, "InvalidIdentityToken"},
		{"bad signature", signJWT(t, otherKey, is.kid, map[string]any{"iss": is.srv.URL, "sub": "system:serviceaccount:default:app",
			"aud": "sts.amazonaws.com", "exp": now.Add(time.Hour).Unix()}), roleARN, "InvalidIdentityToken"},
		{"not a JWT", "not-a-token", roleARN, "InvalidIdentityToken"},
		{"other service account", is.token(t, map[string]any{"sub": "system:serviceaccount:default:other"}), roleARN, "AccessDenied"},
		{"unknown role", is.token(t, nil), "arn:aws:iam::" + r.ownerID + ":role/nope", "AccessDenied"},
		{"role of another account", is.token(t, nil), "arn:aws:iam::000000000000:role/app-role", "AccessDenied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := anonymousSTS(r.Cloud).AssumeRoleWithWebIdentity(context.Background(), &sts.AssumeRoleWithWebIdentityInput{
				RoleArn: aws.String(tc.role), RoleSessionName: aws.String("s1"), WebIdentityToken: aws.String(tc.token)})
			wantCode(t, err, tc.code)
		})
	}
	r.mu.Lock()
	n := len(r.sessions)
	r.mu.Unlock()
	if n != 0 {
		t.Errorf("%d sessions after refusals, want none", n)
	}

	// A provider whose thumbprint is not the issuer's certificate's.
	r.mu.Lock()
	prov := r.oidcProviders["arn:aws:iam::"+r.ownerID+":oidc-provider/"+strings.TrimPrefix(is.srv.URL, "https://")]
	prov.Thumbprints = []string{strings.Repeat("0", 40)}
	r.mu.Unlock()
	_, err = anonymousSTS(r.Cloud).AssumeRoleWithWebIdentity(context.Background(), &sts.AssumeRoleWithWebIdentityInput{
		RoleArn: aws.String(roleARN), RoleSessionName: aws.String("s1"), WebIdentityToken: aws.String(is.token(t, nil))})
	wantCode(t, err, "InvalidIdentityToken")
	if !strings.Contains(err.Error(), "thumbprint") {
		t.Errorf("thumbprint mismatch: %v", err)
	}
}

// TestSessionCredentials checks temporary credentials at the API: the token is required,
// expiry is refused in each service's form, and they survive a restart of the cloud.
func TestSessionCredentials(t *testing.T) {
	dir := t.TempDir()
	r := startCloud(t, Config{Hollow: true, DataDir: dir})
	is := newTestIssuer(t)
	ctx := context.Background()
	roleARN := irsaRole(t, r.Cloud, is, "admin", "arn:aws:iam::aws:policy/AdministratorAccess")
	out, err := anonymousSTS(r.Cloud).AssumeRoleWithWebIdentity(ctx, &sts.AssumeRoleWithWebIdentityInput{
		RoleArn: aws.String(roleARN), RoleSessionName: aws.String("s1"), WebIdentityToken: aws.String(is.token(t, nil)), DurationSeconds: aws.Int32(900)})
	if err != nil {
		t.Fatalf("assume role: %v", err)
	}
	if *out.Provider != is.srv.URL || *out.Audience != "sts.amazonaws.com" || *out.SubjectFromWebIdentityToken != "system:serviceaccount:default:app" ||
		*out.AssumedRoleUser.Arn != "arn:aws:sts::"+r.ownerID+":assumed-role/admin/s1" {
		t.Errorf("result: provider %s audience %s subject %s user %s", *out.Provider, *out.Audience, *out.SubjectFromWebIdentityToken, *out.AssumedRoleUser.Arn)
	}
	if d := time.Until(*out.Credentials.Expiration); d < 14*time.Minute || d > 16*time.Minute {
		t.Errorf("expiration in %v, want 15m", d)
	}
	ec2With := func(c *Cloud, ak, sk, tok string) *ec2.Client {
		return ec2.New(ec2.Options{Region: c.Region(), BaseEndpoint: aws.String(c.Endpoint()), RetryMaxAttempts: 1,
			Credentials: credentials.NewStaticCredentialsProvider(ak, sk, tok)})
	}
	cr := out.Credentials
	if _, err := ec2With(r.Cloud, *cr.AccessKeyId, *cr.SecretAccessKey, *cr.SessionToken).DescribeVolumes(ctx, &ec2.DescribeVolumesInput{}); err != nil {
		t.Errorf("with the session: %v", err)
	}
	_, err = ec2With(r.Cloud, *cr.AccessKeyId, *cr.SecretAccessKey, "").DescribeVolumes(ctx, &ec2.DescribeVolumesInput{})
	wantCode(t, err, "AuthFailure")
	_, err = newIAMClientWith(r.Cloud, *cr.AccessKeyId, *cr.SecretAccessKey, "wrong").ListRoles(ctx, &iam.ListRolesInput{})
	wantCode(t, err, "InvalidClientTokenId")

	r.stop(t)
	r2 := startCloud(t, Config{Hollow: true, DataDir: dir})
	if _, err := ec2With(r2.Cloud, *cr.AccessKeyId, *cr.SecretAccessKey, *cr.SessionToken).DescribeVolumes(ctx, &ec2.DescribeVolumesInput{}); err != nil {
		t.Errorf("with the session after a restart: %v", err)
	}
	if _, err := newIAMClient(t, r2.Cloud).GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String("admin")}); err != nil {
		t.Errorf("role after a restart: %v", err)
	}
	r2.mu.Lock()
	r2.sessions[*cr.AccessKeyId].Expiration = time.Now().Add(-time.Second)
	r2.mu.Unlock()
	_, err = ec2With(r2.Cloud, *cr.AccessKeyId, *cr.SecretAccessKey, *cr.SessionToken).DescribeVolumes(ctx, &ec2.DescribeVolumesInput{})
	wantCode(t, err, "RequestExpired")
	_, err = newIAMClientWith(r2.Cloud, *cr.AccessKeyId, *cr.SecretAccessKey, *cr.SessionToken).ListRoles(ctx, &iam.ListRolesInput{})
	wantCode(t, err, "ExpiredToken")
}

func newIAMClientWith(c *Cloud, ak, sk, tok string) *iam.Client {
	return iam.New(iam.Options{Region: "us-east-1", BaseEndpoint: aws.String(c.Endpoint()), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(ak, sk, tok)})
}

package cloud

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// rawCall sends a form to the API, signed with the given keys, and returns the error
// code and message of the answer ("" when it succeeded) and the HTTP status.
func rawCall(t testing.TB, r *running, form url.Values, ak, sk string) (code, msg string, status int) {
	t.Helper()
	body := form.Encode()
	req, err := http.NewRequest(http.MethodPost, r.Endpoint()+"/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
	h := sha256.Sum256([]byte(body))
	if ak != "" {
		err = v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk}, req, hex.EncodeToString(h[:]), "ec2", "us-east-1", time.Now())
		if err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK {
		return "", "", resp.StatusCode
	}
	var e xmlError
	if err := xml.Unmarshal(data, &e); err != nil || len(e.Errors) != 1 {
		t.Fatalf("error answer is not EC2 error XML: %v\n%s", err, data)
	}
	return e.Errors[0].Code, e.Errors[0].Message, resp.StatusCode
}

func TestProtocolErrors(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ak, sk := r.Credentials()
	for _, tc := range []struct {
		name       string
		form       url.Values
		code, want string // want: a part of the message (the parameter named)
	}{
		{"unknown action", url.Values{"Action": {"LaunchRocket"}, "Version": {apiVersion}}, "InvalidAction", "LaunchRocket"},
		{"no action", url.Values{"Version": {apiVersion}}, "MissingParameter", "Action"},
		{"no version", url.Values{"Action": {"DescribeVolumes"}}, "MissingParameter", "Version"},
		{"bad version", url.Values{"Action": {"DescribeVolumes"}, "Version": {"2010-01-01"}}, "InvalidParameterValue", "Version"},
		{"create without zone", url.Values{"Action": {"CreateVolume"}, "Version": {apiVersion}, "Size": {"1"}}, "MissingParameter", "AvailabilityZone"},
		{"create without size", url.Values{"Action": {"CreateVolume"}, "Version": {apiVersion}, "AvailabilityZone": {"us-east-1a"}}, "MissingParameter", "Size"},
		{"size not a number", url.Values{"Action": {"CreateVolume"}, "Version": {apiVersion}, "AvailabilityZone": {"us-east-1a"}, "Size": {"ten"}}, "InvalidParameterValue", "Size"},
		{"bad boolean", url.Values{"Action": {"CreateVolume"}, "Version": {apiVersion}, "AvailabilityZone": {"us-east-1a"}, "Size": {"1"}, "Encrypted": {"yes"}}, "InvalidParameterValue", "Encrypted"},
		{"unknown zone", url.Values{"Action": {"CreateVolume"}, "Version": {apiVersion}, "AvailabilityZone": {"us-east-1z"}, "Size": {"1"}}, "InvalidParameterValue", "us-east-1z"},
		{"attach without device", url.Values{"Action": {"AttachVolume"}, "Version": {apiVersion}, "VolumeId": {"vol-0123456789abcdef0"}, "InstanceId": {"i-0123456789abcdef0"}}, "MissingParameter", "Device"},
		{"malformed volume id", url.Values{"Action": {"DescribeVolumes"}, "Version": {apiVersion}, "VolumeId.1": {"volume-1"}}, "InvalidVolumeID.Malformed", "volume-1"},
		{"unknown filter", url.Values{"Action": {"DescribeVolumes"}, "Version": {apiVersion}, "Filter.1.Name": {"colour"}, "Filter.1.Value.1": {"red"}}, "InvalidParameterValue", "colour"},
		{"list index 0", url.Values{"Action": {"DescribeVolumes"}, "Version": {apiVersion}, "VolumeId.0": {"vol-0123456789abcdef0"}}, "InvalidParameterValue", "VolumeId.0"},
		{"MaxResults too small", url.Values{"Action": {"DescribeVolumes"}, "Version": {apiVersion}, "MaxResults": {"2"}}, "InvalidParameterValue", "MaxResults"},
		{"bad NextToken", url.Values{"Action": {"DescribeVolumes"}, "Version": {apiVersion}, "NextToken": {"!!"}}, "InvalidParameterValue", "NextToken"},
		{"terminate nothing", url.Values{"Action": {"TerminateInstances"}, "Version": {apiVersion}}, "MissingParameter", "InstanceId"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg, status := rawCall(t, r, tc.form, ak, sk)
			if code != tc.code || !strings.Contains(msg, tc.want) {
				t.Errorf("got %s %q, want %s naming %q", code, msg, tc.code, tc.want)
			}
			if status != http.StatusBadRequest {
				t.Errorf("HTTP status %d, want 400", status)
			}
		})
	}
}

func TestSignatureVerification(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ak, sk := r.Credentials()
	form := url.Values{"Action": {"DescribeVolumes"}, "Version": {apiVersion}}
	if code, msg, _ := rawCall(t, r, form, ak, sk); code != "" {
		t.Fatalf("well-signed request refused: %s %s", code, msg)
	}
	if code, _, status := rawCall(t, r, form, ak, sk+"x"); code != "SignatureDoesNotMatch" || status != http.StatusForbidden {
		t.Errorf("wrong secret: got %s (%d), want SignatureDoesNotMatch (403)", code, status)
	}
	if code, _, status := rawCall(t, r, form, "AKIAWRONGWRONGWRONG0", sk); code != "AuthFailure" || status != http.StatusUnauthorized {
		t.Errorf("unknown key: got %s (%d), want AuthFailure (401)", code, status)
	}
	if code, _, _ := rawCall(t, r, form, "", ""); code != "MissingAuthenticationToken" {
		t.Errorf("unsigned: got %s, want MissingAuthenticationToken", code)
	}
	// An SDK client with other keys is refused as well.
	bad := ec2.New(ec2.Options{Region: "us-east-1", BaseEndpoint: aws.String(r.Endpoint()), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(ak, "not-the-secret", "")})
	_, err := bad.DescribeVolumes(context.Background(), &ec2.DescribeVolumesInput{})
	wantCode(t, err, "SignatureDoesNotMatch")
	// A request signed for another region.
	other := ec2.New(ec2.Options{Region: "eu-west-1", BaseEndpoint: aws.String(r.Endpoint()), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider(ak, sk, "")})
	_, err = other.DescribeVolumes(context.Background(), &ec2.DescribeVolumesInput{})
	wantCode(t, err, "AuthFailure")
}

// TestRules checks each rule's error code through the SDK.
func TestRules(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ctx := context.Background()
	a1 := r.runInstance(t, "us-east-1a")
	a2 := r.runInstance(t, "us-east-1a")
	b1 := r.runInstance(t, "us-east-1b")
	small := r.runInstance(t, "us-east-1a", types.Tag{Key: aws.String(TagAttachLimit), Value: aws.String("1")})
	vol := r.createVolume(t, "us-east-1a", 1)
	vol2 := r.createVolume(t, "us-east-1a", 1)
	attach := func(v, i, dev string) error {
		_, err := r.ec2.AttachVolume(ctx, &ec2.AttachVolumeInput{VolumeId: &v, InstanceId: &i, Device: &dev})
		return err
	}

	wantCode(t, attach(vol, b1, "/dev/xvdba"), "InvalidVolume.ZoneMismatch")
	wantCode(t, attach(vol, a1, "/dev/xvda"), "InvalidParameterValue")
	if err := attach(vol, a1, "/dev/xvdba"); err != nil {
		t.Fatal(err)
	}
	r.waitVolume(t, vol, func(v types.Volume) bool { return attachedState(v) == "attached" })
	wantCode(t, attach(vol, a2, "/dev/xvdba"), "VolumeInUse")
	err := attach(vol2, a1, "/dev/xvdba")
	wantCode(t, err, "InvalidParameterValue")
	if !strings.Contains(err.Error(), "already in use") {
		t.Errorf("device in use: message %q lacks 'already in use'", err)
	}
	if err := attach(vol2, small, "/dev/xvdba"); err != nil {
		t.Fatal(err)
	}
	vol3 := r.createVolume(t, "us-east-1a", 1)
	wantCode(t, attach(vol3, small, "/dev/xvdbb"), "AttachmentLimitExceeded")

	_, err = r.ec2.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: &vol})
	wantCode(t, err, "VolumeInUse")
	_, err = r.ec2.DetachVolume(ctx, &ec2.DetachVolumeInput{VolumeId: &vol3})
	wantCode(t, err, "IncorrectState")
	_, err = r.ec2.DetachVolume(ctx, &ec2.DetachVolumeInput{VolumeId: &vol, InstanceId: &a2})
	wantCode(t, err, "InvalidAttachment.NotFound")

	// NotFound messages carry the ids.
	_, err = r.ec2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{vol, "vol-0000000000000aaaa", "vol-0000000000000bbbb"}})
	wantCode(t, err, "InvalidVolume.NotFound")
	if !strings.Contains(err.Error(), "vol-0000000000000aaaa") || !strings.Contains(err.Error(), "vol-0000000000000bbbb") {
		t.Errorf("NotFound message lacks the ids: %v", err)
	}
	err = attach(vol3, "i-0000000000000cccc", "/dev/xvdbc")
	wantCode(t, err, "InvalidInstanceID.NotFound")
	if !strings.Contains(err.Error(), "i-0000000000000cccc") {
		t.Errorf("NotFound message lacks the id: %v", err)
	}
	_, err = r.ec2.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String("us-east-1a"), SnapshotId: aws.String("snap-0000000000000dddd")})
	wantCode(t, err, "InvalidSnapshot.NotFound")

	// Io2 Multi-Attach: two instances; gp3 refuses the flag.
	multi, err := r.ec2.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String("us-east-1a"), Size: aws.Int32(10),
		VolumeType: types.VolumeTypeIo2, Iops: aws.Int32(1000), MultiAttachEnabled: aws.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	r.waitVolume(t, *multi.VolumeId, func(v types.Volume) bool { return v.State == types.VolumeStateAvailable })
	if err := attach(*multi.VolumeId, a1, "/dev/xvdbc"); err != nil {
		t.Fatal(err)
	}
	if err := attach(*multi.VolumeId, a2, "/dev/xvdbc"); err != nil {
		t.Fatalf("second Multi-Attach attachment: %v", err)
	}
	v := r.waitVolume(t, *multi.VolumeId, func(v types.Volume) bool { return len(v.Attachments) == 2 })
	if !*v.MultiAttachEnabled {
		t.Error("MultiAttachEnabled not reported")
	}
	_, err = r.ec2.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String("us-east-1a"), Size: aws.Int32(10), MultiAttachEnabled: aws.Bool(true)})
	wantCode(t, err, "InvalidParameterCombination")
	_, err = r.ec2.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String("us-east-1a"), Size: aws.Int32(10), VolumeType: "gp9"})
	wantCode(t, err, "InvalidParameterValue")
	_, err = r.ec2.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String("us-east-1a"), Size: aws.Int32(10), VolumeType: types.VolumeTypeIo1})
	wantCode(t, err, "MissingParameter")

	// DryRun: the would-succeed answer, and no change.
	_, err = r.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{DryRun: aws.Bool(true)})
	wantCode(t, err, "DryRunOperation")
	_, err = r.ec2.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String("us-east-1a"), Size: aws.Int32(1), DryRun: aws.Bool(true)})
	wantCode(t, err, "DryRunOperation")
	_, err = r.ec2.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: &vol3, DryRun: aws.Bool(true)})
	wantCode(t, err, "DryRunOperation")
	r.waitVolume(t, vol3, func(v types.Volume) bool { return v.State == types.VolumeStateAvailable })

	// Modifications: no shrinking, one at a time.
	_, err = r.ec2.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: &vol3, Size: aws.Int32(0 + 1)})
	wantCode(t, err, "InvalidParameterValue")
	// A modification held by a fault stays in progress, so a second one is refused.
	fid, err := r.InjectFault(Fault{Action: "ModifyVolume", VolumeID: vol3, Mode: "hang"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ec2.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: &vol3, Size: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	_, err = r.ec2.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: &vol3, Size: aws.Int32(3)})
	wantCode(t, err, "IncorrectModificationState")
	r.ClearFaults(fid)
	r.waitVolume(t, vol3, func(v types.Volume) bool { return *v.Size == 2 })
}

func TestIdempotency(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ctx := context.Background()
	in := &ec2.CreateVolumeInput{AvailabilityZone: aws.String("us-east-1c"), Size: aws.Int32(8), ClientToken: aws.String("pvc-1234"),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("CSIVolumeName"), Value: aws.String("pvc-1234")}}}}}
	first, err := r.ec2.CreateVolume(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	again, err := r.ec2.CreateVolume(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if *again.VolumeId != *first.VolumeId {
		t.Errorf("same ClientToken made %s then %s", *first.VolumeId, *again.VolumeId)
	}
	in.Size = aws.Int32(9)
	_, err = r.ec2.CreateVolume(ctx, in)
	wantCode(t, err, "IdempotentParameterMismatch")
	out, err := r.ec2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Volumes) != 1 {
		t.Errorf("%d volumes, want 1", len(out.Volumes))
	}
	// RunInstances too.
	run := &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1), ClientToken: aws.String("node-a")}
	i1, err := r.ec2.RunInstances(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	i2, err := r.ec2.RunInstances(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if *i1.Instances[0].InstanceId != *i2.Instances[0].InstanceId {
		t.Errorf("same ClientToken launched two instances")
	}
	run.InstanceType = types.InstanceTypeC5Large
	_, err = r.ec2.RunInstances(ctx, run)
	wantCode(t, err, "IdempotentParameterMismatch")
}

func TestPaginationAndFilters(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ctx := context.Background()
	inst := r.runInstance(t, "us-east-1b")
	var all []string
	for i := range 12 {
		zone := "us-east-1a"
		if i%3 == 0 {
			zone = "us-east-1b"
		}
		out, err := r.ec2.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(zone), Size: aws.Int32(1),
			TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{
				{Key: aws.String("ebs.csi.aws.com/cluster"), Value: aws.String("true")},
				{Key: aws.String("CSIVolumeName"), Value: aws.String("pvc-" + string(rune('a'+i)))}}}}})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, *out.VolumeId)
	}
	seen := map[string]bool{}
	pages := 0
	p := ec2.NewDescribeVolumesPaginator(r.ec2, &ec2.DescribeVolumesInput{MaxResults: aws.Int32(5)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(out.Volumes) > 5 {
			t.Errorf("page of %d, want at most 5", len(out.Volumes))
		}
		for _, v := range out.Volumes {
			if seen[*v.VolumeId] {
				t.Errorf("%s on two pages", *v.VolumeId)
			}
			seen[*v.VolumeId] = true
		}
	}
	if pages != 3 || len(seen) != 12 {
		t.Errorf("%d pages with %d volumes, want 3 with 12", pages, len(seen))
	}

	// Many ids per call.
	out, err := r.ec2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: all[:7]})
	if err != nil || len(out.Volumes) != 7 {
		t.Fatalf("7 ids: %d volumes, %v", len(out.Volumes), err)
	}
	count := func(fs ...types.Filter) int {
		t.Helper()
		out, err := r.ec2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{Filters: fs})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Volumes)
	}
	f := func(name string, values ...string) types.Filter {
		return types.Filter{Name: aws.String(name), Values: values}
	}
	if _, err := r.ec2.AttachVolume(ctx, &ec2.AttachVolumeInput{VolumeId: &all[0], InstanceId: &inst, Device: aws.String("/dev/xvdba")}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		filters []types.Filter
		want    int
	}{
		{[]types.Filter{f("availability-zone", "us-east-1b")}, 4},
		{[]types.Filter{f("tag:CSIVolumeName", "pvc-a", "pvc-b", "pvc-z")}, 2},
		{[]types.Filter{f("tag:CSIVolumeName", "pvc-*")}, 12},
		{[]types.Filter{f("tag-key", "ebs.csi.aws.com/cluster")}, 12},
		{[]types.Filter{f("volume-id", all[3], all[4])}, 2},
		{[]types.Filter{f("attachment.instance-id", inst)}, 1},
		{[]types.Filter{f("status", "in-use")}, 1},
		{[]types.Filter{f("status", "available"), f("availability-zone", "us-east-1b")}, 3},
	} {
		if got := count(tc.filters...); got != tc.want {
			t.Errorf("filters %v: %d volumes, want %d", tc.filters, got, tc.want)
		}
	}
	_, err = r.ec2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: all[:1], MaxResults: aws.Int32(5)})
	wantCode(t, err, "InvalidParameterCombination")
}

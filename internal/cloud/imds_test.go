package cloud

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestIMDS(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ctx := context.Background()
	inst := r.runInstance(t, "us-east-1c")
	ep := r.IMDSEndpoint(inst)
	if ep == "" {
		t.Fatal("no IMDS endpoint")
	}
	file, err := os.ReadFile(filepath.Join(r.cfg.DataDir, "instances", inst, "imds-endpoint"))
	if err != nil || strings.TrimSpace(string(file)) != ep {
		t.Fatalf("imds-endpoint file %q (%v), want %s", file, err, ep)
	}
	client := imds.New(imds.Options{Endpoint: ep})
	doc, err := client.GetInstanceIdentityDocument(ctx, &imds.GetInstanceIdentityDocumentInput{})
	if err != nil {
		t.Fatal(err)
	}
	if doc.InstanceID != inst || doc.AvailabilityZone != "us-east-1c" || doc.Region != "us-east-1" || doc.InstanceType != "m5.large" || doc.PrivateIP == "" {
		t.Errorf("identity document %+v", doc.InstanceIdentityDocument)
	}
	region, err := client.GetRegion(ctx, &imds.GetRegionInput{})
	if err != nil || region.Region != "us-east-1" {
		t.Errorf("region %v %v", region, err)
	}
	get := func(path string) string {
		t.Helper()
		out, err := client.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
		if err != nil {
			t.Fatalf("metadata %s: %v", path, err)
		}
		b, _ := io.ReadAll(out.Content)
		return string(b)
	}
	if got := get("instance-id"); got != inst {
		t.Errorf("instance-id %q", got)
	}
	if got := get("placement/availability-zone"); got != "us-east-1c" {
		t.Errorf("placement/availability-zone %q", got)
	}
	if got := get("instance-type"); got != "m5.large" {
		t.Errorf("instance-type %q", got)
	}
	macs := get("network/interfaces/macs/")
	if !strings.HasSuffix(macs, "/") || get("network/interfaces/macs/"+strings.TrimSuffix(macs, "/")+"/device-number") != "0" {
		t.Errorf("macs listing %q", macs)
	}
	// A second interface with a secondary address appears under its MAC, as the VPC
	// CNI's IP address manager reads it.
	di, err := r.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{inst}})
	if err != nil {
		t.Fatal(err)
	}
	eni := r.createENI(t, aws.ToString(di.Reservations[0].Instances[0].SubnetId), 1)
	if _, err := r.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: eni.NetworkInterfaceId,
		InstanceId: &inst, DeviceIndex: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	mac2 := "network/interfaces/macs/" + aws.ToString(eni.MacAddress) + "/"
	if got, want := get(mac2+"local-ipv4s"), strings.Join(eniIPs(eni), "\n"); got != want || get(mac2+"device-number") != "1" ||
		get(mac2+"interface-id") != aws.ToString(eni.NetworkInterfaceId) || get(mac2+"subnet-id") != aws.ToString(eni.SubnetId) {
		t.Errorf("second interface's metadata: local-ipv4s %q (want %q)", got, want)
	}
	if got := get("network/interfaces/macs/"); strings.Count(got, "/") != 2 {
		t.Errorf("macs listing %q, want two", got)
	}
	vol := r.createVolume(t, "us-east-1c", 1)
	if _, err := r.ec2.AttachVolume(ctx, &ec2.AttachVolumeInput{VolumeId: &vol, InstanceId: &inst, Device: aws.String("/dev/xvdba")}); err != nil {
		t.Fatal(err)
	}
	r.waitVolume(t, vol, func(v types.Volume) bool { return attachedState(v) == "attached" })
	if got := get("block-device-mapping/"); got != "ami\nebs1\nroot" {
		t.Errorf("block-device-mapping/ lists %q", got)
	}
	if got := get("block-device-mapping/ebs1"); got != "xvdba" {
		t.Errorf("ebs1 %q", got)
	}
	if _, err := client.GetMetadata(ctx, &imds.GetMetadataInput{Path: "outpost-arn"}); err == nil {
		t.Error("outpost-arn answered; it must be 404 off an Outpost")
	}

	// IMDSv2 by hand: the TTL is echoed, a bad token is 401; IMDSv1 works when allowed.
	req, _ := http.NewRequest(http.MethodPut, ep+"/latest/api/token", nil)
	req.Header.Set("X-Aws-Ec2-Metadata-Token-Ttl-Seconds", "60")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds") != "60" || len(tok) == 0 {
		t.Fatalf("token: %d, ttl header %q", resp.StatusCode, resp.Header.Get("X-Aws-Ec2-Metadata-Token-Ttl-Seconds"))
	}
	status := func(token string) int {
		req, _ := http.NewRequest(http.MethodGet, ep+"/latest/meta-data/instance-id", nil)
		if token != "" {
			req.Header.Set("X-Aws-Ec2-Metadata-Token", token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if s := status(string(tok)); s != 200 {
		t.Errorf("good token: %d", s)
	}
	if s := status("forged"); s != 401 {
		t.Errorf("bad token: %d, want 401", s)
	}
	if s := status(""); s != 200 {
		t.Errorf("IMDSv1: %d, want 200", s)
	}
	req, _ = http.NewRequest(http.MethodPut, ep+"/latest/api/token", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 400 {
		t.Errorf("token without TTL: %v %v, want 400", resp.StatusCode, err)
	}

	// An instance that requires tokens refuses IMDSv1.
	out, err := r.ec2.RunInstances(ctx, &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		MetadataOptions: &types.InstanceMetadataOptionsRequest{HttpTokens: types.HttpTokensStateRequired}})
	if err != nil {
		t.Fatal(err)
	}
	v2only := *out.Instances[0].InstanceId
	resp, err = http.Get(r.IMDSEndpoint(v2only) + "/latest/meta-data/instance-id")
	if err != nil || resp.StatusCode != 401 {
		t.Errorf("IMDSv1 on a tokens-required instance: %v %v, want 401", resp.StatusCode, err)
	}
	// A token of one instance is not valid on another.
	if s := func() int {
		req, _ := http.NewRequest(http.MethodGet, r.IMDSEndpoint(v2only)+"/latest/meta-data/instance-id", nil)
		req.Header.Set("X-Aws-Ec2-Metadata-Token", string(tok))
		resp, _ := http.DefaultClient.Do(req)
		return resp.StatusCode
	}(); s != 401 {
		t.Errorf("another instance's token: %d, want 401", s)
	}
	// The handler is mountable elsewhere (as at 169.254.169.254 in a node namespace).
	rec := &recorder{h: http.Header{}}
	r.IMDSHandler(inst).ServeHTTP(rec, httptestGet("/latest/dynamic/instance-identity/document"))
	var d map[string]any
	if err := json.Unmarshal(rec.body, &d); err != nil || d["instanceId"] != inst {
		t.Errorf("handler document %s (%v)", rec.body, err)
	}
	// Termination ends the instance's IMDS.
	if _, err := r.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{inst}}); err != nil {
		t.Fatal(err)
	}
	if r.IMDSEndpoint(inst) != "" {
		t.Error("terminated instance still has an IMDS endpoint")
	}
	v := r.waitVolume(t, vol, func(v types.Volume) bool { return v.State == types.VolumeStateAvailable })
	if len(v.Attachments) != 0 {
		t.Error("termination left the attachment")
	}
}

type recorder struct {
	h    http.Header
	code int
	body []byte
}

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) WriteHeader(c int)           { r.code = c }
func (r *recorder) Write(b []byte) (int, error) { r.body = append(r.body, b...); return len(b), nil }

func httptestGet(path string) *http.Request {
	req, _ := http.NewRequest(http.MethodGet, "http://169.254.169.254"+path, nil)
	return req
}

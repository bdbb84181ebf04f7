package cloud

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kubelab/kubelab/internal/cloud/blockdev"
)

func TestFaults(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ctx := context.Background()
	inst := r.runInstance(t, "us-east-1a")
	vol := r.createVolume(t, "us-east-1a", 1)

	// Through the admin endpoint: attaches of this volume hang.
	body, _ := json.Marshal(Fault{Action: "AttachVolume", VolumeID: vol, Mode: "hang"})
	ak, sk := r.Credentials()
	if status, answer := adminCall(t, r, http.MethodPost, "/_kubelab/faults", body, ak, sk); status != http.StatusCreated {
		t.Fatalf("inject: %d %s", status, answer)
	}
	if _, err := r.ec2.AttachVolume(ctx, &ec2.AttachVolumeInput{VolumeId: &vol, InstanceId: &inst, Device: aws.String("/dev/xvdba")}); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		v := r.waitVolume(t, vol, func(types.Volume) bool { return true })
		if attachedState(v) != "attaching" {
			t.Fatalf("attach with a hang fault reached %q", attachedState(v))
		}
	}
	if status, answer := adminCall(t, r, http.MethodDelete, "/_kubelab/faults", nil, ak, sk); status != http.StatusNoContent {
		t.Fatalf("clear: %d %s", status, answer)
	}
	r.waitVolume(t, vol, func(v types.Volume) bool { return attachedState(v) == "attached" })

	// A stuck detach, then a forced one.
	fid, err := r.InjectFault(Fault{Action: "DetachVolume", InstanceID: inst, Mode: "hang"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.ec2.DetachVolume(ctx, &ec2.DetachVolumeInput{VolumeId: &vol}); err != nil {
		t.Fatal(err)
	}
	if v := r.waitVolume(t, vol, func(types.Volume) bool { return true }); attachedState(v) != "detaching" {
		t.Fatalf("detach with a hang fault reached %q", attachedState(v))
	}
	if _, err := r.ec2.DetachVolume(ctx, &ec2.DetachVolumeInput{VolumeId: &vol, Force: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	r.waitVolume(t, vol, func(v types.Volume) bool { return v.State == types.VolumeStateAvailable })
	r.ClearFaults(fid)

	// Creates fail once with the chosen code, then succeed.
	if _, err := r.InjectFault(Fault{Action: "CreateVolume", Tag: "CSIVolumeName=pvc-x", Mode: "fail", Code: "RequestLimitExceeded", Count: 1}); err != nil {
		t.Fatal(err)
	}
	in := &ec2.CreateVolumeInput{AvailabilityZone: aws.String("us-east-1a"), Size: aws.Int32(1),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("CSIVolumeName"), Value: aws.String("pvc-x")}}}}}
	_, err = r.ec2.CreateVolume(ctx, in)
	wantCode(t, err, "RequestLimitExceeded")
	if _, err := r.ec2.CreateVolume(ctx, in); err != nil {
		t.Fatalf("second create after a count-1 fault: %v", err)
	}
	if len(r.Faults()) != 0 {
		t.Errorf("a used-up fault is still listed: %+v", r.Faults())
	}
	// Bad faults are refused with a reason.
	for _, f := range []Fault{{Action: "Explode", Mode: "fail"}, {Action: "AttachVolume", Mode: "slow"}, {Action: "AttachVolume", Mode: "sometimes"}} {
		if _, err := r.InjectFault(f); err == nil {
			t.Errorf("fault %+v accepted", f)
		}
	}
}

// adminCall sends body to the admin endpoint path, signed with ak and sk as the AWS SDK
// signs (no signature when ak is empty), and returns the status and the answer.
func adminCall(t testing.TB, r *running, method, path string, body []byte, ak, sk string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, r.Endpoint()+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if ak != "" {
		h := sha256.Sum256(body)
		err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: ak, SecretAccessKey: sk}, req,
			hex.EncodeToString(h[:]), "ec2", r.Region(), time.Now())
		if err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer)
}

// TestFaultsNeedSignature: the admin endpoint refuses anonymous and badly signed
// requests (401/403, a JSON error naming the reason) and they change nothing; the
// cloud's key pair opens it.
func TestFaultsNeedSignature(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ak, sk := r.Credentials()
	body, _ := json.Marshal(Fault{Action: "CreateVolume", Mode: "fail"})
	for _, tc := range []struct {
		name, method, ak, sk string
		status               int
		code                 string
	}{
		{"anonymous POST", http.MethodPost, "", "", http.StatusUnauthorized, "MissingAuthenticationToken"},
		{"wrong secret", http.MethodPost, ak, "not-the-secret", http.StatusForbidden, "SignatureDoesNotMatch"},
		{"unknown access key", http.MethodPost, "AKIAUNKNOWNUNKNOWN00", sk, http.StatusUnauthorized, "AuthFailure"},
		{"anonymous GET", http.MethodGet, "", "", http.StatusUnauthorized, "MissingAuthenticationToken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := body
			if tc.method == http.MethodGet {
				b = nil
			}
			status, answer := adminCall(t, r, tc.method, "/_kubelab/faults", b, tc.ak, tc.sk)
			var e struct{ Code, Error string }
			if err := json.Unmarshal([]byte(answer), &e); err != nil {
				t.Fatalf("answer is not a JSON error: %v\n%s", err, answer)
			}
			if status != tc.status || e.Code != tc.code || !strings.Contains(e.Error, tc.code) {
				t.Fatalf("got %d %s, want %d with code %s", status, answer, tc.status, tc.code)
			}
			if f := r.Faults(); len(f) != 0 {
				t.Fatalf("a refused request created faults: %+v", f)
			}
		})
	}

	// A signed request works; an anonymous DELETE does not clear it.
	status, answer := adminCall(t, r, http.MethodPost, "/_kubelab/faults", body, ak, sk)
	if status != http.StatusCreated || len(r.Faults()) != 1 {
		t.Fatalf("signed inject: %d %s, faults %+v", status, answer, r.Faults())
	}
	if status, _ := adminCall(t, r, http.MethodDelete, "/_kubelab/faults", nil, "", ""); status != http.StatusUnauthorized || len(r.Faults()) != 1 {
		t.Fatalf("anonymous DELETE: %d, faults %+v", status, r.Faults())
	}
	status, answer = adminCall(t, r, http.MethodGet, "/_kubelab/faults", nil, ak, sk)
	if status != http.StatusOK || !strings.Contains(answer, `"action":"CreateVolume"`) {
		t.Fatalf("signed GET: %d %s", status, answer)
	}
	if status, _ := adminCall(t, r, http.MethodDelete, "/_kubelab/faults", nil, ak, sk); status != http.StatusNoContent || len(r.Faults()) != 0 {
		t.Fatalf("signed DELETE: %d, faults %+v", status, r.Faults())
	}
}

// TestNoOrphansAfterFailures: when the block layer fails, nothing is left behind: no
// file, no loop device, no link, and the API shows no half-made object.
func TestNoOrphansAfterFailures(t *testing.T) {
	fake := blockdev.NewFake()
	r := startCloud(t, Config{}, WithDevices(fake))
	ctx := context.Background()
	inst := r.runInstance(t, "us-east-1a")
	devDir := filepath.Join(r.cfg.DataDir, "instances", inst, "dev")

	fake.Fail("CreateFile", errors.New("disk full"))
	_, err := r.ec2.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String("us-east-1a"), Size: aws.Int32(1)})
	wantCode(t, err, "InternalError")
	fake.Fail("CreateFile", nil)
	if out, _ := r.ec2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{}); len(out.Volumes) != 0 {
		t.Errorf("failed create left a volume: %+v", out.Volumes)
	}
	if len(fake.Files()) != 0 {
		t.Errorf("failed create left files: %v", fake.Files())
	}

	vol := r.createVolume(t, "us-east-1a", 1)
	fake.Fail("Attach", errors.New("no free loop device"))
	if _, err := r.ec2.AttachVolume(ctx, &ec2.AttachVolumeInput{VolumeId: &vol, InstanceId: &inst, Device: aws.String("/dev/xvdba")}); err != nil {
		t.Fatal(err)
	}
	v := r.waitVolume(t, vol, func(v types.Volume) bool { return len(v.Attachments) == 0 })
	if v.State != types.VolumeStateAvailable {
		t.Errorf("after a failed attach the volume is %s", v.State)
	}
	fake.Fail("Attach", nil)
	assertNoDevices(t, fake, devDir)

	// The links cannot be made (disk/by-id is a file): the loop device is released.
	os.MkdirAll(devDir, 0o755)
	if err := os.WriteFile(filepath.Join(devDir, "disk"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ec2.AttachVolume(ctx, &ec2.AttachVolumeInput{VolumeId: &vol, InstanceId: &inst, Device: aws.String("/dev/xvdba")}); err != nil {
		t.Fatal(err)
	}
	r.waitVolume(t, vol, func(v types.Volume) bool { return len(v.Attachments) == 0 })
	assertNoDevices(t, fake, devDir)
	os.Remove(filepath.Join(devDir, "disk"))

	// A modification whose growth fails is reported failed and the size stays.
	fake.Fail("GrowFile", errors.New("quota"))
	if _, err := r.ec2.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: &vol, Size: aws.Int32(5)}); err != nil {
		t.Fatal(err)
	}
	mods, err := r.ec2.DescribeVolumesModifications(ctx, &ec2.DescribeVolumesModificationsInput{VolumeIds: []string{vol}})
	if err != nil || mods.VolumesModifications[0].ModificationState != types.VolumeModificationStateFailed {
		t.Errorf("modification after failed growth: %+v %v", mods, err)
	}
	if v := r.waitVolume(t, vol, func(types.Volume) bool { return true }); *v.Size != 1 {
		t.Errorf("size %d after failed modification, want 1", *v.Size)
	}
	fake.Fail("GrowFile", nil)

	// A snapshot whose copy fails ends in error and leaves no file.
	fake.Fail("CopyFile", errors.New("io error"))
	snap, err := r.ec2.CreateSnapshot(ctx, &ec2.CreateSnapshotInput{VolumeId: &vol})
	if err != nil {
		t.Fatal(err)
	}
	for {
		out, err := r.ec2.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{SnapshotIds: []string{*snap.SnapshotId}})
		if err != nil {
			t.Fatal(err)
		}
		if out.Snapshots[0].State == types.SnapshotStateError {
			break
		}
		if out.Snapshots[0].State == types.SnapshotStateCompleted {
			t.Fatal("snapshot completed although its copy failed")
		}
	}
	if _, ok := fake.Files()[r.snapshotFile(*snap.SnapshotId)]; ok {
		t.Error("failed snapshot left a file")
	}
}

func assertNoDevices(t testing.TB, fake *blockdev.Fake, devDir string) {
	t.Helper()
	if d := fake.Devices(); len(d) != 0 {
		t.Errorf("loop devices left: %v", d)
	}
	for _, p := range []string{filepath.Join(devDir, "xvdba"), filepath.Join(devDir, "disk", "by-id")} {
		if entries, err := os.ReadDir(p); err == nil && len(entries) > 0 {
			t.Errorf("links left in %s", p)
		}
		if _, err := os.Lstat(p); err == nil && filepath.Base(p) == "xvdba" {
			t.Errorf("link %s left", p)
		}
	}
}

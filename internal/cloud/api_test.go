package cloud

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestHollowLifecycle(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ctx := context.Background()
	inst := r.runInstance(t, "us-east-1a")
	vol := r.createVolume(t, "us-east-1a", 4)
	att, err := r.ec2.AttachVolume(ctx, &ec2.AttachVolumeInput{VolumeId: &vol, InstanceId: &inst, Device: aws.String("/dev/xvdba")})
	if err != nil {
		t.Fatal(err)
	}
	if att.State != types.VolumeAttachmentStateAttaching {
		t.Errorf("attach answered %q, want attaching", att.State)
	}
	v := r.waitVolume(t, vol, func(v types.Volume) bool { return attachedState(v) == "attached" })
	if v.State != types.VolumeStateInUse || *v.Attachments[0].Device != "/dev/xvdba" || *v.Attachments[0].InstanceId != inst {
		t.Errorf("attached volume: %+v", v)
	}
	if _, err := r.ec2.DetachVolume(ctx, &ec2.DetachVolumeInput{VolumeId: &vol}); err != nil {
		t.Fatal(err)
	}
	r.waitVolume(t, vol, func(v types.Volume) bool { return v.State == types.VolumeStateAvailable && len(v.Attachments) == 0 })
	if _, err := r.ec2.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: &vol}); err != nil {
		t.Fatal(err)
	}
	_, err = r.ec2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{vol}})
	wantCode(t, err, "InvalidVolume.NotFound")
}

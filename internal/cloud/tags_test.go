package cloud

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

func TestTagsInstancesSnapshotsZones(t *testing.T) {
	r := startCloud(t, Config{Hollow: true, Zones: []string{"us-east-1a", "us-east-1b"}})
	ctx := context.Background()
	inst := r.runInstance(t, "us-east-1b")
	vol := r.createVolume(t, "us-east-1b", 1)
	snap, err := r.ec2.CreateSnapshot(ctx, &ec2.CreateSnapshotInput{VolumeId: &vol})
	if err != nil {
		t.Fatal(err)
	}
	tag := func(k, v string) types.Tag { return types.Tag{Key: aws.String(k), Value: aws.String(v)} }
	if _, err := r.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{vol, inst, *snap.SnapshotId}, Tags: []types.Tag{tag("team", "storage"), tag("env", "lab")}}); err != nil {
		t.Fatal(err)
	}
	_, err = r.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{vol, "vol-0000000000000ffff"}, Tags: []types.Tag{tag("x", "y")}})
	wantCode(t, err, "InvalidVolume.NotFound")
	_, err = r.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{vol}, Tags: []types.Tag{tag("aws:reserved", "y")}})
	wantCode(t, err, "InvalidParameterValue")
	// DeleteTags: a key with another value stays, a bare key goes.
	if _, err := r.ec2.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{vol}, Tags: []types.Tag{tag("team", "compute"), {Key: aws.String("env")}}}); err != nil {
		t.Fatal(err)
	}
	v := r.waitVolume(t, vol, func(types.Volume) bool { return true })
	if len(v.Tags) != 1 || *v.Tags[0].Key != "team" {
		t.Errorf("tags after delete: %+v", v.Tags)
	}

	insts, err := r.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{
		{Name: aws.String("availability-zone"), Values: []string{"us-east-1b"}},
		{Name: aws.String("instance-state-name"), Values: []string{"running"}},
		{Name: aws.String("tag:team"), Values: []string{"storage"}}}})
	if err != nil || len(insts.Reservations) != 1 || *insts.Reservations[0].Instances[0].InstanceId != inst {
		t.Fatalf("describe instances: %+v %v", insts, err)
	}
	i := insts.Reservations[0].Instances[0]
	if *i.Placement.AvailabilityZone != "us-east-1b" || i.InstanceType != types.InstanceTypeM5Large || *i.PrivateIpAddress == "" {
		t.Errorf("instance: %+v", i)
	}
	if len(i.NetworkInterfaces) != 1 || aws.ToString(i.NetworkInterfaces[0].MacAddress) == "" ||
		aws.ToString(i.NetworkInterfaces[0].PrivateIpAddress) != aws.ToString(i.PrivateIpAddress) {
		t.Errorf("instance's network interfaces: %+v; want its primary one with a MAC and the instance's address", i.NetworkInterfaces)
	}
	_, err = r.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{"i-0000000000000eeee"}})
	wantCode(t, err, "InvalidInstanceID.NotFound")

	snaps, err := r.ec2.DescribeSnapshots(ctx, &ec2.DescribeSnapshotsInput{OwnerIds: []string{"self"}, Filters: []types.Filter{{Name: aws.String("volume-id"), Values: []string{vol}}}})
	if err != nil || len(snaps.Snapshots) != 1 || *snaps.Snapshots[0].VolumeSize != 1 || len(snaps.Snapshots[0].Tags) != 2 {
		t.Fatalf("describe snapshots: %+v %v", snaps, err)
	}
	_, err = r.ec2.DeleteSnapshot(ctx, &ec2.DeleteSnapshotInput{SnapshotId: aws.String("snap-0000000000000eeee")})
	wantCode(t, err, "InvalidSnapshot.NotFound")

	zones, err := r.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{})
	if err != nil || len(zones.AvailabilityZones) != 2 || *zones.AvailabilityZones[1].ZoneName != "us-east-1b" || *zones.AvailabilityZones[1].ZoneId != "use1-az2" {
		t.Fatalf("zones: %+v %v", zones, err)
	}
	_, err = r.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{ZoneNames: []string{"us-east-1c"}})
	wantCode(t, err, "InvalidParameterValue")

	// Terminate: the instance reads shutting-down, then terminated; attach then fails.
	term, err := r.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{inst}})
	if err != nil || term.TerminatingInstances[0].PreviousState.Name != types.InstanceStateNameRunning {
		t.Fatalf("terminate: %+v %v", term, err)
	}
	_, err = r.ec2.AttachVolume(ctx, &ec2.AttachVolumeInput{VolumeId: &vol, InstanceId: &inst, Device: aws.String("/dev/xvdba")})
	wantCode(t, err, "IncorrectInstanceState")
}

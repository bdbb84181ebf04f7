package cloud

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/kubelab/kubelab/internal/testutil"
)

// TestStopStartInstances: a stopped instance keeps its volume attached and has no
// metadata service; started again it runs with the same volume; the states an action
// cannot leave (a terminated instance's) are refused with IncorrectInstanceState and change nothing.
func TestStopStartInstances(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ctx := context.Background()
	inst := r.runInstance(t, "us-east-1a")
	vol := r.createVolume(t, "us-east-1a", 1)
	waitInstance(t, r, inst, types.InstanceStateNameRunning)
	if _, err := r.ec2.AttachVolume(ctx, &ec2.AttachVolumeInput{InstanceId: &inst, VolumeId: &vol, Device: aws.String("/dev/xvdba")}); err != nil {
		t.Fatal(err)
	}
	r.waitVolume(t, vol, func(v types.Volume) bool { return attachedState(v) == "attached" })

	// Starting a running instance answers its state, as EC2 does.
	started, err := r.ec2.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{inst}})
	if err != nil || started.StartingInstances[0].CurrentState.Name != types.InstanceStateNameRunning {
		t.Fatalf("start a running instance: %v, %+v", err, started)
	}
	_, err = r.ec2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{inst, "i-0123456789abcdef0"}})
	wantCode(t, err, "InvalidInstanceID.NotFound")
	waitInstance(t, r, inst, types.InstanceStateNameRunning) // the refused stop changed nothing

	out, err := r.ec2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{inst}})
	if err != nil {
		t.Fatal(err)
	}
	// The fast profile stops at once; the aws one answers stopping.
	if s := out.StoppingInstances[0]; s.PreviousState.Name != types.InstanceStateNameRunning ||
		(s.CurrentState.Name != types.InstanceStateNameStopping && s.CurrentState.Name != types.InstanceStateNameStopped) {
		t.Errorf("stop answered %s → %s, want running → stopping or stopped", s.PreviousState.Name, s.CurrentState.Name)
	}
	waitInstance(t, r, inst, types.InstanceStateNameStopped)
	if r.IMDSEndpoint(inst) != "" {
		t.Error("a stopped instance still has an IMDS endpoint")
	}
	if v := r.waitVolume(t, vol, func(types.Volume) bool { return true }); attachedState(v) != "attached" {
		t.Errorf("stop left the volume %q, want attached", attachedState(v))
	}

	if _, err := r.ec2.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{inst}}); err != nil {
		t.Fatal(err)
	}
	waitInstance(t, r, inst, types.InstanceStateNameRunning)
	if r.IMDSEndpoint(inst) == "" {
		t.Error("a started instance has no IMDS endpoint")
	}
	// A stopped instance can be terminated.
	if _, err := r.ec2.StopInstances(ctx, &ec2.StopInstancesInput{InstanceIds: []string{inst}}); err != nil {
		t.Fatal(err)
	}
	waitInstance(t, r, inst, types.InstanceStateNameStopped)
	if _, err := r.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{inst}}); err != nil {
		t.Fatal(err)
	}
	waitInstance(t, r, inst, types.InstanceStateNameTerminated)
	_, err = r.ec2.StartInstances(ctx, &ec2.StartInstancesInput{InstanceIds: []string{inst}})
	wantCode(t, err, "IncorrectInstanceState")
}

func waitInstance(t *testing.T, r *running, id string, want types.InstanceStateName) {
	t.Helper()
	testutil.Eventually(t, "instance "+id+" "+string(want), func() (bool, error) {
		out, err := r.ec2.DescribeInstances(context.Background(), &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err != nil {
			return false, err
		}
		return out.Reservations[0].Instances[0].State.Name == want, nil
	})
}

package aws

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	corev1 "k8s.io/api/core/v1"

	"github.com/kubelab/kubelab/internal/cloudprovider"
)

// EC2 is the part of the EC2 API the instances use (an *ec2.Client).
type EC2 interface {
	DescribeInstances(ctx context.Context, in *ec2.DescribeInstancesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
}

// Instances answers cloudprovider.Instances over EC2.
type Instances struct{ EC2 EC2 }

var _ cloudprovider.Instances = Instances{}

// instance finds node's instance; a terminated one is not found.
func (i Instances) instance(ctx context.Context, node *corev1.Node) (*ec2types.Instance, error) {
	in := &ec2.DescribeInstancesInput{}
	if node.Spec.ProviderID != "" {
		id, err := cloudprovider.ParseProviderID(node.Spec.ProviderID)
		if err != nil {
			return nil, err
		}
		in.InstanceIds = []string{id}
	} else {
		in.Filters = []ec2types.Filter{{Name: aws.String("private-dns-name"), Values: []string{node.Name}}}
	}
	out, err := i.EC2.DescribeInstances(ctx, in)
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "InvalidInstanceID.NotFound" {
		return nil, cloudprovider.ErrInstanceNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("describe the instance of node %s: %w", node.Name, err)
	}
	var found *ec2types.Instance
	for _, r := range out.Reservations {
		for k := range r.Instances {
			inst := &r.Instances[k]
			if inst.State != nil && inst.State.Name == ec2types.InstanceStateNameTerminated {
				continue
			}
			if found != nil {
				return nil, fmt.Errorf("node %s: instances %s and %s both match", node.Name, aws.ToString(found.InstanceId), aws.ToString(inst.InstanceId))
			}
			found = inst
		}
	}
	if found == nil {
		return nil, cloudprovider.ErrInstanceNotFound
	}
	return found, nil
}

// InstanceMetadata is the node's instance's provider id, type, zone, region and addresses.
func (i Instances) InstanceMetadata(ctx context.Context, node *corev1.Node) (*cloudprovider.Metadata, error) {
	inst, err := i.instance(ctx, node)
	if err != nil {
		return nil, err
	}
	zone := ""
	if inst.Placement != nil {
		zone = aws.ToString(inst.Placement.AvailabilityZone)
	}
	m := &cloudprovider.Metadata{ProviderID: cloudprovider.ProviderID(zone, aws.ToString(inst.InstanceId)),
		InstanceType: string(inst.InstanceType), Zone: zone, Region: cloudprovider.Region(zone)}
	if ip := aws.ToString(inst.PrivateIpAddress); ip != "" {
		m.Addresses = append(m.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	if dns := aws.ToString(inst.PrivateDnsName); dns != "" {
		m.Addresses = append(m.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalDNS, Address: dns},
			corev1.NodeAddress{Type: corev1.NodeHostName, Address: dns})
	}
	return m, nil
}

// InstanceExists is false once the node's instance is terminated or unknown.
func (i Instances) InstanceExists(ctx context.Context, node *corev1.Node) (bool, error) {
	_, err := i.instance(ctx, node)
	if errors.Is(err, cloudprovider.ErrInstanceNotFound) {
		return false, nil
	}
	return err == nil, err
}

// InstanceShutdown is true while the node's instance is stopping or stopped.
func (i Instances) InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error) {
	inst, err := i.instance(ctx, node)
	if err != nil {
		return false, err
	}
	s := inst.State.Name
	return s == ec2types.InstanceStateNameStopping || s == ec2types.InstanceStateNameStopped, nil
}

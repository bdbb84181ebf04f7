package ipamd

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// EC2 is the part of the EC2 API the manager calls (an *ec2.Client has it).
type EC2 interface {
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	DescribeSubnets(context.Context, *ec2.DescribeSubnetsInput, ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error)
	DescribeNetworkInterfaces(context.Context, *ec2.DescribeNetworkInterfacesInput, ...func(*ec2.Options)) (*ec2.DescribeNetworkInterfacesOutput, error)
	CreateNetworkInterface(context.Context, *ec2.CreateNetworkInterfaceInput, ...func(*ec2.Options)) (*ec2.CreateNetworkInterfaceOutput, error)
	AttachNetworkInterface(context.Context, *ec2.AttachNetworkInterfaceInput, ...func(*ec2.Options)) (*ec2.AttachNetworkInterfaceOutput, error)
	ModifyNetworkInterfaceAttribute(context.Context, *ec2.ModifyNetworkInterfaceAttributeInput, ...func(*ec2.Options)) (*ec2.ModifyNetworkInterfaceAttributeOutput, error)
	DetachNetworkInterface(context.Context, *ec2.DetachNetworkInterfaceInput, ...func(*ec2.Options)) (*ec2.DetachNetworkInterfaceOutput, error)
	DeleteNetworkInterface(context.Context, *ec2.DeleteNetworkInterfaceInput, ...func(*ec2.Options)) (*ec2.DeleteNetworkInterfaceOutput, error)
	AssignPrivateIpAddresses(context.Context, *ec2.AssignPrivateIpAddressesInput, ...func(*ec2.Options)) (*ec2.AssignPrivateIpAddressesOutput, error)
	UnassignPrivateIpAddresses(context.Context, *ec2.UnassignPrivateIpAddressesInput, ...func(*ec2.Options)) (*ec2.UnassignPrivateIpAddressesOutput, error)
}

// The tags and description aws-node gives the ENIs it creates.
const (
	TagInstanceID   = "node.k8s.amazonaws.com/instance_id"
	TagCreatedAt    = "node.k8s.amazonaws.com/createdAt"
	TagClusterName  = "cluster.k8s.amazonaws.com/name"
	TagOwner        = "eks:eni:owner"
	ownerValue      = "amazon-vpc-cni"
	descriptionPfx  = "aws-K8S-"
	filterAttachIID = "attachment.instance-id"
)

// instance is what the manager learns of its instance at start.
type instance struct {
	ID, Type, SubnetID string
	SubnetCIDR         netip.Prefix
	SecurityGroups     []string
	Limits             Limits
}

// describeInstance finds the instance id, its type's limits and its subnet.
func describeInstance(ctx context.Context, api EC2, id string) (instance, error) {
	out, err := api.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		return instance{}, fmt.Errorf("describe instance %s: %w", id, err)
	}
	var inst *ec2types.Instance
	for _, r := range out.Reservations {
		for i := range r.Instances {
			if aws.ToString(r.Instances[i].InstanceId) == id {
				inst = &r.Instances[i]
			}
		}
	}
	if inst == nil {
		return instance{}, fmt.Errorf("describe instance %s: not found", id)
	}
	in := instance{ID: id, Type: string(inst.InstanceType), SubnetID: aws.ToString(inst.SubnetId)}
	for _, g := range inst.SecurityGroups {
		in.SecurityGroups = append(in.SecurityGroups, aws.ToString(g.GroupId))
	}
	if in.Limits, err = instanceTypeLimits(ctx, api, in.Type); err != nil {
		return instance{}, err
	}
	if in.SubnetCIDR, err = subnetCIDR(ctx, api, in.SubnetID); err != nil {
		return instance{}, err
	}
	return in, nil
}

// instanceTypeLimits are typ's ENIs and IPv4 addresses per ENI.
func instanceTypeLimits(ctx context.Context, api EC2, typ string) (Limits, error) {
	out, err := api.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []ec2types.InstanceType{ec2types.InstanceType(typ)}})
	if err != nil {
		return Limits{}, fmt.Errorf("describe instance type %s: %w", typ, err)
	}
	for _, t := range out.InstanceTypes {
		if string(t.InstanceType) == typ && t.NetworkInfo != nil {
			l := Limits{MaxENIs: int(aws.ToInt32(t.NetworkInfo.MaximumNetworkInterfaces)),
				IPv4PerENI: int(aws.ToInt32(t.NetworkInfo.Ipv4AddressesPerInterface))}
			if l.MaxENIs < 1 || l.IPv4PerENI < 2 {
				return Limits{}, fmt.Errorf("instance type %s: %d ENIs of %d IPv4 addresses leave no pod address", typ, l.MaxENIs, l.IPv4PerENI)
			}
			return l, nil
		}
	}
	return Limits{}, fmt.Errorf("describe instance type %s: no network info", typ)
}

// InstanceTypeLimits asks the EC2 API for typ's network limits.
func InstanceTypeLimits(ctx context.Context, api EC2, typ string) (Limits, error) {
	return instanceTypeLimits(ctx, api, typ)
}

func subnetCIDR(ctx context.Context, api EC2, id string) (netip.Prefix, error) {
	out, err := api.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{SubnetIds: []string{id}})
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("describe subnet %s: %w", id, err)
	}
	if len(out.Subnets) != 1 {
		return netip.Prefix{}, fmt.Errorf("describe subnet %s: not found", id)
	}
	p, err := netip.ParsePrefix(aws.ToString(out.Subnets[0].CidrBlock))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("subnet %s: %w", id, err)
	}
	return p, nil
}

// cloudENI is one ENI attached to the instance, as the cloud has it.
type cloudENI struct {
	ID, MAC, AttachmentID, SubnetID string
	DeviceNumber                    int
	PrimaryIP                       netip.Addr
	SubnetCIDR                      netip.Prefix
	Secondary                       []netip.Addr
}

// describeENIs lists the ENIs attached to the instance, in device order.
func describeENIs(ctx context.Context, api EC2, inst instance) ([]cloudENI, error) {
	var out []cloudENI
	p := ec2.NewDescribeNetworkInterfacesPaginator(api, &ec2.DescribeNetworkInterfacesInput{
		Filters: []ec2types.Filter{{Name: aws.String(filterAttachIID), Values: []string{inst.ID}}}})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe network interfaces of %s: %w", inst.ID, err)
		}
		for _, n := range page.NetworkInterfaces {
			if n.Attachment == nil || aws.ToString(n.Attachment.InstanceId) != inst.ID {
				continue
			}
			if s := n.Attachment.Status; s == ec2types.AttachmentStatusDetaching || s == ec2types.AttachmentStatusDetached {
				continue
			}
			e := cloudENI{ID: aws.ToString(n.NetworkInterfaceId), MAC: aws.ToString(n.MacAddress),
				AttachmentID: aws.ToString(n.Attachment.AttachmentId), SubnetID: aws.ToString(n.SubnetId),
				DeviceNumber: int(aws.ToInt32(n.Attachment.DeviceIndex)), SubnetCIDR: inst.SubnetCIDR}
			for _, a := range n.PrivateIpAddresses {
				ip, err := netip.ParseAddr(aws.ToString(a.PrivateIpAddress))
				if err != nil {
					continue
				}
				if aws.ToBool(a.Primary) {
					e.PrimaryIP = ip
				} else {
					e.Secondary = append(e.Secondary, ip)
				}
			}
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b cloudENI) int { return a.DeviceNumber - b.DeviceNumber })
	return out, nil
}

// eniTags are the tags of an ENI the manager creates for inst, as aws-node tags them.
func eniTags(instanceID, cluster string, now time.Time) []ec2types.Tag {
	tags := []ec2types.Tag{
		{Key: aws.String(TagInstanceID), Value: aws.String(instanceID)},
		{Key: aws.String(TagCreatedAt), Value: aws.String(now.UTC().Format(time.RFC3339))},
		{Key: aws.String(TagOwner), Value: aws.String(ownerValue)},
	}
	if cluster != "" {
		tags = append(tags, ec2types.Tag{Key: aws.String(TagClusterName), Value: aws.String(cluster)})
	}
	return tags
}

// freeDevice is the lowest device index below max that no ENI of enis has.
func freeDevice(enis []*eniState, maxENIs int) (int, bool) {
	for i := 1; i < maxENIs; i++ {
		if !slices.ContainsFunc(enis, func(e *eniState) bool { return e.DeviceNumber == i }) {
			return i, true
		}
	}
	return 0, false
}

// createENI creates an ENI in the instance's subnet and attaches it at device, deleting
// it again when the attachment fails.
func createENI(ctx context.Context, api EC2, inst instance, cluster string, device int, now time.Time) (string, eniTook, error) {
	var took eniTook
	start := time.Now()
	out, err := api.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{
		SubnetId:    aws.String(inst.SubnetID),
		Description: aws.String(descriptionPfx + inst.ID),
		Groups:      inst.SecurityGroups,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeNetworkInterface,
			Tags: eniTags(inst.ID, cluster, now)}},
	})
	took.create = time.Since(start)
	if err != nil {
		return "", took, fmt.Errorf("create network interface: %w", err)
	}
	id := aws.ToString(out.NetworkInterface.NetworkInterfaceId)
	start = time.Now()
	att, err := api.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{
		InstanceId: aws.String(inst.ID), NetworkInterfaceId: aws.String(id), DeviceIndex: aws.Int32(int32(device))})
	took.attach = time.Since(start)
	if err != nil {
		_, derr := api.DeleteNetworkInterface(context.WithoutCancel(ctx), &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(id)})
		return "", took, errors.Join(fmt.Errorf("attach network interface %s to %s at device %d: %w", id, inst.ID, device, err), derr)
	}
	// As aws-node does: the ENI goes with the instance.
	if _, err := api.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{
		NetworkInterfaceId: aws.String(id),
		Attachment: &ec2types.NetworkInterfaceAttachmentChanges{AttachmentId: att.AttachmentId,
			DeleteOnTermination: aws.Bool(true)}}); err != nil {
		return id, took, fmt.Errorf("set DeleteOnTermination of %s: %w", id, err)
	}
	return id, took, nil
}

// eniTook is how long a new ENI's CreateNetworkInterface and AttachNetworkInterface took.
type eniTook struct{ create, attach time.Duration }

// deleteENI detaches and deletes a surplus ENI, retrying the deletion while the detach
// is under way.
func deleteENI(ctx context.Context, api EC2, e *eniState) error {
	if _, err := api.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String(e.AttachmentID)}); err != nil {
		return fmt.Errorf("detach network interface %s: %w", e.ID, err)
	}
	var err error
	for range 10 {
		if _, err = api.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(e.ID)}); err == nil {
			return nil
		}
		if errorCode(err) != "InvalidNetworkInterface.InUse" {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("delete network interface %s: %w", e.ID, err)
}

// errorCode is the AWS error code of err ("" when it has none).
func errorCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// parseAddrs parses the addresses of an Assign answer.
func parseAddrs(in []ec2types.AssignedPrivateIpAddress) []netip.Addr {
	var out []netip.Addr
	for _, a := range in {
		if ip, err := netip.ParseAddr(aws.ToString(a.PrivateIpAddress)); err == nil {
			out = append(out, ip)
		}
	}
	return out
}

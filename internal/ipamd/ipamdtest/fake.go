// Package ipamdtest is a fake of the EC2 API for the IP address manager's tests: one
// instance in one subnet with its ENIs and their addresses in memory, the instance
// type's limits enforced with AWS's error codes.
package ipamdtest

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// ENI is one network interface of the fake.
type ENI struct {
	ID, MAC, AttachmentID string
	Device                int
	Attached              bool
	Primary               netip.Addr
	Secondary             []netip.Addr
	Tags                  map[string]string
	Description           string
	DeleteOnTermination   bool
}

// EC2 is the fake. Its fields may be read under Lock.
type EC2 struct {
	sync.Mutex
	InstanceID, InstanceType, SubnetID string
	Subnet                             netip.Prefix
	MaxENIs, IPv4PerENI                int
	ENIs                               []*ENI
	// Calls counts the calls by action.
	Calls map[string]int
	// Fail makes an action fail with the given AWS error code.
	Fail map[string]string
	next netip.Addr
	seq  int
}

// New is an instance of type typ with limits maxENIs × ipv4PerENI in 172.31.16.0/20,
// its primary ENI at device 0 with address primary.
func New(maxENIs, ipv4PerENI int) *EC2 {
	f := &EC2{InstanceID: "i-0123456789abcdef0", InstanceType: "t3.small", SubnetID: "subnet-0a",
		Subnet: netip.MustParsePrefix("172.31.16.0/20"), MaxENIs: maxENIs, IPv4PerENI: ipv4PerENI,
		Calls: map[string]int{}, Fail: map[string]string{}, next: netip.MustParseAddr("172.31.16.10")}
	f.ENIs = []*ENI{{ID: f.newID("eni"), MAC: f.newMAC(), AttachmentID: f.newID("eni-attach"), Device: 0, Attached: true,
		Primary: f.nextAddr(), Tags: map[string]string{}}}
	return f
}

func (f *EC2) newID(prefix string) string {
	f.seq++
	return fmt.Sprintf("%s-%017x", prefix, f.seq)
}

func (f *EC2) newMAC() string {
	f.seq++
	return fmt.Sprintf("02:00:00:00:%02x:%02x", f.seq>>8&0xff, f.seq&0xff)
}

func (f *EC2) nextAddr() netip.Addr {
	a := f.next
	f.next = f.next.Next()
	return a
}

// PrimaryIP is the instance's address.
func (f *EC2) PrimaryIP() netip.Addr { return f.ENIs[0].Primary }

func apiError(code, msg string) error {
	return &smithy.GenericAPIError{Code: code, Message: msg, Fault: smithy.FaultClient}
}

// call counts action and returns the failure set for it.
func (f *EC2) call(action string) error {
	f.Calls[action]++
	if code := f.Fail[action]; code != "" {
		return apiError(code, action+" failed as the test asked")
	}
	return nil
}

func (f *EC2) eni(id string) (*ENI, error) {
	for _, e := range f.ENIs {
		if e.ID == id {
			return e, nil
		}
	}
	return nil, apiError("InvalidNetworkInterfaceID.NotFound", fmt.Sprintf("The networkInterface ID '%s' does not exist", id))
}

// Assigned lists the secondary addresses of every attached ENI.
func (f *EC2) Assigned() []netip.Addr {
	f.Lock()
	defer f.Unlock()
	var out []netip.Addr
	for _, e := range f.ENIs {
		if e.Attached {
			out = append(out, e.Secondary...)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// Count is how often action was called.
func (f *EC2) Count(action string) int {
	f.Lock()
	defer f.Unlock()
	return f.Calls[action]
}

func (f *EC2) DescribeInstances(_ context.Context, in *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	f.Lock()
	defer f.Unlock()
	if err := f.call("DescribeInstances"); err != nil {
		return nil, err
	}
	if !slices.Contains(in.InstanceIds, f.InstanceID) {
		return nil, apiError("InvalidInstanceID.NotFound", fmt.Sprintf("The instance IDs '%v' do not exist", in.InstanceIds))
	}
	return &ec2.DescribeInstancesOutput{Reservations: []ec2types.Reservation{{Instances: []ec2types.Instance{{
		InstanceId: aws.String(f.InstanceID), InstanceType: ec2types.InstanceType(f.InstanceType), SubnetId: aws.String(f.SubnetID),
		PrivateIpAddress: aws.String(f.PrimaryIP().String()),
		SecurityGroups:   []ec2types.GroupIdentifier{{GroupId: aws.String("sg-0a")}},
	}}}}}, nil
}

func (f *EC2) DescribeInstanceTypes(_ context.Context, in *ec2.DescribeInstanceTypesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	f.Lock()
	defer f.Unlock()
	if err := f.call("DescribeInstanceTypes"); err != nil {
		return nil, err
	}
	return &ec2.DescribeInstanceTypesOutput{InstanceTypes: []ec2types.InstanceTypeInfo{{InstanceType: ec2types.InstanceType(f.InstanceType),
		NetworkInfo: &ec2types.NetworkInfo{MaximumNetworkInterfaces: aws.Int32(int32(f.MaxENIs)), Ipv4AddressesPerInterface: aws.Int32(int32(f.IPv4PerENI))}}}}, nil
}

func (f *EC2) DescribeSubnets(_ context.Context, in *ec2.DescribeSubnetsInput, _ ...func(*ec2.Options)) (*ec2.DescribeSubnetsOutput, error) {
	f.Lock()
	defer f.Unlock()
	if err := f.call("DescribeSubnets"); err != nil {
		return nil, err
	}
	return &ec2.DescribeSubnetsOutput{Subnets: []ec2types.Subnet{{SubnetId: aws.String(f.SubnetID), CidrBlock: aws.String(f.Subnet.String())}}}, nil
}

func (f *EC2) DescribeNetworkInterfaces(_ context.Context, in *ec2.DescribeNetworkInterfacesInput, _ ...func(*ec2.Options)) (*ec2.DescribeNetworkInterfacesOutput, error) {
	f.Lock()
	defer f.Unlock()
	if err := f.call("DescribeNetworkInterfaces"); err != nil {
		return nil, err
	}
	out := &ec2.DescribeNetworkInterfacesOutput{}
	for _, e := range f.ENIs {
		n := ec2types.NetworkInterface{NetworkInterfaceId: aws.String(e.ID), MacAddress: aws.String(e.MAC), SubnetId: aws.String(f.SubnetID),
			PrivateIpAddress: aws.String(e.Primary.String()), Description: aws.String(e.Description),
			PrivateIpAddresses: []ec2types.NetworkInterfacePrivateIpAddress{{Primary: aws.Bool(true), PrivateIpAddress: aws.String(e.Primary.String())}}}
		for _, a := range e.Secondary {
			n.PrivateIpAddresses = append(n.PrivateIpAddresses, ec2types.NetworkInterfacePrivateIpAddress{Primary: aws.Bool(false), PrivateIpAddress: aws.String(a.String())})
		}
		if e.Attached {
			n.Attachment = &ec2types.NetworkInterfaceAttachment{AttachmentId: aws.String(e.AttachmentID), InstanceId: aws.String(f.InstanceID),
				DeviceIndex: aws.Int32(int32(e.Device)), Status: ec2types.AttachmentStatusAttached}
		}
		for k, v := range e.Tags {
			n.TagSet = append(n.TagSet, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
		}
		out.NetworkInterfaces = append(out.NetworkInterfaces, n)
	}
	return out, nil
}

func (f *EC2) CreateNetworkInterface(_ context.Context, in *ec2.CreateNetworkInterfaceInput, _ ...func(*ec2.Options)) (*ec2.CreateNetworkInterfaceOutput, error) {
	f.Lock()
	defer f.Unlock()
	if err := f.call("CreateNetworkInterface"); err != nil {
		return nil, err
	}
	e := &ENI{ID: f.newID("eni"), MAC: f.newMAC(), Primary: f.nextAddr(), Tags: map[string]string{}, Description: aws.ToString(in.Description)}
	for _, ts := range in.TagSpecifications {
		for _, t := range ts.Tags {
			e.Tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
		}
	}
	f.ENIs = append(f.ENIs, e)
	return &ec2.CreateNetworkInterfaceOutput{NetworkInterface: &ec2types.NetworkInterface{NetworkInterfaceId: aws.String(e.ID)}}, nil
}

func (f *EC2) AttachNetworkInterface(_ context.Context, in *ec2.AttachNetworkInterfaceInput, _ ...func(*ec2.Options)) (*ec2.AttachNetworkInterfaceOutput, error) {
	f.Lock()
	defer f.Unlock()
	if err := f.call("AttachNetworkInterface"); err != nil {
		return nil, err
	}
	e, err := f.eni(aws.ToString(in.NetworkInterfaceId))
	if err != nil {
		return nil, err
	}
	attached := 0
	for _, x := range f.ENIs {
		if x.Attached {
			attached++
			if x.Device == int(aws.ToInt32(in.DeviceIndex)) {
				return nil, apiError("InvalidParameterValue", fmt.Sprintf("Instance '%s' already has an interface attached at device index '%d'.", f.InstanceID, x.Device))
			}
		}
	}
	if attached >= f.MaxENIs {
		return nil, apiError("AttachmentLimitExceeded", fmt.Sprintf("Interface count %d exceeds the limit for %s", attached+1, f.InstanceType))
	}
	e.Attached, e.Device, e.AttachmentID = true, int(aws.ToInt32(in.DeviceIndex)), f.newID("eni-attach")
	return &ec2.AttachNetworkInterfaceOutput{AttachmentId: aws.String(e.AttachmentID)}, nil
}

func (f *EC2) ModifyNetworkInterfaceAttribute(_ context.Context, in *ec2.ModifyNetworkInterfaceAttributeInput, _ ...func(*ec2.Options)) (*ec2.ModifyNetworkInterfaceAttributeOutput, error) {
	f.Lock()
	defer f.Unlock()
	if err := f.call("ModifyNetworkInterfaceAttribute"); err != nil {
		return nil, err
	}
	e, err := f.eni(aws.ToString(in.NetworkInterfaceId))
	if err != nil {
		return nil, err
	}
	if in.Attachment != nil {
		e.DeleteOnTermination = aws.ToBool(in.Attachment.DeleteOnTermination)
	}
	return &ec2.ModifyNetworkInterfaceAttributeOutput{}, nil
}

func (f *EC2) DetachNetworkInterface(_ context.Context, in *ec2.DetachNetworkInterfaceInput, _ ...func(*ec2.Options)) (*ec2.DetachNetworkInterfaceOutput, error) {
	f.Lock()
	defer f.Unlock()
	if err := f.call("DetachNetworkInterface"); err != nil {
		return nil, err
	}
	for _, e := range f.ENIs {
		if e.Attached && e.AttachmentID == aws.ToString(in.AttachmentId) {
			e.Attached = false
			return &ec2.DetachNetworkInterfaceOutput{}, nil
		}
	}
	return nil, apiError("InvalidAttachmentID.NotFound", "no attachment "+aws.ToString(in.AttachmentId))
}

func (f *EC2) DeleteNetworkInterface(_ context.Context, in *ec2.DeleteNetworkInterfaceInput, _ ...func(*ec2.Options)) (*ec2.DeleteNetworkInterfaceOutput, error) {
	f.Lock()
	defer f.Unlock()
	if err := f.call("DeleteNetworkInterface"); err != nil {
		return nil, err
	}
	e, err := f.eni(aws.ToString(in.NetworkInterfaceId))
	if err != nil {
		return nil, err
	}
	if e.Attached {
		return nil, apiError("InvalidNetworkInterface.InUse", "Network interface '"+e.ID+"' is currently in use.")
	}
	f.ENIs = slices.DeleteFunc(f.ENIs, func(x *ENI) bool { return x == e })
	return &ec2.DeleteNetworkInterfaceOutput{}, nil
}

func (f *EC2) AssignPrivateIpAddresses(_ context.Context, in *ec2.AssignPrivateIpAddressesInput, _ ...func(*ec2.Options)) (*ec2.AssignPrivateIpAddressesOutput, error) {
	f.Lock()
	defer f.Unlock()
	if err := f.call("AssignPrivateIpAddresses"); err != nil {
		return nil, err
	}
	e, err := f.eni(aws.ToString(in.NetworkInterfaceId))
	if err != nil {
		return nil, err
	}
	n := int(aws.ToInt32(in.SecondaryPrivateIpAddressCount))
	if 1+len(e.Secondary)+n > f.IPv4PerENI {
		return nil, apiError("PrivateIpAddressLimitExceeded", fmt.Sprintf("Number of private addresses will exceed limit for %s", f.InstanceType))
	}
	out := &ec2.AssignPrivateIpAddressesOutput{NetworkInterfaceId: aws.String(e.ID)}
	for range n {
		a := f.nextAddr()
		e.Secondary = append(e.Secondary, a)
		out.AssignedPrivateIpAddresses = append(out.AssignedPrivateIpAddresses, ec2types.AssignedPrivateIpAddress{PrivateIpAddress: aws.String(a.String())})
	}
	return out, nil
}

func (f *EC2) UnassignPrivateIpAddresses(_ context.Context, in *ec2.UnassignPrivateIpAddressesInput, _ ...func(*ec2.Options)) (*ec2.UnassignPrivateIpAddressesOutput, error) {
	f.Lock()
	defer f.Unlock()
	if err := f.call("UnassignPrivateIpAddresses"); err != nil {
		return nil, err
	}
	e, err := f.eni(aws.ToString(in.NetworkInterfaceId))
	if err != nil {
		return nil, err
	}
	for _, s := range in.PrivateIpAddresses {
		a, err := netip.ParseAddr(s)
		if err != nil || !slices.Contains(e.Secondary, a) {
			return nil, apiError("InvalidParameterValue", fmt.Sprintf("Some of the specified addresses are not assigned to interface %s", e.ID))
		}
	}
	for _, s := range in.PrivateIpAddresses {
		a := netip.MustParseAddr(s)
		e.Secondary = slices.DeleteFunc(e.Secondary, func(x netip.Addr) bool { return x == a })
	}
	return &ec2.UnassignPrivateIpAddressesOutput{}, nil
}

// Unassign takes addresses off the instance behind the manager's back (as another
// client of the API could).
func (f *EC2) Unassign(addrs ...netip.Addr) {
	f.Lock()
	defer f.Unlock()
	for _, e := range f.ENIs {
		e.Secondary = slices.DeleteFunc(e.Secondary, func(x netip.Addr) bool { return slices.Contains(addrs, x) })
	}
}

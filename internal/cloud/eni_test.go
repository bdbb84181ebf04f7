package cloud

import (
	"context"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// fakeFabric records what the cloud tells its fabric.
type fakeFabric struct {
	mu    sync.Mutex
	state map[string][]FabricInterface
	calls int
}

func (f *fakeFabric) Sync(all map[string][]FabricInterface) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state = all
	f.calls++
}

func (f *fakeFabric) SetInstance(id string, ifaces []FabricInterface) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.state == nil {
		f.state = map[string][]FabricInterface{}
	}
	f.state[id] = ifaces
	f.calls++
}

// ips returns the addresses the fabric carries to instance id, by device index.
func (f *fakeFabric) ips(id string) map[int][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[int][]string{}
	for _, fi := range f.state[id] {
		out[fi.DeviceIndex] = fi.IPs
	}
	return out
}

func (r *running) runInstanceOfType(t testing.TB, typ types.InstanceType) types.Instance {
	t.Helper()
	out, err := r.ec2.RunInstances(context.Background(), &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		InstanceType: typ, Placement: &types.Placement{AvailabilityZone: aws.String("us-east-1a")}})
	if err != nil {
		t.Fatalf("run %s instance: %v", typ, err)
	}
	return out.Instances[0]
}

func (r *running) subnetOf(t testing.TB, zone string) types.Subnet {
	t.Helper()
	out, err := r.ec2.DescribeSubnets(context.Background(), &ec2.DescribeSubnetsInput{Filters: []types.Filter{
		{Name: aws.String("availability-zone"), Values: []string{zone}}}})
	if err != nil || len(out.Subnets) != 1 {
		t.Fatalf("describe subnet of %s: %v %v", zone, out, err)
	}
	return out.Subnets[0]
}

func (r *running) eni(t testing.TB, id string) types.NetworkInterface {
	t.Helper()
	out, err := r.ec2.DescribeNetworkInterfaces(context.Background(), &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{id}})
	if err != nil || len(out.NetworkInterfaces) != 1 {
		t.Fatalf("describe %s: %v %v", id, out, err)
	}
	return out.NetworkInterfaces[0]
}

func eniIPs(n types.NetworkInterface) []string {
	var out []string
	for _, a := range n.PrivateIpAddresses {
		out = append(out, aws.ToString(a.PrivateIpAddress))
	}
	return out
}

func (r *running) createENI(t testing.TB, subnet string, secondary int32, tags ...types.Tag) types.NetworkInterface {
	t.Helper()
	in := &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(subnet), Description: aws.String("test"),
		SecondaryPrivateIpAddressCount: aws.Int32(secondary)}
	if len(tags) > 0 {
		in.TagSpecifications = []types.TagSpecification{{ResourceType: types.ResourceTypeNetworkInterface, Tags: tags}}
	}
	out, err := r.ec2.CreateNetworkInterface(context.Background(), in)
	if err != nil {
		t.Fatalf("create network interface: %v", err)
	}
	return *out.NetworkInterface
}

// An instance has its primary interface, with its address and MAC, from RunInstances on:
// DescribeInstances and DescribeNetworkInterfaces show it, and the fabric is told.
func TestPrimaryNetworkInterface(t *testing.T) {
	fab := &fakeFabric{}
	r := startCloud(t, Config{Hollow: true, Fabric: fab})
	ctx := context.Background()
	before := aws.ToInt32(r.subnetOf(t, "us-east-1a").AvailableIpAddressCount)
	inst := r.runInstanceOfType(t, types.InstanceTypeM5Large)
	id, ip, mac := aws.ToString(inst.InstanceId), aws.ToString(inst.PrivateIpAddress), aws.ToString(inst.NetworkInterfaces[0].MacAddress)
	if ip != "172.31.0.11" {
		t.Errorf("first instance's address %s, want 172.31.0.11 as before interfaces existed", ip)
	}
	d, err := r.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	nis := d.Reservations[0].Instances[0].NetworkInterfaces
	if len(nis) != 1 || aws.ToString(nis[0].NetworkInterfaceId) != "eni-"+id[2:] || aws.ToString(nis[0].MacAddress) != mac ||
		aws.ToInt32(nis[0].Attachment.DeviceIndex) != 0 || len(nis[0].PrivateIpAddresses) != 1 ||
		aws.ToString(nis[0].PrivateIpAddresses[0].PrivateIpAddress) != ip || !aws.ToBool(nis[0].PrivateIpAddresses[0].Primary) {
		t.Fatalf("instance's interfaces: %+v", nis)
	}
	out, err := r.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{
		{Name: aws.String("attachment.instance-id"), Values: []string{id}}}})
	if err != nil || len(out.NetworkInterfaces) != 1 {
		t.Fatalf("describe by instance: %+v %v", out, err)
	}
	n := out.NetworkInterfaces[0]
	if n.Status != types.NetworkInterfaceStatusInUse || aws.ToString(n.PrivateIpAddress) != ip || aws.ToString(n.MacAddress) != mac ||
		!aws.ToBool(n.Attachment.DeleteOnTermination) || n.Attachment.Status != types.AttachmentStatusAttached || aws.ToString(n.SubnetId) == "" {
		t.Errorf("primary interface %+v", n)
	}
	if after := aws.ToInt32(r.subnetOf(t, "us-east-1a").AvailableIpAddressCount); after != before-1 {
		t.Errorf("available addresses %d, want %d", after, before-1)
	}
	if got := fab.ips(id); !slices.Equal(got[0], []string{ip}) || len(got) != 1 {
		t.Errorf("fabric carries %v to %s, want eth0 %s", got, id, ip)
	}
}

// A second interface is created, attached, given addresses and freed again; each step is
// what Describe*, the subnet's free count and the fabric show.
func TestNetworkInterfaceLifecycle(t *testing.T) {
	fab := &fakeFabric{}
	r := startCloud(t, Config{Hollow: true, Fabric: fab})
	ctx := context.Background()
	inst := aws.ToString(r.runInstanceOfType(t, types.InstanceTypeM5Large).InstanceId)
	subnet := r.subnetOf(t, "us-east-1a")
	free := aws.ToInt32(subnet.AvailableIpAddressCount)

	n := r.createENI(t, aws.ToString(subnet.SubnetId), 2, types.Tag{Key: aws.String("node"), Value: aws.String("a")})
	eni := aws.ToString(n.NetworkInterfaceId)
	if n.Status != types.NetworkInterfaceStatusAvailable || len(n.PrivateIpAddresses) != 3 || aws.ToString(n.Description) != "test" ||
		len(n.TagSet) != 1 || len(n.Groups) != 1 || aws.ToString(n.MacAddress) == "" {
		t.Fatalf("created %+v", n)
	}
	if got := aws.ToInt32(r.subnetOf(t, "us-east-1a").AvailableIpAddressCount); got != free-3 {
		t.Errorf("free addresses %d, want %d", got, free-3)
	}
	byTag, err := r.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{Filters: []types.Filter{
		{Name: aws.String("tag:node"), Values: []string{"a"}}, {Name: aws.String("status"), Values: []string{"available"}},
		{Name: aws.String("addresses.private-ip-address"), Values: []string{aws.ToString(n.PrivateIpAddresses[2].PrivateIpAddress)}}}})
	if err != nil || len(byTag.NetworkInterfaces) != 1 {
		t.Fatalf("describe by tag, status and address: %+v %v", byTag, err)
	}

	att, err := r.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: aws.String(eni),
		InstanceId: aws.String(inst), DeviceIndex: aws.Int32(1)})
	if err != nil || aws.ToString(att.AttachmentId) == "" {
		t.Fatalf("attach: %+v %v", att, err)
	}
	n = r.eni(t, eni)
	if n.Status != types.NetworkInterfaceStatusInUse || n.Attachment.Status != types.AttachmentStatusAttached ||
		aws.ToString(n.Attachment.InstanceId) != inst || aws.ToBool(n.Attachment.DeleteOnTermination) {
		t.Fatalf("attached %+v", n)
	}
	if got := fab.ips(inst); !slices.Equal(got[1], eniIPs(n)) {
		t.Errorf("fabric carries %v, want eth1 %v", got, eniIPs(n))
	}

	as, err := r.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(eni),
		SecondaryPrivateIpAddressCount: aws.Int32(3)})
	if err != nil || len(as.AssignedPrivateIpAddresses) != 3 {
		t.Fatalf("assign 3: %+v %v", as, err)
	}
	// A named free address of the subnet.
	named := "172.31.7.7"
	if _, err := r.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(eni),
		PrivateIpAddresses: []string{named}}); err != nil {
		t.Fatalf("assign %s: %v", named, err)
	}
	n = r.eni(t, eni)
	if len(n.PrivateIpAddresses) != 7 || !slices.Contains(eniIPs(n), named) {
		t.Fatalf("after assigning: %v", eniIPs(n))
	}
	if got := fab.ips(inst); !slices.Equal(got[1], eniIPs(n)) {
		t.Errorf("fabric carries %v, want eth1 %v", got, eniIPs(n))
	}
	d, err := r.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{inst}})
	if err != nil {
		t.Fatal(err)
	}
	if nis := d.Reservations[0].Instances[0].NetworkInterfaces; len(nis) != 2 || len(nis[1].PrivateIpAddresses) != 7 {
		t.Errorf("DescribeInstances lists interfaces %+v", nis)
	}
	// The instance whose interface has an address, as a node agent finds the owner of one.
	byAddr, err := r.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []types.Filter{
		{Name: aws.String("network-interface.addresses.private-ip-address"), Values: []string{named}}}})
	if err != nil || len(byAddr.Reservations) != 1 || aws.ToString(byAddr.Reservations[0].Instances[0].InstanceId) != inst {
		t.Errorf("instances with %s: %+v %v", named, byAddr, err)
	}

	drop := []string{named, aws.ToString(as.AssignedPrivateIpAddresses[0].PrivateIpAddress)}
	if _, err := r.ec2.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(eni),
		PrivateIpAddresses: drop}); err != nil {
		t.Fatal(err)
	}
	n = r.eni(t, eni)
	if len(n.PrivateIpAddresses) != 5 || slices.Contains(eniIPs(n), named) {
		t.Fatalf("after unassigning: %v", eniIPs(n))
	}
	if got := fab.ips(inst); slices.Contains(got[1], named) {
		t.Errorf("fabric still carries %s: %v", named, got)
	}
	if got := aws.ToInt32(r.subnetOf(t, "us-east-1a").AvailableIpAddressCount); got != free-5 {
		t.Errorf("free addresses %d, want %d", got, free-5)
	}

	if _, err := r.ec2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: aws.String(eni),
		Attachment: &types.NetworkInterfaceAttachmentChanges{AttachmentId: att.AttachmentId, DeleteOnTermination: aws.Bool(true)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ec2.ModifyNetworkInterfaceAttribute(ctx, &ec2.ModifyNetworkInterfaceAttributeInput{NetworkInterfaceId: aws.String(eni),
		SourceDestCheck: &types.AttributeBooleanValue{Value: aws.Bool(false)}}); err != nil {
		t.Fatal(err)
	}
	if n = r.eni(t, eni); !aws.ToBool(n.Attachment.DeleteOnTermination) || aws.ToBool(n.SourceDestCheck) {
		t.Errorf("after modify: %+v", n)
	}

	_, err = r.ec2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(eni)})
	wantCode(t, err, "InvalidNetworkInterface.InUse")
	if _, err := r.ec2.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: att.AttachmentId}); err != nil {
		t.Fatal(err)
	}
	if n = r.eni(t, eni); n.Status != types.NetworkInterfaceStatusAvailable || n.Attachment != nil {
		t.Errorf("after detach: %+v", n)
	}
	if got := fab.ips(inst); len(got) != 1 {
		t.Errorf("fabric carries %v after the detach, want eth0 only", got)
	}
	_, err = r.ec2.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: att.AttachmentId})
	wantCode(t, err, "InvalidAttachmentID.NotFound")
	if _, err := r.ec2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String(eni)}); err != nil {
		t.Fatal(err)
	}
	_, err = r.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{eni}})
	wantCode(t, err, "InvalidNetworkInterfaceID.NotFound")
	if got := aws.ToInt32(r.subnetOf(t, "us-east-1a").AvailableIpAddressCount); got != free {
		t.Errorf("free addresses %d after the delete, want %d", got, free)
	}
}

// The instance type's limits hold as AWS publishes them: interfaces per instance and
// addresses per interface; DescribeInstanceTypes tells them.
func TestNetworkInterfaceLimits(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ctx := context.Background()
	types_, err := r.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{
		types.InstanceTypeT3Nano, types.InstanceTypeM5Large, types.InstanceTypeT3Medium}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[types.InstanceType][3]int32{}
	for _, it := range types_.InstanceTypes {
		got[it.InstanceType] = [3]int32{aws.ToInt32(it.NetworkInfo.MaximumNetworkInterfaces), aws.ToInt32(it.NetworkInfo.Ipv4AddressesPerInterface),
			aws.ToInt32(it.VCpuInfo.DefaultVCpus)}
		if it.MemoryInfo == nil || aws.ToInt64(it.MemoryInfo.SizeInMiB) == 0 {
			t.Errorf("%s has no memory: %+v", it.InstanceType, it.MemoryInfo)
		}
	}
	want := map[types.InstanceType][3]int32{types.InstanceTypeT3Nano: {2, 2, 2}, types.InstanceTypeM5Large: {3, 10, 2}, types.InstanceTypeT3Medium: {3, 6, 2}}
	if len(got) != 3 || got[types.InstanceTypeT3Nano] != want[types.InstanceTypeT3Nano] || got[types.InstanceTypeM5Large] != want[types.InstanceTypeM5Large] ||
		got[types.InstanceTypeT3Medium] != want[types.InstanceTypeT3Medium] {
		t.Errorf("limits %v, want %v", got, want)
	}
	_, err = r.ec2.DescribeInstanceTypes(ctx, &ec2.DescribeInstanceTypesInput{InstanceTypes: []types.InstanceType{"m5.huge"}})
	wantCode(t, err, "InvalidInstanceType")
	_, err = r.ec2.RunInstances(ctx, &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: "m5.huge"})
	wantCode(t, err, "InvalidParameterValue")

	inst := r.runInstanceOfType(t, types.InstanceTypeT3Nano)
	id := aws.ToString(inst.InstanceId)
	subnet := aws.ToString(inst.SubnetId)
	primary := aws.ToString(inst.NetworkInterfaces[0].NetworkInterfaceId)
	if _, err := r.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(primary),
		SecondaryPrivateIpAddressCount: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	_, err = r.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(primary),
		SecondaryPrivateIpAddressCount: aws.Int32(1)})
	wantCode(t, err, "PrivateIpAddressLimitExceeded")

	big := r.createENI(t, subnet, 2)
	_, err = r.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: big.NetworkInterfaceId,
		InstanceId: aws.String(id), DeviceIndex: aws.Int32(1)})
	wantCode(t, err, "PrivateIpAddressLimitExceeded")
	second, third := r.createENI(t, subnet, 0), r.createENI(t, subnet, 0)
	_, err = r.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: second.NetworkInterfaceId,
		InstanceId: aws.String(id), DeviceIndex: aws.Int32(0)})
	wantCode(t, err, "InvalidParameterValue")
	if _, err := r.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: second.NetworkInterfaceId,
		InstanceId: aws.String(id), DeviceIndex: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	_, err = r.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: third.NetworkInterfaceId,
		InstanceId: aws.String(id), DeviceIndex: aws.Int32(2)})
	wantCode(t, err, "AttachmentLimitExceeded")
	_, err = r.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: second.NetworkInterfaceId,
		InstanceId: aws.String(id), DeviceIndex: aws.Int32(2)})
	wantCode(t, err, "InvalidNetworkInterface.InUse")
}

// Errors come in EC2's codes and change nothing.
func TestNetworkInterfaceErrors(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ctx := context.Background()
	inst := r.runInstanceOfType(t, types.InstanceTypeM5Large)
	other := r.runInstanceOfType(t, types.InstanceTypeM5Large)
	subnet := aws.ToString(inst.SubnetId)
	primary := aws.ToString(inst.NetworkInterfaces[0].NetworkInterfaceId)

	_, err := r.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{"eni-nothex"}})
	wantCode(t, err, "InvalidNetworkInterfaceID.Malformed")
	_, err = r.ec2.DeleteNetworkInterface(ctx, &ec2.DeleteNetworkInterfaceInput{NetworkInterfaceId: aws.String("eni-0123456789abcdef0")})
	wantCode(t, err, "InvalidNetworkInterfaceID.NotFound")
	_, err = r.ec2.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: aws.String("eni-attach-0123456789abcdef0")})
	wantCode(t, err, "InvalidAttachmentID.NotFound")
	_, err = r.ec2.DetachNetworkInterface(ctx, &ec2.DetachNetworkInterfaceInput{AttachmentId: inst.NetworkInterfaces[0].Attachment.AttachmentId})
	wantCode(t, err, "OperationNotPermitted")
	_, err = r.ec2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String("subnet-0123456789abcdef0")})
	wantCode(t, err, "InvalidSubnetID.NotFound")
	// Another instance's address is taken, even with AllowReassignment (a primary address).
	_, err = r.ec2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(subnet), PrivateIpAddress: other.PrivateIpAddress})
	wantCode(t, err, "InvalidIPAddress.InUse")
	_, err = r.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(primary),
		PrivateIpAddresses: []string{aws.ToString(other.PrivateIpAddress)}, AllowReassignment: aws.Bool(true)})
	wantCode(t, err, "InvalidIPAddress.InUse")
	_, err = r.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(primary),
		PrivateIpAddresses: []string{"10.0.0.9"}})
	wantCode(t, err, "InvalidParameterValue")
	_, err = r.ec2.UnassignPrivateIpAddresses(ctx, &ec2.UnassignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(primary),
		PrivateIpAddresses: []string{aws.ToString(inst.PrivateIpAddress)}})
	wantCode(t, err, "InvalidParameterValue")

	// A secondary address moves between interfaces only with AllowReassignment.
	a := r.createENI(t, subnet, 1)
	moved := aws.ToString(a.PrivateIpAddresses[1].PrivateIpAddress)
	_, err = r.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(primary),
		PrivateIpAddresses: []string{moved}})
	wantCode(t, err, "InvalidIPAddress.InUse")
	if _, err := r.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(primary),
		PrivateIpAddresses: []string{moved}, AllowReassignment: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	if got := eniIPs(r.eni(t, aws.ToString(a.NetworkInterfaceId))); len(got) != 1 {
		t.Errorf("the address stayed on its old interface too: %v", got)
	}
	if got := eniIPs(r.eni(t, primary)); !slices.Equal(got, []string{aws.ToString(inst.PrivateIpAddress), moved}) {
		t.Errorf("primary interface has %v", got)
	}

	// An injected fault answers with its code and assigns nothing; only attachments and
	// detachments have a transition to hold.
	if _, err := r.InjectFault(Fault{Action: "AssignPrivateIpAddresses", Mode: "hang"}); err == nil {
		t.Errorf("a hang fault of AssignPrivateIpAddresses was accepted")
	}
	if _, err := r.InjectFault(Fault{Action: "AssignPrivateIpAddresses", Mode: "fail", Code: "RequestLimitExceeded", NetworkInterfaceID: primary, Count: 1}); err != nil {
		t.Fatal(err)
	}
	_, err = r.ec2.AssignPrivateIpAddresses(ctx, &ec2.AssignPrivateIpAddressesInput{NetworkInterfaceId: aws.String(primary),
		SecondaryPrivateIpAddressCount: aws.Int32(2)})
	wantCode(t, err, "RequestLimitExceeded")
	if got := eniIPs(r.eni(t, primary)); len(got) != 2 {
		t.Errorf("the failed call assigned addresses: %v", got)
	}
	if _, err := r.InjectFault(Fault{Action: "AttachNetworkInterface", Mode: "hang"}); err != nil {
		t.Fatal(err)
	}
	b := r.createENI(t, subnet, 0)
	if _, err := r.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: b.NetworkInterfaceId,
		InstanceId: inst.InstanceId, DeviceIndex: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	if n := r.eni(t, aws.ToString(b.NetworkInterfaceId)); n.Attachment == nil || n.Attachment.Status != types.AttachmentStatusAttaching {
		t.Errorf("held attachment: %+v", n.Attachment)
	}
	r.ClearFaults()
	if n := r.eni(t, aws.ToString(b.NetworkInterfaceId)); n.Attachment == nil || n.Attachment.Status != types.AttachmentStatusAttached {
		t.Errorf("released attachment: %+v", n.Attachment)
	}
}

// When the subnet runs out, allocation fails with InsufficientFreeAddressesInSubnet and
// takes nothing; the free count reaches zero.
func TestInsufficientFreeAddresses(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ctx := context.Background()
	subnet := r.subnetOf(t, "us-east-1b")
	id := aws.ToString(subnet.SubnetId)
	for free := aws.ToInt32(subnet.AvailableIpAddressCount); free > 0; {
		n := min(free, maxIPv4PerENI)
		r.createENI(t, id, n-1)
		free -= n
	}
	if got := aws.ToInt32(r.subnetOf(t, "us-east-1b").AvailableIpAddressCount); got != 0 {
		t.Fatalf("free addresses %d, want 0", got)
	}
	_, err := r.ec2.CreateNetworkInterface(ctx, &ec2.CreateNetworkInterfaceInput{SubnetId: aws.String(id)})
	wantCode(t, err, "InsufficientFreeAddressesInSubnet")
	_, err = r.ec2.RunInstances(ctx, &ec2.RunInstancesInput{MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		Placement: &types.Placement{AvailabilityZone: aws.String("us-east-1b")}})
	wantCode(t, err, "InsufficientFreeAddressesInSubnet")
}

// Termination deletes the interfaces marked DeleteOnTermination (the primary one) and
// makes the others available; the fabric stops carrying the instance's addresses.
func TestTerminateReleasesInterfaces(t *testing.T) {
	fab := &fakeFabric{}
	r := startCloud(t, Config{Hollow: true, Fabric: fab})
	ctx := context.Background()
	inst := r.runInstanceOfType(t, types.InstanceTypeM5Large)
	id := aws.ToString(inst.InstanceId)
	extra := r.createENI(t, aws.ToString(inst.SubnetId), 1)
	if _, err := r.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: extra.NetworkInterfaceId,
		InstanceId: aws.String(id), DeviceIndex: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		t.Fatal(err)
	}
	_, err := r.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{NetworkInterfaceIds: []string{aws.ToString(inst.NetworkInterfaces[0].NetworkInterfaceId)}})
	wantCode(t, err, "InvalidNetworkInterfaceID.NotFound")
	if n := r.eni(t, aws.ToString(extra.NetworkInterfaceId)); n.Status != types.NetworkInterfaceStatusAvailable || len(n.PrivateIpAddresses) != 2 {
		t.Errorf("the created interface after termination: %+v", n)
	}
	if got := fab.ips(id); len(got) != 0 {
		t.Errorf("fabric still carries %v to the terminated instance", got)
	}
}

// Interfaces persist across a restart; state written before interfaces existed gets the
// instances' primary interfaces at load, with their addresses and MACs; Run tells the
// fabric every instance's interfaces.
func TestNetworkInterfacesPersistAndMigrate(t *testing.T) {
	dir := t.TempDir()
	r := startCloud(t, Config{Hollow: true, DataDir: dir})
	ctx := context.Background()
	inst := r.runInstanceOfType(t, types.InstanceTypeM5Large)
	id := aws.ToString(inst.InstanceId)
	extra := r.createENI(t, aws.ToString(inst.SubnetId), 3)
	if _, err := r.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: extra.NetworkInterfaceId,
		InstanceId: aws.String(id), DeviceIndex: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	// An attachment held in attaching when the cloud stops completes at the next start.
	if _, err := r.InjectFault(Fault{Action: "AttachNetworkInterface", Mode: "hang"}); err != nil {
		t.Fatal(err)
	}
	held := r.createENI(t, aws.ToString(inst.SubnetId), 0)
	if _, err := r.ec2.AttachNetworkInterface(ctx, &ec2.AttachNetworkInterfaceInput{NetworkInterfaceId: held.NetworkInterfaceId,
		InstanceId: aws.String(id), DeviceIndex: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	r.stop(t)
	// Drop the primary interface from the state, as state of an older cloud lacks it.
	st, err := openStore(dir + "/state.db")
	if err != nil {
		t.Fatal(err)
	}
	if err := st.apply(del(bucketNetworkInterfaces, primaryENIID(id))); err != nil {
		t.Fatal(err)
	}
	st.close()

	fab := &fakeFabric{}
	r2 := startCloud(t, Config{Hollow: true, DataDir: dir, Fabric: fab})
	d, err := r2.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil {
		t.Fatal(err)
	}
	nis := d.Reservations[0].Instances[0].NetworkInterfaces
	sort.Slice(nis, func(a, b int) bool {
		return aws.ToInt32(nis[a].Attachment.DeviceIndex) < aws.ToInt32(nis[b].Attachment.DeviceIndex)
	})
	if len(nis) != 3 || nis[2].Attachment.Status != types.AttachmentStatusAttached || aws.ToString(nis[0].MacAddress) != aws.ToString(inst.NetworkInterfaces[0].MacAddress) ||
		aws.ToString(nis[0].PrivateIpAddress) != aws.ToString(inst.PrivateIpAddress) || len(nis[1].PrivateIpAddresses) != 4 {
		t.Fatalf("interfaces after restart: %+v", nis)
	}
	if got := fab.ips(id); len(got) != 3 || len(got[1]) != 4 {
		t.Errorf("fabric told %v at start", got)
	}
}

func TestPickAddresses(t *testing.T) {
	pfx := netip.MustParsePrefix("10.1.0.0/28") // offsets 4..14 usable
	usedSet := func(offs ...int) func(netip.Addr) bool {
		m := map[netip.Addr]bool{}
		for _, o := range offs {
			m[netip.AddrFrom4([4]byte{10, 1, 0, byte(o)})] = true
		}
		return func(a netip.Addr) bool { return m[a] }
	}
	for _, tc := range []struct {
		name  string
		start int
		used  []int
		n     int
		want  []string
	}{
		{"first free", 0, nil, 2, []string{"10.1.0.4", "10.1.0.5"}},
		{"skips used", 0, []int{4, 6}, 2, []string{"10.1.0.5", "10.1.0.7"}},
		{"from start", 10, nil, 1, []string{"10.1.0.10"}},
		{"wraps around", 13, []int{14}, 2, []string{"10.1.0.13", "10.1.0.4"}},
		{"all usable", 0, nil, 11, []string{"10.1.0.4", "10.1.0.5", "10.1.0.6", "10.1.0.7", "10.1.0.8", "10.1.0.9", "10.1.0.10", "10.1.0.11", "10.1.0.12", "10.1.0.13", "10.1.0.14"}},
		{"too few", 0, []int{5}, 11, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, a := range pickAddresses(pfx, tc.start, usedSet(tc.used...), tc.n) {
				got = append(got, a.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	if got := instanceOffset(0); got != 11 {
		t.Errorf("first instance's offset %d, want 11", got)
	}
	if got := instanceOffset(240); got != 256+1 {
		t.Errorf("241st instance's offset %d, want 257 (x.1 of the next /24)", got)
	}
}

// DescribeNetworkInterfaces pages with MaxResults and NextToken, as the SDK's paginator
// reads them, and filters by tag key and subnet.
func TestDescribeNetworkInterfacesPages(t *testing.T) {
	r := startCloud(t, Config{Hollow: true})
	ctx := context.Background()
	subnet := aws.ToString(r.subnetOf(t, "us-east-1c").SubnetId)
	want := map[string]bool{}
	for i := 0; i < 7; i++ {
		n := r.createENI(t, subnet, 0, types.Tag{Key: aws.String("pool"), Value: aws.String("x")})
		want[aws.ToString(n.NetworkInterfaceId)] = true
	}
	r.runInstance(t, "us-east-1a") // its primary interface is in another subnet
	p := ec2.NewDescribeNetworkInterfacesPaginator(r.ec2, &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5),
		Filters: []types.Filter{{Name: aws.String("tag-key"), Values: []string{"pool"}}, {Name: aws.String("subnet-id"), Values: []string{subnet}}}})
	pages, seen := 0, map[string]bool{}
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, n := range page.NetworkInterfaces {
			seen[aws.ToString(n.NetworkInterfaceId)] = true
		}
	}
	if pages != 2 || len(seen) != 7 {
		t.Errorf("%d pages, %d interfaces; want 2 and 7", pages, len(seen))
	}
	_, err := r.ec2.DescribeNetworkInterfaces(ctx, &ec2.DescribeNetworkInterfacesInput{MaxResults: aws.Int32(5),
		NetworkInterfaceIds: []string{"eni-0123456789abcdef0"}})
	wantCode(t, err, "InvalidParameterCombination")
}

package cluster

import (
	"github.com/kubelab/kubelab/internal/cloud"
	"github.com/kubelab/kubelab/internal/vpc"
)

// vpcFabric carries the cloud's network interfaces on the VPC's fabric: the cloud tells
// it every change of an instance's interfaces, the fabric makes them links of the nodes
// and delivers their addresses (package vpc).
type vpcFabric struct{ f *vpc.Fabric }

func (a vpcFabric) Sync(all map[string][]cloud.FabricInterface) {
	out := make(map[string][]vpc.Interface, len(all))
	for id, ifaces := range all {
		out[id] = toVPCInterfaces(ifaces)
	}
	a.f.Sync(out)
}

func (a vpcFabric) SetInstance(instanceID string, ifaces []cloud.FabricInterface) {
	a.f.SetInstance(instanceID, toVPCInterfaces(ifaces))
}

func toVPCInterfaces(in []cloud.FabricInterface) []vpc.Interface {
	out := make([]vpc.Interface, len(in))
	for i, fi := range in {
		out[i] = vpc.Interface{ID: fi.ID, DeviceIndex: fi.DeviceIndex, MAC: fi.MAC, IPs: fi.IPs}
	}
	return out
}

package cloud

// NetworkFabric is the VPC's data plane under the cloud's network interfaces, as AWS's
// VPC is under an account's ENIs: it makes each attached interface a link of its
// instance's machine and delivers every private address of the interface to that
// machine. The cloud tells it the state; it never calls back.
//
// Both methods are called with the cloud's lock held: they must not block for long.
type NetworkFabric interface {
	// Sync gives every instance's attached interfaces, by instance id, when Run starts:
	// the whole state; what it does not name has no interfaces.
	Sync(all map[string][]FabricInterface)
	// SetInstance says which interfaces are attached to the instance now and which
	// addresses each has (none: a terminated instance, or one whose interfaces were all
	// released). It is called after every change of them.
	SetInstance(instanceID string, ifaces []FabricInterface)
}

// FabricInterface is one attached interface as the fabric sees it.
type FabricInterface struct {
	// ID is the interface's id (eni-…).
	ID string
	// DeviceIndex is its attachment's device index (0: the primary interface, eth0).
	DeviceIndex int
	// MAC is its MAC address.
	MAC string
	// IPs are its private IPv4 addresses, the primary one first.
	IPs []string
	// SubnetCIDR is its subnet's range.
	SubnetCIDR string
}

// fabricStateLocked is what the fabric should carry for an instance: its attached
// interfaces (an attaching one carries no traffic yet, a detaching one no more).
func (c *Cloud) fabricStateLocked(instanceID string) []FabricInterface {
	var out []FabricInterface
	if i := c.instances[instanceID]; i == nil || i.State == "terminated" {
		return nil
	}
	for _, n := range c.interfacesOfLocked(instanceID) {
		if n.Attachment.State != "attached" {
			continue
		}
		fi := FabricInterface{ID: n.ID, DeviceIndex: n.Attachment.DeviceIndex, MAC: n.MAC, IPs: append([]string(nil), n.PrivateIPs...)}
		if s := c.subnets[n.SubnetID]; s != nil {
			fi.SubnetCIDR = s.CIDR
		}
		out = append(out, fi)
	}
	return out
}

// syncFabricLocked tells the fabric an instance's interfaces.
func (c *Cloud) syncFabricLocked(instanceID string) {
	if c.cfg.Fabric != nil {
		c.cfg.Fabric.SetInstance(instanceID, c.fabricStateLocked(instanceID))
	}
}

// syncAllFabricLocked tells the fabric every instance's interfaces (at start).
func (c *Cloud) syncAllFabricLocked() {
	if c.cfg.Fabric == nil {
		return
	}
	all := map[string][]FabricInterface{}
	for id := range c.instances {
		if ifaces := c.fabricStateLocked(id); len(ifaces) > 0 {
			all[id] = ifaces
		}
	}
	c.cfg.Fabric.Sync(all)
}

// NetworkInterfaces returns an instance's attached interfaces as the fabric sees them.
func (c *Cloud) NetworkInterfaces(instanceID string) []FabricInterface {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fabricStateLocked(instanceID)
}

package ipamd

import (
	"net/netip"
	"slices"
	"time"
)

// Limits are an instance type's network limits, as DescribeInstanceTypes reports them.
type Limits struct {
	// MaxENIs is NetworkInfo.MaximumNetworkInterfaces.
	MaxENIs int
	// IPv4PerENI is NetworkInfo.Ipv4AddressesPerInterface, the ENI's primary address
	// included.
	IPv4PerENI int
}

// SecondaryPerENI is how many pod addresses one ENI holds: all but its primary.
func (l Limits) SecondaryPerENI() int { return max(l.IPv4PerENI-1, 0) }

// MaxPods is EKS's max pods of an instance type: ENIs × (IPv4 per ENI − 1) + 2, the two
// being the host-network pods every node runs (aws-node and kube-proxy on EKS).
func MaxPods(l Limits) int { return l.MaxENIs*l.SecondaryPerENI() + 2 }

// Targets are the warm pool's settings, aws-node's environment: WARM_ENI_TARGET,
// WARM_IP_TARGET and MINIMUM_IP_TARGET. Zero means unset; WarmENI 1 is used when none is set.
type Targets struct {
	WarmENI, WarmIP, MinimumIP int
}

// ipMode says whether the pool is sized in addresses (WARM_IP_TARGET or
// MINIMUM_IP_TARGET set), which then take precedence over WARM_ENI_TARGET.
func (t Targets) ipMode() bool { return t.WarmIP > 0 || t.MinimumIP > 0 }

func (t Targets) warmENI() int {
	if t.WarmENI == 0 && !t.ipMode() {
		return 1
	}
	return t.WarmENI
}

// PoolENI is one attached ENI as the pool decisions see it.
type PoolENI struct {
	ID           string
	DeviceNumber int
	// Primary is the instance's own ENI (device 0): never detached.
	Primary bool
	// Assigned counts its secondary addresses; Used those a pod holds.
	Assigned, Used int
	// Freeable are the addresses no pod holds whose cooldown is over, oldest released first.
	Freeable []netip.Addr
}

// Decision is what one pass of the pool's reconciliation does.
type Decision struct {
	// Assign asks for more secondary addresses on ENIs (AssignPrivateIpAddresses).
	Assign []Assign
	// AttachENI asks for a new ENI (CreateNetworkInterface, AttachNetworkInterface).
	AttachENI bool
	// Unassign gives addresses back (UnassignPrivateIpAddresses).
	Unassign []Unassign
	// DeleteENI detaches and deletes a surplus ENI whose addresses are all unused.
	DeleteENI string
}

// Assign is a number of addresses for one ENI.
type Assign struct {
	ENI   string
	Count int
}

// Unassign is addresses of one ENI to give back.
type Unassign struct {
	ENI string
	IPs []netip.Addr
}

// Empty says whether d does nothing.
func (d Decision) Empty() bool {
	return len(d.Assign) == 0 && !d.AttachENI && len(d.Unassign) == 0 && d.DeleteENI == ""
}

// Decide is one pass of the warm pool over enis (in device order), for an instance type
// of limits lim:
//
//   - With WARM_IP_TARGET or MINIMUM_IP_TARGET set, the pool holds max(used + WarmIP,
//     MinimumIP) addresses: a shortfall is asked of the ENIs with room, lowest device
//     first, and if they cannot hold it a new ENI is attached; a surplus is given back,
//     from the highest device first, out of the addresses whose cooldown is over.
//   - Otherwise (WARM_ENI_TARGET, 1 by default) every attached ENI is filled to its
//     limit, and a new one is attached while fewer than WarmENI ENIs' worth of addresses
//     are free; a secondary ENI no pod uses is detached when the others leave that many
//     free without it.
//
// No ENI is attached beyond lim.MaxENIs.
func Decide(enis []PoolENI, lim Limits, t Targets) Decision {
	var d Decision
	per := lim.SecondaryPerENI()
	total, used := 0, 0
	for _, e := range enis {
		total += e.Assigned
		used += e.Used
	}
	canAttach := len(enis) < lim.MaxENIs
	if t.ipMode() {
		want := max(used+t.WarmIP, t.MinimumIP)
		if short := want - total; short > 0 {
			for _, e := range enis {
				if room := per - e.Assigned; room > 0 && short > 0 {
					n := min(room, short)
					d.Assign = append(d.Assign, Assign{ENI: e.ID, Count: n})
					short -= n
				}
			}
			d.AttachENI = short > 0 && canAttach
			return d
		}
		surplus := total - want
		for i := len(enis) - 1; i >= 0 && surplus > 0; i-- {
			e := enis[i]
			n := min(surplus, len(e.Freeable))
			if n > 0 {
				d.Unassign = append(d.Unassign, Unassign{ENI: e.ID, IPs: slices.Clone(e.Freeable[:n])})
				surplus -= n
			}
		}
		return d
	}

	warm := t.warmENI() * per
	for _, e := range enis {
		if room := per - e.Assigned; room > 0 {
			d.Assign = append(d.Assign, Assign{ENI: e.ID, Count: room})
		}
	}
	free := total - used
	if len(d.Assign) > 0 {
		return d // fill first: what is free is known once the ENIs are full
	}
	if free < warm {
		d.AttachENI = canAttach
		return d
	}
	for i := len(enis) - 1; i >= 0; i-- {
		e := enis[i]
		if e.Primary || e.Used > 0 || len(e.Freeable) < e.Assigned {
			continue
		}
		if free-e.Assigned >= warm {
			d.DeleteENI = e.ID
		}
		break
	}
	return d
}

// freeable are the addresses of ips that no pod holds and whose cooldown (since
// released, the zero time for never used) is over at now, the longest released first.
func freeable(ips []*ipState, now time.Time, cooldown time.Duration) []netip.Addr {
	var out []*ipState
	for _, ip := range ips {
		if ip.owner == nil && now.Sub(ip.released) >= cooldown {
			out = append(out, ip)
		}
	}
	slices.SortStableFunc(out, func(a, b *ipState) int { return a.released.Compare(b.released) })
	addrs := make([]netip.Addr, len(out))
	for i, ip := range out {
		addrs[i] = ip.addr
	}
	return addrs
}

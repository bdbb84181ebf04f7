package cloud

import (
	"fmt"
	"net/netip"
	"strconv"
)

// The cloud's network, as EC2 models it: one default VPC (172.31.0.0/16, as an account's
// default VPC is) and in it one default subnet per availability zone, the k-th zone's
// 172.31.(16*k).0/20. Instances get their private address in their zone's subnet; load
// balancers name the subnets they are in.

// vpcCIDR is the default VPC's range.
const vpcCIDR = "172.31.0.0/16"

// VPC is the cloud's default VPC.
type VPC struct {
	ID   string `json:"id"`
	CIDR string `json:"cidr"`
	// DHCPOptionsID is the id of its (default) DHCP options set.
	DHCPOptionsID string `json:"dhcpOptionsId"`
	// DefaultSecurityGroupID is its default security group's, which a load balancer
	// created without security groups gets.
	DefaultSecurityGroupID string `json:"defaultSecurityGroupId"`
	Tags                   []Tag  `json:"tags,omitempty"`
}

// Subnet is a zone's default subnet.
type Subnet struct {
	ID    string `json:"id"`
	Zone  string `json:"zone"`
	CIDR  string `json:"cidr"`
	VPCID string `json:"vpcId"`
	Tags  []Tag  `json:"tags,omitempty"`
}

func (v *VPC) clone() *VPC {
	out := *v
	out.Tags = append([]Tag(nil), v.Tags...)
	return &out
}

func (s *Subnet) clone() *Subnet {
	out := *s
	out.Tags = append([]Tag(nil), s.Tags...)
	return &out
}

// zoneSubnetCIDR is the k-th zone's subnet.
func zoneSubnetCIDR(k int) string { return fmt.Sprintf("172.31.%d.0/20", 16*k) }

// ensureNetworkLocked makes the default VPC and the subnets of the configured zones that
// the state lacks (at first start, or when zones were added).
func (c *Cloud) ensureNetworkLocked() error {
	var changes []change
	if c.vpc == nil {
		c.vpc = &VPC{ID: newID("vpc-"), CIDR: vpcCIDR, DHCPOptionsID: newID("dopt-")}
	}
	if c.vpc.DefaultSecurityGroupID == "" {
		c.vpc.DefaultSecurityGroupID = newID("sg-")
		changes = append(changes, put(bucketVPCs, c.vpc.ID, c.vpc))
	}
	for k, z := range c.cfg.Zones {
		if c.subnetOfZone(z) != nil {
			continue
		}
		s := &Subnet{ID: newID("subnet-"), Zone: z, CIDR: zoneSubnetCIDR(k), VPCID: c.vpc.ID}
		c.subnets[s.ID] = s
		changes = append(changes, put(bucketSubnets, s.ID, s))
	}
	if len(changes) == 0 {
		return nil
	}
	return c.store.apply(changes...)
}

// subnetOfZone is the zone's subnet (nil for a zone the cloud does not serve).
func (c *Cloud) subnetOfZone(zone string) *Subnet {
	for _, s := range c.subnets {
		if s.Zone == zone {
			return s
		}
	}
	return nil
}

func errSubnetNotFound(ids ...string) *apiError {
	if len(ids) == 1 {
		return errf("InvalidSubnetID.NotFound", "The subnet ID '%s' does not exist", ids[0])
	}
	return errf("InvalidSubnetID.NotFound", "The subnet IDs %s do not exist", quoteList(ids))
}

func errVPCNotFound(ids ...string) *apiError {
	if len(ids) == 1 {
		return errf("InvalidVpcID.NotFound", "The vpc ID '%s' does not exist", ids[0])
	}
	return errf("InvalidVpcID.NotFound", "The vpc IDs %s do not exist", quoteList(ids))
}

type xmlSubnet struct {
	SubnetID                string   `xml:"subnetId"`
	SubnetArn               string   `xml:"subnetArn"`
	State                   string   `xml:"state"`
	OwnerID                 string   `xml:"ownerId"`
	VpcID                   string   `xml:"vpcId"`
	CidrBlock               string   `xml:"cidrBlock"`
	AvailableIPAddressCount int      `xml:"availableIpAddressCount"`
	AvailabilityZone        string   `xml:"availabilityZone"`
	AvailabilityZoneID      string   `xml:"availabilityZoneId"`
	DefaultForAz            bool     `xml:"defaultForAz"`
	MapPublicIPOnLaunch     bool     `xml:"mapPublicIpOnLaunch"`
	AssignIpv6OnCreation    bool     `xml:"assignIpv6AddressOnCreation"`
	Tags                    []xmlTag `xml:"tagSet>item,omitempty"`
}

type describeSubnetsResponse struct {
	respBase
	Subnets   []xmlSubnet `xml:"subnetSet>item"`
	NextToken string      `xml:"nextToken,omitempty"`
}

func (c *Cloud) zoneIndex(zone string) int {
	for k, z := range c.cfg.Zones {
		if z == zone {
			return k
		}
	}
	return -1
}

// availableIPs is what EC2 reports as a subnet's free addresses: its size less the five
// reserved ones, the network interfaces' addresses (the instances' among them) and the
// load balancers' own.
func (c *Cloud) availableIPsLocked(s *Subnet) int {
	pfx := netip.MustParsePrefix(s.CIDR)
	n := 1<<(32-pfx.Bits()) - 5
	for a := range c.usedAddrsLocked() {
		if pfx.Contains(a) {
			n--
		}
	}
	for _, lb := range c.lbs {
		for _, id := range lb.Subnets {
			if id == s.ID {
				n--
			}
		}
	}
	return n
}

func (c *Cloud) toXMLSubnetLocked(s *Subnet) xmlSubnet {
	zid := ""
	if k := c.zoneIndex(s.Zone); k >= 0 {
		zid = zoneID(c.cfg.Region, k)
	}
	return xmlSubnet{
		SubnetID: s.ID, SubnetArn: fmt.Sprintf("arn:aws:ec2:%s:%s:subnet/%s", c.cfg.Region, c.ownerID, s.ID),
		State: "available", OwnerID: c.ownerID, VpcID: s.VPCID, CidrBlock: s.CIDR,
		AvailableIPAddressCount: c.availableIPsLocked(s), AvailabilityZone: s.Zone, AvailabilityZoneID: zid,
		DefaultForAz: true, MapPublicIPOnLaunch: true, Tags: xmlTags(s.Tags),
	}
}

func (c *Cloud) describeSubnets(p *params) (response, *apiError) {
	q, aerr := parseDescribe(p, describeSpec{idParam: "SubnetId", idPrefix: "subnet-", minMax: 5, maxMax: 1000})
	if aerr != nil {
		return nil, aerr
	}
	if q.dry {
		return nil, errDryRun()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	page, next, aerr := selectPage(c.subnets, q, func(s *Subnet) fieldsFunc { return c.subnetFields(s) }, errSubnetNotFound)
	if aerr != nil {
		return nil, aerr
	}
	resp := &describeSubnetsResponse{NextToken: next}
	for _, id := range page {
		resp.Subnets = append(resp.Subnets, c.toXMLSubnetLocked(c.subnets[id]))
	}
	return resp, nil
}

func (c *Cloud) subnetFields(s *Subnet) fieldsFunc {
	return func(name string) ([]string, bool) {
		if s == nil || s.ID == "" {
			// The zero object: only the filter names are checked.
			s = &Subnet{}
		}
		switch name {
		case "subnet-id":
			return []string{s.ID}, true
		case "vpc-id":
			return []string{s.VPCID}, true
		case "availability-zone":
			return []string{s.Zone}, true
		case "availability-zone-id":
			if k := c.zoneIndex(s.Zone); k >= 0 {
				return []string{zoneID(c.cfg.Region, k)}, true
			}
			return nil, true
		case "cidr-block", "cidr", "cidrBlock":
			return []string{s.CIDR}, true
		case "state":
			return []string{"available"}, true
		case "default-for-az", "defaultForAz", "map-public-ip-on-launch":
			return []string{"true"}, true
		case "owner-id":
			return []string{c.ownerID}, true
		case "available-ip-address-count":
			if s.ID == "" {
				return nil, true
			}
			return []string{strconv.Itoa(c.availableIPsLocked(s))}, true
		}
		return tagFields(s.Tags, name)
	}
}

type xmlVPC struct {
	VpcID           string `xml:"vpcId"`
	OwnerID         string `xml:"ownerId"`
	State           string `xml:"state"`
	CidrBlock       string `xml:"cidrBlock"`
	CidrAssociation []struct {
		AssociationID string `xml:"associationId"`
		CidrBlock     string `xml:"cidrBlock"`
		State         string `xml:"cidrBlockState>state"`
	} `xml:"cidrBlockAssociationSet>item"`
	DhcpOptionsID   string   `xml:"dhcpOptionsId"`
	InstanceTenancy string   `xml:"instanceTenancy"`
	IsDefault       bool     `xml:"isDefault"`
	Tags            []xmlTag `xml:"tagSet>item,omitempty"`
}

type describeVpcsResponse struct {
	respBase
	Vpcs      []xmlVPC `xml:"vpcSet>item"`
	NextToken string   `xml:"nextToken,omitempty"`
}

func (c *Cloud) describeVpcs(p *params) (response, *apiError) {
	q, aerr := parseDescribe(p, describeSpec{idParam: "VpcId", idPrefix: "vpc-", minMax: 5, maxMax: 1000})
	if aerr != nil {
		return nil, aerr
	}
	if q.dry {
		return nil, errDryRun()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	all := map[string]*VPC{c.vpc.ID: c.vpc}
	page, next, aerr := selectPage(all, q, func(v *VPC) fieldsFunc {
		return func(name string) ([]string, bool) {
			switch name {
			case "vpc-id":
				return []string{v.ID}, true
			case "cidr", "cidr-block-association.cidr-block":
				return []string{v.CIDR}, true
			case "state":
				return []string{"available"}, true
			case "is-default", "isDefault":
				return []string{"true"}, true
			case "owner-id":
				return []string{c.ownerID}, true
			case "dhcp-options-id":
				return []string{v.DHCPOptionsID}, true
			}
			return tagFields(v.Tags, name)
		}
	}, errVPCNotFound)
	if aerr != nil {
		return nil, aerr
	}
	resp := &describeVpcsResponse{NextToken: next}
	for _, id := range page {
		v := all[id]
		x := xmlVPC{VpcID: v.ID, OwnerID: c.ownerID, State: "available", CidrBlock: v.CIDR, DhcpOptionsID: v.DHCPOptionsID,
			InstanceTenancy: "default", IsDefault: true, Tags: xmlTags(v.Tags)}
		x.CidrAssociation = append(x.CidrAssociation, struct {
			AssociationID string `xml:"associationId"`
			CidrBlock     string `xml:"cidrBlock"`
			State         string `xml:"cidrBlockState>state"`
		}{"vpc-cidr-assoc-" + v.ID[len("vpc-"):], v.CIDR, "associated"})
		resp.Vpcs = append(resp.Vpcs, x)
	}
	return resp, nil
}

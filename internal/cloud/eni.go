package cloud

import (
	"crypto/rand"
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Elastic network interfaces: every instance has a primary one (device index 0, made by
// RunInstances with the instance's private address and MAC, deleted when the instance
// terminates); more are made with CreateNetworkInterface and attached at device indexes
// 1…, up to the instance type's limit. Each interface has private IPv4 addresses of its
// subnet, the primary one first and secondary ones assigned and unassigned with
// AssignPrivateIpAddresses / UnassignPrivateIpAddresses, up to the instance type's limit
// per interface. Config.Fabric carries the VPC's traffic to them.

// bucketNetworkInterfaces is state.db's bucket of the network interfaces.
var bucketNetworkInterfaces = []byte("networkinterfaces")

// ensureBucket makes a bucket of state.db unless it exists.
func (s *store) ensureBucket(name []byte) error {
	return s.db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return fmt.Errorf("init state bucket %s: %w", name, err)
		}
		return nil
	})
}

// NetworkInterface is an elastic network interface.
type NetworkInterface struct {
	ID          string `json:"id"`
	SubnetID    string `json:"subnetId"`
	Zone        string `json:"zone"`
	Description string `json:"description,omitempty"`
	MAC         string `json:"mac"`
	// PrivateIPs are its private IPv4 addresses, the primary one first.
	PrivateIPs      []string       `json:"privateIps"`
	Groups          []string       `json:"groups,omitempty"`
	SourceDestCheck bool           `json:"sourceDestCheck"`
	Tags            []Tag          `json:"tags,omitempty"`
	Attachment      *ENIAttachment `json:"attachment,omitempty"`
}

// ENIAttachment is a network interface's attachment to an instance.
type ENIAttachment struct {
	ID                  string    `json:"id"`
	InstanceID          string    `json:"instanceId"`
	DeviceIndex         int       `json:"deviceIndex"`
	State               string    `json:"state"` // attaching, attached, detaching
	AttachTime          time.Time `json:"attachTime"`
	DeleteOnTermination bool      `json:"deleteOnTermination"`
}

func (n *NetworkInterface) clone() *NetworkInterface {
	out := *n
	out.PrivateIPs = append([]string(nil), n.PrivateIPs...)
	out.Groups = append([]string(nil), n.Groups...)
	out.Tags = append([]Tag(nil), n.Tags...)
	if n.Attachment != nil {
		a := *n.Attachment
		out.Attachment = &a
	}
	return &out
}

// status is the interface's status as EC2 reports it.
func (n *NetworkInterface) status() string {
	switch {
	case n.Attachment == nil:
		return "available"
	case n.Attachment.State == "detaching":
		return "detaching"
	}
	return "in-use"
}

// primaryENIID and primaryAttachmentID name an instance's primary interface and its
// attachment after the instance, as they always have been.
func primaryENIID(instanceID string) string {
	return "eni-" + strings.TrimPrefix(instanceID, "i-")
}
func primaryAttachmentID(instanceID string) string {
	return "eni-attach-" + strings.TrimPrefix(instanceID, "i-")
}

// primaryENI is the primary interface RunInstances makes for inst in subnet.
func (c *Cloud) primaryENI(inst *Instance, subnet *Subnet) *NetworkInterface {
	n := &NetworkInterface{
		ID: primaryENIID(inst.ID), Zone: inst.Zone, MAC: inst.MAC, PrivateIPs: []string{inst.PrivateIP},
		SourceDestCheck: true,
		Attachment: &ENIAttachment{ID: primaryAttachmentID(inst.ID), InstanceID: inst.ID, DeviceIndex: 0, State: "attached",
			AttachTime: inst.LaunchTime, DeleteOnTermination: true},
	}
	if subnet != nil {
		n.SubnetID = subnet.ID
	}
	if c.vpc != nil {
		n.Groups = []string{c.vpc.DefaultSecurityGroupID}
	}
	return n
}

// migrateENIsLocked gives every instance that is not terminated and lacks one its primary
// interface (state written before the cloud had network interfaces).
func (c *Cloud) migrateENIsLocked() error {
	var changes []change
	for _, id := range sortedKeys(c.instances) {
		i := c.instances[id]
		if i.State == "terminated" || c.enis[primaryENIID(id)] != nil {
			continue
		}
		n := c.primaryENI(i, c.subnetOfZone(i.Zone))
		c.enis[n.ID] = n
		changes = append(changes, put(bucketNetworkInterfaces, n.ID, n))
	}
	if len(changes) == 0 {
		return nil
	}
	return c.store.apply(changes...)
}

// interfacesOfLocked lists the interfaces attached to an instance, by device index.
func (c *Cloud) interfacesOfLocked(instanceID string) []*NetworkInterface {
	var out []*NetworkInterface
	for _, n := range c.enis {
		if n.Attachment != nil && n.Attachment.InstanceID == instanceID {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Attachment.DeviceIndex < out[b].Attachment.DeviceIndex })
	return out
}

// usedAddrsLocked maps every private address in use to the interface (or instance) that has it.
func (c *Cloud) usedAddrsLocked() map[netip.Addr]string {
	used := map[netip.Addr]string{}
	for _, i := range c.instances {
		if a, err := netip.ParseAddr(i.PrivateIP); err == nil && i.State != "terminated" {
			used[a] = i.ID
		}
	}
	for _, n := range c.enis {
		for _, ip := range n.PrivateIPs {
			if a, err := netip.ParseAddr(ip); err == nil {
				used[a] = n.ID
			}
		}
	}
	return used
}

// pickAddresses chooses n free addresses of subnet, looking from the host offset start
// upward and then from the subnet's start: never the subnet's first four addresses or its
// last (EC2 reserves them), nor one that used holds. It returns nil when the subnet has
// fewer than n free addresses.
func pickAddresses(subnet netip.Prefix, start int, used func(netip.Addr) bool, n int) []netip.Addr {
	size := 1 << (32 - subnet.Bits())
	first, last := 4, size-2
	if start < first || start > last {
		start = first
	}
	baseN := addrNum(subnet.Masked().Addr())
	var out []netip.Addr
	for k := 0; k <= last-first && len(out) < n; k++ {
		off := start + k
		if off > last {
			off -= last - first + 1
		}
		v := baseN + uint32(off)
		a := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
		if !used(a) {
			out = append(out, a)
		}
	}
	if len(out) < n {
		return nil
	}
	return out
}

// instanceOffset is where the k-th instance of a zone looks for its address first: the
// 1st to 250th host of each /24 of the subnet, in order, starting at 172.31.x.11.
func instanceOffset(k int) int {
	host := 10 + k
	return host/250*256 + host%250 + 1
}

// allocLocked takes n free addresses in subnet, starting at offset start (0: the
// subnet's first free one), avoiding also those in taken.
func (c *Cloud) allocLocked(s *Subnet, start, n int, taken map[netip.Addr]bool) ([]string, *apiError) {
	used := c.usedAddrsLocked()
	got := pickAddresses(netip.MustParsePrefix(s.CIDR), start, func(a netip.Addr) bool {
		_, inUse := used[a]
		return inUse || taken[a]
	}, n)
	if got == nil {
		return nil, errf("InsufficientFreeAddressesInSubnet", "The specified subnet %s does not have enough free addresses to satisfy the request.", s.ID)
	}
	out := make([]string, len(got))
	for i, a := range got {
		out[i] = a.String()
		if taken != nil {
			taken[a] = true
		}
	}
	return out, nil
}

// newMACLocked makes a MAC address no interface has (locally administered, unicast).
func (c *Cloud) newMACLocked() string {
	for {
		b := make([]byte, 5)
		rand.Read(b)
		mac := fmt.Sprintf("0e:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4])
		taken := false
		for _, n := range c.enis {
			taken = taken || n.MAC == mac
		}
		for _, i := range c.instances {
			taken = taken || i.MAC == mac
		}
		if !taken {
			return mac
		}
	}
}

func errENINotFound(ids ...string) *apiError {
	if len(ids) == 1 {
		return errf("InvalidNetworkInterfaceID.NotFound", "The networkInterface ID '%s' does not exist", ids[0])
	}
	return errf("InvalidNetworkInterfaceID.NotFound", "The networkInterface IDs %s do not exist", quoteList(ids))
}

func errAttachmentNotFound(id string) *apiError {
	return errf("InvalidAttachmentID.NotFound", "The attachment ID '%s' does not exist", id)
}

func errENIInUse(id string) *apiError {
	return errf("InvalidNetworkInterface.InUse", "The network interface '%s' is currently in use.", id)
}

func errIPLimit() *apiError {
	return errf("PrivateIpAddressLimitExceeded", "Number of private addresses will exceed limit.")
}

// ipLimitLocked is how many private addresses n may have: its instance type's limit when
// attached, else the most any instance type allows.
func (c *Cloud) ipLimitLocked(n *NetworkInterface) int {
	if n.Attachment != nil {
		if i := c.instances[n.Attachment.InstanceID]; i != nil {
			return limitsOf(i.Type).IPv4PerENI
		}
	}
	return maxIPv4PerENI
}

// ---- wire shapes

type xmlGroup struct {
	GroupID   string `xml:"groupId"`
	GroupName string `xml:"groupName"`
}

type xmlPrivateIP struct {
	PrivateIP      string `xml:"privateIpAddress"`
	PrivateDNSName string `xml:"privateDnsName"`
	Primary        bool   `xml:"primary"`
}

type xmlENIAttachment struct {
	AttachmentID        string `xml:"attachmentId"`
	InstanceID          string `xml:"instanceId,omitempty"`
	InstanceOwnerID     string `xml:"instanceOwnerId,omitempty"`
	DeviceIndex         int    `xml:"deviceIndex"`
	NetworkCardIndex    int    `xml:"networkCardIndex"`
	Status              string `xml:"status"`
	AttachTime          string `xml:"attachTime"`
	DeleteOnTermination bool   `xml:"deleteOnTermination"`
}

type xmlNetworkInterface struct {
	NetworkInterfaceID string            `xml:"networkInterfaceId"`
	SubnetID           string            `xml:"subnetId"`
	VpcID              string            `xml:"vpcId"`
	AvailabilityZone   string            `xml:"availabilityZone"`
	Description        string            `xml:"description"`
	OwnerID            string            `xml:"ownerId"`
	RequesterManaged   bool              `xml:"requesterManaged"`
	Status             string            `xml:"status"`
	MacAddress         string            `xml:"macAddress"`
	PrivateIP          string            `xml:"privateIpAddress"`
	PrivateDNSName     string            `xml:"privateDnsName"`
	SourceDestCheck    bool              `xml:"sourceDestCheck"`
	Groups             []xmlGroup        `xml:"groupSet>item"`
	Attachment         *xmlENIAttachment `xml:"attachment,omitempty"`
	Tags               []xmlTag          `xml:"tagSet>item"`
	PrivateIPs         []xmlPrivateIP    `xml:"privateIpAddressesSet>item"`
	InterfaceType      string            `xml:"interfaceType"`
}

func (c *Cloud) groupsOf(n *NetworkInterface) []xmlGroup {
	var out []xmlGroup
	for _, g := range n.Groups {
		name := g
		if c.vpc != nil && g == c.vpc.DefaultSecurityGroupID {
			name = "default"
		}
		out = append(out, xmlGroup{g, name})
	}
	return out
}

func (c *Cloud) privateIPsXML(n *NetworkInterface) []xmlPrivateIP {
	var out []xmlPrivateIP
	for k, ip := range n.PrivateIPs {
		out = append(out, xmlPrivateIP{ip, privateDNS(ip, c.cfg.Region), k == 0})
	}
	return out
}

func (c *Cloud) toXMLENILocked(n *NetworkInterface) xmlNetworkInterface {
	x := xmlNetworkInterface{
		NetworkInterfaceID: n.ID, SubnetID: n.SubnetID, AvailabilityZone: n.Zone, Description: n.Description,
		OwnerID: c.ownerID, Status: n.status(), MacAddress: n.MAC, SourceDestCheck: n.SourceDestCheck,
		Groups: c.groupsOf(n), Tags: xmlTags(n.Tags), PrivateIPs: c.privateIPsXML(n), InterfaceType: "interface",
	}
	if s := c.subnets[n.SubnetID]; s != nil {
		x.VpcID = s.VPCID
	}
	if len(n.PrivateIPs) > 0 {
		x.PrivateIP = n.PrivateIPs[0]
		x.PrivateDNSName = privateDNS(n.PrivateIPs[0], c.cfg.Region)
	}
	if a := n.Attachment; a != nil {
		x.Attachment = &xmlENIAttachment{AttachmentID: a.ID, InstanceID: a.InstanceID, InstanceOwnerID: c.ownerID,
			DeviceIndex: a.DeviceIndex, Status: a.State, AttachTime: ts(a.AttachTime), DeleteOnTermination: a.DeleteOnTermination}
	}
	return x
}

// toXMLInstanceENI is n as DescribeInstances lists it under its instance.
func (c *Cloud) toXMLInstanceENI(n *NetworkInterface) xmlInterface {
	x := xmlInterface{
		InterfaceID: n.ID, SubnetID: n.SubnetID, Description: n.Description, OwnerID: c.ownerID, Status: n.status(),
		MacAddress: n.MAC, SourceDestCheck: n.SourceDestCheck, Groups: c.groupsOf(n), PrivateIPs: c.privateIPsXML(n),
		InterfaceType: "interface",
	}
	if s := c.subnets[n.SubnetID]; s != nil {
		x.VpcID = s.VPCID
	}
	if len(n.PrivateIPs) > 0 {
		x.PrivateIP, x.PrivateDNSName = n.PrivateIPs[0], privateDNS(n.PrivateIPs[0], c.cfg.Region)
	}
	if a := n.Attachment; a != nil {
		x.Attachment = xmlENIAttachment{AttachmentID: a.ID, DeviceIndex: a.DeviceIndex, Status: a.State,
			AttachTime: ts(a.AttachTime), DeleteOnTermination: a.DeleteOnTermination}
	}
	return x
}

func (c *Cloud) eniFields(n *NetworkInterface) fieldsFunc {
	return func(name string) ([]string, bool) {
		if n == nil || n.ID == "" {
			n = &NetworkInterface{}
		}
		a := n.Attachment
		att := func(f func(*ENIAttachment) string) ([]string, bool) {
			if a == nil {
				return nil, true
			}
			return []string{f(a)}, true
		}
		switch name {
		case "network-interface-id":
			return []string{n.ID}, true
		case "subnet-id":
			return []string{n.SubnetID}, true
		case "vpc-id":
			if s := c.subnets[n.SubnetID]; s != nil {
				return []string{s.VPCID}, true
			}
			return nil, true
		case "availability-zone":
			return []string{n.Zone}, true
		case "status":
			return []string{n.status()}, true
		case "description":
			return []string{n.Description}, true
		case "mac-address":
			return []string{n.MAC}, true
		case "owner-id":
			return []string{c.ownerID}, true
		case "interface-type":
			return []string{"interface"}, true
		case "source-dest-check":
			return []string{strconv.FormatBool(n.SourceDestCheck)}, true
		case "requester-managed":
			return []string{"false"}, true
		case "group-id":
			return n.Groups, true
		case "addresses.private-ip-address":
			return n.PrivateIPs, true
		case "private-ip-address", "private-dns-name": // the primary address
			if len(n.PrivateIPs) == 0 {
				return nil, true
			}
			if name == "private-dns-name" {
				return []string{privateDNS(n.PrivateIPs[0], c.cfg.Region)}, true
			}
			return n.PrivateIPs[:1], true
		case "attachment.instance-id":
			return att(func(a *ENIAttachment) string { return a.InstanceID })
		case "attachment.attachment-id":
			return att(func(a *ENIAttachment) string { return a.ID })
		case "attachment.device-index":
			return att(func(a *ENIAttachment) string { return strconv.Itoa(a.DeviceIndex) })
		case "attachment.status":
			return att(func(a *ENIAttachment) string { return a.State })
		case "attachment.delete-on-termination":
			return att(func(a *ENIAttachment) string { return strconv.FormatBool(a.DeleteOnTermination) })
		case "attachment.instance-owner-id":
			return att(func(*ENIAttachment) string { return c.ownerID })
		case "attachment.attach-time":
			return att(func(a *ENIAttachment) string { return ts(a.AttachTime) })
		case "tag-value":
			var out []string
			for _, t := range n.Tags {
				out = append(out, t.Value)
			}
			return out, true
		}
		return tagFields(n.Tags, name)
	}
}

// ---- actions

type networkInterfaceResponse struct {
	respBase
	NetworkInterface xmlNetworkInterface `xml:"networkInterface"`
	ClientToken      string              `xml:"clientToken,omitempty"`
}

func (c *Cloud) createNetworkInterface(p *params) (response, *apiError) {
	subnetID := p.required("SubnetId")
	desc := p.str("Description")
	primary := p.str("PrivateIpAddress")
	count := p.int("SecondaryPrivateIpAddressCount")
	var named []string // the addresses asked for, primary first
	if primary != "" {
		named = append(named, primary)
	}
	for _, k := range p.indexed("PrivateIpAddresses") {
		ip := p.str(k + ".PrivateIpAddress")
		if ip == "" {
			p.fail(errMissing(k + ".PrivateIpAddress"))
			continue
		}
		if p.bool(k + ".Primary") {
			if primary != "" && primary != ip {
				p.fail(errf("InvalidParameterCombination", "Only one primary private IP address may be specified."))
			}
			primary = ip
			named = append([]string{ip}, removeString(named, ip)...)
		} else if ip != primary {
			named = append(named, ip)
		}
	}
	groups := p.list("SecurityGroupId")
	tags := p.tagSpecs("network-interface")
	token := p.str("ClientToken")
	dry := p.dryRun()
	if aerr := p.checkArgs(idArg{"subnet-", subnetID}); aerr != nil {
		return nil, aerr
	}
	if count > 0 && len(named) > 1 {
		return nil, errf("InvalidParameterCombination", "SecondaryPrivateIpAddressCount cannot be used with secondary addresses in PrivateIpAddresses.")
	}
	for _, g := range groups {
		if !strings.HasPrefix(g, "sg-") {
			return nil, errf("InvalidGroupId.Malformed", "Invalid id: \"%s\" (expecting \"sg-...\")", g)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.subnets[subnetID]
	if s == nil {
		return nil, errSubnetNotFound(subnetID)
	}
	if token != "" {
		if rec, ok := c.tokens[token]; ok {
			if rec.Action != "CreateNetworkInterface" || rec.Hash != p.requestHash() {
				return nil, errf("IdempotentParameterMismatch", "The client token %s was used with different parameters.", token)
			}
			if n := c.enis[rec.ResourceID]; n != nil && !dry {
				return &networkInterfaceResponse{NetworkInterface: c.toXMLENILocked(n), ClientToken: token}, nil
			}
		}
	}
	total := max(len(named), 1) + count
	if len(named) > 1 {
		total = len(named)
	}
	if total > maxIPv4PerENI {
		return nil, errIPLimit()
	}
	taken := map[netip.Addr]bool{}
	if aerr := c.checkNamedAddrsLocked(s, named, false, taken); aerr != nil {
		return nil, aerr
	}
	if f := c.matchFaultLocked("CreateNetworkInterface", "", "", tags, "fail"); f != nil {
		return nil, f.apiError()
	}
	if dry {
		return nil, errDryRun()
	}
	ips := append([]string(nil), named...)
	if more := total - len(ips); more > 0 {
		got, aerr := c.allocLocked(s, 0, more, taken)
		if aerr != nil {
			return nil, aerr
		}
		ips = append(ips, got...)
	}
	if len(groups) == 0 {
		groups = []string{c.vpc.DefaultSecurityGroupID}
	}
	n := &NetworkInterface{ID: newID("eni-"), SubnetID: s.ID, Zone: s.Zone, Description: desc, MAC: c.newMACLocked(),
		PrivateIPs: ips, Groups: dedupe(groups), SourceDestCheck: true, Tags: tags}
	changes := []change{put(bucketNetworkInterfaces, n.ID, n)}
	if token != "" {
		changes = append(changes, put(bucketTokens, token, tokenEntry(token, tokenRecord{Action: "CreateNetworkInterface", Hash: p.requestHash(), ResourceID: n.ID})))
	}
	if aerr := c.persist(changes...); aerr != nil {
		return nil, aerr
	}
	if token != "" {
		c.tokens[token] = tokenRecord{Action: "CreateNetworkInterface", Hash: p.requestHash(), ResourceID: n.ID}
	}
	c.enis[n.ID] = n
	return &networkInterfaceResponse{NetworkInterface: c.toXMLENILocked(n), ClientToken: token}, nil
}

// checkNamedAddrsLocked checks addresses a request names for an interface in subnet s:
// each an IPv4 address of the subnet that is not reserved and not in use (unless
// reassign allows taking a secondary address from another interface); it marks them in
// taken.
func (c *Cloud) checkNamedAddrsLocked(s *Subnet, named []string, reassign bool, taken map[netip.Addr]bool) *apiError {
	pfx := netip.MustParsePrefix(s.CIDR)
	used := c.usedAddrsLocked()
	for _, ip := range named {
		a, err := netip.ParseAddr(ip)
		if err != nil || !a.Is4() {
			return errf("InvalidParameterValue", "Invalid value '%s' for PrivateIpAddress. It must be an IPv4 address.", ip)
		}
		size := 1 << (32 - pfx.Bits())
		off := int(addrNum(a) - addrNum(pfx.Masked().Addr()))
		if !pfx.Contains(a) || off < 4 || off > size-2 {
			return errf("InvalidParameterValue", "Address %s does not fall within the subnet's address range", ip)
		}
		if taken[a] {
			return errf("InvalidParameterValue", "The address %s is given twice.", ip)
		}
		if owner, inUse := used[a]; inUse {
			on := c.enis[owner]
			if !reassign || on == nil || on.PrivateIPs[0] == ip {
				return errf("InvalidIPAddress.InUse", "Address %s is in use.", ip)
			}
		}
		taken[a] = true
	}
	return nil
}

func addrNum(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func removeString(list []string, s string) []string {
	var out []string
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

type describeNetworkInterfacesResponse struct {
	respBase
	NetworkInterfaces []xmlNetworkInterface `xml:"networkInterfaceSet>item"`
	NextToken         string                `xml:"nextToken,omitempty"`
}

func (c *Cloud) describeNetworkInterfaces(p *params) (response, *apiError) {
	q, aerr := parseDescribe(p, describeSpec{idParam: "NetworkInterfaceId", idPrefix: "eni-", minMax: 5, maxMax: 1000, exclusive: true})
	if aerr != nil {
		return nil, aerr
	}
	if q.dry {
		return nil, errDryRun()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	page, next, aerr := selectPage(c.enis, q, c.eniFields, errENINotFound)
	if aerr != nil {
		return nil, aerr
	}
	resp := &describeNetworkInterfacesResponse{NextToken: next}
	for _, id := range page {
		resp.NetworkInterfaces = append(resp.NetworkInterfaces, c.toXMLENILocked(c.enis[id]))
	}
	return resp, nil
}

type attachNetworkInterfaceResponse struct {
	respBase
	AttachmentID     string `xml:"attachmentId"`
	NetworkCardIndex int    `xml:"networkCardIndex"`
}

func (c *Cloud) attachNetworkInterface(p *params) (response, *apiError) {
	eniID := p.required("NetworkInterfaceId")
	instID := p.required("InstanceId")
	p.required("DeviceIndex")
	index := p.int("DeviceIndex")
	card := p.int("NetworkCardIndex")
	dry := p.dryRun()
	if aerr := p.checkArgs(idArg{"eni-", eniID}, idArg{"i-", instID}); aerr != nil {
		return nil, aerr
	}
	if card != 0 {
		return nil, errInvalid("NetworkCardIndex", strconv.Itoa(card), "The instance type has one network card, index 0.")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.enis[eniID]
	if n == nil {
		return nil, errENINotFound(eniID)
	}
	inst := c.instances[instID]
	if inst == nil {
		return nil, errInstanceNotFound(instID)
	}
	if n.Attachment != nil {
		return nil, errENIInUse(eniID)
	}
	if inst.State != "running" && inst.State != "stopped" {
		return nil, errf("IncorrectInstanceState", "The instance '%s' is not in the 'running' or 'stopped' states.", instID)
	}
	if n.Zone != inst.Zone {
		return nil, errf("InvalidParameterCombination", "You may not attach a network interface to an instance if they are not in the same availability zone")
	}
	attached := c.interfacesOfLocked(instID)
	for _, o := range attached {
		if o.Attachment.DeviceIndex == index {
			return nil, errf("InvalidParameterValue", "Instance '%s' already has an interface attached at device index '%d'.", instID, index)
		}
	}
	lim := limitsOf(inst.Type)
	if len(attached) >= lim.MaxENIs {
		return nil, errf("AttachmentLimitExceeded", "Interface count %d exceeds the limit for %s", len(attached)+1, inst.Type)
	}
	if len(n.PrivateIPs) > lim.IPv4PerENI {
		return nil, errIPLimit()
	}
	if f := c.matchFaultLocked("AttachNetworkInterface", eniID, instID, n.Tags, "fail"); f != nil {
		return nil, f.apiError()
	}
	if dry {
		return nil, errDryRun()
	}
	nn := n.clone()
	nn.Attachment = &ENIAttachment{ID: newID("eni-attach-"), InstanceID: instID, DeviceIndex: index, State: "attaching", AttachTime: c.now().UTC()}
	if aerr := c.persist(put(bucketNetworkInterfaces, eniID, nn)); aerr != nil {
		return nil, aerr
	}
	c.enis[eniID] = nn
	attID := nn.Attachment.ID
	c.after(c.lat.Attach, "AttachNetworkInterface", eniID, instID, nn.Tags, func() { c.finishENIAttachLocked(eniID, attID) })
	return &attachNetworkInterfaceResponse{AttachmentID: attID}, nil
}

// finishENIAttachLocked completes an attachment that is still attaching.
func (c *Cloud) finishENIAttachLocked(eniID, attID string) {
	n := c.enis[eniID]
	if n == nil || n.Attachment == nil || n.Attachment.ID != attID || n.Attachment.State != "attaching" {
		return
	}
	nn := n.clone()
	nn.Attachment.State = "attached"
	if c.persist(put(bucketNetworkInterfaces, eniID, nn)) == nil {
		c.enis[eniID] = nn
		c.syncFabricLocked(nn.Attachment.InstanceID)
	}
}

// attachmentLocked finds the interface with the attachment id.
func (c *Cloud) attachmentLocked(attID string) *NetworkInterface {
	for _, n := range c.enis {
		if n.Attachment != nil && n.Attachment.ID == attID {
			return n
		}
	}
	return nil
}

func (c *Cloud) detachNetworkInterface(p *params) (response, *apiError) {
	attID := p.required("AttachmentId")
	force := p.bool("Force")
	dry := p.dryRun()
	if p.err != nil {
		return nil, p.err
	}
	if !strings.HasPrefix(attID, "eni-attach-") {
		return nil, errf("InvalidAttachmentID.Malformed", "Invalid id: \"%s\" (expecting \"eni-attach-...\")", attID)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.attachmentLocked(attID)
	if n == nil {
		return nil, errAttachmentNotFound(attID)
	}
	if n.Attachment.DeviceIndex == 0 {
		return nil, errf("OperationNotPermitted", "The network interface at device index 0 and networkCard index 0 cannot be detached.")
	}
	if f := c.matchFaultLocked("DetachNetworkInterface", n.ID, n.Attachment.InstanceID, n.Tags, "fail"); f != nil {
		return nil, f.apiError()
	}
	if dry {
		return nil, errDryRun()
	}
	if n.Attachment.State == "detaching" {
		return &returnResponse{Return: true}, nil
	}
	nn := n.clone()
	nn.Attachment.State = "detaching"
	if aerr := c.persist(put(bucketNetworkInterfaces, n.ID, nn)); aerr != nil {
		return nil, aerr
	}
	c.enis[n.ID] = nn
	// Traffic stops reaching the interface once it starts detaching.
	c.syncFabricLocked(nn.Attachment.InstanceID)
	eniID := n.ID
	d := c.lat.Detach
	if force {
		d = 0
	}
	c.after(d, "DetachNetworkInterface", eniID, nn.Attachment.InstanceID, nn.Tags, func() { c.finishENIDetachLocked(eniID, attID) })
	return &returnResponse{Return: true}, nil
}

// finishENIDetachLocked makes a detaching interface available.
func (c *Cloud) finishENIDetachLocked(eniID, attID string) {
	n := c.enis[eniID]
	if n == nil || n.Attachment == nil || n.Attachment.ID != attID || n.Attachment.State != "detaching" {
		return
	}
	nn := n.clone()
	instID := n.Attachment.InstanceID
	nn.Attachment = nil
	if c.persist(put(bucketNetworkInterfaces, eniID, nn)) == nil {
		c.enis[eniID] = nn
		c.syncFabricLocked(instID)
	}
}

func (c *Cloud) deleteNetworkInterface(p *params) (response, *apiError) {
	id := p.required("NetworkInterfaceId")
	dry := p.dryRun()
	if aerr := p.checkArgs(idArg{"eni-", id}); aerr != nil {
		return nil, aerr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.enis[id]
	if n == nil {
		return nil, errENINotFound(id)
	}
	if n.Attachment != nil {
		return nil, errENIInUse(id)
	}
	if f := c.matchFaultLocked("DeleteNetworkInterface", id, "", n.Tags, "fail"); f != nil {
		return nil, f.apiError()
	}
	if dry {
		return nil, errDryRun()
	}
	if aerr := c.persist(del(bucketNetworkInterfaces, id)); aerr != nil {
		return nil, aerr
	}
	delete(c.enis, id)
	return &returnResponse{Return: true}, nil
}

type assignPrivateIPsResponse struct {
	respBase
	NetworkInterfaceID string `xml:"networkInterfaceId"`
	Assigned           []struct {
		PrivateIP string `xml:"privateIpAddress"`
	} `xml:"assignedPrivateIpAddressesSet>item"`
}

func (c *Cloud) assignPrivateIPAddresses(p *params) (response, *apiError) {
	id := p.required("NetworkInterfaceId")
	named := p.list("PrivateIpAddress")
	count := p.int("SecondaryPrivateIpAddressCount")
	reassign := p.bool("AllowReassignment")
	dry := p.dryRun()
	if aerr := p.checkArgs(idArg{"eni-", id}); aerr != nil {
		return nil, aerr
	}
	if (len(named) == 0) == (count == 0) {
		return nil, errf("InvalidParameterCombination", "Exactly one of PrivateIpAddress or SecondaryPrivateIpAddressCount must be given.")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.enis[id]
	if n == nil {
		return nil, errENINotFound(id)
	}
	// Addresses the interface has already are not assigned again.
	var fresh []string
	for _, ip := range dedupe(named) {
		if !contains(n.PrivateIPs, ip) {
			fresh = append(fresh, ip)
		}
	}
	named = fresh
	want := count + len(named)
	if len(n.PrivateIPs)+want > c.ipLimitLocked(n) {
		return nil, errIPLimit()
	}
	s := c.subnets[n.SubnetID]
	taken := map[netip.Addr]bool{}
	if aerr := c.checkNamedAddrsLocked(s, named, reassign, taken); aerr != nil {
		return nil, aerr
	}
	instID := ""
	if n.Attachment != nil {
		instID = n.Attachment.InstanceID
	}
	if f := c.matchFaultLocked("AssignPrivateIpAddresses", id, instID, n.Tags, "fail"); f != nil {
		return nil, f.apiError()
	}
	if dry {
		return nil, errDryRun()
	}
	add := named
	if count > 0 {
		got, aerr := c.allocLocked(s, 0, count, taken)
		if aerr != nil {
			return nil, aerr
		}
		add = got
	}
	// Addresses reassigned from other interfaces leave them in the same write.
	nn := n.clone()
	nn.PrivateIPs = append(nn.PrivateIPs, add...)
	changes := []change{put(bucketNetworkInterfaces, id, nn)}
	losers := map[string]*NetworkInterface{}
	if reassign {
		used := c.usedAddrsLocked()
		for _, ip := range add {
			owner := used[netip.MustParseAddr(ip)]
			if o := c.enis[owner]; o != nil && owner != id {
				lo := losers[owner]
				if lo == nil {
					lo = o.clone()
					losers[owner] = lo
				}
				lo.PrivateIPs = removeString(lo.PrivateIPs, ip)
			}
		}
		for oid, lo := range losers {
			changes = append(changes, put(bucketNetworkInterfaces, oid, lo))
		}
	}
	if aerr := c.persist(changes...); aerr != nil {
		return nil, aerr
	}
	c.enis[id] = nn
	for oid, lo := range losers {
		c.enis[oid] = lo
		if lo.Attachment != nil {
			c.syncFabricLocked(lo.Attachment.InstanceID)
		}
	}
	if instID != "" {
		c.syncFabricLocked(instID)
	}
	resp := &assignPrivateIPsResponse{NetworkInterfaceID: id}
	for _, ip := range add {
		resp.Assigned = append(resp.Assigned, struct {
			PrivateIP string `xml:"privateIpAddress"`
		}{ip})
	}
	return resp, nil
}

func (c *Cloud) unassignPrivateIPAddresses(p *params) (response, *apiError) {
	id := p.required("NetworkInterfaceId")
	ips := p.list("PrivateIpAddress")
	dry := p.dryRun()
	if aerr := p.checkArgs(idArg{"eni-", id}); aerr != nil {
		return nil, aerr
	}
	if len(ips) == 0 {
		return nil, errMissing("PrivateIpAddress")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.enis[id]
	if n == nil {
		return nil, errENINotFound(id)
	}
	for _, ip := range ips {
		found := false
		for k, have := range n.PrivateIPs {
			if have == ip {
				if k == 0 {
					return nil, errf("InvalidParameterValue", "The primary private IP address %s of %s cannot be unassigned.", ip, id)
				}
				found = true
			}
		}
		if !found {
			return nil, errf("InvalidParameterValue", "Some of the specified addresses are not assigned to interface %s", id)
		}
	}
	instID := ""
	if n.Attachment != nil {
		instID = n.Attachment.InstanceID
	}
	if f := c.matchFaultLocked("UnassignPrivateIpAddresses", id, instID, n.Tags, "fail"); f != nil {
		return nil, f.apiError()
	}
	if dry {
		return nil, errDryRun()
	}
	nn := n.clone()
	for _, ip := range ips {
		nn.PrivateIPs = removeString(nn.PrivateIPs, ip)
	}
	if aerr := c.persist(put(bucketNetworkInterfaces, id, nn)); aerr != nil {
		return nil, aerr
	}
	c.enis[id] = nn
	if instID != "" {
		c.syncFabricLocked(instID)
	}
	return &returnResponse{Return: true}, nil
}

func (c *Cloud) modifyNetworkInterfaceAttribute(p *params) (response, *apiError) {
	id := p.required("NetworkInterfaceId")
	attID := p.str("Attachment.AttachmentId")
	_, hasDOT := p.v["Attachment.DeleteOnTermination"]
	dot := p.bool("Attachment.DeleteOnTermination")
	_, hasSDC := p.v["SourceDestCheck.Value"]
	sdc := p.bool("SourceDestCheck.Value")
	_, hasDesc := p.v["Description.Value"]
	desc := p.str("Description.Value")
	groups := p.list("SecurityGroupId")
	dry := p.dryRun()
	if aerr := p.checkArgs(idArg{"eni-", id}); aerr != nil {
		return nil, aerr
	}
	if !hasDOT && !hasSDC && !hasDesc && len(groups) == 0 {
		return nil, errMissing("Attachment, SourceDestCheck, Description or SecurityGroupId")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.enis[id]
	if n == nil {
		return nil, errENINotFound(id)
	}
	nn := n.clone()
	if hasDOT {
		if attID == "" {
			return nil, errMissing("Attachment.AttachmentId")
		}
		if n.Attachment == nil || n.Attachment.ID != attID {
			return nil, errAttachmentNotFound(attID)
		}
		nn.Attachment.DeleteOnTermination = dot
	}
	if hasSDC {
		nn.SourceDestCheck = sdc
	}
	if hasDesc {
		nn.Description = desc
	}
	if len(groups) > 0 {
		nn.Groups = dedupe(groups)
	}
	if dry {
		return nil, errDryRun()
	}
	if aerr := c.persist(put(bucketNetworkInterfaces, id, nn)); aerr != nil {
		return nil, aerr
	}
	c.enis[id] = nn
	return &returnResponse{Return: true}, nil
}

// releaseInterfacesLocked is what termination does to an instance's interfaces: those
// marked DeleteOnTermination are deleted, the others detached (available). It returns
// the writes and applies them to memory once persist succeeds.
func (c *Cloud) releaseInterfacesLocked(instID string) ([]change, func()) {
	var changes []change
	var apply []func()
	for _, n := range c.interfacesOfLocked(instID) {
		id := n.ID
		if n.Attachment.DeleteOnTermination {
			changes = append(changes, del(bucketNetworkInterfaces, id))
			apply = append(apply, func() { delete(c.enis, id) })
			continue
		}
		nn := n.clone()
		nn.Attachment = nil
		changes = append(changes, put(bucketNetworkInterfaces, id, nn))
		apply = append(apply, func() { c.enis[id] = nn })
	}
	return changes, func() {
		for _, f := range apply {
			f()
		}
		c.syncFabricLocked(instID)
	}
}

// The network interface actions and DescribeInstanceTypes, added to the action table.
func init() {
	for name, act := range map[string]action{
		"CreateNetworkInterface":          (*Cloud).createNetworkInterface,
		"DescribeNetworkInterfaces":       (*Cloud).describeNetworkInterfaces,
		"AttachNetworkInterface":          (*Cloud).attachNetworkInterface,
		"DetachNetworkInterface":          (*Cloud).detachNetworkInterface,
		"DeleteNetworkInterface":          (*Cloud).deleteNetworkInterface,
		"AssignPrivateIpAddresses":        (*Cloud).assignPrivateIPAddresses,
		"UnassignPrivateIpAddresses":      (*Cloud).unassignPrivateIPAddresses,
		"ModifyNetworkInterfaceAttribute": (*Cloud).modifyNetworkInterfaceAttribute,
		"DescribeInstanceTypes":           (*Cloud).describeInstanceTypes,
	} {
		actions[name] = act
	}
}

// terminatedLocked ends a shutting-down instance: it is terminated and its interfaces are
// released, in one write.
func (c *Cloud) terminatedLocked(i *Instance) *apiError {
	ni := i.clone()
	ni.State = "terminated"
	changes, apply := c.releaseInterfacesLocked(i.ID)
	if aerr := c.persist(append(changes, put(bucketInstances, i.ID, ni))...); aerr != nil {
		return aerr
	}
	c.instances[i.ID] = ni
	apply()
	return nil
}

// resumeENITransitionsLocked restarts the attachments and detachments of network
// interfaces that were under way when the cloud stopped.
func (c *Cloud) resumeENITransitionsLocked() {
	for _, id := range sortedKeys(c.enis) {
		n := c.enis[id]
		if n.Attachment == nil {
			continue
		}
		eniID, attID, instID := n.ID, n.Attachment.ID, n.Attachment.InstanceID
		switch n.Attachment.State {
		case "attaching":
			c.after(c.lat.Attach, "AttachNetworkInterface", eniID, instID, n.Tags, func() { c.finishENIAttachLocked(eniID, attID) })
		case "detaching":
			c.after(c.lat.Detach, "DetachNetworkInterface", eniID, instID, n.Tags, func() { c.finishENIDetachLocked(eniID, attID) })
		}
	}
}

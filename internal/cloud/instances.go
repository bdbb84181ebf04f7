package cloud

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Tags on RunInstances that kubelab reads.
const (
	// TagDeviceDir overrides an instance's device dir (an absolute path).
	TagDeviceDir = "kubelab.dev/device-dir"
	// TagAttachLimit overrides an instance's attachment limit.
	TagAttachLimit = "kubelab.dev/attach-limit"
)

const defaultImageID = "ami-0a1b2c3d4e5f60718"

type xmlInstanceState struct {
	Code int    `xml:"code"`
	Name string `xml:"name"`
}

var stateCodes = map[string]int{"pending": 0, "running": 16, "shutting-down": 32, "terminated": 48, "stopping": 64, "stopped": 80}

func instanceState(s string) xmlInstanceState { return xmlInstanceState{stateCodes[s], s} }

type xmlBlockDevice struct {
	DeviceName string `xml:"deviceName"`
	Ebs        struct {
		VolumeID            string `xml:"volumeId"`
		Status              string `xml:"status"`
		AttachTime          string `xml:"attachTime"`
		DeleteOnTermination bool   `xml:"deleteOnTermination"`
	} `xml:"ebs"`
}

type xmlInstance struct {
	InstanceID       string           `xml:"instanceId"`
	ImageID          string           `xml:"imageId"`
	State            xmlInstanceState `xml:"instanceState"`
	PrivateDNSName   string           `xml:"privateDnsName"`
	InstanceType     string           `xml:"instanceType"`
	LaunchTime       string           `xml:"launchTime"`
	Placement        xmlPlacement     `xml:"placement"`
	PrivateIP        string           `xml:"privateIpAddress"`
	SubnetID         string           `xml:"subnetId,omitempty"`
	VpcID            string           `xml:"vpcId,omitempty"`
	Architecture     string           `xml:"architecture"`
	RootDeviceType   string           `xml:"rootDeviceType"`
	RootDeviceName   string           `xml:"rootDeviceName"`
	BlockDevices     []xmlBlockDevice `xml:"blockDeviceMapping>item"`
	Hypervisor       string           `xml:"hypervisor"`
	Tags             []xmlTag         `xml:"tagSet>item,omitempty"`
	MetadataOptions  xmlMetadataOpts  `xml:"metadataOptions"`
	IamProfile       *xmlIamProfile   `xml:"iamInstanceProfile,omitempty"`
	AmiLaunchIndex   int              `xml:"amiLaunchIndex"`
	VirtualizationTy string           `xml:"virtualizationType"`
	Interfaces       []xmlInterface   `xml:"networkInterfaceSet>item"`
}

// xmlInterface is a network interface attached to an instance: the primary one's MAC is
// the one the instance's eth0 has on the VPC.
type xmlInterface struct {
	InterfaceID     string           `xml:"networkInterfaceId"`
	SubnetID        string           `xml:"subnetId,omitempty"`
	VpcID           string           `xml:"vpcId,omitempty"`
	Description     string           `xml:"description"`
	OwnerID         string           `xml:"ownerId"`
	Status          string           `xml:"status"`
	MacAddress      string           `xml:"macAddress"`
	PrivateIP       string           `xml:"privateIpAddress"`
	PrivateDNSName  string           `xml:"privateDnsName"`
	SourceDestCheck bool             `xml:"sourceDestCheck"`
	Groups          []xmlGroup       `xml:"groupSet>item"`
	Attachment      xmlENIAttachment `xml:"attachment"`
	PrivateIPs      []xmlPrivateIP   `xml:"privateIpAddressesSet>item"`
	InterfaceType   string           `xml:"interfaceType"`
}

type xmlPlacement struct {
	AvailabilityZone string `xml:"availabilityZone"`
	Tenancy          string `xml:"tenancy"`
}

type xmlMetadataOpts struct {
	State        string `xml:"state"`
	HTTPTokens   string `xml:"httpTokens"`
	HopLimit     int    `xml:"httpPutResponseHopLimit"`
	HTTPEndpoint string `xml:"httpEndpoint"`
}

type xmlIamProfile struct {
	ARN string `xml:"arn"`
	ID  string `xml:"id"`
}

// hopLimit is the instance's IMDS token response hop limit.
func (i *Instance) hopLimit() int {
	if i.HopLimit == 0 {
		return 1
	}
	return i.HopLimit
}

type xmlReservation struct {
	ReservationID string        `xml:"reservationId"`
	OwnerID       string        `xml:"ownerId"`
	Instances     []xmlInstance `xml:"instancesSet>item"`
}

type runInstancesResponse struct {
	respBase
	xmlReservation
}

type describeInstancesResponse struct {
	respBase
	Reservations []xmlReservation `xml:"reservationSet>item"`
	NextToken    string           `xml:"nextToken,omitempty"`
}

func (c *Cloud) toXMLInstanceLocked(i *Instance, state string) xmlInstance {
	out := xmlInstance{
		InstanceID: i.ID, ImageID: i.ImageID, State: instanceState(state), InstanceType: i.Type,
		PrivateDNSName: privateDNS(i.PrivateIP, c.cfg.Region), LaunchTime: ts(i.LaunchTime),
		Placement: xmlPlacement{AvailabilityZone: i.Zone, Tenancy: "default"}, PrivateIP: i.PrivateIP,
		Architecture: "x86_64", RootDeviceType: "ebs", RootDeviceName: "/dev/xvda", Hypervisor: "xen",
		Tags: xmlTags(i.Tags), MetadataOptions: xmlMetadataOpts{"applied", i.HTTPTokens, i.hopLimit(), "enabled"}, VirtualizationTy: "hvm",
	}
	if ip := c.profileByARNLocked(i.InstanceProfile); ip != nil {
		out.IamProfile = &xmlIamProfile{ARN: ip.ARN, ID: ip.ID}
	}
	if s := c.subnetOfZone(i.Zone); s != nil {
		out.SubnetID, out.VpcID = s.ID, s.VPCID
	}
	for _, n := range c.interfacesOfLocked(i.ID) {
		out.Interfaces = append(out.Interfaces, c.toXMLInstanceENI(n))
	}
	for _, v := range sortedVolumes(c.volumes) {
		if a := v.attachment(i.ID); a != nil {
			var bd xmlBlockDevice
			bd.DeviceName = a.Device
			bd.Ebs.VolumeID, bd.Ebs.Status, bd.Ebs.AttachTime = v.ID, a.State, ts(a.AttachTime)
			out.BlockDevices = append(out.BlockDevices, bd)
		}
	}
	return out
}

func privateDNS(ip, region string) string {
	if region == "us-east-1" {
		return "ip-" + strings.ReplaceAll(ip, ".", "-") + ".ec2.internal"
	}
	return "ip-" + strings.ReplaceAll(ip, ".", "-") + "." + region + ".compute.internal"
}

func sortedVolumes(m map[string]*Volume) []*Volume {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	ids, _, _ = paginate(ids, 0, "")
	out := make([]*Volume, len(ids))
	for i, id := range ids {
		out[i] = m[id]
	}
	return out
}

func (c *Cloud) runInstances(p *params) (response, *apiError) {
	minCount, maxCount := p.int("MinCount"), p.int("MaxCount")
	p.required("MinCount")
	p.required("MaxCount")
	image := p.str("ImageId")
	typ := p.str("InstanceType")
	zone := p.str("Placement.AvailabilityZone")
	tags := p.tagSpecs("instance")
	httpTokens := p.str("MetadataOptions.HttpTokens")
	hopLimit := p.int("MetadataOptions.HttpPutResponseHopLimit")
	profileARN, profileName := p.str("IamInstanceProfile.Arn"), p.str("IamInstanceProfile.Name")
	token := p.str("ClientToken")
	dry := p.dryRun()
	if p.err != nil {
		return nil, p.err
	}
	if minCount < 1 || minCount > maxCount || maxCount > 100 {
		return nil, errInvalid("MinCount", strconv.Itoa(minCount), "MinCount must be at least 1 and at most MaxCount, and MaxCount at most 100.")
	}
	if image == "" {
		image = defaultImageID
	}
	if typ == "" {
		typ = "m5.large"
	}
	if _, ok := instanceTypes[typ]; !ok {
		return nil, errf("InvalidParameterValue", "Invalid value '%s' for InstanceType.", typ)
	}
	if zone == "" {
		zone = c.cfg.Zones[0]
	}
	if !c.zoneKnown(zone) {
		return nil, errInvalid("Placement.AvailabilityZone", zone, "Invalid availability zone: ["+zone+"]")
	}
	switch httpTokens {
	case "":
		httpTokens = "optional"
	case "optional", "required":
	default:
		return nil, errInvalid("MetadataOptions.HttpTokens", httpTokens, "It must be optional or required.")
	}
	if p.v.Get("MetadataOptions.HttpPutResponseHopLimit") == "" {
		hopLimit = 1
	} else if hopLimit < 1 || hopLimit > 64 {
		return nil, errInvalid("MetadataOptions.HttpPutResponseHopLimit", strconv.Itoa(hopLimit), "It must be an integer from 1 to 64.")
	}
	devDir, _ := tagValue(tags, TagDeviceDir)
	if devDir != "" && !filepath.IsAbs(devDir) {
		return nil, errInvalid("TagSpecification "+TagDeviceDir, devDir, "The device dir must be an absolute path.")
	}
	limit := attachLimit(typ)
	if s, ok := tagValue(tags, TagAttachLimit); ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 128 {
			return nil, errInvalid("TagSpecification "+TagAttachLimit, s, "The attachment limit must be an integer from 1 to 128.")
		}
		limit = n
	}
	if devDir != "" && maxCount > 1 {
		return nil, errf("InvalidParameterCombination", "The tag %s names one device dir; launch one instance per request with it.", TagDeviceDir)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	profile, aerr := c.launchProfileLocked(profileARN, profileName)
	if aerr != nil {
		return nil, aerr
	}
	hash := p.requestHash()
	if token != "" {
		if rec, ok := c.tokens[token]; ok {
			if rec.Action != "RunInstances" || rec.Hash != hash {
				return nil, errf("IdempotentParameterMismatch", "The client token %s was used with different parameters.", token)
			}
			if !dry {
				return &runInstancesResponse{xmlReservation: c.reservationLocked(rec.ResourceID, nil)}, nil
			}
		}
	}
	if dry {
		return nil, errDryRun()
	}
	resID := newID("r-")
	var insts []*Instance
	var enis []*NetworkInterface
	var changes []change
	subnet := c.subnetOfZone(zone)
	taken := map[netip.Addr]bool{}
	for n := 0; n < maxCount; n++ {
		ip, aerr := c.nextIPLocked(subnet, zone, n, taken)
		if aerr != nil {
			return nil, aerr
		}
		i := &Instance{
			ID: newID("i-"), ReservationID: resID, Type: typ, Zone: zone, ImageID: image, State: "pending",
			LaunchTime: c.now().UTC(), Tags: tags, DeviceDir: devDir, PrivateIP: ip,
			MAC: macFor(len(c.instances) + n), HTTPTokens: httpTokens, AttachLimit: limit,
			HopLimit: hopLimit, InstanceProfile: profile,
		}
		eni := c.primaryENI(i, subnet)
		insts, enis = append(insts, i), append(enis, eni)
		changes = append(changes, put(bucketInstances, i.ID, i), put(bucketNetworkInterfaces, eni.ID, eni))
	}
	if token != "" {
		changes = append(changes, put(bucketTokens, token, tokenEntry(token, tokenRecord{Action: "RunInstances", Hash: hash, ResourceID: resID})))
	}
	if aerr := c.persist(changes...); aerr != nil {
		return nil, aerr
	}
	if token != "" {
		c.tokens[token] = tokenRecord{Action: "RunInstances", Hash: hash, ResourceID: resID}
	}
	for _, n := range enis {
		c.enis[n.ID] = n
	}
	for _, i := range insts {
		c.instances[i.ID] = i
		if i.DeviceDir == "" {
			os.MkdirAll(c.devDirOf(i), 0o755)
		}
	}
	resp := &runInstancesResponse{xmlReservation: c.reservationLocked(resID, map[string]string{})}
	for _, i := range insts {
		id := i.ID
		c.after(c.lat.Create, "RunInstances", "", id, i.Tags, func() {
			cur := c.instances[id]
			if cur == nil || cur.State != "pending" {
				return
			}
			ni := cur.clone()
			ni.State = "running"
			if c.persist(put(bucketInstances, id, ni)) == nil {
				c.instances[id] = ni
				c.startIMDSLocked(ni)
				c.syncFabricLocked(id)
			}
		})
	}
	return resp, nil
}

// reservationLocked describes a reservation's instances; states overrides their states
// (a map that is empty but not nil reports them as "pending", as a launch answers).
func (c *Cloud) reservationLocked(resID string, states map[string]string) xmlReservation {
	out := xmlReservation{ReservationID: resID, OwnerID: c.ownerID}
	ids := []string{}
	for id, i := range c.instances {
		if i.ReservationID == resID {
			ids = append(ids, id)
		}
	}
	ids, _, _ = paginate(ids, 0, "")
	for _, id := range ids {
		i := c.instances[id]
		state := i.State
		if states != nil {
			state = "pending"
		}
		out.Instances = append(out.Instances, c.toXMLInstanceLocked(i, state))
	}
	return out
}

// nextIPLocked gives the n-th instance of a launch a private address in its zone's
// subnet (172.31.16*k.0/20): the k-th instance ever launched in the zone looks first at
// instanceOffset(k), then at the next free address, avoiding those in taken.
func (c *Cloud) nextIPLocked(subnet *Subnet, zone string, n int, taken map[netip.Addr]bool) (string, *apiError) {
	count := n
	for _, i := range c.instances {
		if i.Zone == zone {
			count++
		}
	}
	ips, aerr := c.allocLocked(subnet, instanceOffset(count), 1, taken)
	if aerr != nil {
		return "", aerr
	}
	return ips[0], nil
}

func macFor(n int) string {
	return fmt.Sprintf("0e:6b:%02x:%02x:%02x:%02x", byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

type xmlStateChange struct {
	InstanceID    string           `xml:"instanceId"`
	CurrentState  xmlInstanceState `xml:"currentState"`
	PreviousState xmlInstanceState `xml:"previousState"`
}

type terminateInstancesResponse struct {
	respBase
	Instances []xmlStateChange `xml:"instancesSet>item"`
}

func (c *Cloud) terminateInstances(p *params) (response, *apiError) {
	ids := p.list("InstanceId")
	dry := p.dryRun()
	if p.err != nil {
		return nil, p.err
	}
	if len(ids) == 0 {
		return nil, errMissing("InstanceId")
	}
	for _, id := range ids {
		if aerr := checkID("i-", id); aerr != nil {
			return nil, aerr
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var missing []string
	for _, id := range dedupe(ids) {
		if c.instances[id] == nil {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		return nil, errInstanceNotFound(missing...)
	}
	if dry {
		return nil, errDryRun()
	}
	resp := &terminateInstancesResponse{}
	for _, id := range dedupe(ids) {
		i := c.instances[id]
		prev := i.State
		if prev == "pending" || prev == "running" || prev == "stopping" || prev == "stopped" {
			ni := i.clone()
			ni.State = "shutting-down"
			if aerr := c.persist(put(bucketInstances, id, ni)); aerr != nil {
				return nil, aerr
			}
			c.instances[id] = ni
			c.stopIMDSLocked(id)
			// Its load balancer targets stop receiving traffic.
			c.syncLoadBalancersLocked()
			// Its volumes are detached, as EC2 does on termination.
			for _, v := range sortedVolumes(c.volumes) {
				if a := v.attachment(id); a != nil && a.State != "detaching" {
					nv := v.clone()
					nv.attachment(id).State = "detaching"
					if c.saveVolumeLocked(nv) == nil {
						volID := v.ID
						c.after(c.lat.Detach, "terminate-detach", volID, id, nil, func() { c.finishDetachLocked(volID, id) })
					}
				}
			}
			c.after(c.lat.Terminate, "TerminateInstances", "", id, nil, func() {
				cur := c.instances[id]
				if cur == nil || cur.State != "shutting-down" {
					return
				}
				c.terminatedLocked(cur)
			})
		}
		resp.Instances = append(resp.Instances, xmlStateChange{InstanceID: id, CurrentState: instanceState(c.instances[id].State), PreviousState: instanceState(prev)})
	}
	return resp, nil
}

func (c *Cloud) describeInstances(p *params) (response, *apiError) {
	q, aerr := parseDescribe(p, describeSpec{idParam: "InstanceId", idPrefix: "i-", minMax: 5, maxMax: 1000, exclusive: true})
	if aerr != nil {
		return nil, aerr
	}
	if q.dry {
		return nil, errDryRun()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	page, next, aerr := selectPage(c.instances, q, func(i *Instance) fieldsFunc { return instanceFields(c, i) }, errInstanceNotFound)
	if aerr != nil {
		return nil, aerr
	}
	resp := &describeInstancesResponse{NextToken: next}
	byRes := map[string]int{}
	for _, id := range page {
		i := c.instances[id]
		k, ok := byRes[i.ReservationID]
		if !ok {
			k = len(resp.Reservations)
			byRes[i.ReservationID] = k
			resp.Reservations = append(resp.Reservations, xmlReservation{ReservationID: i.ReservationID, OwnerID: c.ownerID})
		}
		resp.Reservations[k].Instances = append(resp.Reservations[k].Instances, c.toXMLInstanceLocked(i, i.State))
	}
	return resp, nil
}

type xmlZone struct {
	ZoneName           string `xml:"zoneName"`
	ZoneState          string `xml:"zoneState"`
	RegionName         string `xml:"regionName"`
	ZoneID             string `xml:"zoneId"`
	ZoneType           string `xml:"zoneType"`
	OptInStatus        string `xml:"optInStatus"`
	GroupName          string `xml:"groupName"`
	NetworkBorderGroup string `xml:"networkBorderGroup"`
}

type describeZonesResponse struct {
	respBase
	Zones []xmlZone `xml:"availabilityZoneInfo>item"`
}

// zoneID is the zone's account-independent id, e.g. use1-az1 for the first zone of us-east-1.
func zoneID(region string, k int) string {
	parts := strings.Split(region, "-")
	var b strings.Builder
	for i, part := range parts {
		if i == 0 || i == len(parts)-1 {
			b.WriteString(part)
		} else if part != "" {
			b.WriteByte(part[0])
		}
	}
	return fmt.Sprintf("%s-az%d", b.String(), k+1)
}

func (c *Cloud) describeAvailabilityZones(p *params) (response, *apiError) {
	names := p.list("ZoneName")
	zids := p.list("ZoneId")
	filters := p.filters()
	p.bool("AllAvailabilityZones")
	dry := p.dryRun()
	if p.err != nil {
		return nil, p.err
	}
	if dry {
		return nil, errDryRun()
	}
	resp := &describeZonesResponse{}
	for _, n := range names {
		if !c.zoneKnown(n) {
			return nil, errInvalid("ZoneName", n, "Invalid availability zone: ["+n+"]")
		}
	}
	for k, z := range c.cfg.Zones {
		xz := xmlZone{ZoneName: z, ZoneState: "available", RegionName: c.cfg.Region, ZoneID: zoneID(c.cfg.Region, k),
			ZoneType: "availability-zone", OptInStatus: "opt-in-not-required", GroupName: c.cfg.Region, NetworkBorderGroup: c.cfg.Region}
		if len(names) > 0 && !anyMatch(names, []string{z}) || len(zids) > 0 && !anyMatch(zids, []string{xz.ZoneID}) {
			continue
		}
		ok, aerr := matchFilters(filters, func(name string) ([]string, bool) {
			switch name {
			case "zone-name":
				return []string{xz.ZoneName}, true
			case "zone-id":
				return []string{xz.ZoneID}, true
			case "state":
				return []string{xz.ZoneState}, true
			case "region-name":
				return []string{xz.RegionName}, true
			case "zone-type":
				return []string{xz.ZoneType}, true
			}
			return nil, false
		})
		if aerr != nil {
			return nil, aerr
		}
		if ok {
			resp.Zones = append(resp.Zones, xz)
		}
	}
	return resp, nil
}

func instanceFields(c *Cloud, i *Instance) fieldsFunc {
	return func(name string) ([]string, bool) {
		switch name {
		case "instance-id":
			return []string{i.ID}, true
		case "availability-zone":
			return []string{i.Zone}, true
		case "instance-state-name":
			return []string{i.State}, true
		case "instance-state-code":
			return []string{strconv.Itoa(stateCodes[i.State])}, true
		case "instance-type":
			return []string{i.Type}, true
		case "image-id":
			return []string{i.ImageID}, true
		case "private-ip-address":
			return []string{i.PrivateIP}, true
		case "private-dns-name":
			return []string{privateDNS(i.PrivateIP, c.cfg.Region)}, true
		case "reservation-id":
			return []string{i.ReservationID}, true
		case "network-interface.network-interface-id", "network-interface.addresses.private-ip-address",
			"network-interface.mac-address", "network-interface.subnet-id":
			var out []string
			for _, n := range c.interfacesOfLocked(i.ID) {
				switch name {
				case "network-interface.network-interface-id":
					out = append(out, n.ID)
				case "network-interface.addresses.private-ip-address":
					out = append(out, n.PrivateIPs...)
				case "network-interface.mac-address":
					out = append(out, n.MAC)
				default:
					out = append(out, n.SubnetID)
				}
			}
			return out, true
		case "subnet-id", "vpc-id":
			if s := c.subnetOfZone(i.Zone); s != nil {
				if name == "vpc-id" {
					return []string{s.VPCID}, true
				}
				return []string{s.ID}, true
			}
			return nil, true
		}
		return tagFields(i.Tags, name)
	}
}

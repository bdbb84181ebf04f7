package cloud

import (
	"crypto/rand"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// canonicalZones are the Route 53 hosted zones of ELB names per region: [ALB, NLB].
var canonicalZones = map[string][2]string{
	"us-east-1":      {"Z35SXDOTRQ7X7K", "Z26RNL4JYFTOTI"},
	"us-east-2":      {"Z3AADJGX6KTTL2", "ZLMOA37VPKANP"},
	"us-west-1":      {"Z368ELLRRE2KJ0", "Z24FKFUX50B4VW"},
	"us-west-2":      {"Z1H1FL5HABSF5", "Z18D5FSROUN65G"},
	"eu-west-1":      {"Z32O12XQLNTSW2", "Z2IFOLAFXWLO4F"},
	"eu-central-1":   {"Z215JYRZR1TBD5", "Z3F0SRJ5LGBH90"},
	"ap-northeast-1": {"Z14GRHDCWA56QT", "Z31USIVHYNEOWT"},
	"ap-southeast-1": {"Z1LMS91P8CMLE5", "ZKVM4W9LS7TM"},
}

// canonicalHostedZoneID is the hosted zone of the region's ALB or NLB names; for a region
// the table lacks, a stable made-up one.
func canonicalHostedZoneID(region, typ string) string {
	k := 0
	if typ == "network" {
		k = 1
	}
	if z, ok := canonicalZones[region]; ok {
		return z[k]
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	h := uint32(2166136261)
	for _, b := range []byte(region + typ) {
		h = (h ^ uint32(b)) * 16777619
	}
	var b strings.Builder
	b.WriteByte('Z')
	for i := 0; i < 13; i++ {
		b.WriteByte(alphabet[h%36])
		h = h*1103515245 + 12345
	}
	return b.String()
}

// lbDNSName is a load balancer's DNS name as AWS forms it: an ALB's
// [internal-]<name>-<decimal>.<region>.elb.amazonaws.com, an NLB's
// <name>-<id>.elb.<region>.amazonaws.com.
func lbDNSName(typ, scheme, name, id, region string) string {
	if typ == "network" {
		return strings.ToLower(fmt.Sprintf("%s-%s.elb.%s.amazonaws.com", name, id, region))
	}
	n, _ := rand.Int(rand.Reader, big.NewInt(9_000_000_000))
	prefix := ""
	if scheme == "internal" {
		prefix = "internal-"
	}
	return strings.ToLower(fmt.Sprintf("%s%s-%d.%s.elb.amazonaws.com", prefix, name, n.Int64()+1_000_000_000, region))
}

func lbTypeShort(typ string) string {
	if typ == "network" {
		return "net"
	}
	return "app"
}

type xmlLBAddress struct {
	IPAddress          string `xml:"IpAddress,omitempty"`
	PrivateIPv4Address string `xml:"PrivateIPv4Address,omitempty"`
}

type xmlLBZone struct {
	ZoneName  string         `xml:"ZoneName"`
	SubnetID  string         `xml:"SubnetId"`
	Addresses []xmlLBAddress `xml:"LoadBalancerAddresses>member"`
}

type xmlLB struct {
	LoadBalancerArn       string      `xml:"LoadBalancerArn"`
	DNSName               string      `xml:"DNSName"`
	CanonicalHostedZoneID string      `xml:"CanonicalHostedZoneId"`
	CreatedTime           string      `xml:"CreatedTime"`
	LoadBalancerName      string      `xml:"LoadBalancerName"`
	Scheme                string      `xml:"Scheme"`
	VpcID                 string      `xml:"VpcId"`
	StateCode             string      `xml:"State>Code"`
	StateReason           string      `xml:"State>Reason,omitempty"`
	Type                  string      `xml:"Type"`
	AvailabilityZones     []xmlLBZone `xml:"AvailabilityZones>member"`
	SecurityGroups        []string    `xml:"SecurityGroups>member,omitempty"`
	IPAddressType         string      `xml:"IpAddressType"`
}

// toXMLLBLocked describes a load balancer. Each of its zones reports the load balancer's
// one address (as an NLB reports its nodes' addresses; kubelab reports it for ALBs too).
func (c *Cloud) toXMLLBLocked(lb *LoadBalancer, state string) xmlLB {
	out := xmlLB{
		LoadBalancerArn: lb.ARN, DNSName: lb.DNSName, CanonicalHostedZoneID: canonicalHostedZoneID(c.cfg.Region, lb.Type),
		CreatedTime: ts(lb.CreatedTime), LoadBalancerName: lb.Name, Scheme: lb.Scheme, VpcID: c.vpc.ID,
		StateCode: state, Type: lb.Type, SecurityGroups: lb.SecurityGroups, IPAddressType: lb.IPAddressType,
	}
	if state == lb.State {
		out.StateReason = lb.StateReason
	}
	for _, id := range lb.Subnets {
		z := xmlLBZone{SubnetID: id}
		if s := c.subnets[id]; s != nil {
			z.ZoneName = s.Zone
		}
		if lb.Scheme == "internal" {
			z.Addresses = []xmlLBAddress{{PrivateIPv4Address: lb.Address}}
		} else {
			z.Addresses = []xmlLBAddress{{IPAddress: lb.Address}}
		}
		out.AvailabilityZones = append(out.AvailabilityZones, z)
	}
	return out
}

type lbsResult struct {
	LoadBalancers []xmlLB `xml:"LoadBalancers>member"`
	NextMarker    string  `xml:"NextMarker,omitempty"`
}

var sgRE = regexp.MustCompile(`^sg-[0-9a-f]{8,17}$`)

// lbSpec is what CreateLoadBalancer asks for; two requests with equal specs make one
// load balancer.
type lbSpec struct {
	name, typ, scheme, ipType string
	subnets, sgs              []string
}

func (s lbSpec) sameAs(lb *LoadBalancer) bool {
	return s.typ == lb.Type && s.scheme == lb.Scheme && s.ipType == lb.IPAddressType &&
		slices.Equal(s.subnets, lb.Subnets) && (len(s.sgs) == 0 || slices.Equal(s.sgs, lb.SecurityGroups))
}

func (c *Cloud) createLoadBalancer(p *eparams) (any, *apiError) {
	s := lbSpec{name: p.requiredStr("Name")}
	s.typ = p.oneOf("Type", "application", "application", "network", "gateway")
	s.scheme = p.oneOf("Scheme", "internet-facing", "internet-facing", "internal")
	s.ipType = p.oneOf("IpAddressType", "ipv4", "ipv4", "dualstack", "dualstack-without-public-ipv4")
	subnets := p.members("Subnets")
	var mapped []string
	for _, k := range p.indexed("SubnetMappings.member") {
		if p.str(k+".AllocationId") != "" || p.str(k+".PrivateIPv4Address") != "" || p.str(k+".IPv6Address") != "" {
			p.fail(elbErr("InvalidConfigurationRequest", "kubelab's load balancers take no Elastic IP or private address in a subnet mapping"))
		}
		mapped = append(mapped, p.str(k+".SubnetId"))
	}
	s.sgs = p.members("SecurityGroups")
	tags := p.elbTags()
	if p.err != nil {
		return nil, p.err
	}
	if aerr := checkName("Load balancer", s.name); aerr != nil {
		return nil, aerr
	}
	if strings.HasPrefix(s.name, "internal-") {
		return nil, errValidation("Load balancer name cannot begin with 'internal-'")
	}
	if s.typ == "gateway" {
		return nil, errValidation("kubelab serves load balancers of type application and network, not gateway")
	}
	if s.ipType != "ipv4" {
		return nil, elbErr("InvalidConfigurationRequest", "kubelab's load balancers have IPv4 addresses only: IP address type '%s' is not supported", s.ipType)
	}
	switch {
	case len(subnets) > 0 && len(mapped) > 0:
		return nil, errValidation("You can specify subnets or subnet mappings, not both")
	case len(mapped) > 0:
		subnets = mapped
	case len(subnets) == 0:
		return nil, errValidation("At least one subnet must be specified")
	}
	for _, sg := range s.sgs {
		if !sgRE.MatchString(sg) {
			return nil, elbErr("InvalidSecurityGroup", "Invalid security group '%s'", sg)
		}
	}
	if len(tags) > maxTags {
		return nil, elbErr("TooManyTags", "Too many tags: a load balancer can have at most %d", maxTags)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	zones := map[string]bool{}
	for _, id := range dedupe(subnets) {
		sn := c.subnets[id]
		if sn == nil {
			return nil, elbErr("SubnetNotFound", "The subnet ID '%s' is not valid", id)
		}
		if zones[sn.Zone] {
			return nil, elbErr("InvalidConfigurationRequest", "A load balancer cannot be attached to multiple subnets in the same Availability Zone")
		}
		zones[sn.Zone] = true
	}
	if s.typ == "application" && len(zones) < 2 {
		return nil, elbErr("InvalidConfigurationRequest", "At least two subnets in two different Availability Zones must be specified")
	}
	s.subnets = c.sortSubnetsByZone(dedupe(subnets))
	if len(s.sgs) == 0 {
		s.sgs = []string{c.vpc.DefaultSecurityGroupID}
	}
	s.sgs = dedupe(s.sgs)
	for _, lb := range c.lbs {
		if lb.Name != s.name {
			continue
		}
		if !s.sameAs(lb) {
			return nil, elbErr("DuplicateLoadBalancerName", "A load balancer with the same name '%s' exists, but with different settings", s.name)
		}
		return &lbsResult{LoadBalancers: []xmlLB{c.toXMLLBLocked(lb, lb.State)}}, nil
	}
	id := hexID(16)
	arn := c.elbARN(fmt.Sprintf("loadbalancer/%s/%s/%s", lbTypeShort(s.typ), s.name, id))
	if f := c.matchFaultLocked("CreateLoadBalancer", arn, "", tags, "fail"); f != nil {
		return nil, f.apiError()
	}
	addr, aerr := c.allocLBAddressLocked()
	if aerr != nil {
		return nil, aerr
	}
	lb := &LoadBalancer{
		ARN: arn, Name: s.name, Type: s.typ, Scheme: s.scheme, IPAddressType: s.ipType,
		DNSName: lbDNSName(s.typ, s.scheme, s.name, id, c.cfg.Region), Subnets: s.subnets, SecurityGroups: s.sgs,
		State: "provisioning", CreatedTime: c.now().UTC(), Address: addr, Tags: tags,
	}
	if aerr := c.persist(put(bucketLoadBalancers, arn, lb)); aerr != nil {
		return nil, aerr
	}
	c.lbs[arn] = lb
	resp := &lbsResult{LoadBalancers: []xmlLB{c.toXMLLBLocked(lb, "provisioning")}}
	c.startProvisionLocked(lb)
	return resp, nil
}

// startProvisionLocked makes a provisioning load balancer active after the profile's
// latency.
func (c *Cloud) startProvisionLocked(lb *LoadBalancer) {
	arn := lb.ARN
	c.after(c.lat.LoadBalancer, "CreateLoadBalancer", arn, "", lb.Tags, func() {
		cur := c.lbs[arn]
		if cur == nil || cur.State != "provisioning" {
			return
		}
		n := cur.clone()
		n.State = "active"
		if c.persist(put(bucketLoadBalancers, arn, n)) == nil {
			c.lbs[arn] = n
			c.syncLoadBalancersLocked()
		}
	})
}

// sortSubnetsByZone orders subnet ids by their zones' order.
func (c *Cloud) sortSubnetsByZone(ids []string) []string {
	out := slices.Clone(ids)
	sort.Slice(out, func(i, j int) bool {
		zi, zj := c.zoneIndex(c.subnets[out[i]].Zone), c.zoneIndex(c.subnets[out[j]].Zone)
		if zi != zj {
			return zi < zj
		}
		return out[i] < out[j]
	})
	return out
}

// lookupLBs resolves ARNs or names (all when both are empty): LoadBalancerNotFound when
// any is missing.
func (c *Cloud) lookupLBsLocked(arns, names []string) ([]*LoadBalancer, *apiError) {
	if len(arns) == 0 && len(names) == 0 {
		out := make([]*LoadBalancer, 0, len(c.lbs))
		for _, lb := range c.lbs {
			out = append(out, lb)
		}
		return out, nil
	}
	var out []*LoadBalancer
	for _, a := range dedupe(arns) {
		lb := c.lbs[a]
		if lb == nil {
			return nil, errLBNotFound()
		}
		out = append(out, lb)
	}
	for _, n := range dedupe(names) {
		var found *LoadBalancer
		for _, lb := range c.lbs {
			if lb.Name == n {
				found = lb
			}
		}
		if found == nil {
			return nil, elbErr("LoadBalancerNotFound", "Load balancers '[%s]' not found", n)
		}
		out = append(out, found)
	}
	return out, nil
}

func (c *Cloud) describeLoadBalancers(p *eparams) (any, *apiError) {
	arns := p.members("LoadBalancerArns")
	names := p.members("Names")
	size := p.intIn("PageSize", 1, 400, 0)
	marker := p.str("Marker")
	if p.err != nil {
		return nil, p.err
	}
	if len(arns) > 0 && len(names) > 0 {
		return nil, errValidation("Load balancer names and load balancer ARNs cannot be specified at the same time")
	}
	for _, a := range arns {
		if aerr := c.checkARN("loadbalancer", a); aerr != nil {
			return nil, aerr
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	lbs, aerr := c.lookupLBsLocked(arns, names)
	if aerr != nil {
		return nil, aerr
	}
	byKey := map[string]*LoadBalancer{}
	keys := make([]string, 0, len(lbs))
	for _, lb := range lbs {
		byKey[lb.ARN] = lb
		keys = append(keys, lb.ARN)
	}
	page, next, perr := paginate(keys, size, marker)
	if perr != nil {
		return nil, errValidation("The marker '%s' is not valid", marker)
	}
	resp := &lbsResult{NextMarker: next}
	for _, k := range page {
		resp.LoadBalancers = append(resp.LoadBalancers, c.toXMLLBLocked(byKey[k], byKey[k].State))
	}
	return resp, nil
}

type emptyResult struct{}

func (c *Cloud) deleteLoadBalancer(p *eparams) (any, *apiError) {
	arn, aerr := c.requiredARN(p, "LoadBalancerArn", "loadbalancer")
	if aerr != nil {
		return nil, aerr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	lb := c.lbs[arn]
	if lb == nil {
		return &emptyResult{}, nil // as ELB does: deleting what is gone succeeds
	}
	if lbAttr(lb, "deletion_protection.enabled") == "true" {
		return nil, elbErr("OperationNotPermitted", "Load balancer '%s' cannot be deleted because deletion protection is enabled", arn)
	}
	if f := c.matchFaultLocked("DeleteLoadBalancer", arn, "", lb.Tags, "fail"); f != nil {
		return nil, f.apiError()
	}
	changes := []change{del(bucketLoadBalancers, arn)}
	var listeners, rules []string
	for _, l := range c.listeners {
		if l.LoadBalancerARN != arn {
			continue
		}
		listeners = append(listeners, l.ARN)
		changes = append(changes, del(bucketListeners, l.ARN))
		for _, r := range c.rules {
			if r.ListenerARN == l.ARN {
				rules = append(rules, r.ARN)
				changes = append(changes, del(bucketRules, r.ARN))
			}
		}
	}
	if aerr := c.persist(changes...); aerr != nil {
		return nil, aerr
	}
	delete(c.lbs, arn)
	for _, a := range listeners {
		delete(c.listeners, a)
	}
	for _, a := range rules {
		delete(c.rules, a)
	}
	c.syncLoadBalancersLocked()
	return &emptyResult{}, nil
}

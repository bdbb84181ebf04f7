package cloud

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// tgProtocols are the target group protocols served, by load balancer type.
var tgProtocols = []string{"HTTP", "HTTPS", "TCP", "UDP", "TCP_UDP", "TLS"}

func httpProtocol(p string) bool { return p == "HTTP" || p == "HTTPS" }

// matcherRE is an HttpCode matcher: codes and ranges separated by commas.
var matcherRE = regexp.MustCompile(`^\d{3}(-\d{3})?(,\d{3}(-\d{3})?)*$`)

// checkMatcher says why an HttpCode matcher is wrong for a target group of protocol, or "".
func checkMatcher(m, protocol string) string {
	if !matcherRE.MatchString(m) {
		return fmt.Sprintf("Health check matcher HTTP code '%s' must be a code (200), a list (200,202) or a range (200-299)", m)
	}
	hi := 599
	if httpProtocol(protocol) {
		hi = 499
	}
	for _, part := range strings.Split(m, ",") {
		lo, up, _ := strings.Cut(part, "-")
		for _, s := range []string{lo, up} {
			if s == "" {
				continue
			}
			n, _ := strconv.Atoi(s)
			if n < 200 || n > hi {
				return fmt.Sprintf("Health check matcher HTTP code '%s' must be between 200 and %d", m, hi)
			}
		}
	}
	return ""
}

// defaultHealthCheck is AWS's health check for a new target group of the protocol.
func defaultHealthCheck(protocol string) HealthCheck {
	hc := HealthCheck{Protocol: "TCP", Port: "traffic-port", Interval: 30, Timeout: 10, Healthy: 5, Unhealth: 2}
	if httpProtocol(protocol) {
		hc.Protocol, hc.Path, hc.Matcher = protocol, "/", "200"
		if protocol == "HTTP" {
			hc.Timeout = 6
		}
	}
	return hc
}

// readHealthCheck applies the request's health check parameters to hc (a new target
// group's defaults, or the group's current check) and checks the result.
func readHealthCheck(p *eparams, protocol string, hc HealthCheck) (HealthCheck, *apiError) {
	prevProto := hc.Protocol
	hc.Protocol = p.oneOf("HealthCheckProtocol", hc.Protocol, "HTTP", "HTTPS", "TCP", "TLS", "UDP", "TCP_UDP", "GENEVE")
	if port := p.str("HealthCheckPort"); port != "" {
		hc.Port = port
	}
	path, hasPath := p.str("HealthCheckPath"), p.has("HealthCheckPath")
	hc.Interval = p.intIn("HealthCheckIntervalSeconds", 5, 300, hc.Interval)
	timeoutGiven := p.has("HealthCheckTimeoutSeconds")
	hc.Timeout = p.intIn("HealthCheckTimeoutSeconds", 2, 120, hc.Timeout)
	hc.Healthy = p.intIn("HealthyThresholdCount", 2, 10, hc.Healthy)
	hc.Unhealth = p.intIn("UnhealthyThresholdCount", 2, 10, hc.Unhealth)
	matcher, hasMatcher := p.str("Matcher.HttpCode"), p.has("Matcher.HttpCode")
	if p.has("Matcher.GrpcCode") {
		p.fail(errValidation("kubelab's target groups take HTTP code matchers, not gRPC codes"))
	}
	if p.str("HealthCheckEnabled") == "false" {
		p.fail(errValidation("Health checks cannot be disabled for target groups with target type 'instance' or 'ip'"))
	}
	if p.err != nil {
		return hc, p.err
	}
	switch hc.Protocol {
	case "HTTP", "TCP":
	case "HTTPS":
		return hc, errValidation("kubelab's health checks speak TCP and HTTP, not HTTPS")
	default:
		return hc, errValidation("Health check protocol '%s' is not supported", hc.Protocol)
	}
	if httpProtocol(protocol) && hc.Protocol == "TCP" {
		return hc, errValidation("Health check protocol 'TCP' is not supported for target groups with the %s protocol", protocol)
	}
	if hc.Port != "traffic-port" {
		if n, err := strconv.Atoi(hc.Port); err != nil || n < 1 || n > 65535 {
			return hc, errValidation("Health check port '%s' must be 'traffic-port' or a port from 1 to 65535", hc.Port)
		}
	}
	if hc.Protocol == "TCP" {
		if hasPath && path != "" || hasMatcher {
			return hc, errValidation("Health check path and matcher are not supported for TCP health checks")
		}
		hc.Path, hc.Matcher = "", ""
	} else {
		if prevProto == "TCP" {
			// A check that becomes HTTP gets the HTTP defaults.
			hc.Path, hc.Matcher = "/", "200-399"
			if httpProtocol(protocol) {
				hc.Matcher = "200"
			}
			if !timeoutGiven && !httpProtocol(protocol) {
				hc.Timeout = 6
			}
		}
		if hasPath {
			hc.Path = path
		}
		if !strings.HasPrefix(hc.Path, "/") || len(hc.Path) > 1024 {
			return hc, errValidation("Health check path '%s' must begin with '/' and be at most 1024 characters", hc.Path)
		}
		if hasMatcher {
			hc.Matcher = matcher
		}
		if why := checkMatcher(hc.Matcher, protocol); why != "" {
			return hc, errValidation("%s", why)
		}
	}
	// An ALB's check must time out before the next starts; an NLB's may take the whole
	// interval. A default timeout longer than that is shortened to fit.
	limit := hc.Interval
	if httpProtocol(protocol) {
		limit--
	}
	if !timeoutGiven && hc.Timeout > limit {
		hc.Timeout = max(limit, 2)
	}
	if hc.Timeout > limit {
		return hc, errValidation("Health check timeout '%d' must be smaller than the interval '%d'", hc.Timeout, hc.Interval)
	}
	return hc, nil
}

type xmlTG struct {
	TargetGroupArn             string   `xml:"TargetGroupArn"`
	TargetGroupName            string   `xml:"TargetGroupName"`
	Protocol                   string   `xml:"Protocol"`
	ProtocolVersion            string   `xml:"ProtocolVersion,omitempty"`
	Port                       int      `xml:"Port"`
	VpcID                      string   `xml:"VpcId"`
	HealthCheckProtocol        string   `xml:"HealthCheckProtocol"`
	HealthCheckPort            string   `xml:"HealthCheckPort"`
	HealthCheckEnabled         bool     `xml:"HealthCheckEnabled"`
	HealthCheckIntervalSeconds int      `xml:"HealthCheckIntervalSeconds"`
	HealthCheckTimeoutSeconds  int      `xml:"HealthCheckTimeoutSeconds"`
	HealthyThresholdCount      int      `xml:"HealthyThresholdCount"`
	UnhealthyThresholdCount    int      `xml:"UnhealthyThresholdCount"`
	HealthCheckPath            string   `xml:"HealthCheckPath,omitempty"`
	MatcherHTTPCode            string   `xml:"Matcher>HttpCode,omitempty"`
	LoadBalancerArns           []string `xml:"LoadBalancerArns>member"`
	TargetType                 string   `xml:"TargetType"`
	IPAddressType              string   `xml:"IpAddressType"`
}

type tgsResult struct {
	TargetGroups []xmlTG `xml:"TargetGroups>member"`
	NextMarker   string  `xml:"NextMarker,omitempty"`
}

func (c *Cloud) toXMLTGLocked(tg *TargetGroup) xmlTG {
	hc := tg.HealthCheck
	out := xmlTG{
		TargetGroupArn: tg.ARN, TargetGroupName: tg.Name, Protocol: tg.Protocol, ProtocolVersion: tg.ProtocolVersion,
		Port: tg.Port, VpcID: tg.VPCID, HealthCheckProtocol: hc.Protocol, HealthCheckPort: hc.Port, HealthCheckEnabled: true,
		HealthCheckIntervalSeconds: hc.Interval, HealthCheckTimeoutSeconds: hc.Timeout, HealthyThresholdCount: hc.Healthy,
		UnhealthyThresholdCount: hc.Unhealth, HealthCheckPath: hc.Path, MatcherHTTPCode: hc.Matcher,
		TargetType: tg.TargetType, IPAddressType: "ipv4", LoadBalancerArns: []string{},
	}
	if lb := c.tgUsersLocked()[tg.ARN]; lb != "" {
		out.LoadBalancerArns = []string{lb}
	}
	return out
}

// tgUsersLocked maps each target group that a listener or rule forwards to, to the load
// balancer of that listener.
func (c *Cloud) tgUsersLocked() map[string]string {
	out := map[string]string{}
	for _, l := range c.listeners {
		for _, tg := range targetGroupsOf(l.DefaultActions) {
			out[tg] = l.LoadBalancerARN
		}
	}
	for _, r := range c.rules {
		if l := c.listeners[r.ListenerARN]; l != nil {
			for _, tg := range targetGroupsOf(r.Actions) {
				out[tg] = l.LoadBalancerARN
			}
		}
	}
	return out
}

func (c *Cloud) createTargetGroup(p *eparams) (any, *apiError) {
	name := p.requiredStr("Name")
	typ := p.oneOf("TargetType", "instance", "instance", "ip", "lambda", "alb")
	protocol := p.oneOf("Protocol", "", tgProtocols...)
	version := p.oneOf("ProtocolVersion", "", "HTTP1", "HTTP2", "GRPC")
	port := p.intIn("Port", 1, 65535, 0)
	vpcID := p.str("VpcId")
	ipType := p.oneOf("IpAddressType", "ipv4", "ipv4", "ipv6")
	tags := p.elbTags()
	if p.err != nil {
		return nil, p.err
	}
	if aerr := checkName("Target group", name); aerr != nil {
		return nil, aerr
	}
	if typ == "lambda" || typ == "alb" {
		return nil, errValidation("kubelab's target groups take targets of type instance or ip, not %s", typ)
	}
	if ipType != "ipv4" {
		return nil, errValidation("kubelab's target groups take IPv4 targets only")
	}
	if protocol == "" {
		return nil, errValidation("A protocol must be specified")
	}
	if protocol == "TLS" || protocol == "HTTPS" {
		return nil, elbErr("UnsupportedProtocol", "kubelab's load balancers do not speak %s to targets", protocol)
	}
	if port == 0 {
		return nil, errValidation("A port must be specified")
	}
	if vpcID == "" {
		return nil, errValidation("A VPC ID must be specified")
	}
	if version != "" && !httpProtocol(protocol) {
		return nil, errValidation("A protocol version can be specified only for target groups with the HTTP or HTTPS protocol")
	}
	if version == "GRPC" || version == "HTTP2" {
		return nil, errValidation("kubelab's target groups speak HTTP1 to targets, not %s", version)
	}
	if httpProtocol(protocol) && version == "" {
		version = "HTTP1"
	}
	hc, aerr := readHealthCheck(p, protocol, defaultHealthCheck(protocol))
	if aerr != nil {
		return nil, aerr
	}
	if len(tags) > maxTags {
		return nil, elbErr("TooManyTags", "Too many tags: a target group can have at most %d", maxTags)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if vpcID != c.vpc.ID {
		return nil, errValidation("The VPC ID '%s' is not found", vpcID)
	}
	tg := &TargetGroup{Name: name, Protocol: protocol, ProtocolVersion: version, Port: port, VPCID: vpcID,
		TargetType: typ, HealthCheck: hc, Tags: tags}
	for _, old := range c.tgs {
		if old.Name != name {
			continue
		}
		if old.Protocol != tg.Protocol || old.Port != tg.Port || old.VPCID != tg.VPCID || old.TargetType != tg.TargetType ||
			old.ProtocolVersion != tg.ProtocolVersion || old.HealthCheck != tg.HealthCheck {
			return nil, elbErr("DuplicateTargetGroupName", "A target group with the same name '%s' exists, but with different settings", name)
		}
		return &tgsResult{TargetGroups: []xmlTG{c.toXMLTGLocked(old)}}, nil
	}
	tg.ARN = c.elbARN(fmt.Sprintf("targetgroup/%s/%s", name, hexID(16)))
	if f := c.matchFaultLocked("CreateTargetGroup", tg.ARN, "", tags, "fail"); f != nil {
		return nil, f.apiError()
	}
	if aerr := c.persist(put(bucketTargetGroups, tg.ARN, tg)); aerr != nil {
		return nil, aerr
	}
	c.tgs[tg.ARN] = tg
	return &tgsResult{TargetGroups: []xmlTG{c.toXMLTGLocked(tg)}}, nil
}

func (c *Cloud) describeTargetGroups(p *eparams) (any, *apiError) {
	lbARN := p.str("LoadBalancerArn")
	arns := p.members("TargetGroupArns")
	names := p.members("Names")
	size := p.intIn("PageSize", 1, 400, 0)
	marker := p.str("Marker")
	if p.err != nil {
		return nil, p.err
	}
	given := 0
	for _, g := range []bool{lbARN != "", len(arns) > 0, len(names) > 0} {
		if g {
			given++
		}
	}
	if given > 1 {
		return nil, errValidation("Only one of load balancer ARN, target group ARNs or names can be specified")
	}
	for _, a := range arns {
		if aerr := c.checkARN("targetgroup", a); aerr != nil {
			return nil, aerr
		}
	}
	if lbARN != "" {
		if aerr := c.checkARN("loadbalancer", lbARN); aerr != nil {
			return nil, aerr
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []string
	switch {
	case lbARN != "":
		if c.lbs[lbARN] == nil {
			return nil, errLBNotFound()
		}
		for tg, lb := range c.tgUsersLocked() {
			if lb == lbARN {
				keys = append(keys, tg)
			}
		}
	case len(arns) > 0:
		for _, a := range dedupe(arns) {
			if c.tgs[a] == nil {
				return nil, errTGNotFound()
			}
			keys = append(keys, a)
		}
	case len(names) > 0:
		for _, n := range dedupe(names) {
			found := ""
			for _, tg := range c.tgs {
				if tg.Name == n {
					found = tg.ARN
				}
			}
			if found == "" {
				return nil, elbErr("TargetGroupNotFound", "Target groups '[%s]' not found", n)
			}
			keys = append(keys, found)
		}
	default:
		for a := range c.tgs {
			keys = append(keys, a)
		}
	}
	page, next, perr := paginate(keys, size, marker)
	if perr != nil {
		return nil, errValidation("The marker '%s' is not valid", marker)
	}
	resp := &tgsResult{NextMarker: next, TargetGroups: []xmlTG{}}
	for _, a := range page {
		resp.TargetGroups = append(resp.TargetGroups, c.toXMLTGLocked(c.tgs[a]))
	}
	return resp, nil
}

func (c *Cloud) modifyTargetGroup(p *eparams) (any, *apiError) {
	arn, aerr := c.requiredARN(p, "TargetGroupArn", "targetgroup")
	if aerr != nil {
		return nil, aerr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	tg := c.tgs[arn]
	if tg == nil {
		return nil, errTGNotFound()
	}
	hc, aerr := readHealthCheck(p, tg.Protocol, tg.HealthCheck)
	if aerr != nil {
		return nil, aerr
	}
	n := tg.clone()
	n.HealthCheck = hc
	if aerr := c.persist(put(bucketTargetGroups, arn, n)); aerr != nil {
		return nil, aerr
	}
	c.tgs[arn] = n
	c.syncLoadBalancersLocked()
	return &tgsResult{TargetGroups: []xmlTG{c.toXMLTGLocked(n)}}, nil
}

func (c *Cloud) deleteTargetGroup(p *eparams) (any, *apiError) {
	arn, aerr := c.requiredARN(p, "TargetGroupArn", "targetgroup")
	if aerr != nil {
		return nil, aerr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tgs[arn] == nil {
		return &emptyResult{}, nil
	}
	if _, used := c.tgUsersLocked()[arn]; used {
		return nil, elbErr("ResourceInUse", "Target group '%s' is currently in use by a listener or a rule", arn)
	}
	if aerr := c.persist(del(bucketTargetGroups, arn)); aerr != nil {
		return nil, aerr
	}
	delete(c.tgs, arn)
	return &emptyResult{}, nil
}

// targetArg is a target named in a request.
type targetArg struct {
	id   string
	port int
	zone string
}

func readTargets(p *eparams, defPort int) []targetArg {
	var out []targetArg
	for _, k := range p.indexed("Targets.member") {
		id := p.str(k + ".Id")
		if id == "" {
			p.fail(errValidation("A target ID must be specified"))
			continue
		}
		out = append(out, targetArg{id: id, port: p.intIn(k+".Port", 1, 65535, defPort), zone: p.str(k + ".AvailabilityZone")})
	}
	return out
}

// privateRanges are where ip targets may be: RFC 1918 and RFC 6598.
var privateRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"), netip.MustParsePrefix("100.64.0.0/10"),
}

// checkTargetLocked validates a target for tg and returns its zone.
func (c *Cloud) checkTargetLocked(tg *TargetGroup, t targetArg) (string, *apiError) {
	if tg.TargetType == "instance" {
		i := c.instances[t.id]
		if i == nil {
			return "", elbErr("InvalidTarget", "The following targets are not valid instances: '%s'", t.id)
		}
		if i.State != "running" {
			return "", elbErr("InvalidTarget", "The following targets are not in a running state and cannot be registered: '%s'", t.id)
		}
		return i.Zone, nil
	}
	ip, err := netip.ParseAddr(t.id)
	if err != nil || !ip.Is4() {
		return "", elbErr("InvalidTarget", "The IP address '%s' is not a valid IPv4 address", t.id)
	}
	if !slices.ContainsFunc(privateRanges, func(p netip.Prefix) bool { return p.Contains(ip) }) {
		return "", elbErr("InvalidTarget", "The IP address '%s' is not in a private range (RFC 1918 or RFC 6598)", t.id)
	}
	for _, s := range c.subnets {
		if netip.MustParsePrefix(s.CIDR).Contains(ip) {
			if t.zone != "" && t.zone != "all" && t.zone != s.Zone {
				return "", elbErr("InvalidTarget", "The IP address '%s' is in %s, not %s", t.id, s.Zone, t.zone)
			}
			return s.Zone, nil
		}
	}
	if t.zone != "" && t.zone != "all" && !c.zoneKnown(t.zone) {
		return "", errValidation("The availability zone '%s' is not valid", t.zone)
	}
	return t.zone, nil
}

func findTarget(ts []Target, id string, port int) int {
	return slices.IndexFunc(ts, func(t Target) bool { return t.ID == id && t.Port == port })
}

func (c *Cloud) registerTargets(p *eparams) (any, *apiError) {
	arn, aerr := c.requiredARN(p, "TargetGroupArn", "targetgroup")
	if aerr != nil {
		return nil, aerr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	tg := c.tgs[arn]
	if tg == nil {
		return nil, errTGNotFound()
	}
	targets := readTargets(p, tg.Port)
	if p.err != nil {
		return nil, p.err
	}
	if len(targets) == 0 {
		return nil, errValidation("At least one target must be specified")
	}
	n := tg.clone()
	for _, t := range targets {
		zone, aerr := c.checkTargetLocked(tg, t)
		if aerr != nil {
			return nil, aerr
		}
		nt := Target{ID: t.id, Port: t.port, Zone: zone, Health: "initial", Reason: "Elb.RegistrationInProgress",
			Description: "Target registration is in progress"}
		if k := findTarget(n.Targets, t.id, t.port); k >= 0 {
			if n.Targets[k].Health != "draining" {
				continue
			}
			n.Targets[k] = nt
			continue
		}
		n.Targets = append(n.Targets, nt)
	}
	if len(n.Targets) > 1000 {
		return nil, elbErr("TooManyTargets", "A target group can have at most 1000 targets")
	}
	if f := c.matchFaultLocked("RegisterTargets", arn, "", tg.Tags, "fail"); f != nil {
		return nil, f.apiError()
	}
	if aerr := c.persist(put(bucketTargetGroups, arn, n)); aerr != nil {
		return nil, aerr
	}
	c.tgs[arn] = n
	c.syncLoadBalancersLocked()
	return &emptyResult{}, nil
}

func (c *Cloud) deregisterTargets(p *eparams) (any, *apiError) {
	arn, aerr := c.requiredARN(p, "TargetGroupArn", "targetgroup")
	if aerr != nil {
		return nil, aerr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	tg := c.tgs[arn]
	if tg == nil {
		return nil, errTGNotFound()
	}
	targets := readTargets(p, tg.Port)
	if p.err != nil {
		return nil, p.err
	}
	if len(targets) == 0 {
		return nil, errValidation("At least one target must be specified")
	}
	_, used := c.tgUsersLocked()[arn]
	delay, _ := strconv.Atoi(tgAttr(tg, "deregistration_delay.timeout_seconds"))
	n := tg.clone()
	var draining []Target
	for _, t := range targets {
		k := findTarget(n.Targets, t.id, t.port)
		if k < 0 {
			continue // as ELB does: deregistering what is not registered succeeds
		}
		if !used || delay == 0 {
			n.Targets = slices.Delete(n.Targets, k, k+1)
			continue
		}
		if n.Targets[k].Health == "draining" {
			continue
		}
		n.Targets[k].Health, n.Targets[k].Reason, n.Targets[k].Description = "draining", "Target.DeregistrationInProgress", "Target deregistration is in progress"
		// The delay passes at the health checks' pace (the profile's divisor).
		d := time.Duration(delay) * time.Second / time.Duration(max(c.lat.HealthCheckDivisor, 1))
		n.Targets[k].DrainUntil = c.now().UTC().Add(d)
		draining = append(draining, n.Targets[k])
	}
	if aerr := c.persist(put(bucketTargetGroups, arn, n)); aerr != nil {
		return nil, aerr
	}
	c.tgs[arn] = n
	for _, t := range draining {
		c.startDrainLocked(arn, t)
	}
	c.syncLoadBalancersLocked()
	return &emptyResult{}, nil
}

// startDrainLocked removes a draining target once its deregistration delay has passed.
func (c *Cloud) startDrainLocked(arn string, t Target) {
	c.after(max(t.DrainUntil.Sub(c.now()), 0), "DeregisterTargets", arn, "", nil, func() {
		tg := c.tgs[arn]
		if tg == nil {
			return
		}
		k := findTarget(tg.Targets, t.ID, t.Port)
		if k < 0 || tg.Targets[k].Health != "draining" {
			return
		}
		n := tg.clone()
		n.Targets = slices.Delete(n.Targets, k, k+1)
		if c.persist(put(bucketTargetGroups, arn, n)) == nil {
			c.tgs[arn] = n
			c.syncLoadBalancersLocked()
		}
	})
}

type xmlTargetHealth struct {
	TargetID        string `xml:"Target>Id"`
	TargetPort      int    `xml:"Target>Port"`
	TargetZone      string `xml:"Target>AvailabilityZone,omitempty"`
	HealthCheckPort string `xml:"HealthCheckPort"`
	State           string `xml:"TargetHealth>State"`
	Reason          string `xml:"TargetHealth>Reason,omitempty"`
	Description     string `xml:"TargetHealth>Description,omitempty"`
}

type targetHealthResult struct {
	Descriptions []xmlTargetHealth `xml:"TargetHealthDescriptions>member"`
}

// targetHealthView is what DescribeTargetHealth reports for a target: its recorded
// health, unless it is not registered, its group serves no load balancer, or its
// instance is not running.
func targetHealthView(t Target, registered, inUse bool, instanceState string) (state, reason, desc string) {
	switch {
	case !registered:
		return "unused", "Target.NotRegistered", "Target is not registered to the target group"
	case t.Health == "draining":
		return "draining", "Target.DeregistrationInProgress", "Target deregistration is in progress"
	case !inUse:
		return "unused", "Target.NotInUse", "Target group is not configured to receive traffic from the load balancer"
	case instanceState != "" && instanceState != "running":
		return "unused", "Target.InvalidState", "Target is in the " + instanceState + " state"
	case t.Health == "healthy":
		return "healthy", "", ""
	}
	return t.Health, t.Reason, t.Description
}

func (c *Cloud) describeTargetHealth(p *eparams) (any, *apiError) {
	arn, aerr := c.requiredARN(p, "TargetGroupArn", "targetgroup")
	if aerr != nil {
		return nil, aerr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	tg := c.tgs[arn]
	if tg == nil {
		return nil, errTGNotFound()
	}
	asked := readTargets(p, 0)
	if p.err != nil {
		return nil, p.err
	}
	_, inUse := c.tgUsersLocked()[arn]
	var list []Target
	registered := map[int]bool{}
	if len(asked) == 0 {
		list = slices.Clone(tg.Targets)
		for i := range list {
			registered[i] = true
		}
	}
	for _, a := range asked {
		if tg.TargetType == "instance" && c.instances[a.id] == nil {
			return nil, elbErr("InvalidTarget", "The following targets are not valid instances: '%s'", a.id)
		}
		if a.port == 0 {
			// No port: every registration of the target.
			found := false
			for _, t := range tg.Targets {
				if t.ID == a.id {
					registered[len(list)] = true
					list = append(list, t)
					found = true
				}
			}
			if !found {
				list = append(list, Target{ID: a.id, Port: tg.Port})
			}
			continue
		}
		if k := findTarget(tg.Targets, a.id, a.port); k >= 0 {
			registered[len(list)] = true
			list = append(list, tg.Targets[k])
		} else {
			list = append(list, Target{ID: a.id, Port: a.port})
		}
	}
	resp := &targetHealthResult{Descriptions: []xmlTargetHealth{}}
	order := make([]int, len(list))
	for i := range order {
		order[i] = i
	}
	if len(asked) == 0 {
		sort.SliceStable(order, func(i, j int) bool {
			a, b := list[order[i]], list[order[j]]
			return a.ID < b.ID || a.ID == b.ID && a.Port < b.Port
		})
	}
	for _, i := range order {
		t := list[i]
		instState := ""
		if tg.TargetType == "instance" {
			if inst := c.instances[t.ID]; inst != nil {
				instState = inst.State
			}
		}
		state, reason, desc := targetHealthView(t, registered[i], inUse, instState)
		hcPort := tg.HealthCheck.Port
		if hcPort == "traffic-port" {
			hcPort = strconv.Itoa(t.Port)
		}
		resp.Descriptions = append(resp.Descriptions, xmlTargetHealth{
			TargetID: t.ID, TargetPort: t.Port, TargetZone: t.Zone, HealthCheckPort: hcPort,
			State: state, Reason: reason, Description: desc,
		})
	}
	return resp, nil
}

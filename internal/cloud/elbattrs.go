package cloud

import (
	"fmt"
	"sort"
	"strconv"
)

// attrRule checks one attribute's value; it returns why a value is wrong, or "".
type attrRule func(v string) string

func boolAttr(v string) string {
	if v != "true" && v != "false" {
		return "must be true or false"
	}
	return ""
}

func intAttr(lo, hi int) attrRule {
	return func(v string) string {
		n, err := strconv.Atoi(v)
		if err != nil || n < lo || n > hi {
			return fmt.Sprintf("must be an integer from %d to %d", lo, hi)
		}
		return ""
	}
}

func enumAttr(vals ...string) attrRule {
	return func(v string) string {
		for _, a := range vals {
			if v == a {
				return ""
			}
		}
		return fmt.Sprintf("must be one of %v", vals)
	}
}

func anyAttr(string) string { return "" }

// offOrInt accepts "off" or an integer in [lo, hi].
func offOrInt(lo, hi int) attrRule {
	return func(v string) string {
		if v == "off" {
			return ""
		}
		if intAttr(lo, hi)(v) != "" {
			return fmt.Sprintf("must be off or an integer from %d to %d", lo, hi)
		}
		return ""
	}
}

type attrDef struct {
	def  string
	rule attrRule
}

// lbAttrDefs are the attributes a load balancer of the type has, with their defaults.
// Of them the load balancers honour deletion_protection.enabled,
// idle_timeout.timeout_seconds, routing.http.xff_header_processing.mode,
// routing.http.xff_client_port.enabled, routing.http.preserve_host_header.enabled and
// routing.http2.enabled; the others are kept and reported.
func lbAttrDefs(lb *LoadBalancer) map[string]attrDef {
	denyIGW := "false"
	if lb.Scheme == "internal" {
		denyIGW = "true"
	}
	m := map[string]attrDef{
		"deletion_protection.enabled": {"false", boolAttr},
		"access_logs.s3.enabled":      {"false", boolAttr},
		"access_logs.s3.bucket":       {"", anyAttr},
		"access_logs.s3.prefix":       {"", anyAttr},
		"ipv6.deny_all_igw_traffic":   {denyIGW, boolAttr},
		"zonal_shift.config.enabled":  {"false", boolAttr},
	}
	if lb.Type == "network" {
		m["load_balancing.cross_zone.enabled"] = attrDef{"false", boolAttr}
		m["dns_record.client_routing_policy"] = attrDef{"any_availability_zone",
			enumAttr("availability_zone_affinity", "partial_availability_zone_affinity", "any_availability_zone")}
		m["secondary_ips.auto_assigned.per_subnet"] = attrDef{"0", intAttr(0, 7)}
		return m
	}
	m["load_balancing.cross_zone.enabled"] = attrDef{"true", enumAttr("true")}
	for k, d := range map[string]attrDef{
		"idle_timeout.timeout_seconds":                             {"60", intAttr(1, 4000)},
		"client_keep_alive.seconds":                                {"3600", intAttr(60, 604800)},
		"connection_logs.s3.enabled":                               {"false", boolAttr},
		"connection_logs.s3.bucket":                                {"", anyAttr},
		"connection_logs.s3.prefix":                                {"", anyAttr},
		"routing.http.desync_mitigation_mode":                      {"defensive", enumAttr("monitor", "defensive", "strictest")},
		"routing.http.drop_invalid_header_fields.enabled":          {"false", boolAttr},
		"routing.http.preserve_host_header.enabled":                {"false", boolAttr},
		"routing.http.x_amzn_tls_version_and_cipher_suite.enabled": {"false", boolAttr},
		"routing.http.xff_client_port.enabled":                     {"false", boolAttr},
		"routing.http.xff_header_processing.mode":                  {"append", enumAttr("append", "preserve", "remove")},
		"routing.http2.enabled":                                    {"true", boolAttr},
		"waf.fail_open.enabled":                                    {"false", boolAttr},
	} {
		m[k] = d
	}
	return m
}

// tgAttrDefs are a target group's attributes with their defaults. The load balancers
// honour deregistration_delay.timeout_seconds and
// target_group_health.unhealthy_state_routing.minimum_healthy_targets.count.
func tgAttrDefs(tg *TargetGroup) map[string]attrDef {
	m := map[string]attrDef{
		"deregistration_delay.timeout_seconds":                                           {"300", intAttr(0, 3600)},
		"stickiness.enabled":                                                             {"false", boolAttr},
		"load_balancing.cross_zone.enabled":                                              {"use_load_balancer_configuration", enumAttr("true", "false", "use_load_balancer_configuration")},
		"target_group_health.dns_failover.minimum_healthy_targets.count":                 {"1", offOrInt(1, 1000)},
		"target_group_health.dns_failover.minimum_healthy_targets.percentage":            {"off", offOrInt(1, 100)},
		"target_group_health.unhealthy_state_routing.minimum_healthy_targets.count":      {"1", intAttr(1, 1000)},
		"target_group_health.unhealthy_state_routing.minimum_healthy_targets.percentage": {"off", offOrInt(1, 100)},
	}
	if tg.Protocol == "HTTP" || tg.Protocol == "HTTPS" {
		m["stickiness.type"] = attrDef{"lb_cookie", enumAttr("lb_cookie", "app_cookie")}
		m["load_balancing.algorithm.type"] = attrDef{"round_robin", enumAttr("round_robin", "least_outstanding_requests", "weighted_random")}
		m["load_balancing.algorithm.anomaly_mitigation"] = attrDef{"off", enumAttr("on", "off")}
		m["slow_start.duration_seconds"] = attrDef{"0", func(v string) string {
			if v == "0" {
				return ""
			}
			return intAttr(30, 900)(v)
		}}
		m["stickiness.app_cookie.cookie_name"] = attrDef{"", anyAttr}
		m["stickiness.app_cookie.duration_seconds"] = attrDef{"86400", intAttr(1, 604800)}
		m["stickiness.lb_cookie.duration_seconds"] = attrDef{"86400", intAttr(1, 604800)}
		return m
	}
	udp := tg.Protocol == "UDP" || tg.Protocol == "TCP_UDP"
	preserve := "true"
	if tg.TargetType == "ip" && tg.Protocol == "TCP" {
		preserve = "false"
	}
	m["stickiness.type"] = attrDef{"source_ip", enumAttr("source_ip")}
	m["deregistration_delay.connection_termination.enabled"] = attrDef{strconv.FormatBool(udp), boolAttr}
	m["preserve_client_ip.enabled"] = attrDef{preserve, boolAttr}
	m["proxy_protocol_v2.enabled"] = attrDef{"false", enumAttr("false")}
	m["target_health_state.unhealthy.connection_termination.enabled"] = attrDef{"true", boolAttr}
	m["target_health_state.unhealthy.draining_interval_seconds"] = attrDef{"0", intAttr(0, 360000)}
	return m
}

func lbAttr(lb *LoadBalancer, key string) string {
	if v, ok := lb.Attributes[key]; ok {
		return v
	}
	return lbAttrDefs(lb)[key].def
}

func tgAttr(tg *TargetGroup, key string) string {
	if v, ok := tg.Attributes[key]; ok {
		return v
	}
	return tgAttrDefs(tg)[key].def
}

type xmlAttr struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type attrsResult struct {
	Attributes []xmlAttr `xml:"Attributes>member"`
}

// allAttrs lists every attribute: the set value or the default, sorted by key.
func allAttrs(defs map[string]attrDef, set map[string]string) *attrsResult {
	keys := make([]string, 0, len(defs))
	for k := range defs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := &attrsResult{Attributes: []xmlAttr{}}
	for _, k := range keys {
		v, ok := set[k]
		if !ok {
			v = defs[k].def
		}
		out.Attributes = append(out.Attributes, xmlAttr{k, v})
	}
	return out
}

// readAttrs reads Attributes.member.N.Key/Value and checks them against defs.
func readAttrs(p *eparams, kind string, defs map[string]attrDef) (map[string]string, *apiError) {
	out := map[string]string{}
	for _, k := range p.indexed("Attributes.member") {
		key, val := p.str(k+".Key"), p.str(k+".Value")
		d, ok := defs[key]
		if !ok {
			return nil, errValidation("%s attribute key '%s' is not recognized", kind, key)
		}
		if why := d.rule(val); why != "" {
			return nil, elbErr("InvalidConfigurationRequest", "%s attribute '%s' %s, not '%s'", kind, key, why, val)
		}
		out[key] = val
	}
	if p.err != nil {
		return nil, p.err
	}
	if len(out) == 0 {
		return nil, errValidation("At least one attribute must be specified")
	}
	return out, nil
}

func (c *Cloud) describeLoadBalancerAttributes(p *eparams) (any, *apiError) {
	arn, aerr := c.requiredARN(p, "LoadBalancerArn", "loadbalancer")
	if aerr != nil {
		return nil, aerr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	lb := c.lbs[arn]
	if lb == nil {
		return nil, errLBNotFound()
	}
	return allAttrs(lbAttrDefs(lb), lb.Attributes), nil
}

func (c *Cloud) modifyLoadBalancerAttributes(p *eparams) (any, *apiError) {
	arn, aerr := c.requiredARN(p, "LoadBalancerArn", "loadbalancer")
	if aerr != nil {
		return nil, aerr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	lb := c.lbs[arn]
	if lb == nil {
		return nil, errLBNotFound()
	}
	set, aerr := readAttrs(p, "Load balancer", lbAttrDefs(lb))
	if aerr != nil {
		return nil, aerr
	}
	n := lb.clone()
	if n.Attributes == nil {
		n.Attributes = map[string]string{}
	}
	for k, v := range set {
		n.Attributes[k] = v
	}
	if aerr := c.persist(put(bucketLoadBalancers, arn, n)); aerr != nil {
		return nil, aerr
	}
	c.lbs[arn] = n
	c.syncLoadBalancersLocked()
	return allAttrs(lbAttrDefs(n), n.Attributes), nil
}

func (c *Cloud) describeTargetGroupAttributes(p *eparams) (any, *apiError) {
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
	return allAttrs(tgAttrDefs(tg), tg.Attributes), nil
}

func (c *Cloud) modifyTargetGroupAttributes(p *eparams) (any, *apiError) {
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
	set, aerr := readAttrs(p, "Target group", tgAttrDefs(tg))
	if aerr != nil {
		return nil, aerr
	}
	n := tg.clone()
	if n.Attributes == nil {
		n.Attributes = map[string]string{}
	}
	for k, v := range set {
		n.Attributes[k] = v
	}
	if aerr := c.persist(put(bucketTargetGroups, arn, n)); aerr != nil {
		return nil, aerr
	}
	c.tgs[arn] = n
	c.syncLoadBalancersLocked()
	return allAttrs(tgAttrDefs(n), n.Attributes), nil
}

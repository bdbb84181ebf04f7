package cloud

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// listenerProtocols are the listener protocols of each load balancer type, and the target
// group protocol each forwards to.
var listenerProtocols = map[string]map[string]string{
	"network":     {"TCP": "TCP", "UDP": "UDP", "TCP_UDP": "TCP_UDP"},
	"application": {"HTTP": "HTTP"},
}

var statusCodeRE = regexp.MustCompile(`^[245]\d\d$`)

var fixedContentTypes = []string{"text/plain", "text/css", "text/html", "application/javascript", "application/json"}

// readActions reads prefix.N (DefaultActions.member or Actions.member).
func readActions(p *eparams, prefix string) []Action {
	var out []Action
	for _, k := range p.indexed(prefix) {
		a := Action{Type: p.str(k + ".Type"), Order: p.intIn(k+".Order", 1, 50000, 0)}
		if a.Type == "" {
			p.fail(errValidation("An action type must be specified"))
			continue
		}
		if tg := p.str(k + ".TargetGroupArn"); tg != "" {
			a.Forward = append(a.Forward, WeightedTargetGroup{ARN: tg, Weight: 1})
		}
		fwd := p.indexed(k + ".ForwardConfig.TargetGroups.member")
		if len(fwd) > 0 && len(a.Forward) > 0 {
			// Both forms name the same single group, or it is an error below.
			if len(fwd) != 1 || p.str(fwd[0]+".TargetGroupArn") != a.Forward[0].ARN {
				p.fail(errValidation("You cannot specify both a target group ARN and a forward config with other target groups"))
			}
			a.Forward = nil
		}
		for _, f := range fwd {
			a.Forward = append(a.Forward, WeightedTargetGroup{ARN: p.str(f + ".TargetGroupArn"), Weight: p.intIn(f+".Weight", 0, 999, 1)})
		}
		if p.has(k + ".ForwardConfig.TargetGroupStickinessConfig.Enabled") {
			a.Stickiness = &Stickiness{Enabled: p.str(k+".ForwardConfig.TargetGroupStickinessConfig.Enabled") == "true",
				Duration: p.intIn(k+".ForwardConfig.TargetGroupStickinessConfig.DurationSeconds", 1, 604800, 0)}
		}
		if p.has(k+".FixedResponseConfig.StatusCode") || a.Type == "fixed-response" {
			a.Fixed = &FixedResponse{StatusCode: p.str(k + ".FixedResponseConfig.StatusCode"),
				ContentType: p.str(k + ".FixedResponseConfig.ContentType"), MessageBody: p.str(k + ".FixedResponseConfig.MessageBody")}
		}
		out = append(out, a)
	}
	return out
}

// checkActionsLocked validates actions for a listener of protocol on lb: one action,
// forward (to target groups of the matching protocol that no other load balancer uses)
// or, on an ALB, fixed-response.
func (c *Cloud) checkActionsLocked(lb *LoadBalancer, protocol string, actions []Action) *apiError {
	if len(actions) == 0 {
		return errValidation("At least one action must be specified")
	}
	if len(actions) > 1 {
		return elbErr("InvalidLoadBalancerAction", "kubelab's listeners and rules take one action (forward or fixed-response)")
	}
	users := c.tgUsersLocked()
	for _, a := range actions {
		switch a.Type {
		case "forward":
			if len(a.Forward) == 0 {
				return errValidation("A target group ARN or a forward config must be specified for a forward action")
			}
			if lb.Type == "network" && len(a.Forward) > 1 {
				return elbErr("InvalidConfigurationRequest", "A forward action of a Network Load Balancer takes one target group")
			}
			if len(a.Forward) > 5 {
				return elbErr("TooManyTargetGroups", "A forward action can have at most 5 target groups")
			}
			for _, w := range a.Forward {
				if aerr := c.checkARN("targetgroup", w.ARN); aerr != nil {
					return aerr
				}
				tg := c.tgs[w.ARN]
				if tg == nil {
					return errTGNotFound()
				}
				if want := listenerProtocols[lb.Type][protocol]; tg.Protocol != want {
					return elbErr("IncompatibleProtocols", "Listener protocol '%s' is not compatible with target group protocol '%s'", protocol, tg.Protocol)
				}
				if other := users[w.ARN]; other != "" && other != lb.ARN {
					return elbErr("TargetGroupAssociationLimit", "The following target groups cannot be associated with more than one load balancer: %s", w.ARN)
				}
			}
			if a.Fixed != nil {
				return errValidation("A forward action takes no fixed response config")
			}
		case "fixed-response":
			if lb.Type == "network" {
				return elbErr("InvalidLoadBalancerAction", "Fixed-response actions are supported only by Application Load Balancers")
			}
			if len(a.Forward) > 0 {
				return errValidation("A fixed-response action takes no target groups")
			}
			if !statusCodeRE.MatchString(a.Fixed.StatusCode) {
				return errValidation("Fixed response status code '%s' must be 2XX, 4XX or 5XX", a.Fixed.StatusCode)
			}
			if a.Fixed.ContentType != "" && !slices.Contains(fixedContentTypes, a.Fixed.ContentType) {
				return errValidation("Fixed response content type '%s' must be one of %s", a.Fixed.ContentType, strings.Join(fixedContentTypes, ", "))
			}
			if len(a.Fixed.MessageBody) > 1024 {
				return errValidation("Fixed response message body can be at most 1024 characters")
			}
		case "redirect", "authenticate-oidc", "authenticate-cognito", "jwt-validation":
			return elbErr("InvalidLoadBalancerAction", "kubelab's load balancers serve forward and fixed-response actions, not %s", a.Type)
		default:
			return errValidation("Action type '%s' is not valid", a.Type)
		}
	}
	return nil
}

type xmlForwardTG struct {
	TargetGroupArn string `xml:"TargetGroupArn"`
	Weight         int    `xml:"Weight"`
}

type xmlAction struct {
	Type           string         `xml:"Type"`
	TargetGroupArn string         `xml:"TargetGroupArn,omitempty"`
	Order          int            `xml:"Order,omitempty"`
	ForwardTGs     []xmlForwardTG `xml:"ForwardConfig>TargetGroups>member,omitempty"`
	StickyEnabled  *bool          `xml:"ForwardConfig>TargetGroupStickinessConfig>Enabled,omitempty"`
	StickyDuration int            `xml:"ForwardConfig>TargetGroupStickinessConfig>DurationSeconds,omitempty"`
	Fixed          *struct {
		StatusCode  string `xml:"StatusCode"`
		ContentType string `xml:"ContentType,omitempty"`
		MessageBody string `xml:"MessageBody,omitempty"`
	} `xml:"FixedResponseConfig,omitempty"`
}

func toXMLActions(as []Action) []xmlAction {
	out := make([]xmlAction, 0, len(as))
	for i, a := range as {
		x := xmlAction{Type: a.Type, Order: a.Order}
		if x.Order == 0 {
			x.Order = i + 1
		}
		if a.Type == "forward" {
			if len(a.Forward) == 1 {
				x.TargetGroupArn = a.Forward[0].ARN
			}
			for _, w := range a.Forward {
				x.ForwardTGs = append(x.ForwardTGs, xmlForwardTG{w.ARN, w.Weight})
			}
			enabled := a.Stickiness != nil && a.Stickiness.Enabled
			x.StickyEnabled = &enabled
			if a.Stickiness != nil {
				x.StickyDuration = a.Stickiness.Duration
			}
		}
		if a.Fixed != nil {
			x.Fixed = &struct {
				StatusCode  string `xml:"StatusCode"`
				ContentType string `xml:"ContentType,omitempty"`
				MessageBody string `xml:"MessageBody,omitempty"`
			}{a.Fixed.StatusCode, a.Fixed.ContentType, a.Fixed.MessageBody}
		}
		out = append(out, x)
	}
	return out
}

type xmlListener struct {
	ListenerArn     string      `xml:"ListenerArn"`
	LoadBalancerArn string      `xml:"LoadBalancerArn"`
	Port            int         `xml:"Port"`
	Protocol        string      `xml:"Protocol"`
	DefaultActions  []xmlAction `xml:"DefaultActions>member"`
}

type listenersResult struct {
	Listeners  []xmlListener `xml:"Listeners>member"`
	NextMarker string        `xml:"NextMarker,omitempty"`
}

func toXMLListener(l *Listener) xmlListener {
	return xmlListener{ListenerArn: l.ARN, LoadBalancerArn: l.LoadBalancerARN, Port: l.Port, Protocol: l.Protocol,
		DefaultActions: toXMLActions(l.DefaultActions)}
}

// lbPath is the part of an LB ARN after "loadbalancer/": app|net/NAME/ID.
func lbPath(lbARN string) string {
	_, rest, _ := strings.Cut(lbARN, ":loadbalancer/")
	return rest
}

// transports are the transport protocols a listener protocol takes a port of.
func transports(protocol string) []string {
	switch protocol {
	case "UDP":
		return []string{"udp"}
	case "TCP_UDP":
		return []string{"tcp", "udp"}
	}
	return []string{"tcp"}
}

// portClashLocked finds a listener of lb, other than skip, that holds port for one of
// protocol's transports.
func (c *Cloud) portClashLocked(lbARN, skip string, port int, protocol string) *Listener {
	for _, l := range c.listeners {
		if l.LoadBalancerARN != lbARN || l.ARN == skip || l.Port != port {
			continue
		}
		for _, t := range transports(protocol) {
			if slices.Contains(transports(l.Protocol), t) {
				return l
			}
		}
	}
	return nil
}

func (c *Cloud) checkListenerProtocol(lb *LoadBalancer, protocol string) *apiError {
	if protocol == "" {
		return errValidation("A listener protocol must be specified")
	}
	if protocol == "HTTPS" || protocol == "TLS" {
		return elbErr("UnsupportedProtocol", "kubelab's load balancers serve no certificates: protocol '%s' is not supported", protocol)
	}
	if _, ok := listenerProtocols[lb.Type][protocol]; !ok {
		return elbErr("UnsupportedProtocol", "Protocol '%s' is not supported for load balancers of type '%s'", protocol, lb.Type)
	}
	return nil
}

func (c *Cloud) createListener(p *eparams) (any, *apiError) {
	lbARN := p.requiredStr("LoadBalancerArn")
	protocol := p.oneOf("Protocol", "", "HTTP", "HTTPS", "TCP", "TLS", "UDP", "TCP_UDP", "GENEVE", "QUIC", "TCP_QUIC")
	port := p.intIn("Port", 1, 65535, 0)
	actions := readActions(p, "DefaultActions.member")
	tags := p.elbTags()
	if p.err != nil {
		return nil, p.err
	}
	if aerr := c.checkARN("loadbalancer", lbARN); aerr != nil {
		return nil, aerr
	}
	if port == 0 {
		return nil, errValidation("A listener port must be specified")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	lb := c.lbs[lbARN]
	if lb == nil {
		return nil, errLBNotFound()
	}
	if aerr := c.checkListenerProtocol(lb, protocol); aerr != nil {
		return nil, aerr
	}
	if aerr := c.checkActionsLocked(lb, protocol, actions); aerr != nil {
		return nil, aerr
	}
	if old := c.portClashLocked(lbARN, "", port, protocol); old != nil {
		if old.Protocol == protocol && slices.EqualFunc(old.DefaultActions, actions, actionsEqual) {
			return &listenersResult{Listeners: []xmlListener{toXMLListener(old)}}, nil
		}
		return nil, elbErr("DuplicateListener", "A listener already exists on this port for this load balancer '%s'", lbARN)
	}
	n := 0
	for _, l := range c.listeners {
		if l.LoadBalancerARN == lbARN {
			n++
		}
	}
	if n >= 50 {
		return nil, elbErr("TooManyListeners", "A load balancer can have at most 50 listeners")
	}
	if len(tags) > maxTags {
		return nil, elbErr("TooManyTags", "Too many tags: a listener can have at most %d", maxTags)
	}
	if f := c.matchFaultLocked("CreateListener", lbARN, "", lb.Tags, "fail"); f != nil {
		return nil, f.apiError()
	}
	id := hexID(16)
	l := &Listener{
		ARN: c.elbARN("listener/" + lbPath(lbARN) + "/" + id), LoadBalancerARN: lbARN, Port: port, Protocol: protocol,
		DefaultActions: actions, DefaultRuleARN: c.elbARN("listener-rule/" + lbPath(lbARN) + "/" + id + "/" + hexID(16)), Tags: tags,
	}
	if aerr := c.persist(put(bucketListeners, l.ARN, l)); aerr != nil {
		return nil, aerr
	}
	c.listeners[l.ARN] = l
	c.syncLoadBalancersLocked()
	return &listenersResult{Listeners: []xmlListener{toXMLListener(l)}}, nil
}

func actionsEqual(a, b Action) bool {
	return a.Type == b.Type && slices.Equal(a.Forward, b.Forward) &&
		(a.Fixed == nil) == (b.Fixed == nil) && (a.Fixed == nil || *a.Fixed == *b.Fixed)
}

func (c *Cloud) describeListeners(p *eparams) (any, *apiError) {
	lbARN := p.str("LoadBalancerArn")
	arns := p.members("ListenerArns")
	size := p.intIn("PageSize", 1, 400, 0)
	marker := p.str("Marker")
	if p.err != nil {
		return nil, p.err
	}
	if lbARN == "" && len(arns) == 0 {
		return nil, errValidation("You must specify either listener ARNs or a load balancer ARN")
	}
	if lbARN != "" && len(arns) > 0 {
		return nil, errValidation("Listener ARNs and a load balancer ARN cannot be specified at the same time")
	}
	for _, a := range arns {
		if aerr := c.checkARN("listener", a); aerr != nil {
			return nil, aerr
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []string
	if lbARN != "" {
		if aerr := c.checkARN("loadbalancer", lbARN); aerr != nil {
			return nil, aerr
		}
		if c.lbs[lbARN] == nil {
			return nil, errLBNotFound()
		}
		for a, l := range c.listeners {
			if l.LoadBalancerARN == lbARN {
				keys = append(keys, a)
			}
		}
	} else {
		for _, a := range dedupe(arns) {
			if c.listeners[a] == nil {
				return nil, errListenerNotFound()
			}
			keys = append(keys, a)
		}
	}
	page, next, perr := paginate(keys, size, marker)
	if perr != nil {
		return nil, errValidation("The marker '%s' is not valid", marker)
	}
	resp := &listenersResult{NextMarker: next, Listeners: []xmlListener{}}
	for _, a := range page {
		resp.Listeners = append(resp.Listeners, toXMLListener(c.listeners[a]))
	}
	return resp, nil
}

func (c *Cloud) modifyListener(p *eparams) (any, *apiError) {
	arn := p.requiredStr("ListenerArn")
	protocol := p.oneOf("Protocol", "", "HTTP", "HTTPS", "TCP", "TLS", "UDP", "TCP_UDP", "GENEVE", "QUIC", "TCP_QUIC")
	port := p.intIn("Port", 1, 65535, 0)
	actions := readActions(p, "DefaultActions.member")
	if p.err != nil {
		return nil, p.err
	}
	if aerr := c.checkARN("listener", arn); aerr != nil {
		return nil, aerr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.listeners[arn]
	if l == nil {
		return nil, errListenerNotFound()
	}
	lb := c.lbs[l.LoadBalancerARN]
	n := l.clone()
	if protocol != "" {
		if aerr := c.checkListenerProtocol(lb, protocol); aerr != nil {
			return nil, aerr
		}
		n.Protocol = protocol
	}
	if port != 0 {
		n.Port = port
	}
	if len(actions) > 0 {
		n.DefaultActions = actions
	}
	if aerr := c.checkActionsLocked(lb, n.Protocol, n.DefaultActions); aerr != nil {
		return nil, aerr
	}
	if c.portClashLocked(lb.ARN, arn, n.Port, n.Protocol) != nil {
		return nil, elbErr("DuplicateListener", "A listener already exists on this port for this load balancer '%s'", lb.ARN)
	}
	if aerr := c.persist(put(bucketListeners, arn, n)); aerr != nil {
		return nil, aerr
	}
	c.listeners[arn] = n
	c.syncLoadBalancersLocked()
	return &listenersResult{Listeners: []xmlListener{toXMLListener(n)}}, nil
}

func (c *Cloud) deleteListener(p *eparams) (any, *apiError) {
	arn, aerr := c.requiredARN(p, "ListenerArn", "listener")
	if aerr != nil {
		return nil, aerr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.listeners[arn] == nil {
		return nil, errListenerNotFound()
	}
	changes := []change{del(bucketListeners, arn)}
	var rules []string
	for _, r := range c.rules {
		if r.ListenerARN == arn {
			rules = append(rules, r.ARN)
			changes = append(changes, del(bucketRules, r.ARN))
		}
	}
	if aerr := c.persist(changes...); aerr != nil {
		return nil, aerr
	}
	delete(c.listeners, arn)
	for _, r := range rules {
		delete(c.rules, r)
	}
	c.syncLoadBalancersLocked()
	return &emptyResult{}, nil
}

// readConditions reads Conditions.member.N: host-header and path-pattern, with their
// values in Values or in HostHeaderConfig / PathPatternConfig.
func readConditions(p *eparams) ([]Condition, *apiError) {
	var out []Condition
	for _, k := range p.indexed("Conditions.member") {
		field := p.str(k + ".Field")
		vals := p.members(k + ".Values")
		switch field {
		case "host-header":
			vals = append(vals, p.members(k+".HostHeaderConfig.Values")...)
		case "path-pattern":
			vals = append(vals, p.members(k+".PathPatternConfig.Values")...)
		case "":
			return nil, errValidation("A condition field must be specified")
		case "http-header", "http-request-method", "query-string", "source-ip":
			return nil, errValidation("kubelab's rules match host-header and path-pattern conditions, not %s", field)
		default:
			return nil, errValidation("Condition field '%s' is not valid", field)
		}
		if len(vals) == 0 {
			return nil, errValidation("A condition value must be specified")
		}
		for _, v := range vals {
			if len(v) > 128 {
				return nil, errValidation("Condition value '%s' can be at most 128 characters", v)
			}
		}
		out = append(out, Condition{Field: field, Values: dedupe(vals)})
	}
	if p.err != nil {
		return nil, p.err
	}
	return out, nil
}

type xmlCondition struct {
	Field   string   `xml:"Field"`
	Values  []string `xml:"Values>member"`
	Host    []string `xml:"HostHeaderConfig>Values>member,omitempty"`
	Pattern []string `xml:"PathPatternConfig>Values>member,omitempty"`
}

type xmlRule struct {
	RuleArn    string         `xml:"RuleArn"`
	Priority   string         `xml:"Priority"`
	Conditions []xmlCondition `xml:"Conditions>member"`
	Actions    []xmlAction    `xml:"Actions>member"`
	IsDefault  bool           `xml:"IsDefault"`
}

type rulesResult struct {
	Rules      []xmlRule `xml:"Rules>member"`
	NextMarker string    `xml:"NextMarker,omitempty"`
}

func toXMLRule(r *Rule) xmlRule {
	x := xmlRule{RuleArn: r.ARN, Priority: strconv.Itoa(r.Priority), Actions: toXMLActions(r.Actions), Conditions: []xmlCondition{}}
	for _, cd := range r.Conditions {
		xc := xmlCondition{Field: cd.Field, Values: cd.Values}
		if cd.Field == "host-header" {
			xc.Host = cd.Values
		} else {
			xc.Pattern = cd.Values
		}
		x.Conditions = append(x.Conditions, xc)
	}
	return x
}

func defaultRuleXML(l *Listener) xmlRule {
	return xmlRule{RuleArn: l.DefaultRuleARN, Priority: "default", Actions: toXMLActions(l.DefaultActions),
		Conditions: []xmlCondition{}, IsDefault: true}
}

// rulesOfLocked lists a listener's rules by priority.
func (c *Cloud) rulesOfLocked(listenerARN string) []*Rule {
	var out []*Rule
	for _, r := range c.rules {
		if r.ListenerARN == listenerARN {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b *Rule) int { return a.Priority - b.Priority })
	return out
}

func (c *Cloud) ruleListenerLocked(listenerARN string) (*Listener, *LoadBalancer, *apiError) {
	l := c.listeners[listenerARN]
	if l == nil {
		return nil, nil, errListenerNotFound()
	}
	lb := c.lbs[l.LoadBalancerARN]
	if lb.Type != "application" {
		return nil, nil, elbErr("InvalidConfigurationRequest", "Rules can be added only to listeners of Application Load Balancers")
	}
	return l, lb, nil
}

func (c *Cloud) createRule(p *eparams) (any, *apiError) {
	listenerARN := p.requiredStr("ListenerArn")
	p.requiredStr("Priority")
	priority := p.intIn("Priority", 1, 50000, 0)
	actions := readActions(p, "Actions.member")
	tags := p.elbTags()
	if p.err != nil {
		return nil, p.err
	}
	conds, aerr := readConditions(p)
	if aerr != nil {
		return nil, aerr
	}
	if len(conds) == 0 {
		return nil, errValidation("At least one condition must be specified")
	}
	if aerr := c.checkARN("listener", listenerARN); aerr != nil {
		return nil, aerr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	l, lb, aerr := c.ruleListenerLocked(listenerARN)
	if aerr != nil {
		return nil, aerr
	}
	rules := c.rulesOfLocked(listenerARN)
	for _, r := range rules {
		if r.Priority == priority {
			return nil, elbErr("PriorityInUse", "Priority '%d' is currently in use", priority)
		}
	}
	if len(rules) >= 100 {
		return nil, elbErr("TooManyRules", "A listener can have at most 100 rules")
	}
	if aerr := c.checkActionsLocked(lb, l.Protocol, actions); aerr != nil {
		return nil, aerr
	}
	if len(tags) > maxTags {
		return nil, elbErr("TooManyTags", "Too many tags: a rule can have at most %d", maxTags)
	}
	_, lid, _ := strings.Cut(l.ARN, ":listener/")
	r := &Rule{ARN: c.elbARN("listener-rule/" + lid + "/" + hexID(16)), ListenerARN: listenerARN, Priority: priority,
		Conditions: conds, Actions: actions, Tags: tags}
	if aerr := c.persist(put(bucketRules, r.ARN, r)); aerr != nil {
		return nil, aerr
	}
	c.rules[r.ARN] = r
	c.syncLoadBalancersLocked()
	return &rulesResult{Rules: []xmlRule{toXMLRule(r)}}, nil
}

// defaultRuleOwnerLocked finds the listener whose default rule arn is.
func (c *Cloud) defaultRuleOwnerLocked(arn string) *Listener {
	for _, l := range c.listeners {
		if l.DefaultRuleARN == arn {
			return l
		}
	}
	return nil
}

func (c *Cloud) describeRules(p *eparams) (any, *apiError) {
	listenerARN := p.str("ListenerArn")
	arns := p.members("RuleArns")
	size := p.intIn("PageSize", 1, 400, 0)
	marker := p.str("Marker")
	if p.err != nil {
		return nil, p.err
	}
	if listenerARN == "" && len(arns) == 0 {
		return nil, errValidation("You must specify either listener ARN or rule ARNs")
	}
	if listenerARN != "" && len(arns) > 0 {
		return nil, errValidation("Listener ARN and rule ARNs cannot be specified at the same time")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var all []xmlRule
	if listenerARN != "" {
		if aerr := c.checkARN("listener", listenerARN); aerr != nil {
			return nil, aerr
		}
		l := c.listeners[listenerARN]
		if l == nil {
			return nil, errListenerNotFound()
		}
		for _, r := range c.rulesOfLocked(listenerARN) {
			all = append(all, toXMLRule(r))
		}
		all = append(all, defaultRuleXML(l))
	} else {
		for _, a := range dedupe(arns) {
			if aerr := c.checkARN("listener-rule", a); aerr != nil {
				return nil, aerr
			}
			if r := c.rules[a]; r != nil {
				all = append(all, toXMLRule(r))
			} else if l := c.defaultRuleOwnerLocked(a); l != nil {
				all = append(all, defaultRuleXML(l))
			} else {
				return nil, errRuleNotFound()
			}
		}
	}
	// Pages follow the order above; a marker is the index of the next rule.
	start := 0
	if marker != "" {
		n, err := strconv.Atoi(marker)
		if err != nil || n < 0 || n > len(all) {
			return nil, errValidation("The marker '%s' is not valid", marker)
		}
		start = n
	}
	end := len(all)
	resp := &rulesResult{}
	if size > 0 && start+size < len(all) {
		end = start + size
		resp.NextMarker = strconv.Itoa(end)
	}
	resp.Rules = append([]xmlRule{}, all[start:end]...)
	return resp, nil
}

func (c *Cloud) modifyRule(p *eparams) (any, *apiError) {
	arn := p.requiredStr("RuleArn")
	actions := readActions(p, "Actions.member")
	if p.err != nil {
		return nil, p.err
	}
	conds, aerr := readConditions(p)
	if aerr != nil {
		return nil, aerr
	}
	if aerr := c.checkARN("listener-rule", arn); aerr != nil {
		return nil, aerr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.defaultRuleOwnerLocked(arn); l != nil {
		// The default rule: its actions are the listener's default actions.
		if len(conds) > 0 {
			return nil, elbErr("OperationNotPermitted", "Conditions cannot be set on a default rule")
		}
		if len(actions) == 0 {
			return &rulesResult{Rules: []xmlRule{defaultRuleXML(l)}}, nil
		}
		lb := c.lbs[l.LoadBalancerARN]
		if aerr := c.checkActionsLocked(lb, l.Protocol, actions); aerr != nil {
			return nil, aerr
		}
		n := l.clone()
		n.DefaultActions = actions
		if aerr := c.persist(put(bucketListeners, n.ARN, n)); aerr != nil {
			return nil, aerr
		}
		c.listeners[n.ARN] = n
		c.syncLoadBalancersLocked()
		return &rulesResult{Rules: []xmlRule{defaultRuleXML(n)}}, nil
	}
	r := c.rules[arn]
	if r == nil {
		return nil, errRuleNotFound()
	}
	l := c.listeners[r.ListenerARN]
	n := r.clone()
	if len(conds) > 0 {
		n.Conditions = conds
	}
	if len(actions) > 0 {
		if aerr := c.checkActionsLocked(c.lbs[l.LoadBalancerARN], l.Protocol, actions); aerr != nil {
			return nil, aerr
		}
		n.Actions = actions
	}
	if aerr := c.persist(put(bucketRules, arn, n)); aerr != nil {
		return nil, aerr
	}
	c.rules[arn] = n
	c.syncLoadBalancersLocked()
	return &rulesResult{Rules: []xmlRule{toXMLRule(n)}}, nil
}

func (c *Cloud) deleteRule(p *eparams) (any, *apiError) {
	arn, aerr := c.requiredARN(p, "RuleArn", "listener-rule")
	if aerr != nil {
		return nil, aerr
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.defaultRuleOwnerLocked(arn) != nil {
		return nil, elbErr("OperationNotPermitted", "Default rule '%s' cannot be deleted", arn)
	}
	if c.rules[arn] == nil {
		return nil, errRuleNotFound()
	}
	if aerr := c.persist(del(bucketRules, arn)); aerr != nil {
		return nil, aerr
	}
	delete(c.rules, arn)
	c.syncLoadBalancersLocked()
	return &emptyResult{}, nil
}

func (c *Cloud) setRulePriorities(p *eparams) (any, *apiError) {
	type pair struct {
		arn      string
		priority int
	}
	var pairs []pair
	for _, k := range p.indexed("RulePriorities.member") {
		pairs = append(pairs, pair{p.str(k + ".RuleArn"), p.intIn(k+".Priority", 1, 50000, 0)})
	}
	if p.err != nil {
		return nil, p.err
	}
	if len(pairs) == 0 {
		return nil, errValidation("At least one rule priority must be specified")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	next := map[string]*Rule{}
	for _, pr := range pairs {
		if aerr := c.checkARN("listener-rule", pr.arn); aerr != nil {
			return nil, aerr
		}
		if pr.priority == 0 {
			return nil, errValidation("A priority must be specified for rule '%s'", pr.arn)
		}
		if c.defaultRuleOwnerLocked(pr.arn) != nil {
			return nil, elbErr("OperationNotPermitted", "The priority of default rule '%s' cannot be changed", pr.arn)
		}
		r := c.rules[pr.arn]
		if r == nil {
			return nil, errRuleNotFound()
		}
		if next[pr.arn] != nil {
			return nil, errValidation("Rule '%s' is given twice", pr.arn)
		}
		n := r.clone()
		n.Priority = pr.priority
		next[pr.arn] = n
	}
	// No two rules of a listener may share a priority once all are set.
	seen := map[string]string{}
	for _, r := range c.rules {
		if n := next[r.ARN]; n != nil {
			r = n
		}
		key := r.ListenerARN + "\x00" + strconv.Itoa(r.Priority)
		if _, dup := seen[key]; dup {
			return nil, elbErr("PriorityInUse", "Priority '%d' is currently in use", r.Priority)
		}
		seen[key] = r.ARN
	}
	var changes []change
	for a, n := range next {
		changes = append(changes, put(bucketRules, a, n))
	}
	if aerr := c.persist(changes...); aerr != nil {
		return nil, aerr
	}
	resp := &rulesResult{}
	for a, n := range next {
		c.rules[a] = n
	}
	for _, pr := range pairs {
		resp.Rules = append(resp.Rules, toXMLRule(next[pr.arn]))
	}
	c.syncLoadBalancersLocked()
	return resp, nil
}

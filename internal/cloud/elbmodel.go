package cloud

import (
	"slices"
	"time"
)

// LoadBalancer is an Application or Network Load Balancer.
type LoadBalancer struct {
	ARN            string    `json:"arn"`
	Name           string    `json:"name"`
	Type           string    `json:"type"` // application, network
	Scheme         string    `json:"scheme"`
	IPAddressType  string    `json:"ipAddressType"`
	DNSName        string    `json:"dnsName"`
	Subnets        []string  `json:"subnets"`
	SecurityGroups []string  `json:"securityGroups,omitempty"`
	State          string    `json:"state"` // provisioning, active, active_impaired, failed
	StateReason    string    `json:"stateReason,omitempty"`
	CreatedTime    time.Time `json:"createdTime"`
	// Address is the machine's loopback address the load balancer's listeners bind.
	Address    string            `json:"address"`
	Attributes map[string]string `json:"attributes,omitempty"`
	Tags       []Tag             `json:"tags,omitempty"`
}

// HealthCheck is a target group's health check.
type HealthCheck struct {
	Protocol string `json:"protocol"` // TCP, HTTP, HTTPS
	Port     string `json:"port"`     // "traffic-port" or a number
	Path     string `json:"path,omitempty"`
	Interval int    `json:"interval"` // seconds
	Timeout  int    `json:"timeout"`  // seconds
	Healthy  int    `json:"healthy"`
	Unhealth int    `json:"unhealthy"`
	Matcher  string `json:"matcher,omitempty"` // HTTP codes: "200", "200-299", "200,202"
}

// Target is a target registered with a target group and its last known health.
type Target struct {
	ID   string `json:"id"` // instance id or IP address
	Port int    `json:"port"`
	Zone string `json:"zone,omitempty"`
	// Health is initial, healthy, unhealthy or draining; Reason and Description are
	// AWS's reason code and text for it.
	Health      string    `json:"health"`
	Reason      string    `json:"reason,omitempty"`
	Description string    `json:"description,omitempty"`
	DrainUntil  time.Time `json:"drainUntil,omitzero"`
}

// TargetGroup is a target group.
type TargetGroup struct {
	ARN             string            `json:"arn"`
	Name            string            `json:"name"`
	Protocol        string            `json:"protocol"`
	ProtocolVersion string            `json:"protocolVersion,omitempty"`
	Port            int               `json:"port"`
	VPCID           string            `json:"vpcId"`
	TargetType      string            `json:"targetType"` // instance, ip
	HealthCheck     HealthCheck       `json:"healthCheck"`
	Attributes      map[string]string `json:"attributes,omitempty"`
	Targets         []Target          `json:"targets,omitempty"`
	Tags            []Tag             `json:"tags,omitempty"`
}

// Action is a listener's or rule's action.
type Action struct {
	Type  string `json:"type"` // forward, fixed-response
	Order int    `json:"order,omitempty"`
	// Forward are the target groups of a forward action with their weights.
	Forward    []WeightedTargetGroup `json:"forward,omitempty"`
	Stickiness *Stickiness           `json:"stickiness,omitempty"`
	Fixed      *FixedResponse        `json:"fixed,omitempty"`
}

// WeightedTargetGroup is one target group of a forward action.
type WeightedTargetGroup struct {
	ARN    string `json:"arn"`
	Weight int    `json:"weight"`
}

// Stickiness is a forward action's target group stickiness.
type Stickiness struct {
	Enabled  bool `json:"enabled"`
	Duration int  `json:"duration,omitempty"`
}

// FixedResponse is a fixed-response action's answer.
type FixedResponse struct {
	StatusCode  string `json:"statusCode"`
	ContentType string `json:"contentType,omitempty"`
	MessageBody string `json:"messageBody,omitempty"`
}

// Listener is a load balancer's listener.
type Listener struct {
	ARN             string   `json:"arn"`
	LoadBalancerARN string   `json:"loadBalancerArn"`
	Port            int      `json:"port"`
	Protocol        string   `json:"protocol"`
	DefaultActions  []Action `json:"defaultActions"`
	// DefaultRuleARN names the listener's default rule (DescribeRules shows it).
	DefaultRuleARN string `json:"defaultRuleArn"`
	Tags           []Tag  `json:"tags,omitempty"`
}

// Condition is a rule's condition: the values any of which may match the field.
type Condition struct {
	Field  string   `json:"field"` // host-header, path-pattern
	Values []string `json:"values"`
}

// Rule is a listener rule (not the default one).
type Rule struct {
	ARN         string      `json:"arn"`
	ListenerARN string      `json:"listenerArn"`
	Priority    int         `json:"priority"`
	Conditions  []Condition `json:"conditions"`
	Actions     []Action    `json:"actions"`
	Tags        []Tag       `json:"tags,omitempty"`
}

func (lb *LoadBalancer) clone() *LoadBalancer {
	out := *lb
	out.Subnets = slices.Clone(lb.Subnets)
	out.SecurityGroups = slices.Clone(lb.SecurityGroups)
	out.Tags = slices.Clone(lb.Tags)
	out.Attributes = cloneMap(lb.Attributes)
	return &out
}

func (tg *TargetGroup) clone() *TargetGroup {
	out := *tg
	out.Targets = slices.Clone(tg.Targets)
	out.Tags = slices.Clone(tg.Tags)
	out.Attributes = cloneMap(tg.Attributes)
	return &out
}

func (l *Listener) clone() *Listener {
	out := *l
	out.DefaultActions = cloneActions(l.DefaultActions)
	out.Tags = slices.Clone(l.Tags)
	return &out
}

func (r *Rule) clone() *Rule {
	out := *r
	out.Actions = cloneActions(r.Actions)
	out.Conditions = make([]Condition, len(r.Conditions))
	for i, cd := range r.Conditions {
		out.Conditions[i] = Condition{Field: cd.Field, Values: slices.Clone(cd.Values)}
	}
	out.Tags = slices.Clone(r.Tags)
	return &out
}

func cloneActions(as []Action) []Action {
	out := make([]Action, len(as))
	for i, a := range as {
		out[i] = a
		out[i].Forward = slices.Clone(a.Forward)
	}
	return out
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// targetGroupsOf lists the target groups the actions forward to.
func targetGroupsOf(actions []Action) []string {
	var out []string
	for _, a := range actions {
		for _, w := range a.Forward {
			out = append(out, w.ARN)
		}
	}
	return out
}

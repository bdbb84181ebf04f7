package loadbalancer

import "time"

// Spec is everything the data plane runs.
type Spec struct {
	LoadBalancers []LoadBalancer
	TargetGroups  []TargetGroup
}

// LoadBalancer is an active load balancer.
type LoadBalancer struct {
	ARN string
	// Type is "network" or "application".
	Type string
	// Addr is the IP address its listeners bind.
	Addr      string
	Listeners []Listener
	// HTTP is an application load balancer's behaviour.
	HTTP HTTPOptions
}

// HTTPOptions are an application load balancer's attributes that change its proxying.
type HTTPOptions struct {
	// IdleTimeout closes client connections idle that long (idle_timeout.timeout_seconds).
	IdleTimeout time.Duration
	// XFFMode is append, preserve or remove (routing.http.xff_header_processing.mode).
	XFFMode string
	// XFFClientPort adds the client's port to X-Forwarded-For (routing.http.xff_client_port.enabled).
	XFFClientPort bool
	// HTTP2 accepts HTTP/2 from clients (routing.http2.enabled).
	HTTP2 bool
}

// Listener is a listener: its port, protocol (TCP, UDP, TCP_UDP, HTTP) and rules in the
// order they are evaluated, the default rule (no conditions) last.
type Listener struct {
	ARN      string
	Port     int
	Protocol string
	Rules    []Rule
}

// Rule is a rule: all its conditions must match.
type Rule struct {
	Conditions []Condition
	Action     Action
}

// Condition matches a request when any of its values does.
type Condition struct {
	// Field is host-header or path-pattern.
	Field  string
	Values []string
}

// Action is a rule's action: a fixed response, or forward to target groups by weight.
type Action struct {
	Forward []WeightedTargetGroup
	Fixed   *FixedResponse
}

// WeightedTargetGroup is one target group of a forward action.
type WeightedTargetGroup struct {
	ARN    string
	Weight int
}

// FixedResponse is a fixed-response action's answer.
type FixedResponse struct {
	StatusCode  int
	ContentType string
	Body        string
}

// TargetGroup is a target group that a load balancer forwards to.
type TargetGroup struct {
	ARN         string
	HealthCheck HealthCheck
	// MinHealthy is how many targets must be healthy for the group to route to healthy
	// targets only; below it routes to all (at least 1).
	MinHealthy int
	Targets    []Target
}

// HealthCheck is a target group's health check, with the durations it really takes.
type HealthCheck struct {
	// Protocol is TCP or HTTP.
	Protocol string
	// Port is the port checked; 0 means the target's traffic port.
	Port              int
	Path              string
	Interval, Timeout time.Duration
	Healthy           int
	Unhealthy         int
	// Matcher is an HTTP code matcher ("200", "200-299", "200,202").
	Matcher string
}

// Target is a registered target that may receive traffic.
type Target struct {
	// Key names the target in its group (id:port) for OnHealth.
	Key string
	// Addr is where traffic goes (ip:port).
	Addr string
	// Health is the target's last known health; the plane starts from it.
	Health Health
}

// Health is a target's health with ELB's reason code and description.
type Health struct {
	// State is initial, healthy or unhealthy.
	State       string
	Reason      string
	Description string
}

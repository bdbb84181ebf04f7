package cloudprovider

import (
	"context"
	"errors"
	"slices"
)

// ErrLoadBalancerNotFound is what LoadBalancers answers for a name the cloud has no load
// balancer of.
var ErrLoadBalancerNotFound = errors.New("load balancer not found")

// Load balancer types and schemes, in ELB's words.
const (
	TypeNetwork        = "network"
	TypeApplication    = "application"
	SchemeInternet     = "internet-facing"
	SchemeInternal     = "internal"
	TargetTypeInstance = "instance"
	TargetTypeIP       = "ip"
)

// LoadBalancer is the desired state of one load balancer, as a controller derives it from
// the objects it serves: its listeners, each with its target groups, their health checks
// and targets. Ensuring it makes the cloud match it and deletes what of the load balancer
// it does not name.
type LoadBalancer struct {
	// Name is the load balancer's name (1–32 characters, letters, digits and hyphens).
	Name string
	// Type is TypeNetwork or TypeApplication; Scheme SchemeInternet or SchemeInternal.
	Type, Scheme string
	// Tags go on the load balancer and on its target groups.
	Tags map[string]string
	// Listeners, one per port.
	Listeners []Listener
}

// Listener is a port of a load balancer and where its traffic goes.
type Listener struct {
	// Protocol is TCP or UDP (network), HTTP (application).
	Protocol string
	Port     int32
	// Default is the target group of the listener's default action; nil on an
	// application load balancer answers 404 with a fixed response.
	Default *TargetGroup
	// Rules are an application load balancer's rules, evaluated by Priority.
	Rules []Rule
}

// Rule forwards the requests matching all its conditions to TargetGroup.
type Rule struct {
	Priority int32
	// Hosts are host-header values, Paths path-pattern values; an empty one matches all.
	Hosts, Paths []string
	TargetGroup  TargetGroup
}

// TargetGroup is a target group and its targets. Its name is fixed by what cannot change
// on a target group (protocol, port, target type): a change of those makes a new group.
type TargetGroup struct {
	Name       string
	Protocol   string
	Port       int32
	TargetType string
	Health     HealthCheck
	Targets    []Target
}

// HealthCheck is a target group's health check; zero fields take the cloud's defaults.
type HealthCheck struct {
	// Protocol is TCP or HTTP; Port "traffic-port" or a number.
	Protocol, Port, Path                  string
	Interval, Timeout, Healthy, Unhealthy int32
}

// Target is an instance id or a private IP address, and the port it receives traffic
// on.
type Target struct {
	ID   string
	Port int32
}

// Status is what the cloud reports of a load balancer.
type Status struct {
	ARN     string
	DNSName string
	// Address is the load balancer's first address (public, or private when internal).
	Address string
	// State is provisioning, active, failed.
	State string
}

// LoadBalancers manages load balancers by name.
type LoadBalancers interface {
	// EnsureLoadBalancer creates lb or updates the cloud's to match it.
	EnsureLoadBalancer(ctx context.Context, lb *LoadBalancer) (*Status, error)
	// GetLoadBalancer is the load balancer of name; ErrLoadBalancerNotFound when none.
	GetLoadBalancer(ctx context.Context, name string) (*Status, error)
	// DeleteLoadBalancer deletes the load balancer of name and its target groups; a gone
	// one is no error.
	DeleteLoadBalancer(ctx context.Context, name string) error
}

// EqualTargets is whether two target lists hold the same targets, in any order.
func EqualTargets(a, b []Target) bool {
	if len(a) != len(b) {
		return false
	}
	for _, t := range a {
		if !slices.Contains(b, t) {
			return false
		}
	}
	return true
}

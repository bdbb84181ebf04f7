// Package loadbalancer is the data plane of the cloud's Elastic Load Balancing: the load
// balancers' nodes, which accept clients' connections on the load balancers' addresses
// and carry them to healthy targets, and the health checks that decide which targets are
// healthy.
//
// The cloud (package cloud) keeps the API's state and hands the plane what must run with
// Apply(Spec): every active load balancer with its address, listeners and rules, and the
// target groups they forward to with each target's address and last known health. Apply
// binds the listeners that are new, closes those that are gone (and their connections),
// and starts and stops health checks; routing changes take effect for the next
// connection or request. Targets are reached through Config.Dial (the VPC's network in a
// cluster, a plain dialer in tests); health changes are reported through Config.OnHealth.
//
// A network load balancer's listener proxies TCP connections (TCP, TCP_UDP) and UDP
// flows (UDP, TCP_UDP; a flow is a client address, idle for 120 s at most) to one target
// each. An application load balancer's listener is an HTTP/1.1 and HTTP/2 (cleartext,
// prior knowledge) reverse proxy: it evaluates the listener's rules in order (host-header
// and path-pattern conditions with the wildcards * and ?; all conditions of a rule must
// match, any value of a condition may), and answers a fixed response or forwards to a
// target of a target group (picked by weight) with X-Forwarded-For, X-Forwarded-Proto,
// X-Forwarded-Port and X-Amzn-Trace-Id set as an ALB sets them.
//
// Targets are picked round robin among the healthy ones. When fewer targets are healthy
// than the group's minimum (target_group_health.unhealthy_state_routing.
// minimum_healthy_targets.count, 1 by default), the load balancer routes to all its
// targets whatever their health, as ELB documents for both ALBs and NLBs ("fail open");
// a target still in its initial health checks counts as not healthy.
//
// Health checks run per target at the group's interval, each with its timeout: a TCP
// connect, or an HTTP GET of the path whose status must satisfy the matcher. A target
// becomes healthy after HealthyThreshold consecutive successes and unhealthy after
// UnhealthyThreshold consecutive failures, with ELB's reason codes.
package loadbalancer

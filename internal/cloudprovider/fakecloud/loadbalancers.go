package fakecloud

import (
	"context"
	"fmt"

	"github.com/kubelab/kubelab/internal/cloudprovider"
)

// LoadBalancers holds load balancers' desired states by name, as the cloud would after
// ensuring them; the zero value is empty and ready.
type LoadBalancers struct {
	Cloud
	lbs map[string]*cloudprovider.LoadBalancer
	// fail, when set, is the error every call answers.
	fail error
}

// Fail makes every call answer err (nil: succeed again).
func (c *LoadBalancers) Fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fail = err
}

// Get is a copy of the load balancer of name as last ensured, nil when none.
func (c *LoadBalancers) Get(name string) *cloudprovider.LoadBalancer {
	c.mu.Lock()
	defer c.mu.Unlock()
	lb := c.lbs[name]
	if lb == nil {
		return nil
	}
	cp := *lb
	return &cp
}

func (c *LoadBalancers) count(method string) {
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[method]++
}

func fakeStatus(name string) *cloudprovider.Status {
	return &cloudprovider.Status{ARN: "arn:aws:elasticloadbalancing:us-east-1:000000000000:loadbalancer/" + name,
		DNSName: name + ".elb.example", Address: "127.128.0.1", State: "active"}
}

// EnsureLoadBalancer stores lb.
func (c *LoadBalancers) EnsureLoadBalancer(_ context.Context, lb *cloudprovider.LoadBalancer) (*cloudprovider.Status, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("EnsureLoadBalancer")
	if c.fail != nil {
		return nil, fmt.Errorf("ensure %s: %w", lb.Name, c.fail)
	}
	if c.lbs == nil {
		c.lbs = map[string]*cloudprovider.LoadBalancer{}
	}
	cp := *lb
	c.lbs[lb.Name] = &cp
	return fakeStatus(lb.Name), nil
}

// GetLoadBalancer answers the status of a stored load balancer.
func (c *LoadBalancers) GetLoadBalancer(_ context.Context, name string) (*cloudprovider.Status, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("GetLoadBalancer")
	if c.fail != nil {
		return nil, c.fail
	}
	if c.lbs[name] == nil {
		return nil, cloudprovider.ErrLoadBalancerNotFound
	}
	return fakeStatus(name), nil
}

// DeleteLoadBalancer forgets a load balancer.
func (c *LoadBalancers) DeleteLoadBalancer(_ context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.count("DeleteLoadBalancer")
	if c.fail != nil {
		return c.fail
	}
	delete(c.lbs, name)
	return nil
}

var _ cloudprovider.LoadBalancers = (*LoadBalancers)(nil)

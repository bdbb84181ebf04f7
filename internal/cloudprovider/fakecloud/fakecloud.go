// Package fakecloud is an in-memory cloudprovider for the cloud-controller-manager's
// tests: instances by id, each running, stopped or gone, and (LoadBalancers) load
// balancers by name.
package fakecloud

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/kubelab/kubelab/internal/cloudprovider"
)

// Instance is one instance of the fake cloud.
type Instance struct {
	ID, Zone, Type, PrivateIP, PrivateDNS string
	Stopped                               bool
}

// Cloud holds instances; the zero value is empty and ready.
type Cloud struct {
	mu        sync.Mutex
	instances map[string]Instance
	// Calls counts the questions asked, by method.
	calls map[string]int
}

// Put adds or replaces an instance.
func (c *Cloud) Put(i Instance) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.instances == nil {
		c.instances = map[string]Instance{}
	}
	c.instances[i.ID] = i
}

// Remove makes an instance gone, as a terminated one.
func (c *Cloud) Remove(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.instances, id)
}

// Calls is how many times method was asked.
func (c *Cloud) Calls(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

func (c *Cloud) find(method string, node *corev1.Node) (Instance, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[string]int{}
	}
	c.calls[method]++
	if node.Spec.ProviderID != "" {
		id, err := cloudprovider.ParseProviderID(node.Spec.ProviderID)
		i, ok := c.instances[id]
		return i, ok && err == nil
	}
	for _, i := range c.instances {
		if i.PrivateDNS == node.Name {
			return i, true
		}
	}
	return Instance{}, false
}

// InstanceMetadata answers from the instance's fields.
func (c *Cloud) InstanceMetadata(_ context.Context, node *corev1.Node) (*cloudprovider.Metadata, error) {
	i, ok := c.find("InstanceMetadata", node)
	if !ok {
		return nil, cloudprovider.ErrInstanceNotFound
	}
	return &cloudprovider.Metadata{ProviderID: cloudprovider.ProviderID(i.Zone, i.ID), InstanceType: i.Type, Zone: i.Zone,
		Region: cloudprovider.Region(i.Zone), Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: i.PrivateIP},
			{Type: corev1.NodeInternalDNS, Address: i.PrivateDNS},
			{Type: corev1.NodeHostName, Address: i.PrivateDNS}}}, nil
}

// InstanceExists is whether the instance is there.
func (c *Cloud) InstanceExists(_ context.Context, node *corev1.Node) (bool, error) {
	_, ok := c.find("InstanceExists", node)
	return ok, nil
}

// InstanceShutdown is whether the instance is stopped.
func (c *Cloud) InstanceShutdown(_ context.Context, node *corev1.Node) (bool, error) {
	i, ok := c.find("InstanceShutdown", node)
	if !ok {
		return false, cloudprovider.ErrInstanceNotFound
	}
	return i.Stopped, nil
}

var _ cloudprovider.Instances = (*Cloud)(nil)

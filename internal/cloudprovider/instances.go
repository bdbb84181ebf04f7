package cloudprovider

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ErrInstanceNotFound is what Instances answers for a node whose instance the cloud
// does not have (or has terminated).
var ErrInstanceNotFound = errors.New("instance not found")

// Metadata is what the cloud knows of a node's instance.
type Metadata struct {
	// ProviderID is aws:///<zone>/<instance-id>.
	ProviderID   string
	InstanceType string
	Zone, Region string
	// Addresses are the instance's: InternalIP, InternalDNS and Hostname (its private
	// DNS name), in that order.
	Addresses []corev1.NodeAddress
}

// Instances answers about the instance behind a Node.
type Instances interface {
	// InstanceMetadata is the node's instance; ErrInstanceNotFound when there is none.
	InstanceMetadata(ctx context.Context, node *corev1.Node) (*Metadata, error)
	// InstanceExists is false once the node's instance is gone (terminated or unknown).
	InstanceExists(ctx context.Context, node *corev1.Node) (bool, error)
	// InstanceShutdown is true while the node's instance is stopping or stopped.
	InstanceShutdown(ctx context.Context, node *corev1.Node) (bool, error)
}

// ParseProviderID splits aws:///<zone>/<instance-id> (or aws:///<instance-id>) into the
// instance id.
func ParseProviderID(id string) (string, error) {
	rest, ok := strings.CutPrefix(id, "aws://")
	if !ok {
		return "", fmt.Errorf("provider id %q: not aws://", id)
	}
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	inst := parts[len(parts)-1]
	if !strings.HasPrefix(inst, "i-") || len(parts) > 2 {
		return "", fmt.Errorf("provider id %q: want aws:///<zone>/<instance-id>", id)
	}
	return inst, nil
}

// ProviderID is the provider id of instance id in zone.
func ProviderID(zone, id string) string { return "aws:///" + zone + "/" + id }

// Region is the region of an availability zone: us-east-1a → us-east-1.
func Region(zone string) string {
	if n := len(zone); n > 0 && zone[n-1] >= 'a' && zone[n-1] <= 'z' {
		return zone[:n-1]
	}
	return zone
}

package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// A real node is the machine of its EC2 instance: when the cloud stops or terminates the
// instance, the node powers off — its components stop, its containers die with its
// containerd, its mounts, network namespace and cgroups go — and when a stopped instance
// starts again, the node boots again with its components. The kubelet stops heartbeating,
// so the node turns NotReady, and the cloud-controller-manager taints (stopped) or deletes
// (terminated) its Node.

// powerPollInterval is how often the instances' states are read.
const powerPollInterval = time.Second

// instancePowered tells whether an instance in state s runs its machine.
func instancePowered(s ec2types.InstanceStateName) bool {
	return s == ec2types.InstanceStateNamePending || s == ec2types.InstanceStateNameRunning
}

// runInstancePower follows the real nodes' instances through the EC2 API and powers their
// nodes off and on with them.
func (c *Cluster) runInstancePower(ctx context.Context) error {
	client, err := c.ec2Client(ctx)
	if err != nil {
		return fmt.Errorf("instance power: ec2 client: %w", err)
	}
	byID := map[string]Node{}
	var ids []string
	for _, n := range c.nodes {
		byID[n.InstanceID] = n
		ids = append(ids, n.InstanceID)
	}
	on := map[string]bool{}
	for _, id := range ids {
		on[id] = true
	}
	log := c.cfg.Logger.With("component", "instance-power")
	t := time.NewTicker(powerPollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		states, err := instanceStates(ctx, client, ids)
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("read the nodes' instances", "err", err)
			}
			continue
		}
		for _, id := range ids {
			n, s := byID[id], states[id]
			switch want := instancePowered(s); {
			case on[id] && !want:
				log.Info("the node's instance left running: powering the node off", "node", n.Name, "instance", id, "state", s)
				if err := c.powerOff(ctx, n); err != nil {
					log.Error("power the node off", "node", n.Name, "err", err)
				}
				on[id] = false
			case !on[id] && want:
				log.Info("the node's instance runs again: booting the node", "node", n.Name, "instance", id)
				if err := c.powerOn(ctx, n); err != nil {
					log.Error("boot the node", "node", n.Name, "err", err)
					continue
				}
				on[id] = true
			}
		}
	}
}

// instanceStates reads the states of instances ids; an instance the cloud no longer
// knows is terminated.
func instanceStates(ctx context.Context, client *ec2.Client, ids []string) (map[string]ec2types.InstanceStateName, error) {
	out := map[string]ec2types.InstanceStateName{}
	for _, id := range ids {
		out[id] = ec2types.InstanceStateNameTerminated
	}
	resp, err := client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: ids})
	var ae smithy.APIError
	if errors.As(err, &ae) && ae.ErrorCode() == "InvalidInstanceID.NotFound" {
		return out, nil
	}
	if err != nil {
		return nil, err
	}
	for _, r := range resp.Reservations {
		for _, i := range r.Instances {
			if i.InstanceId != nil && i.State != nil {
				out[*i.InstanceId] = i.State.Name
			}
		}
	}
	return out, nil
}

// nodeUnitsOf are node's components in start order.
func (c *Cluster) nodeUnitsOf(node string) []*unit {
	v, ok := c.nodeUnits.Load(node)
	if !ok {
		return nil
	}
	return v.([]*unit)
}

// powerOff stops node n's components, last started first (its containerd tears its pods
// down), and tears the node down.
func (c *Cluster) powerOff(ctx context.Context, n Node) error {
	units := c.nodeUnitsOf(n.Name)
	var errs []error
	for i := len(units) - 1; i >= 0; i-- {
		if err := units[i].send(ctx, false); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return c.tearDownNode(ctx, n)
}

// powerOn makes node n's machine again and starts its components.
func (c *Cluster) powerOn(ctx context.Context, n Node) error {
	if _, err := c.prepareNode(n); err != nil {
		return err
	}
	for _, u := range c.nodeUnitsOf(n.Name) {
		if err := u.send(ctx, true); err != nil {
			return err
		}
	}
	return nil
}

package cluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kubelab/kubelab/internal/ipamd"
	"github.com/kubelab/kubelab/internal/vpc"
)

// The VPC pod network (Config.PodNetwork "vpc"): each real node runs aws-node's IP
// address manager as a process of kubelab, as the overlay agent runs in overlay mode.
// Its checkpoint is <node dir>/aws-node/ipam.json, its API socket <node run dir>/
// aws-node/ipamd.sock, which the node's conflist names. Its warm pool follows
// WARM_ENI_TARGET, WARM_IP_TARGET, MINIMUM_IP_TARGET and IP_COOLDOWN_PERIOD in kubelab's
// environment, as aws-node reads them from its DaemonSet's.

// awsNodeDir is node n's aws-node state.
func (c *Cluster) awsNodeDir(n Node) string { return filepath.Join(c.nodeDir(n), "aws-node") }

// ipamdSocket is node n's IP address manager's API socket.
func (c *Cluster) ipamdSocket(n Node) string {
	return filepath.Join(c.nodeRunDir(n), "aws-node", ipamd.SocketFile)
}

// runAWSNode runs node n's IP address manager over the cloud's EC2 API, in the node's
// network namespace netns.
func (c *Cluster) runAWSNode(n Node, netns string) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		targets, cooldown, err := ipamd.EnvTargets(os.Getenv)
		if err != nil {
			return fmt.Errorf("aws-node %s: %w", n.Name, err)
		}
		client, err := c.ec2Client(ctx)
		if err != nil {
			return fmt.Errorf("aws-node %s: ec2 client: %w", n.Name, err)
		}
		m, err := ipamd.New(ipamd.Config{NodeName: n.Name, InstanceID: n.InstanceID, NetNS: netns,
			Dir: c.awsNodeDir(n), Socket: c.ipamdSocket(n),
			VPCCIDR: netip.MustParsePrefix(vpc.CIDR), RouterIP: netip.MustParseAddr(vpc.RouterIP),
			Targets: targets, IPCooldown: cooldown,
			Logger: c.componentLogger("aws-node/"+n.Name, "component", "aws-node", "node", n.Name)}, client)
		if err != nil {
			return err
		}
		return m.Run(ctx)
	}
}

// nodeCapacity is node n's capacity: Config.NodeCapacity, with max pods by EKS's formula
// for the instance's type in VPC mode (the type's limits from DescribeInstanceTypes).
func (c *Cluster) nodeCapacity(ctx context.Context, n Node) (corev1.ResourceList, error) {
	if !c.cfg.vpcPods() {
		return c.cfg.NodeCapacity, nil
	}
	typ := n.InstanceType
	if typ == "" {
		typ = c.cfg.InstanceType
	}
	client, err := c.ec2Client(ctx)
	if err != nil {
		return nil, fmt.Errorf("node %s: ec2 client: %w", n.Name, err)
	}
	lim, err := ipamd.InstanceTypeLimits(ctx, client, typ)
	if err != nil {
		return nil, fmt.Errorf("node %s: max pods: %w", n.Name, err)
	}
	out := corev1.ResourceList{}
	for k, v := range c.cfg.NodeCapacity {
		out[k] = v
	}
	out[corev1.ResourcePods] = *resource.NewQuantity(int64(ipamd.MaxPods(lim)), resource.DecimalSI)
	return out, nil
}

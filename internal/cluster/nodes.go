package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubelab/kubelab/internal/cloud"
)

// tagNodeSlot names the node an instance was launched for, so that a cluster started
// again on the same data dir finds its nodes' instances instead of launching new ones.
const tagNodeSlot = "kubelab.dev/node-slot"

// nodeZone is the zone of node slot i: round-robin over the zones.
func nodeZone(zones []string, i int) string { return zones[i%len(zones)] }

// slotDeviceDir is the device dir of node slot i's instance.
func slotDeviceDir(dataDir string, i int) string {
	return filepath.Join(dataDir, "nodes", fmt.Sprintf("slot-%d", i), "dev")
}

// ec2Client is an AWS SDK client of the cluster's cloud, set up as any AWS user's is:
// endpoint, config and credentials files.
func (c *Cluster) ec2Client(ctx context.Context) (*ec2.Client, error) {
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx,
		awsconfig.WithEC2IMDSClientEnableState(imds.ClientDisabled),
		awsconfig.WithSharedConfigFiles([]string{c.cloud.ConfigFile()}),
		awsconfig.WithSharedCredentialsFiles([]string{c.cloud.CredentialsFile()}))
	if err != nil {
		return nil, err
	}
	return ec2.NewFromConfig(awsCfg, func(o *ec2.Options) { o.BaseEndpoint = aws.String(c.cloud.Endpoint()) }), nil
}

// ensureInstances finds or launches one running instance per node slot through the EC2
// API and names each node after its instance's private DNS name, as EKS does.
func (c *Cluster) ensureInstances(ctx context.Context) ([]Node, error) {
	if c.cfg.Nodes == 0 {
		return nil, nil
	}
	client, err := c.ec2Client(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster: ec2 client: %w", err)
	}
	existing, err := c.slotInstances(ctx, client)
	if err != nil {
		return nil, err
	}
	if !c.cfg.Hollow {
		if err := ensureNodeRole(ctx, c.iamClient()); err != nil {
			return nil, err
		}
		if err := adoptNodeIdentity(ctx, client, existing); err != nil {
			return nil, err
		}
	}
	for slot, inst := range existing {
		if slot >= c.cfg.Nodes {
			c.cfg.Logger.Warn("an instance of an earlier, larger cluster is left running without a kubelet; its node stays NotReady",
				"slot", slot, "instance", aws.ToString(inst.InstanceId), "node", aws.ToString(inst.PrivateDnsName),
				"remove", "aws ec2 terminate-instances --instance-ids "+aws.ToString(inst.InstanceId)+" and kubectl delete node "+aws.ToString(inst.PrivateDnsName))
		}
	}
	// The missing instances are launched a few at a time: one by one, each waiting to
	// run, thousands of hollow nodes took minutes.
	launched := make([]ec2types.Instance, c.cfg.Nodes)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(launchParallel)
	for i := range launched {
		if _, ok := existing[i]; ok {
			continue
		}
		g.Go(func() error {
			inst, err := c.launch(gctx, client, i)
			launched[i] = inst
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	nodes := make([]Node, c.cfg.Nodes)
	for i := range nodes {
		inst, ok := existing[i]
		if !ok {
			inst = launched[i]
		}
		nodes[i] = Node{Name: aws.ToString(inst.PrivateDnsName), Zone: aws.ToString(inst.Placement.AvailabilityZone),
			InstanceID: aws.ToString(inst.InstanceId), InstanceType: string(inst.InstanceType), IP: aws.ToString(inst.PrivateIpAddress), DeviceDir: slotDeviceDir(c.cfg.DataDir, i)}
		if len(inst.NetworkInterfaces) > 0 {
			nodes[i].MAC = aws.ToString(inst.NetworkInterfaces[0].MacAddress)
		}
		for _, t := range inst.Tags {
			if aws.ToString(t.Key) == cloud.TagDeviceDir {
				nodes[i].DeviceDir = aws.ToString(t.Value)
			}
		}
	}
	return nodes, nil
}

// launchParallel is how many instances ensureInstances launches at once.
const launchParallel = 16

// slotInstances maps node slots to their pending or running instances.
func (c *Cluster) slotInstances(ctx context.Context, client *ec2.Client) (map[int]ec2types.Instance, error) {
	out := map[int]ec2types.Instance{}
	p := ec2.NewDescribeInstancesPaginator(client, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag-key"), Values: []string{tagNodeSlot}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running"}},
	}})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("cluster: describe instances: %w", err)
		}
		for _, r := range page.Reservations {
			for _, inst := range r.Instances {
				for _, t := range inst.Tags {
					if aws.ToString(t.Key) != tagNodeSlot {
						continue
					}
					if i, err := strconv.Atoi(aws.ToString(t.Value)); err == nil {
						out[i] = inst
					}
				}
			}
		}
	}
	return out, nil
}

// launch runs the instance of node slot i in its zone and waits until it runs. Its
// attached volumes appear under the node's device dir. A real node's instance has the
// nodes' instance profile and requires IMDSv2 with a hop limit of 1 (noderole.go).
func (c *Cluster) launch(ctx context.Context, client *ec2.Client, i int) (ec2types.Instance, error) {
	zone := nodeZone(c.cfg.Zones, i)
	deviceDir := slotDeviceDir(c.cfg.DataDir, i)
	in := &ec2.RunInstancesInput{
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1), InstanceType: ec2types.InstanceType(c.cfg.InstanceType),
		Placement: &ec2types.Placement{AvailabilityZone: aws.String(zone)},
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: []ec2types.Tag{
			{Key: aws.String("Name"), Value: aws.String(fmt.Sprintf("kubelab-node-%d", i))},
			{Key: aws.String(tagNodeSlot), Value: aws.String(strconv.Itoa(i))},
			{Key: aws.String(cloud.TagDeviceDir), Value: aws.String(deviceDir)},
		}}},
	}
	if !c.cfg.Hollow {
		in.IamInstanceProfile = &ec2types.IamInstanceProfileSpecification{Name: aws.String(NodeRole)}
		in.MetadataOptions = nodeMetadataOptions()
	}
	out, err := client.RunInstances(ctx, in)
	if err != nil {
		return ec2types.Instance{}, fmt.Errorf("cluster: run instance for node %d in %s: %w", i, zone, err)
	}
	if len(out.Instances) != 1 {
		return ec2types.Instance{}, fmt.Errorf("cluster: run instance for node %d in %s: %d instances returned, want 1", i, zone, len(out.Instances))
	}
	id := aws.ToString(out.Instances[0].InstanceId)
	var inst ec2types.Instance
	var last error
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := client.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err != nil || len(d.Reservations) == 0 || len(d.Reservations[0].Instances) == 0 {
			last = err
			return false, nil
		}
		inst = d.Reservations[0].Instances[0]
		if inst.State == nil {
			return false, nil
		}
		switch inst.State.Name {
		case ec2types.InstanceStateNameRunning:
			return true, nil
		case ec2types.InstanceStateNamePending:
			return false, nil
		}
		return false, fmt.Errorf("it is %s", inst.State.Name)
	})
	if err != nil {
		return ec2types.Instance{}, fmt.Errorf("cluster: instance %s of node %d not running (last error: %v): %w", id, i, last, err)
	}
	return inst, nil
}

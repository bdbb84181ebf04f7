// Package ipamd is a real node's IP address manager in VPC mode, in the role of aws-node's
// ipamd: the half of the step "CNI gives the pod an IP" that gets the node's pods
// addresses of the VPC. Each pod gets a secondary private IP of one of its node's ENIs.
//
// One Manager runs per node, as a process of the machine (the node's instance is
// Config.InstanceID). At start it reads its instance's type, subnet and security groups
// (DescribeInstances, DescribeSubnets), the type's limits (DescribeInstanceTypes:
// MaximumNetworkInterfaces, Ipv4AddressesPerInterface) and the ENIs attached to it with
// their addresses (DescribeNetworkInterfaces, filter attachment.instance-id), and restores
// which pod holds which address from its checkpoint, Dir/ipam.json (aws-node's format,
// version "vpc-cni-ipam/1", replaced atomically after every change but not synced: it
// outlives the process, not the machine, as the pods it records): an entry whose address
// the cloud no longer has on the instance is dropped (logged), every other one is kept,
// and an address a pod holds is never given back.
//
// The warm pool (Decide, a pure function) follows aws-node's settings (EnvTargets reads
// them from the environment): with WARM_IP_TARGET or MINIMUM_IP_TARGET set, the node holds
// max(in use + WARM_IP_TARGET, MINIMUM_IP_TARGET) addresses; otherwise WARM_ENI_TARGET (1
// when unset) whole ENIs' worth are kept free, every attached ENI filled to its limit.
// More addresses come from AssignPrivateIpAddresses on ENIs with room; when they are full
// a new ENI is created in the instance's subnet (described "aws-K8S-<instance>", tagged
// node.k8s.amazonaws.com/instance_id, node.k8s.amazonaws.com/createdAt, eks:eni:owner
// and, with ClusterName, cluster.k8s.amazonaws.com/name), attached at the lowest free
// device index and set DeleteOnTermination (ModifyNetworkInterfaceAttribute); never more
// than the type allows. A surplus is given back (UnassignPrivateIpAddresses, or a whole
// unused secondary ENI detached and deleted) once its addresses' cooldown
// (IP_COOLDOWN_PERIOD, 30 s) since their last pod left is over; a released address is
// not given to another pod within its cooldown either. The pool is reconsidered after
// every ADD and DEL and every PoolPeriod, and compared with the cloud every ResyncPeriod.
//
// In the node's network namespace the manager brings up each secondary ENI's interface
// (found by its MAC), gives it its primary address without a route in main unless it
// has it, and fills its route table device+1 with the VPC router on-link and a default
// route via it; it sets loose reverse-path filtering, the rule "fwmark 0x80/0x80 lookup main"
// (priority 1024) and the table kubelab-aws-snat: pod packets (from host veths "eni…")
// for outside the VPC are marked 0x80, so they leave by eth0, and SNATed there to the
// node's primary address. The pods' own veths, routes and rules are the CNI plugin's.
//
// API (package ipamdapi): HTTP on the unix socket Config.Socket (Dir/ipamd.sock). ADD gives an attachment
// the address it holds or a free one (of a ready ENI, the lowest device first), waiting up
// to AddTimeout while the pool gets more; when every address the type allows is in use it
// fails at once with NoAvailableIP. DEL, lookup and GC release, report and collect.
//
// Contract: New(cfg, ec2) then Run(ctx), which returns when ctx ends; Started is closed
// once the API serves. MaxPods is EKS's max pods of an instance type.
package ipamd

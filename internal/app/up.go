package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/kubelab/kubelab/internal/cluster"
	"github.com/kubelab/kubelab/internal/util/logging"
)

// newUpCommand runs the whole cluster: etcd, the API server, the cloud, the CSI driver's
// controller and sidecars, the controller-manager, the scheduler and the nodes, each
// reaching the others only over its wire.
func newUpCommand() *cobra.Command {
	f := &controlPlaneFlags{}
	var (
		cfg      cluster.Config
		zones    string
		logLevel string
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Run a kubelab cluster on this machine (Ctrl-C stops it)",
		Long: `Run a kubelab cluster on this machine until Ctrl-C: embedded etcd, the API server,
the EC2/EBS-compatible cloud, the CSI driver ebs.csi.aws.com's controller with its
sidecars (provisioner, attacher, resizer, snapshotter), the controller-manager, the
scheduler and the nodes. The cluster starts with the CSIDriver object and the
StorageClasses gp2 (the default, as EKS with the EBS CSI add-on has it), gp3 and standard,
all WaitForFirstConsumer.

Nodes are real by default (root): each node is an EC2 instance of the cloud with its own
containerd and runc, the CSI node plugin with its registrar, a kubelet and a CNI bridge;
volumes are loop devices formatted and mounted for real, images come from kubelab's
local registry (pause, busybox and nginx built at start; 'kubelab image import' adds
more), and any other image from the registry it names, fetched once by kubelab's
registry and cached in the data dir (through HTTPS_PROXY when set; private registries
with the pods' imagePullSecrets or your own docker login). --offline keeps the nodes to
kubelab's registry. --hollow runs the cloud without loop devices and the nodes with the hollow
kubelet (a fake container runtime and mounter); no root is needed.

It prints "kubelab is up (in <time>)" once a user's first commands work: every node Ready,
the ServiceAccount default in namespace default, the EBS CSI add-on's pods Ready and, with
real nodes, cluster DNS answering from the nodes.

The components log to stderr in klog's text format, as the Kubernetes components do
(--log-format json: one JSON object per line), at --log-level.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			started := time.Now()
			if err := needsRoot(cfg.Hollow, os.Geteuid()); err != nil {
				return err
			}
			level, err := logging.ParseLevel(logLevel)
			if err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			// Components that log through the default logger, and the Kubernetes libraries
			// that log through klog, follow --log-level and --log-format too.
			if cfg.Logger, err = setupLogging(cmd, level); err != nil {
				return err
			}
			cp, err := f.config()
			if err != nil {
				return err
			}
			cfg.ControlPlaneConfig = cp
			if zones != "" {
				cfg.Zones = strings.Split(zones, ",")
			}
			if cfg.Offline && !cfg.Hollow {
				fmt.Fprintln(cmd.OutOrStdout(), offlineNotice)
			}
			cfg.Progress = func(step string) { fmt.Fprintln(cmd.OutOrStdout(), "up: "+step) }
			cfg.HostsFile = hostsFileFor(cfg.Hollow, os.Geteuid())
			release, err := lockDataDir(cfg.DataDir)
			if err != nil {
				return err
			}
			defer release()
			c, err := cluster.New(cfg)
			if err != nil {
				return err
			}
			g, ctx := errgroup.WithContext(cmd.Context())
			g.Go(func() error { return c.Run(ctx) })
			g.Go(func() error {
				select {
				case <-c.Ready():
				case <-ctx.Done():
					return nil
				}
				printUp(cmd, c, time.Since(started))
				return nil
			})
			return g.Wait()
		},
	}
	f.register(cmd)
	fs := cmd.Flags()
	fs.BoolVar(&cfg.Hollow, "hollow", false, "hollow cloud and nodes (no loop devices, fake runtime and mounter; no root needed)")
	fs.BoolVar(&cfg.CSIInProcess, "csi-in-process", false, "run the EBS CSI add-on inside kubelab (shown as mirror pods, as on hollow nodes) instead of as the pods of kube-system/ebs-csi-controller and ebs-csi-node")
	fs.IntVar(&cfg.Nodes, "nodes", 0, "number of nodes, spread over the zones (default: one per zone)")
	fs.StringVar(&cfg.PodNetwork, "pod-network", "overlay", "how real nodes' pods get their addresses: overlay (the node's podCIDR on its pod bridge, nodes joined by --overlay) or vpc (secondary private IPs of the node's ENIs, as the AWS VPC CNI gives them; max pods by the instance type's ENI limits)")
	fs.StringVar(&cfg.OverlayMode, "overlay", "vxlan", "in the overlay pod network, how real nodes reach each other's pod subnets: vxlan (an overlay over the VPC) or direct (routes via the nodes' VPC addresses)")
	fs.StringVar(&cfg.InstanceType, "instance-type", "m5.large", "instance type of the nodes' instances (its ENI limits set max pods in the vpc pod network)")
	fs.StringVar(&cfg.Region, "region", "us-east-1", "the cloud's region")
	fs.StringVar(&zones, "zones", "", "comma-separated availability zones (default <region>a,<region>b,<region>c)")
	fs.StringVar(&cfg.CloudProfile, "cloud-profile", "fast", "latencies of the cloud's asynchronous transitions: fast or aws")
	fs.BoolVar(&cfg.Offline, "offline", false, "keep the cluster on this machine: pods' images only from kubelab's registry (built, imported or cached before), no NAT gateway out of the VPC, cluster DNS answers only the cluster's names")
	fs.StringVar(&logLevel, "log-level", "warn", "log level of the components: debug, info, warn or error")
	addLogFormatFlag(cmd)
	return cmd
}

// offlineNotice is what `kubelab up --offline` says at start.
const offlineNotice = "kubelab runs offline: pods' images come only from kubelab's registry (kubelab image import adds more), pods have no way out of the VPC and cluster DNS answers only the cluster's names."

// needsRoot is the error of `kubelab up` for a user of euid: real nodes (no --hollow)
// need root. It is one line that says how to run it instead.
func needsRoot(hollow bool, euid int) error {
	if hollow || euid == 0 {
		return nil
	}
	return errors.New("up: real nodes need root (loop devices, mounts, containerd, network namespaces): run it as root (sudo kubelab up), or with --hollow for hollow nodes, which need no root")
}

// hostsFileFor is where `kubelab up` has the cloud keep its load balancers' DNS names:
// the machine's /etc/hosts for real nodes run as root, none for hollow ones.
func hostsFileFor(hollow bool, euid int) string {
	if hollow || euid != 0 {
		return ""
	}
	return "/etc/hosts"
}

// printUp tells the user that the cluster is usable (cluster.Cluster.Ready), how long it
// took to get there, where it is and how to reach it.
func printUp(cmd *cobra.Command, c *cluster.Cluster, took time.Duration) {
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "kubelab is up (in %s).\n  API server:  %s\n  kubeconfig:  %s\n  cloud (EC2): %s\n",
		upTime(took), c.URL(), c.Kubeconfig(), c.CloudEndpoint())
	nodes := c.Nodes()
	for _, n := range nodes {
		fmt.Fprintf(out, "  node:        %s  %s  %s\n", n.Name, n.Zone, n.InstanceID)
	}
	if c.AddonRolled() {
		fmt.Fprintf(out, "  add-on:      the EBS CSI add-on's pods (kube-system) rolled to this kubelab's image\n")
	}
	embedded := "kubelab kubectl get nodes"
	if c.Kubeconfig() != filepath.Join(DefaultDataDir, "kubeconfig") {
		embedded = "kubelab kubectl --kubeconfig " + c.Kubeconfig() + " get nodes"
	}
	fmt.Fprintf(out, "\nUse it with the real kubectl:\n  export KUBECONFIG=%s\n  kubectl get nodes\nor with the embedded one:\n  %s\n", c.Kubeconfig(), embedded)
	fmt.Fprintf(out, "and the cloud with the AWS CLI (aws ec2 …, aws elbv2 … on the same endpoint):\n  AWS_CONFIG_FILE=%s AWS_SHARED_CREDENTIALS_FILE=%s aws ec2 describe-volumes --endpoint-url %s\n",
		c.CloudConfigFile(), c.CloudCredentialsFile(), c.CloudEndpoint())
}

// upTime is how long `kubelab up` took, as printed: tenths of a second under ten seconds,
// whole seconds above.
func upTime(d time.Duration) string {
	if d < 10*time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

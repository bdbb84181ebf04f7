package app

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kubelab/kubelab/internal/cloud"
	"github.com/kubelab/kubelab/internal/util/logging"
)

// newCloudCommand is `kubelab cloud`: the EC2/EBS-compatible cloud, standalone.
func newCloudCommand() *cobra.Command {
	var (
		cfg      cloud.Config
		zones    string
		logLevel string
	)
	cmd := &cobra.Command{
		Use:   "cloud",
		Short: "Serve the EC2/EBS-compatible cloud (EC2 and ELBv2 Query APIs, loop-device volumes, per-instance IMDS, load balancers)",
		Long: `Serve the EC2/EBS-compatible cloud on 127.0.0.1.

Volumes are sparse files under DATA-DIR/volumes; attaching one sets up a loop device and
EBS-style links in the instance's device dir (DATA-DIR/instances/<id>/dev unless the
instance has the tag kubelab.dev/device-dir). --hollow serves the same API without files
or devices. At start it writes DATA-DIR/endpoint, DATA-DIR/aws-config and
DATA-DIR/aws-credentials, so that

  AWS_CONFIG_FILE=DATA-DIR/aws-config AWS_SHARED_CREDENTIALS_FILE=DATA-DIR/aws-credentials \
    aws ec2 describe-volumes --endpoint-url $(cat DATA-DIR/endpoint)

works with nothing else set up. Faults are injected at ENDPOINT/_kubelab/faults, with
requests signed like EC2 calls (Signature Version 4, service ec2) with the same keys:

  curl --aws-sigv4 aws:amz:REGION:ec2 --user "$KEY_ID:$SECRET" ENDPOINT/_kubelab/faults`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level, err := logging.ParseLevel(logLevel)
			if err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			log, err := setupLogging(cmd, level)
			if err != nil {
				return err
			}
			cfg.Logger = log.With("component", "cloud")
			if zones != "" {
				cfg.Zones = strings.Split(zones, ",")
			}
			if cfg.DataDir != "" {
				abs, err := filepath.Abs(cfg.DataDir)
				if err != nil {
					return fmt.Errorf("--data-dir: %w", err)
				}
				cfg.DataDir = abs
			}
			c, err := cloud.New(cfg)
			if err != nil {
				return fmt.Errorf("cloud: %w", err)
			}
			errc := make(chan error, 1)
			go func() { errc <- c.Run(cmd.Context()) }()
			select {
			case err := <-errc:
				return fmt.Errorf("cloud: %w", err)
			case <-c.Ready():
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "endpoint:    %s\n", c.Endpoint())
			fmt.Fprintf(out, "region:      %s\n", c.Region())
			fmt.Fprintf(out, "config:      %s\n", c.ConfigFile())
			fmt.Fprintf(out, "credentials: %s\n", c.CredentialsFile())
			fmt.Fprintf(out, "faults:      %s/_kubelab/faults (signed with the credentials above, service ec2)\n", c.Endpoint())
			fmt.Fprintf(out, "elbv2:       the same endpoint (aws elbv2 …); load balancers listen in %s\n", c.LoadBalancerBlock())
			fmt.Fprintf(out, "try:         AWS_CONFIG_FILE=%s AWS_SHARED_CREDENTIALS_FILE=%s aws ec2 describe-volumes --endpoint-url %s\n",
				c.ConfigFile(), c.CredentialsFile(), c.Endpoint())
			if err := <-errc; err != nil {
				return fmt.Errorf("cloud: %w", err)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.DataDir, "data-dir", filepath.Join(DefaultDataDir, "cloud"), "directory of the cloud's state, volume files and client files")
	f.StringVar(&cfg.Listen, "listen", "127.0.0.1:0", "address of the EC2 API (127.0.0.1 only; port 0: the port of the previous start, or a free one at the first)")
	f.StringVar(&cfg.Region, "region", "us-east-1", "the region served")
	f.StringVar(&zones, "zones", "", "comma-separated availability zones (default <region>a,<region>b,<region>c)")
	f.BoolVar(&cfg.Hollow, "hollow", false, "same API and states with no files, loop devices or links (no root needed)")
	f.StringVar(&cfg.Profile, "profile", "fast", "latencies of the asynchronous transitions: fast or aws")
	f.BoolVar(&cfg.ReleaseOnExit, "release-on-exit", false, "release loop devices and links at exit (they come back at the next start)")
	f.BoolVar(&cfg.NoIMDSListeners, "no-imds-listeners", false, "do not serve each instance's IMDS on a loopback port")
	f.StringVar(&cfg.HostsFile, "hosts-file", "", "hosts file in which to keep the active load balancers' DNS names (e.g. /etc/hosts; default none)")
	f.StringVar(&cfg.LoadBalancerCIDR, "load-balancer-cidr", "", "block of 127.0.0.0/8 the load balancers' addresses come from (default: a /24 picked at the first start and kept)")
	f.IntVar(&cfg.MaxVolumes, "max-volumes", 5000, "the number of volumes beyond which CreateVolume fails with VolumeLimitExceeded")
	f.StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn or error")
	addLogFormatFlag(cmd)
	return cmd
}

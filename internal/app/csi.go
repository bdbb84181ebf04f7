package app

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kubelab/kubelab/internal/csi/driver"
	"github.com/kubelab/kubelab/internal/version"
)

// newCSIDriverCommand is `kubelab csi-driver`: the ebs.csi.aws.com CSI plugin.
func newCSIDriverCommand() *cobra.Command {
	var (
		cfg                       driver.Config
		mode                      string
		ec2Endpoint, region       string
		awsConfig, awsCredentials string
		cloudDir, imdsEndpoint    string
		extraTags                 []string
		verbose                   bool
	)
	cmd := &cobra.Command{
		Use:   "csi-driver",
		Short: "Run the EBS CSI driver (ebs.csi.aws.com): controller, node or both",
		Long: `Run the EBS CSI driver ebs.csi.aws.com on a unix socket.

The controller reaches the cloud only through the EC2 API (--ec2-endpoint, or
AWS_EC2_ENDPOINT, with the AWS config and credentials files); the node learns its
instance id, zone and type from IMDS (--imds-endpoint, or
AWS_EC2_METADATA_SERVICE_ENDPOINT) and finds attached volumes under --device-dir.
--cloud-dir DIR reads DIR/endpoint, DIR/aws-config and DIR/aws-credentials as
written by 'kubelab cloud'.`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelInfo
			if verbose {
				level = slog.LevelDebug
			}
			log, err := setupLogging(cmd, level)
			if err != nil {
				return err
			}
			logger := log.With("component", "csi-driver")
			cfg.Mode = driver.Mode(mode)
			cfg.Version = version.Kubelab
			tags, err := parseTags(extraTags)
			if err != nil {
				return err
			}
			cfg.ExtraTags = tags
			deps := driver.Deps{Logger: logger}
			ctx := cmd.Context()

			if cfg.Mode == driver.ModeController || cfg.Mode == driver.ModeAll {
				if cloudDir != "" {
					if ec2Endpoint == "" {
						b, err := os.ReadFile(filepath.Join(cloudDir, "endpoint"))
						if err != nil {
							return fmt.Errorf("csi-driver: --cloud-dir: %w", err)
						}
						ec2Endpoint = strings.TrimSpace(string(b))
					}
					if awsConfig == "" {
						awsConfig = filepath.Join(cloudDir, "aws-config")
					}
					if awsCredentials == "" {
						awsCredentials = filepath.Join(cloudDir, "aws-credentials")
					}
				}
				if ec2Endpoint == "" {
					ec2Endpoint = os.Getenv("AWS_EC2_ENDPOINT")
				}
				c, err := driver.NewEC2Cloud(ctx, driver.EC2Config{
					Endpoint: ec2Endpoint, Region: region, ConfigFile: awsConfig, CredentialsFile: awsCredentials,
				})
				if err != nil {
					return fmt.Errorf("csi-driver: %w", err)
				}
				deps.Cloud = c
			}
			if cfg.Mode == driver.ModeNode || cfg.Mode == driver.ModeAll {
				if imdsEndpoint == "" {
					imdsEndpoint = os.Getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT")
				}
				deps.Metadata = driver.NewIMDS(imdsEndpoint)
				if cfg.DeviceDir == "" {
					cfg.DeviceDir = "/dev"
				}
				deps.Devices = driver.DeviceDir{Dir: cfg.DeviceDir, Hollow: cfg.Hollow}
				if cfg.Hollow {
					deps.Mounter = driver.NewHollowMounter()
				} else {
					deps.Mounter = driver.NewSystemMounter()
				}
			}
			d, err := driver.New(cfg, deps)
			if err != nil {
				return err
			}
			return d.Run(ctx)
		},
	}
	f := cmd.Flags()
	f.StringVar(&mode, "mode", "all", "services to serve: controller, node or all")
	f.StringVar(&cfg.Endpoint, "endpoint", "unix:///tmp/csi.sock", "CSI socket to serve on (unix:///path)")
	f.StringVar(&cfg.MetricsAddress, "metrics-address", "", "serve Prometheus metrics on this 127.0.0.1:PORT (off when empty)")
	f.StringVar(&ec2Endpoint, "ec2-endpoint", "", "EC2 API endpoint URL (default $AWS_EC2_ENDPOINT)")
	f.StringVar(&region, "region", "", "AWS region (default from $AWS_REGION or the AWS config file)")
	f.StringVar(&awsConfig, "aws-config-file", "", "AWS shared config file (default $AWS_CONFIG_FILE)")
	f.StringVar(&awsCredentials, "aws-credentials-file", "", "AWS shared credentials file (default $AWS_SHARED_CREDENTIALS_FILE)")
	f.StringVar(&cloudDir, "cloud-dir", "", "data dir of 'kubelab cloud': read its endpoint, aws-config and aws-credentials")
	f.StringVar(&cfg.DefaultZone, "default-zone", "", "zone of volumes whose request names none (default: the node's zone in all mode, else the region's first)")
	f.Int32Var(&cfg.DefaultVolumeSizeGiB, "default-volume-size", 100, "size in GiB of volumes whose request names none")
	f.StringSliceVar(&extraTags, "extra-tags", nil, "tags key=value put on every volume and snapshot")
	f.DurationVar(&cfg.OperationTimeout, "operation-timeout", 2*time.Minute, "how long to wait for a volume to be created, attached, detached or resized")
	f.StringVar(&imdsEndpoint, "imds-endpoint", "", "instance metadata endpoint URL (default $AWS_EC2_METADATA_SERVICE_ENDPOINT, else 169.254.169.254)")
	f.StringVar(&cfg.DeviceDir, "device-dir", "/dev", "where the node finds attached volumes (xvdXX and disk/by-id names)")
	f.Int64Var(&cfg.VolumeAttachLimit, "volume-attach-limit", 0, "volumes this node takes (default: from the instance type)")
	f.Int64Var(&cfg.ReservedAttachments, "reserved-volume-attachments", 0, "attachments to keep free of CSI volumes")
	f.BoolVar(&cfg.Hollow, "hollow", false, "node: fake mounter and devices (no root; for scale tests)")
	f.BoolVarP(&verbose, "verbose", "v", false, "log every CSI call (secrets stripped)")
	addLogFormatFlag(cmd)
	return cmd
}

// parseTags turns key=value pairs into a map.
func parseTags(pairs []string) (map[string]string, error) {
	tags := map[string]string{}
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("csi-driver: --extra-tags %q: want key=value", p)
		}
		tags[k] = v
	}
	return tags, nil
}

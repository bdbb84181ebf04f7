package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubelab/kubelab/internal/cloudcontrollermanager"
	"github.com/kubelab/kubelab/internal/cloudprovider/aws"
	"github.com/kubelab/kubelab/internal/leaderelection"
)

func newCloudControllerManagerCommand() *cobra.Command {
	var kubeconfig, cloudDir string
	var awsCfg aws.Config
	var leaderElect bool
	cmd := &cobra.Command{
		Use:   "cloud-controller-manager",
		Short: "Run the controllers that talk to the cloud (node initialization, node lifecycle, load balancers) against a kubelab API server",
		Long: `Run the cloud-controller-manager: the node controller initializes nodes whose kubelet
registered them with the node.cloudprovider.kubernetes.io/uninitialized taint from their
EC2 instances, and the node lifecycle controller deletes the nodes of terminated
instances and taints those of stopped ones, and the service controller gives each
Service of type LoadBalancer a network load balancer. It reaches the cloud only through the EC2
and ELBv2 APIs (--ec2-endpoint, or --cloud-dir DIR for DIR/endpoint, DIR/aws-config and
DIR/aws-credentials as 'kubelab cloud' writes them).`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := setupLogging(cmd, slog.LevelInfo); err != nil {
				return err
			}
			cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
			if err != nil {
				return fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
			}
			if cloudDir != "" {
				if awsCfg.Endpoint == "" {
					b, err := os.ReadFile(filepath.Join(cloudDir, "endpoint"))
					if err != nil {
						return fmt.Errorf("--cloud-dir: %w", err)
					}
					awsCfg.Endpoint = strings.TrimSpace(string(b))
				}
				awsCfg.ConfigFile = filepath.Join(cloudDir, "aws-config")
				awsCfg.CredentialsFile = filepath.Join(cloudDir, "aws-credentials")
			}
			cloud, err := aws.New(cmd.Context(), awsCfg)
			if err != nil {
				return err
			}
			run := func(ctx context.Context) error {
				m, err := cloudcontrollermanager.New(cloudcontrollermanager.Config{Instances: cloud.Instances(), LoadBalancers: cloud.LoadBalancers()}, cfg)
				if err != nil {
					return err
				}
				return m.Run(ctx)
			}
			if !leaderElect {
				return run(cmd.Context())
			}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			return leaderelection.Run(cmd.Context(), leaderelection.Config{Name: "cloud-controller-manager"}, client, run)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", DefaultDataDir+"/kubeconfig", "kubeconfig of the API server")
	cmd.Flags().BoolVar(&leaderElect, "leader-elect", true, "run the controllers only while holding the Lease kube-system/cloud-controller-manager")
	cmd.Flags().StringVar(&awsCfg.Endpoint, "ec2-endpoint", os.Getenv("AWS_EC2_ENDPOINT"), "EC2 API endpoint URL (default $AWS_EC2_ENDPOINT)")
	cmd.Flags().StringVar(&awsCfg.Region, "region", "", "AWS region (default: the aws config's)")
	cmd.Flags().StringVar(&cloudDir, "cloud-dir", "", "data dir of 'kubelab cloud': read its endpoint, aws-config and aws-credentials")
	addLogFormatFlag(cmd)
	return cmd
}

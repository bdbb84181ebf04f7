package app

import (
	"errors"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/informers"

	"github.com/kubelab/kubelab/internal/kubelet"
)

func newKubeletCommand() *cobra.Command {
	var (
		kubeconfig string
		cfg        kubelet.Config
		cpu, mem   string
	)
	cmd := &cobra.Command{
		Use:   "kubelet",
		Short: "Run a node's kubelet (hollow mode: a fake runtime and mounter) against a kubelab API server",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := setupLogging(cmd, slog.LevelInfo); err != nil {
				return err
			}
			if !cfg.Hollow {
				return errors.New("kubelet: only --hollow runs as a command of its own; real nodes (containerd, CNI, volumes) run in kubelab up")
			}
			cpuQ, err := resource.ParseQuantity(cpu)
			if err != nil {
				return err
			}
			memQ, err := resource.ParseQuantity(mem)
			if err != nil {
				return err
			}
			cfg.Capacity = corev1.ResourceList{corev1.ResourceCPU: cpuQ, corev1.ResourceMemory: memQ}
			_, client, err := clientFor(kubeconfig, "kubelet/"+cfg.NodeName)
			if err != nil {
				return err
			}
			factory := informers.NewSharedInformerFactory(client, 10*time.Minute)
			k, err := kubelet.New(cfg, client, factory, kubelet.Deps{})
			if err != nil {
				return err
			}
			factory.Start(cmd.Context().Done())
			defer factory.Shutdown()
			return k.Run(cmd.Context())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&kubeconfig, "kubeconfig", DefaultDataDir+"/kubeconfig", "kubeconfig of the API server")
	fs.StringVar(&cfg.NodeName, "node-name", "", "name of the Node")
	fs.StringVar(&cfg.Zone, "zone", "us-east-1a", "availability zone of the node")
	fs.StringVar(&cfg.InstanceID, "instance-id", "", "EC2 instance id of the node (from the kubelab cloud)")
	fs.StringVar(&cfg.InstanceType, "instance-type", "m5.large", "instance type")
	fs.StringVar(&cfg.RootDir, "root-dir", DefaultDataDir+"/nodes/kubelet", "kubelet root dir")
	fs.StringVar(&cpu, "cpu", "2", "cpu capacity")
	fs.StringVar(&mem, "memory", "8Gi", "memory capacity")
	fs.BoolVar(&cfg.Hollow, "hollow", false, "run a hollow node (fake runtime and mounter)")
	cfg.CSIDriverName = "ebs.csi.aws.com"
	addLogFormatFlag(cmd)
	return cmd
}

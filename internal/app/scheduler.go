package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubelab/kubelab/internal/leaderelection"
	"github.com/kubelab/kubelab/internal/scheduler"
)

// clientFor loads a kubeconfig into a protobuf client for component name.
func clientFor(kubeconfig, name string) (*rest.Config, kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("load kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.UserAgent = name
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.QPS, cfg.Burst = 1000, 2000
	client, err := kubernetes.NewForConfig(cfg)
	return cfg, client, err
}

func newSchedulerCommand() *cobra.Command {
	var kubeconfig string
	var leaderElect bool
	cmd := &cobra.Command{
		Use:   "scheduler",
		Short: "Run the scheduler (filter → score → bind, volume topology) against a kubelab API server",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := setupLogging(cmd, slog.LevelInfo); err != nil {
				return err
			}
			_, client, err := clientFor(kubeconfig, "kube-scheduler")
			if err != nil {
				return err
			}
			run := func(ctx context.Context) error {
				factory := informers.NewSharedInformerFactory(client, 10*time.Minute)
				s, err := scheduler.New(scheduler.Config{}, client, factory)
				if err != nil {
					return err
				}
				factory.Start(ctx.Done())
				defer factory.Shutdown()
				return s.Run(ctx)
			}
			if !leaderElect {
				return run(cmd.Context())
			}
			return leaderelection.Run(cmd.Context(), leaderelection.Config{Name: "kube-scheduler"}, client, run)
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", DefaultDataDir+"/kubeconfig", "kubeconfig of the API server")
	cmd.Flags().BoolVar(&leaderElect, "leader-elect", true, "schedule only while holding the Lease kube-system/kube-scheduler, so that several schedulers are safe")
	addLogFormatFlag(cmd)
	return cmd
}

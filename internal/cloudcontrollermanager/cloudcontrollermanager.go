package cloudcontrollermanager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubelab/kubelab/internal/cloudprovider"
	"github.com/kubelab/kubelab/internal/controller/cloudnode"
	"github.com/kubelab/kubelab/internal/controller/cloudnodelifecycle"
	"github.com/kubelab/kubelab/internal/controller/ingress"
	"github.com/kubelab/kubelab/internal/controller/service"
)

// Config configures the cloud-controller-manager.
type Config struct {
	// Instances is the cloud's answer about nodes' instances (required).
	Instances cloudprovider.Instances
	// LoadBalancers makes the load balancers of Services (and Ingresses); without it the
	// service and Ingress controllers do not run.
	LoadBalancers cloudprovider.LoadBalancers
	// ClusterName goes into the load balancers' tag kubernetes.io/cluster/<name>
	// ("kubernetes" when empty).
	ClusterName string
	// NodeMonitorPeriod is how often the node lifecycle controller looks at every node
	// (5 s when zero).
	NodeMonitorPeriod time.Duration
	// Logger receives the controllers' structured logs (default slog.Default()).
	Logger *slog.Logger
}

// runner is a controller: it blocks in Run until ctx ends.
type runner interface {
	Run(ctx context.Context) error
}

// CloudControllerManager is the cloud's controllers on one shared informer factory.
type CloudControllerManager struct {
	factory informers.SharedInformerFactory
	runners []runner
}

// New builds the controllers against the API server of restConfig.
func New(cfg Config, restConfig *rest.Config) (*CloudControllerManager, error) {
	if cfg.Instances == nil {
		return nil, errors.New("cloud-controller-manager: no cloud")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	restConfig = rest.CopyConfig(restConfig)
	restConfig.UserAgent = "cloud-controller-manager"
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("cloud-controller-manager: %w", err)
	}
	m := &CloudControllerManager{factory: informers.NewSharedInformerFactory(client, 10*time.Minute)}
	node, err := cloudnode.New(cloudnode.Config{Logger: cfg.Logger.With("controller", cloudnode.Component)}, client, m.factory, cfg.Instances)
	if err != nil {
		return nil, fmt.Errorf("cloud-controller-manager: %w", err)
	}
	lifecycle, err := cloudnodelifecycle.New(cloudnodelifecycle.Config{NodeMonitorPeriod: cfg.NodeMonitorPeriod,
		Logger: cfg.Logger.With("controller", cloudnodelifecycle.Component)}, client, m.factory, cfg.Instances)
	if err != nil {
		return nil, fmt.Errorf("cloud-controller-manager: %w", err)
	}
	m.runners = []runner{node, lifecycle}
	if cfg.LoadBalancers != nil {
		svc, err := service.New(service.Config{ClusterName: cfg.ClusterName, Logger: cfg.Logger.With("controller", service.Component)},
			client, m.factory, cfg.LoadBalancers)
		if err != nil {
			return nil, fmt.Errorf("cloud-controller-manager: %w", err)
		}
		ing, err := ingress.New(ingress.Config{ClusterName: cfg.ClusterName, Logger: cfg.Logger.With("controller", "ingress")},
			client, m.factory, cfg.LoadBalancers)
		if err != nil {
			return nil, fmt.Errorf("cloud-controller-manager: %w", err)
		}
		m.runners = append(m.runners, svc, ing)
	}
	return m, nil
}

// Run starts the informers and the controllers and runs them until ctx ends.
func (m *CloudControllerManager) Run(ctx context.Context) error {
	m.factory.Start(ctx.Done())
	defer m.factory.Shutdown()
	g, ctx := errgroup.WithContext(ctx)
	for _, r := range m.runners {
		g.Go(func() error { return r.Run(ctx) })
	}
	return g.Wait()
}

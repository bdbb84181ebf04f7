package controllermanager

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/kubelab/kubelab/internal/controller/attachdetach"
	"github.com/kubelab/kubelab/internal/controller/daemonset"
	"github.com/kubelab/kubelab/internal/controller/deployment"
	"github.com/kubelab/kubelab/internal/controller/endpointslice"
	"github.com/kubelab/kubelab/internal/controller/garbagecollector"
	"github.com/kubelab/kubelab/internal/controller/namespace"
	"github.com/kubelab/kubelab/internal/controller/nodeipam"
	"github.com/kubelab/kubelab/internal/controller/nodelifecycle"
	"github.com/kubelab/kubelab/internal/controller/protection"
	"github.com/kubelab/kubelab/internal/controller/pvbinder"
	"github.com/kubelab/kubelab/internal/controller/replicaset"
	"github.com/kubelab/kubelab/internal/controller/serviceaccount"
	"github.com/kubelab/kubelab/internal/controller/statefulset"
	"github.com/kubelab/kubelab/internal/csi/sidecar/snapshotter"
)

// Config configures the controller-manager.
type Config struct {
	// Logger receives the controllers' structured logs (default slog.Default()).
	Logger *slog.Logger
	// UserAgent is the client's user agent and so the field manager of its writes
	// (default kube-controller-manager, as upstream).
	UserAgent string
}

// runner is a controller: it blocks in Run until ctx ends.
type runner interface {
	Run(ctx context.Context) error
}

// ControllerManager is every controller of the cluster on one shared informer factory.
type ControllerManager struct {
	factory     informers.SharedInformerFactory
	snapFactory snapinformers.SharedInformerFactory
	runners     []runner
}

// New builds every controller against the API server of restConfig; they register
// their informers on the shared factories, which Run starts.
func New(cfg Config, restConfig *rest.Config) (*ControllerManager, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "kube-controller-manager"
	}
	restConfig = rest.CopyConfig(restConfig)
	restConfig.UserAgent = cfg.UserAgent
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("controller-manager: %w", err)
	}
	md, err := metadata.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("controller-manager: %w", err)
	}
	snaps, err := SnapshotClient(restConfig)
	if err != nil {
		return nil, fmt.Errorf("controller-manager: %w", err)
	}
	cm := &ControllerManager{
		factory:     informers.NewSharedInformerFactory(client, 10*time.Minute),
		snapFactory: snapinformers.NewSharedInformerFactory(snaps, 10*time.Minute),
	}
	factory, log := cm.factory, cfg.Logger
	add := func(name string, r runner, err error) error {
		if err != nil {
			return fmt.Errorf("controller-manager: %s controller: %w", name, err)
		}
		cm.runners = append(cm.runners, r)
		return nil
	}
	steps := []func() error{
		func() error {
			c, err := namespace.New(namespace.Config{Workers: 2}, client, md)
			return add("namespace", c, err)
		},
		func() error {
			c, err := garbagecollector.New(garbagecollector.Config{}, client.Discovery(), md)
			return add("garbagecollector", c, err)
		},
		func() error {
			c, err := pvbinder.New(pvbinder.Config{Logger: log}, client, factory)
			return add("persistentvolume-binder", c, err)
		},
		func() error {
			c, err := protection.New(protection.Config{Logger: log}, client, factory)
			return add("protection", c, err)
		},
		func() error {
			c, err := attachdetach.New(attachdetach.Config{Logger: log}, client, factory)
			return add("attachdetach", c, err)
		},
		func() error {
			c, err := replicaset.New(replicaset.Config{}, client, factory)
			return add("replicaset", c, err)
		},
		func() error {
			c, err := deployment.New(deployment.Config{}, client, factory)
			return add("deployment", c, err)
		},
		func() error {
			c, err := statefulset.New(statefulset.Config{}, client, factory)
			return add("statefulset", c, err)
		},
		func() error {
			c, err := daemonset.New(daemonset.Config{}, client, factory)
			return add("daemonset", c, err)
		},
		func() error {
			c, err := endpointslice.New(endpointslice.Config{}, client, factory)
			return add("endpointslice", c, err)
		},
		func() error {
			c, err := serviceaccount.New(serviceaccount.Config{}, client, factory)
			return add("serviceaccount", c, err)
		},
		func() error {
			c, err := nodeipam.New(nodeipam.Config{}, client, factory)
			return add("nodeipam", c, err)
		},
		func() error {
			c, err := nodelifecycle.New(nodelifecycle.Config{}, client, factory)
			return add("nodelifecycle", c, err)
		},
		func() error {
			c, err := snapshotter.NewSnapshotController(snapshotter.Config{Logger: log}, client, snaps, factory, cm.snapFactory)
			return add("snapshot", c, err)
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return cm, nil
}

// Run starts the informers and runs every controller until ctx ends.
func (cm *ControllerManager) Run(ctx context.Context) error {
	g, ctx := errgroup.WithContext(ctx)
	cm.factory.Start(ctx.Done())
	cm.snapFactory.Start(ctx.Done())
	defer cm.factory.Shutdown()
	defer cm.snapFactory.Shutdown()
	for _, r := range cm.runners {
		g.Go(func() error { return r.Run(ctx) })
	}
	return g.Wait()
}

// SnapshotClient is a client of the snapshot.storage.k8s.io kinds, which are served as
// JSON only (they are CRDs upstream, with no protobuf form).
func SnapshotClient(cfg *rest.Config) (snapclient.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeJSON
	return snapclient.NewForConfig(cfg)
}

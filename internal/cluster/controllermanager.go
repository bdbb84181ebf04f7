package cluster

import (
	"context"
	"fmt"
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

// runner is a component that blocks in Run until ctx ends.
type runner interface {
	Run(ctx context.Context) error
}

// RunControllerManager runs every controller against the API server of restConfig until
// ctx ends: all are built on one shared informer factory, which starts once they have
// registered their informers.
func RunControllerManager(ctx context.Context, restConfig *rest.Config) error {
	restConfig = rest.CopyConfig(restConfig)
	restConfig.UserAgent = "kubelab-controller-manager"
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	md, err := metadata.NewForConfig(restConfig)
	if err != nil {
		return err
	}
	snaps, err := snapshotClient(restConfig)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(client, 10*time.Minute)
	snapFactory := snapinformers.NewSharedInformerFactory(snaps, 10*time.Minute)

	var runners []runner
	add := func(name string, r runner, err error) error {
		if err != nil {
			return fmt.Errorf("%s controller: %w", name, err)
		}
		runners = append(runners, r)
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
			c, err := pvbinder.New(pvbinder.Config{}, client, factory)
			return add("persistentvolume-binder", c, err)
		},
		func() error {
			c, err := protection.New(protection.Config{}, client, factory)
			return add("protection", c, err)
		},
		func() error {
			c, err := attachdetach.New(attachdetach.Config{}, client, factory)
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
			c, err := snapshotter.NewSnapshotController(snapshotter.Config{}, client, snaps, factory, snapFactory)
			return add("snapshot", c, err)
		},
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	g, ctx := errgroup.WithContext(ctx)
	factory.Start(ctx.Done())
	snapFactory.Start(ctx.Done())
	defer factory.Shutdown()
	defer snapFactory.Shutdown()
	for _, r := range runners {
		g.Go(func() error { return r.Run(ctx) })
	}
	return g.Wait()
}

// snapshotClient is a client of the snapshot.storage.k8s.io kinds, which are served as
// JSON only (they are CRDs upstream, with no protobuf form).
func snapshotClient(cfg *rest.Config) (snapclient.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.ContentType = runtime.ContentTypeJSON
	return snapclient.NewForConfig(cfg)
}

package controllermanager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubelab/kubelab/internal/controller/attachdetach"
	"github.com/kubelab/kubelab/internal/controller/certificates"
	"github.com/kubelab/kubelab/internal/controller/clusterroleaggregation"
	"github.com/kubelab/kubelab/internal/controller/cronjob"
	"github.com/kubelab/kubelab/internal/controller/daemonset"
	"github.com/kubelab/kubelab/internal/controller/deployment"
	"github.com/kubelab/kubelab/internal/controller/disruption"
	"github.com/kubelab/kubelab/internal/controller/endpoint"
	"github.com/kubelab/kubelab/internal/controller/endpointslice"
	"github.com/kubelab/kubelab/internal/controller/endpointslicemirroring"
	"github.com/kubelab/kubelab/internal/controller/garbagecollector"
	"github.com/kubelab/kubelab/internal/controller/job"
	"github.com/kubelab/kubelab/internal/controller/namespace"
	"github.com/kubelab/kubelab/internal/controller/nodeipam"
	"github.com/kubelab/kubelab/internal/controller/nodelifecycle"
	"github.com/kubelab/kubelab/internal/controller/podautoscaler"
	"github.com/kubelab/kubelab/internal/controller/podgc"
	"github.com/kubelab/kubelab/internal/controller/protection"
	"github.com/kubelab/kubelab/internal/controller/pvbinder"
	"github.com/kubelab/kubelab/internal/controller/replicaset"
	"github.com/kubelab/kubelab/internal/controller/replication"
	"github.com/kubelab/kubelab/internal/controller/resourcequota"
	"github.com/kubelab/kubelab/internal/controller/rootcacertpublisher"
	"github.com/kubelab/kubelab/internal/controller/serviceaccount"
	"github.com/kubelab/kubelab/internal/controller/snapshot"
	"github.com/kubelab/kubelab/internal/controller/statefulset"
	"github.com/kubelab/kubelab/internal/controller/ttlafterfinished"
)

// Config configures the controller-manager.
type Config struct {
	// Logger receives the controllers' structured logs (default slog.Default()).
	Logger *slog.Logger
	// UserAgent is the client's user agent and so the field manager of its writes
	// (default kube-controller-manager, as upstream).
	UserAgent string
	// ControllerConfig, when set, gives each controller its own identity: the client
	// config of the service account kube-system/<sa> the bootstrap RBAC policy binds
	// the controller's role to (sa is "deployment-controller", "node-controller"…).
	// The shared informers keep the controller-manager's own identity. When nil every
	// controller uses restConfig.
	ControllerConfig func(sa string) (*rest.Config, error)
	// RootCA is the CA bundle the root-ca-cert-publisher controller publishes in every
	// namespace as the kube-root-ca.crt ConfigMap (kube-controller-manager's
	// --root-ca-file); when empty, the CA restConfig trusts the API server with.
	RootCA []byte
	// ClusterSigningCertFile and ClusterSigningKeyFile are the CA the csrsigning
	// controller signs approved CertificateSigningRequests with (kube-controller-manager's
	// --cluster-signing-cert-file and --cluster-signing-key-file); when either is empty
	// no request is signed. ClusterSigningDuration is the longest validity it gives
	// (--cluster-signing-duration, a year when zero).
	ClusterSigningCertFile, ClusterSigningKeyFile string
	ClusterSigningDuration                        time.Duration
	// ClusterCIDR is the range the nodes' podCIDRs come from (kube-controller-manager's
	// --cluster-cidr; 10.244.0.0/16 when empty) and NodeCIDRMaskSize the size of each
	// (--node-cidr-mask-size; 24 when zero).
	ClusterCIDR      string
	NodeCIDRMaskSize int
	// NodeMonitorGracePeriod is how long a node's kubelet may stay silent before the node
	// is marked NotReady (kube-controller-manager's --node-monitor-grace-period; 40 s when
	// zero).
	NodeMonitorGracePeriod time.Duration
	// PodGCQuarantine is how long a node must stay missing before the pod garbage
	// collector deletes its pods (40 s when zero, as upstream).
	PodGCQuarantine time.Duration
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
	snaps, err := SnapshotClient(restConfig)
	if err != nil {
		return nil, fmt.Errorf("controller-manager: %w", err)
	}
	cm := &ControllerManager{
		factory:     informers.NewSharedInformerFactory(client, 10*time.Minute),
		snapFactory: snapinformers.NewSharedInformerFactory(snaps, 10*time.Minute),
	}
	factory, log := cm.factory, cfg.Logger
	// withConfig builds a controller on the client config of service account sa; own
	// is its clientset.
	withConfig := func(sa string, build func(*rest.Config) (runner, error)) (runner, error) {
		c, err := controllerConfig(cfg, restConfig, sa)
		if err != nil {
			return nil, err
		}
		return build(c)
	}
	own := func(sa string) (kubernetes.Interface, error) {
		c, err := controllerConfig(cfg, restConfig, sa)
		if err != nil {
			return nil, err
		}
		return kubernetes.NewForConfig(c)
	}
	add := func(name string, r runner, err error) error {
		if err != nil {
			return fmt.Errorf("controller-manager: %s controller: %w", name, err)
		}
		cm.runners = append(cm.runners, r)
		return nil
	}
	steps := []func() error{
		func() error {
			c, err := withConfig("namespace-controller", func(rc *rest.Config) (runner, error) {
				cl, md, err := clients(rc)
				if err != nil {
					return nil, err
				}
				return namespace.New(namespace.Config{Workers: 2}, cl, md)
			})
			return add("namespace", c, err)
		},
		func() error {
			c, err := withConfig("generic-garbage-collector", func(rc *rest.Config) (runner, error) {
				cl, md, err := clients(rc)
				if err != nil {
					return nil, err
				}
				return garbagecollector.New(garbagecollector.Config{}, cl.Discovery(), md)
			})
			return add("garbagecollector", c, err)
		},
		func() error {
			cl, err := own("persistent-volume-binder")
			if err != nil {
				return add("persistent-volume-binder", nil, err)
			}
			c, err := pvbinder.New(pvbinder.Config{Logger: log}, cl, factory)
			return add("persistentvolume-binder", c, err)
		},
		func() error {
			cl, err := own("pvc-protection-controller")
			if err != nil {
				return add("pvc-protection-controller", nil, err)
			}
			c, err := protection.New(protection.Config{Logger: log}, cl, factory)
			return add("protection", c, err)
		},
		func() error {
			cl, err := own("resourcequota-controller")
			if err != nil {
				return add("resourcequota-controller", nil, err)
			}
			c, err := resourcequota.New(resourcequota.Config{Logger: log}, cl, factory)
			return add("resourcequota", c, err)
		},
		func() error {
			cl, err := own("attachdetach-controller")
			if err != nil {
				return add("attachdetach-controller", nil, err)
			}
			c, err := attachdetach.New(attachdetach.Config{Logger: log}, cl, factory)
			return add("attachdetach", c, err)
		},
		func() error {
			cl, err := own("replicaset-controller")
			if err != nil {
				return add("replicaset-controller", nil, err)
			}
			c, err := replicaset.New(replicaset.Config{}, cl, factory)
			return add("replicaset", c, err)
		},
		func() error {
			// csrapproving, csrcleaner and csrsigning share upstream's identity.
			cl, err := own("certificate-controller")
			if err != nil {
				return add("certificate-controller", nil, err)
			}
			a, err := certificates.NewApprovingController(certificates.ApprovingConfig{Logger: log}, cl, factory)
			if err := add("csrapproving", a, err); err != nil {
				return err
			}
			cc, err := certificates.NewCleanerController(certificates.CleanerConfig{Logger: log}, cl, factory)
			if err := add("csrcleaner", cc, err); err != nil {
				return err
			}
			if cfg.ClusterSigningCertFile == "" || cfg.ClusterSigningKeyFile == "" {
				log.Info("skipping the csrsigning controller: no cluster signing certificate and key")
				return nil
			}
			sc, err := certificates.NewSigningController(certificates.SigningConfig{CACertFile: cfg.ClusterSigningCertFile,
				CAKeyFile: cfg.ClusterSigningKeyFile, Duration: cfg.ClusterSigningDuration, Logger: log}, cl, factory)
			return add("csrsigning", sc, err)
		},
		func() error {
			cl, err := own("job-controller")
			if err != nil {
				return add("job-controller", nil, err)
			}
			c, err := job.New(job.Config{Logger: log}, cl, factory)
			return add("job", c, err)
		},
		func() error {
			cl, err := own("ttl-after-finished-controller")
			if err != nil {
				return add("ttl-after-finished-controller", nil, err)
			}
			c, err := ttlafterfinished.New(ttlafterfinished.Config{Logger: log}, cl, factory)
			return add("ttlafterfinished", c, err)
		},
		func() error {
			cl, err := own("pod-garbage-collector")
			if err != nil {
				return add("pod-garbage-collector", nil, err)
			}
			c, err := podgc.New(podgc.Config{Logger: log, Quarantine: cfg.PodGCQuarantine}, cl, factory)
			return add("podgc", c, err)
		},
		func() error {
			// Its metrics.k8s.io and /scale clients share its identity.
			rc, err := controllerConfig(cfg, restConfig, "horizontal-pod-autoscaler")
			if err != nil {
				return add("horizontal-pod-autoscaler", nil, err)
			}
			clients, err := podautoscaler.NewClients(rc)
			if err != nil {
				return add("horizontal-pod-autoscaler", nil, err)
			}
			c, err := podautoscaler.New(podautoscaler.Config{Logger: log}, clients, factory)
			return add("horizontalpodautoscaling", c, err)
		},
		func() error {
			cl, err := own("replication-controller")
			if err != nil {
				return add("replication-controller", nil, err)
			}
			c, err := replication.New(replication.Config{}, cl, factory)
			return add("replicationcontroller", c, err)
		},
		func() error {
			cl, err := own("disruption-controller")
			if err != nil {
				return add("disruption-controller", nil, err)
			}
			c, err := disruption.New(disruption.Config{Logger: log}, cl, factory)
			return add("disruption", c, err)
		},
		func() error {
			cl, err := own("cronjob-controller")
			if err != nil {
				return add("cronjob-controller", nil, err)
			}
			c, err := cronjob.New(cronjob.Config{Logger: log}, cl, factory)
			return add("cronjob", c, err)
		},
		func() error {
			cl, err := own("deployment-controller")
			if err != nil {
				return add("deployment-controller", nil, err)
			}
			c, err := deployment.New(deployment.Config{}, cl, factory)
			return add("deployment", c, err)
		},
		func() error {
			cl, err := own("statefulset-controller")
			if err != nil {
				return add("statefulset-controller", nil, err)
			}
			c, err := statefulset.New(statefulset.Config{}, cl, factory)
			return add("statefulset", c, err)
		},
		func() error {
			cl, err := own("daemon-set-controller")
			if err != nil {
				return add("daemon-set-controller", nil, err)
			}
			c, err := daemonset.New(daemonset.Config{}, cl, factory)
			return add("daemonset", c, err)
		},
		func() error {
			cl, err := own("endpointslice-controller")
			if err != nil {
				return add("endpointslice-controller", nil, err)
			}
			c, err := endpointslice.New(endpointslice.Config{}, cl, factory)
			return add("endpointslice", c, err)
		},
		func() error {
			cl, err := own("endpoint-controller")
			if err != nil {
				return add("endpoint-controller", nil, err)
			}
			c, err := endpoint.New(endpoint.Config{}, cl, factory)
			return add("endpoint", c, err)
		},
		func() error {
			cl, err := own("endpointslicemirroring-controller")
			if err != nil {
				return add("endpointslicemirroring-controller", nil, err)
			}
			c, err := endpointslicemirroring.New(endpointslicemirroring.Config{}, cl, factory)
			return add("endpointslicemirroring", c, err)
		},
		func() error {
			cl, err := own("service-account-controller")
			if err != nil {
				return add("service-account-controller", nil, err)
			}
			c, err := serviceaccount.New(serviceaccount.Config{}, cl, factory)
			return add("serviceaccount", c, err)
		},
		func() error {
			rootCA, err := rootCA(cfg.RootCA, restConfig)
			if err != nil {
				return add("root-ca-cert-publisher", nil, err)
			}
			cl, err := own("root-ca-cert-publisher")
			if err != nil {
				return add("root-ca-cert-publisher", nil, err)
			}
			c, err := rootcacertpublisher.New(rootcacertpublisher.Config{RootCA: rootCA, InformerClient: client}, cl, factory)
			return add("root-ca-cert-publisher", c, err)
		},
		func() error {
			cl, err := own("node-controller")
			if err != nil {
				return add("node-controller", nil, err)
			}
			c, err := nodeipam.New(nodeipam.Config{ClusterCIDR: cfg.ClusterCIDR, NodeCIDRMaskSize: cfg.NodeCIDRMaskSize}, cl, factory)
			return add("nodeipam", c, err)
		},
		func() error {
			cl, err := own("node-controller")
			if err != nil {
				return add("node-controller", nil, err)
			}
			c, err := nodelifecycle.New(nodelifecycle.Config{NodeMonitorGracePeriod: cfg.NodeMonitorGracePeriod}, cl, factory)
			return add("nodelifecycle", c, err)
		},
		func() error {
			c, err := withConfig("snapshot-controller", func(rc *rest.Config) (runner, error) {
				cl, _, err := clients(rc)
				if err != nil {
					return nil, err
				}
				snaps, err := SnapshotClient(rc)
				if err != nil {
					return nil, err
				}
				return snapshot.New(snapshot.Config{Logger: log}, cl, snaps, factory, cm.snapFactory)
			})
			return add("snapshot", c, err)
		},
		func() error {
			cl, err := own("clusterrole-aggregation-controller")
			if err != nil {
				return add("clusterrole-aggregation", nil, err)
			}
			c, err := clusterroleaggregation.New(cl, factory)
			return add("clusterrole-aggregation", c, err)
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

// rootCA is the bundle to publish: the configured one, else the CA of restConfig.
func rootCA(configured []byte, restConfig *rest.Config) ([]byte, error) {
	if len(configured) > 0 {
		return configured, nil
	}
	if len(restConfig.CAData) > 0 {
		return restConfig.CAData, nil
	}
	if restConfig.CAFile != "" {
		ca, err := os.ReadFile(restConfig.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read the root CA: %w", err)
		}
		return ca, nil
	}
	return nil, errors.New("no root CA: set RootCA or a client config with a CA")
}

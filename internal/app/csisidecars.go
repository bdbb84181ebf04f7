package app

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions"
	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubelab/kubelab/internal/controllermanager"
	csiclient "github.com/kubelab/kubelab/internal/csi/client"
	"github.com/kubelab/kubelab/internal/csi/sidecar/attacher"
	"github.com/kubelab/kubelab/internal/csi/sidecar/livenessprobe"
	"github.com/kubelab/kubelab/internal/csi/sidecar/provisioner"
	"github.com/kubelab/kubelab/internal/csi/sidecar/registrar"
	"github.com/kubelab/kubelab/internal/csi/sidecar/resizer"
	"github.com/kubelab/kubelab/internal/csi/sidecar/snapshotter"
	"github.com/kubelab/kubelab/internal/leaderelection"
)

// The CSI sidecars as commands of their own, with the flags of the upstream sidecars
// (--csi-address, --kubeconfig, --leader-election, --timeout, --v …), so that they run as
// the containers of the driver's pods; without --kubeconfig they use the pod's service
// account (in-cluster configuration).

// sidecarOptions are the flags the controller sidecars share.
type sidecarOptions struct {
	csiAddress, kubeconfig  string
	leaderElection          bool
	leaderElectionNamespace string
	leaseDuration           time.Duration
	renewDeadline           time.Duration
	retryPeriod             time.Duration
	kubeAPIQPS              float32
	kubeAPIBurst            int
	timeout                 time.Duration
	workers                 int
	retryStart, retryMax    time.Duration
	verbosity               int
	// Accepted for upstream's manifests, not served: kubelab's sidecars have no metrics
	// endpoint.
	httpEndpoint, metricsAddress string
	// notActedOn are the sidecar's own flags of upstream's manifests that it accepts
	// without acting on them.
	notActedOn []string
}

func (o *sidecarOptions) addFlags(cmd *cobra.Command, workersFlag string) {
	f := cmd.Flags()
	f.StringVar(&o.csiAddress, "csi-address", "/run/csi/socket", "the CSI driver's socket (a path or unix:///path)")
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the API server (default: the pod's service account)")
	f.Float32Var(&o.kubeAPIQPS, "kube-api-qps", 5, "queries per second to the API server")
	f.IntVar(&o.kubeAPIBurst, "kube-api-burst", 10, "burst of queries to the API server")
	f.BoolVar(&o.leaderElection, "leader-election", false, "work only while holding the sidecar's Lease, so that several replicas are safe")
	f.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the Lease (default: the pod's namespace, else kube-system)")
	f.DurationVar(&o.leaseDuration, "leader-election-lease-duration", 15*time.Second, "how long a Lease holds without renewal")
	f.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", 10*time.Second, "how long the leader retries renewing before it gives up")
	f.DurationVar(&o.retryPeriod, "leader-election-retry-period", 5*time.Second, "how often candidates try to take the Lease")
	f.DurationVar(&o.timeout, "timeout", 0, "how long one CSI call may take (default: the sidecar's)")
	f.IntVar(&o.workers, workersFlag, 0, "objects handled at once (default: the sidecar's)")
	f.DurationVar(&o.retryStart, "retry-interval-start", time.Second, "first backoff of a failed object")
	f.DurationVar(&o.retryMax, "retry-interval-max", 5*time.Minute, "longest backoff of a failed object")
	f.StringVar(&o.httpEndpoint, "http-endpoint", "", "accepted for upstream's manifests; kubelab's sidecars serve no metrics")
	f.StringVar(&o.metricsAddress, "metrics-address", "", "accepted for upstream's manifests; kubelab's sidecars serve no metrics")
	addVerbosityFlag(cmd, &o.verbosity)
}

// addVerbosityFlag is upstream's -v/--v (4 and more logs at debug level), with
// --log-format.
func addVerbosityFlag(cmd *cobra.Command, v *int) {
	cmd.Flags().IntVarP(v, "v", "v", 2, "log verbosity: 4 and more log every CSI call")
	addLogFormatFlag(cmd)
}

// ignored logs a warning for each flag of names that was set and that kubelab's sidecar
// accepts without acting on it.
func ignored(ctx context.Context, cmd *cobra.Command, log *slog.Logger, names ...string) {
	for _, n := range names {
		if f := cmd.Flags().Lookup(n); f != nil && f.Changed {
			log.WarnContext(ctx, "flag accepted but not acted on", "flag", "--"+n, "value", f.Value.String())
		}
	}
}

// sidecarLogger is the process's logger (setupLogging) at the level -v asks for, naming
// the component; the sidecar's package adds no component of its own.
func sidecarLogger(cmd *cobra.Command, component string, verbosity int) (*slog.Logger, error) {
	level := slog.LevelInfo
	if verbosity >= 4 {
		level = slog.LevelDebug
	}
	log, err := setupLogging(cmd, level)
	if err != nil {
		return nil, err
	}
	return log.With("component", component), nil
}

func (o *sidecarOptions) tuning(log *slog.Logger) csiclient.Tuning {
	return csiclient.Tuning{Workers: o.workers, Timeout: o.timeout, RetryIntervalStart: o.retryStart,
		RetryIntervalMax: o.retryMax, Logger: log}
}

// sidecarRun is a sidecar built for one term of leadership; it blocks until ctx ends.
type sidecarRun func(ctx context.Context) error

// run connects to the API server and the driver, learns the driver's name, and runs the
// sidecar that build makes (with a fresh informer factory, started before it runs) while
// it holds the Lease leasePrefix+<driver name, sanitized>, or at once without
// --leader-election.
func (o *sidecarOptions) run(cmd *cobra.Command, component, leasePrefix string,
	build func(cfg *rest.Config, client kubernetes.Interface, factory informers.SharedInformerFactory, conn *grpc.ClientConn, log *slog.Logger) (sidecarRun, error)) error {
	log, err := sidecarLogger(cmd, component, o.verbosity)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	ignored(ctx, cmd, log, append([]string{"http-endpoint", "metrics-address"}, o.notActedOn...)...)
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("%s: API server config: %w", component, err)
	}
	cfg.UserAgent, cfg.QPS, cfg.Burst = component, o.kubeAPIQPS, o.kubeAPIBurst
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", component, err)
	}
	conn, err := csiclient.Dial(o.csiAddress)
	if err != nil {
		return fmt.Errorf("%s: %w", component, err)
	}
	defer conn.Close()
	info, err := csiclient.DiscoverDriver(ctx, conn, component, "")
	if err != nil {
		return err
	}
	log.InfoContext(ctx, "driver found", "driver", info.Name, "csi-address", o.csiAddress)
	lead := func(ctx context.Context) error {
		factory := informers.NewSharedInformerFactory(client, 0)
		defer factory.Shutdown()
		r, err := build(cfg, client, factory, conn, log)
		if err != nil {
			return fmt.Errorf("%s: %w", component, err)
		}
		factory.Start(ctx.Done())
		return r(ctx)
	}
	if !o.leaderElection {
		return lead(ctx)
	}
	return leaderelection.Run(ctx, leaderelection.Config{Name: leasePrefix + leaseName(info.Name),
		Namespace: o.leaseNamespace(), LeaseDuration: o.leaseDuration, RenewDeadline: o.renewDeadline,
		RetryPeriod: o.retryPeriod, Logger: log}, client, lead)
}

// leaseNamespace is --leader-election-namespace, else the pod's own namespace (from its
// service account), else kube-system.
func (o *sidecarOptions) leaseNamespace() string {
	if o.leaderElectionNamespace != "" {
		return o.leaderElectionNamespace
	}
	if ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: o.kubeconfig}, nil).Namespace(); err == nil && ns != "" && ns != "default" {
		return ns
	}
	return "kube-system"
}

var notLeaseChars = regexp.MustCompile(`[^a-zA-Z0-9-]`)

// leaseName is a driver name as a Lease name: every character other than a letter, digit
// or dash made a dash (ebs.csi.aws.com → ebs-csi-aws-com), and an X after a trailing dash.
func leaseName(driver string) string {
	s := notLeaseChars.ReplaceAllString(driver, "-")
	if len(s) > 0 && s[len(s)-1] == '-' {
		s += "X"
	}
	return s
}

// newCSIProvisionerCommand is `kubelab csi-provisioner`: claims to volumes.
func newCSIProvisionerCommand() *cobra.Command {
	var o sidecarOptions
	var cfg provisioner.Config
	cmd := &cobra.Command{
		Use:   "csi-provisioner",
		Short: "Run the CSI external-provisioner: CreateVolume/DeleteVolume for the driver's claims (Lease <driver>)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd, "csi-provisioner", "", func(rc *rest.Config, client kubernetes.Interface, f informers.SharedInformerFactory, conn *grpc.ClientConn, log *slog.Logger) (sidecarRun, error) {
				snaps, err := controllermanager.SnapshotClient(rc)
				if err != nil {
					return nil, err
				}
				c := cfg
				c.Tuning = o.tuning(log)
				p, err := provisioner.New(c, client, f, conn, snaps)
				if err != nil {
					return nil, err
				}
				return p.Run, nil
			})
		},
	}
	o.addFlags(cmd, "worker-threads")
	f := cmd.Flags()
	f.StringVar(&cfg.DefaultFSType, "default-fstype", "", "filesystem of volumes whose class names none")
	f.BoolVar(&cfg.ExtraCreateMetadata, "extra-create-metadata", false, "pass the claim's and the PV's names as CreateVolume parameters")
	f.BoolVar(&cfg.StrictTopology, "strict-topology", false, "only the selected node's topology as the volume's requirement")
	f.StringVar(&cfg.VolumeNamePrefix, "volume-name-prefix", "pvc", "prefix of the PV names")
	f.IntVar(&cfg.VolumeNameUUIDLength, "volume-name-uuid-length", 0, "length of the claim UID in PV names (0: all of it)")
	o.notActedOn = []string{"feature-gates"}
	f.StringToString("feature-gates", nil, "accepted for upstream's manifests (Topology=true: kubelab's provisioner always passes topology)")
	return cmd
}

// newCSIAttacherCommand is `kubelab csi-attacher`: VolumeAttachments to attached volumes.
func newCSIAttacherCommand() *cobra.Command {
	var o sidecarOptions
	cmd := &cobra.Command{
		Use:   "csi-attacher",
		Short: "Run the CSI external-attacher: ControllerPublish/UnpublishVolume for the driver's VolumeAttachments (Lease external-attacher-leader-<driver>)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd, "csi-attacher", "external-attacher-leader-", func(_ *rest.Config, client kubernetes.Interface, f informers.SharedInformerFactory, conn *grpc.ClientConn, log *slog.Logger) (sidecarRun, error) {
				a, err := attacher.New(attacher.Config{Tuning: o.tuning(log)}, client, f, conn)
				if err != nil {
					return nil, err
				}
				return a.Run, nil
			})
		},
	}
	o.addFlags(cmd, "worker-threads")
	return cmd
}

// newCSIResizerCommand is `kubelab csi-resizer`: grown claims to ControllerExpandVolume.
func newCSIResizerCommand() *cobra.Command {
	var o sidecarOptions
	cmd := &cobra.Command{
		Use:   "csi-resizer",
		Short: "Run the CSI external-resizer: ControllerExpandVolume for the driver's grown claims (Lease external-resizer-<driver>)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd, "csi-resizer", "external-resizer-", func(_ *rest.Config, client kubernetes.Interface, f informers.SharedInformerFactory, conn *grpc.ClientConn, log *slog.Logger) (sidecarRun, error) {
				r, err := resizer.New(resizer.Config{Tuning: o.tuning(log)}, client, f, conn)
				if err != nil {
					return nil, err
				}
				return r.Run, nil
			})
		},
	}
	o.addFlags(cmd, "workers")
	o.notActedOn = []string{"handle-volume-inuse-error"}
	cmd.Flags().Bool("handle-volume-inuse-error", true, "accepted for upstream's manifests (kubelab's resizer expands volumes in use)")
	return cmd
}

// newCSISnapshotterCommand is `kubelab csi-snapshotter`: VolumeSnapshotContents to
// snapshots.
func newCSISnapshotterCommand() *cobra.Command {
	var o sidecarOptions
	var prefix string
	cmd := &cobra.Command{
		Use:   "csi-snapshotter",
		Short: "Run the CSI external-snapshotter sidecar: CreateSnapshot/DeleteSnapshot for the driver's VolumeSnapshotContents (Lease external-snapshotter-leader-<driver>)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd, "csi-snapshotter", "external-snapshotter-leader-", func(rc *rest.Config, client kubernetes.Interface, _ informers.SharedInformerFactory, conn *grpc.ClientConn, log *slog.Logger) (sidecarRun, error) {
				snaps, err := controllermanager.SnapshotClient(rc)
				if err != nil {
					return nil, err
				}
				snapFactory := snapinformers.NewSharedInformerFactory(snaps, 0)
				s, err := snapshotter.New(snapshotter.Config{SnapshotNamePrefix: prefix, Workers: o.workers, Timeout: o.timeout,
					RetryIntervalStart: o.retryStart, RetryIntervalMax: o.retryMax, Logger: log}, client, snaps, snapFactory, conn)
				if err != nil {
					return nil, err
				}
				return func(ctx context.Context) error {
					snapFactory.Start(ctx.Done())
					defer snapFactory.Shutdown()
					return s.Run(ctx)
				}, nil
			})
		},
	}
	o.addFlags(cmd, "worker-threads")
	cmd.Flags().StringVar(&prefix, "snapshot-name-prefix", "snapshot", "prefix of the snapshot names given to the driver")
	o.notActedOn = []string{"extra-create-metadata"}
	cmd.Flags().Bool("extra-create-metadata", false, "accepted for upstream's manifests; not acted on: CreateSnapshot gets no snapshot names as parameters")
	return cmd
}

// newNodeDriverRegistrarCommand is `kubelab node-driver-registrar`: registers the node
// plugin with the kubelet.
func newNodeDriverRegistrarCommand() *cobra.Command {
	var cfg registrar.Config
	var csiAddress, registrationDir string
	var verbosity int
	cmd := &cobra.Command{
		Use:   "node-driver-registrar",
		Short: "Register a CSI node plugin with the kubelet through its plugin registration socket",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := sidecarLogger(cmd, "node-driver-registrar", verbosity)
			if err != nil {
				return err
			}
			cfg.PluginRegistrationDir, cfg.Logger = registrationDir, log
			conn, err := csiclient.Dial(csiAddress)
			if err != nil {
				return fmt.Errorf("node-driver-registrar: %w", err)
			}
			defer conn.Close()
			r, err := registrar.New(cfg, conn)
			if err != nil {
				return err
			}
			return r.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&csiAddress, "csi-address", "/csi/csi.sock", "the CSI driver's socket as this process reaches it")
	f.StringVar(&cfg.KubeletRegistrationPath, "kubelet-registration-path", "", "the CSI driver's socket as the kubelet reaches it (an absolute path)")
	f.StringVar(&registrationDir, "plugin-registration-path", "/registration", "the kubelet's plugins_registry directory")
	addVerbosityFlag(cmd, &verbosity)
	return cmd
}

// newLivenessProbeCommand is `kubelab liveness-probe`: /healthz backed by the driver's Probe.
func newLivenessProbeCommand() *cobra.Command {
	var cfg livenessprobe.Config
	var csiAddress string
	var port, verbosity int
	cmd := &cobra.Command{
		Use:   "liveness-probe",
		Short: "Serve /healthz, answered by the CSI driver's Probe, for the kubelet's liveness probe",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Addr == "" {
				cfg.Addr = fmt.Sprintf(":%d", port)
			}
			log, err := sidecarLogger(cmd, "liveness-probe", verbosity)
			if err != nil {
				return err
			}
			cfg.Logger = log
			conn, err := csiclient.Dial(csiAddress)
			if err != nil {
				return fmt.Errorf("liveness-probe: %w", err)
			}
			defer conn.Close()
			return livenessprobe.New(cfg, conn).Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&csiAddress, "csi-address", "/csi/csi.sock", "the CSI driver's socket")
	f.IntVar(&port, "health-port", 9808, "port of /healthz (on every address)")
	f.StringVar(&cfg.Addr, "http-endpoint", "", "host:port of /healthz (instead of --health-port)")
	f.DurationVar(&cfg.ProbeTimeout, "probe-timeout", time.Second, "how long the driver's Probe may take")
	addVerbosityFlag(cmd, &verbosity)
	return cmd
}

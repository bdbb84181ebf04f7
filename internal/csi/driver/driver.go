package driver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
)

// Deps are the driver's boundaries. The controller needs Cloud; the node needs
// Metadata, Mounter and Devices.
type Deps struct {
	Cloud    Cloud
	Metadata Metadata
	Mounter  Mounter
	Devices  Devices
	// Registry receives the per-RPC metrics (a new registry when nil).
	Registry *prometheus.Registry
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Driver is the ebs.csi.aws.com CSI plugin.
type Driver struct {
	cfg     Config
	deps    Deps
	log     *slog.Logger
	metrics *metrics
	ready   atomic.Bool
	readyCh chan struct{}

	// controller state
	ctrlLocks *inflight
	nodeLocks sync.Map // instance id -> *sync.Mutex: device names are picked one at a time

	// node state
	nodeInflight *inflight
	identity     InstanceIdentity
}

// New checks cfg and returns a driver that Run serves.
func New(cfg Config, deps Deps) (*Driver, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("csi driver config: %w", err)
	}
	if cfg.Mode.controller() && deps.Cloud == nil {
		return nil, errors.New("csi driver: controller mode needs a cloud")
	}
	if cfg.Mode.node() && (deps.Metadata == nil || deps.Mounter == nil || deps.Devices == nil) {
		return nil, errors.New("csi driver: node mode needs metadata, a mounter and devices")
	}
	if deps.Registry == nil {
		deps.Registry = prometheus.NewRegistry()
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	return &Driver{
		cfg:          cfg,
		deps:         deps,
		log:          deps.Logger.With("mode", string(cfg.Mode)),
		metrics:      newMetrics(deps.Registry),
		readyCh:      make(chan struct{}),
		ctrlLocks:    newInflight(),
		nodeInflight: newInflight(),
	}, nil
}

// blankFastPather is a Mounter whose blank-device fast path is decided at run time
// (SystemMounter).
type blankFastPather interface{ BlankFastPath() BlankFastPath }

// logBlankFastPath logs the node's blank-device fast path decision: a warning when
// it is off, since every format decision then costs a blkid run.
func (d *Driver) logBlankFastPath(fp BlankFastPath) {
	attrs := []any{"enabled", fp.Enabled, "libblkid", fp.Version, "reason", fp.Reason, "took", fp.Took}
	if fp.Enabled {
		d.log.Info("blank-device fast path", attrs...)
		return
	}
	d.log.Warn("blank-device fast path off: blkid decides every format", attrs...)
}

// Ready is closed once the driver serves its socket.
func (d *Driver) Ready() <-chan struct{} { return d.readyCh }

// Registry returns the registry holding the driver's metrics.
func (d *Driver) Registry() *prometheus.Registry { return d.deps.Registry }

// Run serves the CSI services on the socket until ctx ends.
func (d *Driver) Run(ctx context.Context) error {
	if d.cfg.Mode.node() {
		id, err := d.deps.Metadata.InstanceIdentity(ctx)
		if err != nil {
			return fmt.Errorf("csi driver: read instance identity: %w", err)
		}
		d.identity = id
		if d.cfg.Mode.controller() && d.cfg.DefaultZone == "" {
			// One process serving both sides: volumes without topology go where
			// this node is, as the upstream controller does with its own metadata.
			d.cfg.DefaultZone = id.Zone
		}
		d.log.Info("node identity", "instance", id.InstanceID, "zone", id.Zone, "type", id.InstanceType)
		if fp, ok := d.deps.Mounter.(blankFastPather); ok {
			// Decided off the serving path; a NodeStageVolume that comes first
			// waits for it. Run returns once it is made (its temporary files gone).
			checked := make(chan struct{})
			defer func() { <-checked }()
			go func() {
				defer close(checked)
				d.logBlankFastPath(fp.BlankFastPath())
			}()
		}
	}
	sock, _ := socketPath(d.cfg.Endpoint)
	if err := os.MkdirAll(filepath.Dir(sock), 0o750); err != nil {
		return fmt.Errorf("csi driver: socket dir: %w", err)
	}
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("csi driver: remove stale socket: %w", err)
	}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return fmt.Errorf("csi driver: listen on %s: %w", sock, err)
	}
	defer os.Remove(sock)

	srv := grpc.NewServer(grpc.UnaryInterceptor(d.interceptor))
	csi.RegisterIdentityServer(srv, &identity{d: d})
	if d.cfg.Mode.controller() {
		csi.RegisterControllerServer(srv, &controller{d: d})
	}
	if d.cfg.Mode.node() {
		csi.RegisterNodeServer(srv, &node{d: d})
	}

	errc := make(chan error, 2)
	var metricsSrv *http.Server
	if d.cfg.MetricsAddress != "" {
		mlis, err := net.Listen("tcp", d.cfg.MetricsAddress)
		if err != nil {
			lis.Close()
			return fmt.Errorf("csi driver: metrics listen: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(d.deps.Registry, promhttp.HandlerOpts{}))
		metricsSrv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := metricsSrv.Serve(mlis); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("csi driver: metrics: %w", err)
			}
		}()
	}
	go func() { errc <- srv.Serve(lis) }()
	d.ready.Store(true)
	close(d.readyCh)
	d.log.Info("serving", "endpoint", sock, "driver", d.cfg.DriverName)

	select {
	case <-ctx.Done():
	case err := <-errc:
		srv.Stop()
		if metricsSrv != nil {
			metricsSrv.Close()
		}
		return err
	}
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		srv.Stop()
	}
	if metricsSrv != nil {
		metricsSrv.Close()
	}
	return nil
}

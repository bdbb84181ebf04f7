package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// Config is what the server needs from its node.
type Config struct {
	// Addr is where to listen, host:port ("127.0.0.1:0" picks a free port).
	Addr string
	// Listen opens the server's listener on Addr; nil: net.Listen, in this process's
	// network namespace (a real node's kubelet listens in the node's).
	Listen func(network, address string) (net.Listener, error)
	// NodeName is the node's name, as /stats/summary reports it.
	NodeName string
	// CertFile and KeyFile are the node's serving certificate and key (PEM).
	CertFile, KeyFile string
	// ClientCAFile holds the CA certificates (PEM) client certificates must be signed by.
	ClientCAFile string
	// PodLogsDir is the node's directory of pod log directories
	// (<PodLogsDir>/<namespace>_<pod>_<uid>/<container>/<restartCount>.log).
	PodLogsDir string
	// Runtime is the node's container runtime (CRI).
	Runtime runtimeapi.RuntimeServiceClient
	// Summary, when set, answers /stats/summary instead of the runtime's CRI stats: a
	// hollow node's kubelet, whose containers run in no CRI runtime, reports its fake
	// runtime's usage through it.
	Summary func(ctx context.Context) (*statsapi.Summary, error)
	// DialStream connects to the runtime's streaming server (the URL of an exec, attach
	// or port-forward answer); nil: from this process's network namespace.
	DialStream func(ctx context.Context, network, addr string) (net.Conn, error)
	// PodLookup finds a pod bound to the node; a missing pod is an error for which
	// k8s.io/apimachinery/pkg/api/errors.IsNotFound holds (as listers return), or (nil, nil).
	PodLookup func(namespace, name string) (*corev1.Pod, error)
	// PodList lists the pods bound to the node, for GET /pods; nil: /pods is not served.
	PodList func() ([]*corev1.Pod, error)
	// Metrics and ProbeMetrics give the kubelet's metrics, served at /metrics and
	// /metrics/probes (none while they give nil: the kubelet is not running yet); nil:
	// the path is not served.
	Metrics, ProbeMetrics func() prometheus.Gatherer
	// Logger defaults to slog.Default().
	Logger *slog.Logger

	// followRecheck is how often a followed log checks whether its container still runs
	// while the file does not grow (1 s).
	followRecheck time.Duration
	// now is the clock of /stats/summary (time.Now).
	now func() time.Time
	// statsInterval is how often the runtime's stats are sampled once /stats/summary has
	// been asked for (10s).
	statsInterval time.Duration
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Listen == nil {
		c.Listen = net.Listen
	}
	if c.followRecheck <= 0 {
		c.followRecheck = time.Second
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.statsInterval <= 0 {
		c.statsInterval = 10 * time.Second
	}
}

func (c *Config) validate() error {
	var errs []error
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		errs = append(errs, fmt.Errorf("listen address %q: %w", c.Addr, err))
	}
	if c.CertFile == "" || c.KeyFile == "" {
		errs = append(errs, errors.New("serving certificate and key files are required"))
	}
	if c.ClientCAFile == "" {
		errs = append(errs, errors.New("client CA file is required"))
	}
	if c.PodLogsDir == "" || !filepath.IsAbs(c.PodLogsDir) {
		errs = append(errs, fmt.Errorf("pod logs dir %q must be an absolute path", c.PodLogsDir))
	}
	if c.Runtime == nil {
		errs = append(errs, errors.New("a container runtime is required"))
	}
	if c.PodLookup == nil {
		errs = append(errs, errors.New("a pod lookup is required"))
	}
	return errors.Join(errs...)
}

package pluginmanager

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/client-go/kubernetes"

	csiclient "github.com/kubelab/kubelab/internal/csi/client"
)

// ErrNotRegistered is matched (errors.Is) by the errors of calls for a driver that is not
// registered on the node.
var ErrNotRegistered = errors.New("csi driver not registered")

// notRegisteredError names the driver and node of an ErrNotRegistered.
type notRegisteredError struct{ driver, node string }

func (e *notRegisteredError) Error() string {
	return fmt.Sprintf("csi driver %s is not registered on node %s", e.driver, e.node)
}

func (e *notRegisteredError) Is(target error) bool { return target == ErrNotRegistered }

// driverInfo is what the manager knows of a registered CSI driver.
type driverInfo struct {
	name     string
	endpoint string
	// regSocket is the registration socket the driver registered through; only its
	// removal unregisters the driver.
	regSocket string
	nodeID    string
	// caps are the driver's node service capabilities.
	caps map[csi.NodeServiceCapability_RPC_Type]bool
}

// driverConn is the gRPC connection to a driver's endpoint.
type driverConn struct {
	endpoint string
	conn     *grpc.ClientConn
}

// Manager watches the plugin registration directory, registers CSI drivers and holds the
// connections to them.
type Manager struct {
	cfg    Config
	client kubernetes.Interface
	log    *slog.Logger
	ready  chan struct{}

	// apiMu orders the writes of registrations and de-registrations to the API (and the
	// driver table updates that go with them).
	apiMu sync.Mutex

	mu      sync.Mutex
	drivers map[string]*driverInfo
	conns   map[string]*driverConn // by driver name
	// changed is closed and replaced whenever a driver registers.
	changed chan struct{}
	stopped bool

	// hook, when set (by tests), hears of a registration socket's worker: "settled" when
	// it stopped trying to register (registered or refused for good), "done" when it
	// ended, after the de-registration a removed socket causes.
	hook func(event, path string)
}

// New builds the plugin manager of one node.
func New(cfg Config, client kubernetes.Interface) (*Manager, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if client == nil {
		return nil, errors.New("pluginmanager: a kubernetes client is required")
	}
	cfg.defaults()
	return &Manager{
		cfg: cfg, client: client, log: cfg.Logger,
		ready: make(chan struct{}), drivers: map[string]*driverInfo{}, conns: map[string]*driverConn{},
		changed: make(chan struct{}),
	}, nil
}

// Ready is closed once the registration directory is watched and its sockets found at
// start are being registered.
func (m *Manager) Ready() <-chan struct{} { return m.ready }

// Endpoint returns the CSI endpoint of a registered driver.
func (m *Manager) Endpoint(driver string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, ok := m.drivers[driver]
	if !ok {
		return "", false
	}
	return d.endpoint, true
}

// WaitFor returns once driver is registered, or ctx's error.
func (m *Manager) WaitFor(ctx context.Context, driver string) error {
	for {
		m.mu.Lock()
		_, ok := m.drivers[driver]
		ch := m.changed
		m.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for csi driver %s on node %s: %w", driver, m.cfg.NodeName, ctx.Err())
		case <-ch:
		}
	}
}

// driver returns the registered driver and a connection to its endpoint.
func (m *Manager) driver(name string) (*driverInfo, *grpc.ClientConn, error) {
	m.mu.Lock()
	d, ok := m.drivers[name]
	m.mu.Unlock()
	if !ok {
		return nil, nil, &notRegisteredError{driver: name, node: m.cfg.NodeName}
	}
	conn, err := m.conn(name, d.endpoint)
	if err != nil {
		return nil, nil, err
	}
	return d, conn, nil
}

// conn returns the connection to driver's endpoint: the one it has, or a new one when
// the driver has none yet or its endpoint changed (the old one is closed then).
func (m *Manager) conn(driver, endpoint string) (*grpc.ClientConn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.stopped {
		return nil, fmt.Errorf("csi driver %s: plugin manager of node %s stopped", driver, m.cfg.NodeName)
	}
	if c, ok := m.conns[driver]; ok {
		if c.endpoint == endpoint {
			return c.conn, nil
		}
		c.conn.Close()
		delete(m.conns, driver)
	}
	conn, err := dialUnix(endpoint)
	if err != nil {
		return nil, fmt.Errorf("csi driver %s: %w", driver, err)
	}
	m.conns[driver] = &driverConn{endpoint: endpoint, conn: conn}
	return conn, nil
}

// dialUnix makes a lazy connection to a unix socket endpoint (unix:///path or /path). It
// reconnects within seconds after the server restarts.
func dialUnix(endpoint string) (*grpc.ClientConn, error) {
	target, err := csiclient.Target(endpoint)
	if err != nil {
		return nil, err
	}
	bc := backoff.DefaultConfig
	bc.MaxDelay = 2 * time.Second
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bc, MinConnectTimeout: 5 * time.Second}))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	return conn, nil
}

// setDriver records a registered driver and wakes WaitFor.
func (m *Manager) setDriver(d *driverInfo) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.drivers[d.name] = d
	close(m.changed)
	m.changed = make(chan struct{})
}

// takeDriverOf forgets the driver registered through regSocket and returns its name.
func (m *Manager) takeDriverOf(regSocket string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for name, d := range m.drivers {
		if d.regSocket == regSocket {
			delete(m.drivers, name)
			return name, true
		}
	}
	return "", false
}

// stop forgets the drivers and closes their connections.
func (m *Manager) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.stopped = true
	for name, c := range m.conns {
		c.conn.Close()
		delete(m.conns, name)
	}
	clear(m.drivers)
}

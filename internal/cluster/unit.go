package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// stopTimeout is how long a component may take to stop before the cluster gives up
// waiting for it (and says so).
const stopTimeout = 30 * time.Second

// errClusterStopped is returned by Stop and Start once the cluster no longer runs.
var errClusterStopped = errors.New("the cluster is not running")

// unit supervises one component of the cluster: it runs the component until the
// cluster's context ends, and stops and starts it on request, as an operator would
// restart a process. Each start builds the component afresh (new clients, new caches).
// A component that fails on its own is not restarted: its error ends the cluster.
type unit struct {
	name string
	run  func(ctx context.Context) error
	log  *slog.Logger

	cmds chan unitCmd
	done chan struct{} // closed when supervise returns
}

type unitCmd struct {
	start bool
	done  chan struct{} // closed once the component has stopped or been started
}

func newUnit(name string, log *slog.Logger, run func(ctx context.Context) error) *unit {
	return &unit{name: name, run: run, log: log.With("component", name), cmds: make(chan unitCmd), done: make(chan struct{})}
}

// supervise runs the unit until ctx ends. A component that returns on its own while it
// should run is an error of the cluster.
func (u *unit) supervise(ctx context.Context) error {
	defer close(u.done)
	running := false
	var (
		cancel context.CancelFunc
		exited chan error
	)
	start := func() {
		var uctx context.Context
		uctx, cancel = context.WithCancel(ctx)
		exited = make(chan error, 1)
		go func() { exited <- u.run(uctx) }()
		running = true
	}
	stop := func() {
		cancel()
		running = false
		select {
		case err := <-exited:
			if err != nil && !errors.Is(err, context.Canceled) {
				u.log.Warn("stopped with an error", "err", err)
			}
		case <-time.After(stopTimeout):
			u.log.Error("did not stop in time; left behind", "timeout", stopTimeout)
		}
	}
	start()
	for {
		var exit chan error
		if running {
			exit = exited
		}
		select {
		case <-ctx.Done():
			if running {
				stop()
			}
			return nil
		case err := <-exit:
			cancel()
			if ctx.Err() != nil {
				return nil
			}
			if err == nil {
				err = errors.New("returned while it should run")
			}
			return fmt.Errorf("%s: %w", u.name, err)
		case c := <-u.cmds:
			switch {
			case c.start && !running:
				u.log.Info("starting")
				start()
			case !c.start && running:
				u.log.Info("stopping")
				stop()
			}
			close(c.done)
		}
	}
}

// send asks the supervisor to start or stop the component and waits until it has.
func (u *unit) send(ctx context.Context, start bool) error {
	c := unitCmd{start: start, done: make(chan struct{})}
	select {
	case u.cmds <- c:
	case <-u.done:
		return fmt.Errorf("%s: %w", u.name, errClusterStopped)
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-c.done:
		return nil
	case <-u.done:
		return fmt.Errorf("%s: %w", u.name, errClusterStopped)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// units is the cluster's set of supervised components, by name.
type units struct {
	mu sync.Mutex
	m  map[string]*unit
}

func (us *units) add(u *unit) {
	us.mu.Lock()
	defer us.mu.Unlock()
	if us.m == nil {
		us.m = map[string]*unit{}
	}
	us.m[u.name] = u
}

func (us *units) get(name string) (*unit, error) {
	us.mu.Lock()
	defer us.mu.Unlock()
	u, ok := us.m[name]
	if !ok {
		return nil, fmt.Errorf("no component %q in this cluster", name)
	}
	return u, nil
}

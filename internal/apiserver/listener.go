package apiserver

import (
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"
)

// trackingListener remembers the connections it accepted, so that when the server stops
// it can close the ones a graceful shutdown leaves open (watches over HTTP/2 never go idle).
// Clients then see the server go, as they would if its process ended, and reconnect.
type trackingListener struct {
	net.Listener
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func newTrackingListener(l net.Listener) *trackingListener {
	return &trackingListener{Listener: l, conns: map[net.Conn]struct{}{}}
}

func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.mu.Lock()
	l.conns[tc] = struct{}{}
	l.mu.Unlock()
	return tc, nil
}

// closeAll closes every connection still open.
func (l *trackingListener) closeAll() {
	l.mu.Lock()
	conns := l.conns
	l.conns = map[net.Conn]struct{}{}
	l.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

type trackedConn struct {
	net.Conn
	l    *trackingListener
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
	})
	return c.Conn.Close()
}

// multiListener accepts the connections of several listeners as one, so that one HTTPS
// server (one handler, one certificate) serves them all; more can be added while it
// serves. Addr is the first listener's. Accept errors of the first listener go to the
// server as they would without the others; another listener is retried after a
// temporary error and dropped (logged) once it is closed under the server.
type multiListener struct {
	primary net.Listener
	conns   chan acceptResult
	done    chan struct{}
	log     *slog.Logger

	mu     sync.Mutex
	extra  []net.Listener
	closed bool
}

type acceptResult struct {
	conn net.Conn
	err  error
}

func newMultiListener(primary net.Listener, log *slog.Logger) *multiListener {
	m := &multiListener{primary: primary, conns: make(chan acceptResult), done: make(chan struct{}), log: log}
	go m.accept(primary, true)
	return m
}

// errServerStopped answers listeners handed over after the server stopped.
var errServerStopped = errors.New("the API server has stopped")

// add serves l too; once the multiListener is closed it closes l and says so.
func (m *multiListener) add(l net.Listener) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		l.Close()
		return errServerStopped
	}
	m.extra = append(m.extra, l)
	go m.accept(l, false)
	return nil
}

func (m *multiListener) accept(l net.Listener, primary bool) {
	backoff := 5 * time.Millisecond
	for {
		c, err := l.Accept()
		if err != nil && !primary {
			select {
			case <-m.done:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				m.log.Warn("an extra API server listener was closed by its owner; it serves no more", "addr", l.Addr().String())
				return
			}
			// Out of file descriptors, say: try again, as the HTTP server does.
			time.Sleep(backoff)
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		select {
		case m.conns <- acceptResult{c, err}:
		case <-m.done:
			if c != nil {
				c.Close()
			}
			return
		}
	}
}

func (m *multiListener) Accept() (net.Conn, error) {
	select {
	case r := <-m.conns:
		return r.conn, r.err
	case <-m.done:
		return nil, net.ErrClosed
	}
}

// Close closes every listener; the first one's error is returned.
func (m *multiListener) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	close(m.done)
	extra := m.extra
	m.mu.Unlock()
	err := m.primary.Close()
	for _, l := range extra {
		l.Close()
	}
	return err
}

func (m *multiListener) Addr() net.Addr { return m.primary.Addr() }

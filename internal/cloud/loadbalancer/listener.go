package loadbalancer

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
)

// listenerConfig is what a running listener serves; Apply swaps it in place.
type listenerConfig struct {
	lb        LoadBalancer
	listener  Listener
	transport string // tcp, udp
}

// kind is how the listener serves: "http" (ALB), "tcp" or "udp" (NLB).
func (c listenerConfig) kind() string {
	if c.lb.Type == "application" {
		return "http"
	}
	return c.transport
}

// listener is one bound socket of a load balancer and the connections it carries.
type listener struct {
	kind string
	cfg  atomic.Pointer[listenerConfig]

	// ctx ends when the listener closes: connection attempts to targets give up.
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	stop   func() // closes the socket (and, for HTTP, the server)
	done   chan struct{}
}

// track remembers a connection so that close ends it; false once the listener is closed.
func (l *listener) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *listener) untrack(c net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.conns, c)
}

// close closes the socket and every connection the listener carries, and waits for its
// serving goroutine.
func (l *listener) close() {
	l.cancel()
	l.mu.Lock()
	l.closed = true
	conns := l.conns
	l.conns = map[net.Conn]struct{}{}
	l.mu.Unlock()
	l.stop()
	for c := range conns {
		c.Close()
	}
	<-l.done
}

func (p *Plane) startListener(cfg listenerConfig) (*listener, error) {
	addr := net.JoinHostPort(cfg.lb.Addr, strconv.Itoa(cfg.listener.Port))
	l := &listener{kind: cfg.kind(), conns: map[net.Conn]struct{}{}, done: make(chan struct{})}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	l.cfg.Store(&cfg)
	switch l.kind {
	case "udp":
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			l.cancel()
			return nil, err
		}
		l.stop = func() { pc.Close() }
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer close(l.done)
			p.serveUDP(l, pc)
		}()
	case "tcp":
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			l.cancel()
			return nil, err
		}
		l.stop = func() { ln.Close() }
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer close(l.done)
			p.serveTCP(l, ln)
		}()
	default:
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			l.cancel()
			return nil, err
		}
		srv := p.httpServer(l)
		l.stop = func() { srv.Close() }
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer close(l.done)
			srv.Serve(ln)
		}()
	}
	p.log.Info("load balancer listening", "loadBalancer", cfg.lb.ARN, "address", addr, "protocol", cfg.listener.Protocol, "transport", cfg.transport)
	return l, nil
}

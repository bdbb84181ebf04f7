package loadbalancer

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// dialTimeout bounds a connection attempt to one target.
const dialTimeout = 10 * time.Second

// udpIdle is how long a UDP flow lives without packets (as an NLB's UDP flows do).
const udpIdle = 120 * time.Second

// forwardGroup is the target group of a network listener's (only) rule.
func (p *Plane) forwardGroup(cfg *listenerConfig) *group {
	for _, r := range cfg.listener.Rules {
		if len(r.Action.Forward) > 0 {
			return p.pickGroup(r.Action.Forward)
		}
	}
	return nil
}

// dialTarget connects to a target of g, trying the next one when a target refuses.
func (p *Plane) dialTarget(ctx context.Context, g *group, network string) (net.Conn, error) {
	tried := map[string]bool{}
	var errs []error
	for range g.size() {
		addr, ok := g.pick(tried)
		if !ok {
			break
		}
		tried[addr] = true
		dctx, cancel := context.WithTimeout(ctx, dialTimeout)
		c, err := p.cfg.Dial(dctx, network, addr)
		cancel()
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, errors.New("no targets")
	}
	return nil, errors.Join(errs...)
}

func (p *Plane) serveTCP(l *listener, ln net.Listener) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		if !l.track(c) {
			c.Close()
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer l.untrack(c)
			defer c.Close()
			p.proxyTCP(l, c)
		}()
	}
}

// proxyTCP carries one client connection to a target until either side closes.
func (p *Plane) proxyTCP(l *listener, client net.Conn) {
	cfg := l.cfg.Load()
	g := p.forwardGroup(cfg)
	if g == nil {
		return
	}
	up, err := p.dialTarget(l.ctx, g, "tcp")
	if err != nil {
		p.log.Debug("no target took the connection", "loadBalancer", cfg.lb.ARN, "client", client.RemoteAddr(), "err", err)
		return
	}
	if !l.track(up) {
		up.Close()
		return
	}
	defer l.untrack(up)
	defer up.Close()
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		} else {
			dst.Close()
		}
		done <- struct{}{}
	}
	go pipe(up, client)
	go pipe(client, up)
	<-done
	<-done
}

// udpFlow is one client's flow through a UDP listener.
type udpFlow struct {
	conn net.Conn
	last time.Time
}

func (p *Plane) serveUDP(l *listener, pc net.PacketConn) {
	var mu sync.Mutex
	flows := map[string]*udpFlow{}
	var wg sync.WaitGroup
	defer func() {
		mu.Lock()
		for _, f := range flows {
			f.conn.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	stopReap := make(chan struct{})
	defer close(stopReap)
	go func() {
		t := time.NewTicker(udpIdle / 4)
		defer t.Stop()
		for {
			select {
			case <-stopReap:
				return
			case now := <-t.C:
				mu.Lock()
				for k, f := range flows {
					if now.Sub(f.last) > udpIdle {
						f.conn.Close()
						delete(flows, k)
					}
				}
				mu.Unlock()
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, from, err := pc.ReadFrom(buf)
		if err != nil {
			return
		}
		key := from.String()
		mu.Lock()
		f := flows[key]
		mu.Unlock()
		if f == nil {
			g := p.forwardGroup(l.cfg.Load())
			if g == nil {
				continue
			}
			up, err := p.dialTarget(l.ctx, g, "udp")
			if err != nil {
				continue
			}
			f = &udpFlow{conn: up}
			mu.Lock()
			flows[key] = f
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				rb := make([]byte, 64<<10)
				for {
					m, err := up.Read(rb)
					if err != nil {
						return
					}
					mu.Lock()
					f.last = time.Now()
					mu.Unlock()
					pc.WriteTo(rb[:m], from)
				}
			}()
		}
		mu.Lock()
		f.last = time.Now()
		mu.Unlock()
		f.conn.Write(buf[:n])
	}
}

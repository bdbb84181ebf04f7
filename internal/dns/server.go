package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"time"

	mdns "github.com/miekg/dns"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// shutdownTimeout bounds how long Serve waits for queries in flight when ctx ends.
const shutdownTimeout = 5 * time.Second

// Server is the cluster DNS server.
type Server struct {
	cfg     Config
	log     *slog.Logger
	factory informers.SharedInformerFactory
	synced  []cache.InformerSynced
	res     *resolver
	fwd     *forwarder // nil without upstreams
	serial  atomic.Uint32
	serving atomic.Bool
}

// New makes a server answering from the cluster client's Services, EndpointSlices and
// Namespaces; it watches them once Serve is called.
func New(cfg Config, client kubernetes.Interface) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if client == nil {
		return nil, errors.New("dns: a cluster client is required")
	}
	cfg.defaults()
	s := &Server{cfg: cfg, log: cfg.Logger,
		factory: informers.NewSharedInformerFactory(client, 0)}
	s.serial.Store(serialNow())
	svcInf := s.factory.Core().V1().Services().Informer()
	sliceInf := s.factory.Discovery().V1().EndpointSlices().Informer()
	nsInf := s.factory.Core().V1().Namespaces().Informer()
	if err := svcInf.AddIndexers(serviceIndexers()); err != nil {
		return nil, fmt.Errorf("dns: service indexes: %w", err)
	}
	if err := sliceInf.AddIndexers(sliceIndexers()); err != nil {
		return nil, fmt.Errorf("dns: endpointslice indexes: %w", err)
	}
	// Any change moves the SOA serial on.
	bump := func() { s.serial.Store(max(serialNow(), s.serial.Load()+1)) }
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { bump() },
		UpdateFunc: func(any, any) { bump() },
		DeleteFunc: func(any) { bump() },
	}
	for _, inf := range []cache.SharedIndexInformer{svcInf, sliceInf, nsInf} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			return nil, fmt.Errorf("dns: event handler: %w", err)
		}
		s.synced = append(s.synced, inf.HasSynced)
	}
	s.res = &resolver{domain: cfg.Domain, ttl: cfg.TTL, serial: s.serial.Load,
		cat:   &catalog{services: svcInf.GetIndexer(), slices: sliceInf.GetIndexer(), namespaces: nsInf.GetIndexer()},
		hosts: map[string][]netip.Addr{}}
	for name, addrs := range cfg.Hosts {
		s.res.hosts[canonicalDomain(name)] = addrs
	}
	if len(cfg.Upstreams) > 0 {
		s.fwd = &forwarder{upstreams: cfg.Upstreams, dial: cfg.Dial, timeout: upstreamTimeout, log: cfg.Logger}
	}
	return s, nil
}

func serialNow() uint32 { return uint32(time.Now().Unix()) }

// Serve answers queries on the UDP socket and the TCP listener (either may be nil, not
// both) until ctx ends. It reads neither before its caches of the cluster have synced
// (queries wait in the sockets meanwhile). Serve owns the sockets: they are closed when
// it returns. A Server serves once.
func (s *Server) Serve(ctx context.Context, udp net.PacketConn, tcp net.Listener) error {
	closeAll := func() {
		if udp != nil {
			_ = udp.Close()
		}
		if tcp != nil {
			_ = tcp.Close()
		}
	}
	if udp == nil && tcp == nil {
		return errors.New("dns: serve needs a UDP socket or a TCP listener")
	}
	if !s.serving.CompareAndSwap(false, true) {
		closeAll()
		return errors.New("dns: server already served")
	}
	defer closeAll()
	ctx, cancel := context.WithCancel(ctx)
	s.factory.Start(ctx.Done())
	defer func() {
		cancel()
		s.factory.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), s.synced...) {
		return fmt.Errorf("dns: caches did not sync: %w", context.Cause(ctx))
	}
	s.res.listen = listenAddrs(udp, tcp)

	var servers []*mdns.Server
	if udp != nil {
		servers = append(servers, &mdns.Server{PacketConn: udp, UDPSize: mdns.DefaultMsgSize})
	}
	if tcp != nil {
		servers = append(servers, &mdns.Server{Listener: tcp})
	}
	type run struct {
		srv  *mdns.Server
		done chan error
	}
	var runs []run
	exited := make(chan struct{}, len(servers))
	var err error
	for _, srv := range servers {
		r := run{srv: srv, done: make(chan error, 1)}
		up := make(chan struct{})
		srv.Handler = s.res.handler(ctx, s.fwd, s.log)
		srv.NotifyStartedFunc = func() { close(up) }
		go func() {
			r.done <- srv.ActivateAndServe()
			exited <- struct{}{}
		}()
		select {
		case <-up:
			runs = append(runs, r)
		case err = <-r.done:
		}
		if err != nil {
			break
		}
	}
	if err == nil {
		s.log.Info("serving cluster DNS", "domain", s.cfg.Domain, "udp", udpAddr(udp), "tcp", tcpAddr(tcp), "upstreams", s.cfg.Upstreams)
		select {
		case <-ctx.Done():
		case <-exited:
		}
	}
	sctx, scancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer scancel()
	for _, r := range runs {
		_ = r.srv.ShutdownContext(sctx)
	}
	for _, r := range runs {
		if e := <-r.done; e != nil && err == nil {
			err = e
		}
	}
	if err != nil {
		return fmt.Errorf("dns: serve: %w", err)
	}
	return nil
}

// listenAddrs are the specific addresses the sockets are bound to.
func listenAddrs(udp net.PacketConn, tcp net.Listener) []netip.Addr {
	var out []netip.Addr
	var addrs []net.Addr
	if udp != nil {
		addrs = append(addrs, udp.LocalAddr())
	}
	if tcp != nil {
		addrs = append(addrs, tcp.Addr())
	}
	for _, a := range addrs {
		ap, err := netip.ParseAddrPort(a.String())
		if err != nil || ap.Addr().IsUnspecified() {
			continue
		}
		if ip := ap.Addr().Unmap().WithZone(""); !slices.Contains(out, ip) {
			out = append(out, ip)
		}
	}
	return out
}

func udpAddr(c net.PacketConn) string {
	if c == nil {
		return ""
	}
	return c.LocalAddr().String()
}

func tcpAddr(l net.Listener) string {
	if l == nil {
		return ""
	}
	return l.Addr().String()
}

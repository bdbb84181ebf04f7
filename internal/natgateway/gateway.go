package natgateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"sigs.k8s.io/knftables"
)

// dialTimeout bounds how long the gateway tries to reach a destination; the client,
// whose handshake the namespace's kernel answered, waits for it meanwhile.
const dialTimeout = 30 * time.Second

// cleanupTimeout bounds the removal of the rules when Serve ends.
const cleanupTimeout = 10 * time.Second

// Gateway is the VPC's NAT gateway.
type Gateway struct {
	cfg      Config
	log      *slog.Logger
	excluded []netip.Prefix
}

// New makes a gateway; it changes nothing until Serve.
func New(cfg Config) (*Gateway, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	return &Gateway{cfg: cfg, log: cfg.Logger, excluded: excludedRanges(cfg.ClusterRanges)}, nil
}

// Serve sends the VPC's outbound TCP to l, a TCP listener the caller opened in the VPC's
// namespace on one of its addresses, and carries each connection l accepts to where its
// client was going, until ctx ends. Serve owns l: it is closed when Serve returns, after
// the rules are removed and every connection it carried is closed.
func (g *Gateway) Serve(ctx context.Context, l net.Listener) (err error) {
	defer l.Close()
	listen, perr := netip.ParseAddrPort(l.Addr().String())
	if perr != nil || !listen.Addr().Unmap().Is4() || listen.Addr().IsUnspecified() {
		return fmt.Errorf("nat gateway: listener %s: want one on a specific IPv4 address", l.Addr())
	}
	listen = netip.AddrPortFrom(listen.Addr().Unmap(), listen.Port())
	nft, err := newNFTables(g.cfg.NetNS)
	if err != nil {
		return fmt.Errorf("nat gateway: %w", err)
	}
	if err := run(ctx, nft, func(tx *knftables.Transaction) { gatewayRules(tx, listen, g.excluded) }); err != nil {
		return fmt.Errorf("nat gateway: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if cerr := run(cctx, nft, deleteTable); cerr != nil {
			err = errors.Join(err, fmt.Errorf("nat gateway: %w", cerr))
		}
	}()
	g.log.Info("NAT gateway serving", "listener", listen, "excluded", g.excluded)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	var conns sync.WaitGroup
	defer conns.Wait()
	for {
		c, aerr := l.Accept()
		if aerr != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(aerr, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("nat gateway: accept: %w", aerr)
		}
		conns.Go(func() { g.carry(ctx, c) })
	}
}

// carry connects client to where it was going and copies between them.
func (g *Gateway) carry(ctx context.Context, client net.Conn) {
	defer client.Close()
	dst, err := originalDst(client)
	if err != nil {
		g.log.Debug("NAT gateway: no original destination", "client", client.RemoteAddr(), "err", err)
		reset(client)
		return
	}
	if !carries(dst.Addr(), g.excluded) {
		g.log.Debug("NAT gateway: destination not carried", "client", client.RemoteAddr(), "dst", dst)
		reset(client)
		return
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	up, err := g.cfg.Dial(dctx, "tcp", dst.String())
	cancel()
	if err != nil {
		g.log.Debug("NAT gateway: connect", "client", client.RemoteAddr(), "dst", dst, "err", err)
		reset(client)
		return
	}
	defer up.Close()
	splice(ctx, client, up)
}

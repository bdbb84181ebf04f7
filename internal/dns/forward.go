package dns

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	mdns "github.com/miekg/dns"
)

// upstreamTimeout bounds one exchange with one upstream: within the 5 seconds a client's
// resolver waits for an answer by default, two upstreams get their try.
const upstreamTimeout = 2 * time.Second

// forwards says whether the server's answer to req, of rcode, gives way to the upstreams'
// answer: for a query (one question, not a zone transfer) of a name outside the zones,
// which the server refuses, and of a reverse name the cluster has no record of (NXDOMAIN),
// as CoreDNS's kubernetes plugin falls through to its forward plugin for the reverse
// zones. A name in the cluster domain never leaves: what the cluster lacks does not exist.
// The name goes up as the client asked it: the client's resolver has applied its search
// list and ndots already (a pod's ndots:5 sends www.example.com.<ns>.svc.cluster.local
// and the other search names first, which the server answers itself, then
// www.example.com).
func (r *resolver) forwards(req *mdns.Msg, rcode int) bool {
	if req.Opcode != mdns.OpcodeQuery || len(req.Question) != 1 {
		return false
	}
	q := req.Question[0]
	if q.Qtype == mdns.TypeAXFR || q.Qtype == mdns.TypeIXFR {
		return false
	}
	switch r.zoneOf(strings.ToLower(mdns.Fqdn(q.Name))) {
	case "":
		return rcode == mdns.RcodeRefused
	case r.domain:
		return false
	default:
		return rcode == mdns.RcodeNameError
	}
}

// forwarder sends queries to upstream nameservers.
type forwarder struct {
	upstreams []netip.AddrPort
	dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	timeout   time.Duration
	log       *slog.Logger
}

// respond is the answer to req from the first upstream that gives one, over the client's
// transport (tcp or udp), as the upstream gave it; over UDP cut to the client's buffer
// as the server's own answers are (the client asks again over TCP). When none answers,
// SERVFAIL.
func (f *forwarder) respond(ctx context.Context, req *mdns.Msg, tcp bool) *mdns.Msg {
	m, err := f.forward(ctx, req, tcp)
	if err != nil {
		f.log.Debug("forward dns query", "name", req.Question[0].Name, "type", mdns.TypeToString[req.Question[0].Qtype], "err", err)
		m = new(mdns.Msg)
		m.SetRcode(req, mdns.RcodeServerFailure)
		if req.IsEdns0() != nil {
			m.SetEdns0(udpPayload, false)
		}
		return m
	}
	m.Id = req.Id
	m.Truncate(responseSize(req, tcp))
	return m
}

// forward asks the upstreams in order until one answers.
func (f *forwarder) forward(ctx context.Context, req *mdns.Msg, tcp bool) (*mdns.Msg, error) {
	network := "udp"
	if tcp {
		network = "tcp"
	}
	var errs []error
	for _, u := range f.upstreams {
		m, err := f.exchange(ctx, network, u.String(), req)
		if err == nil {
			return m, nil
		}
		errs = append(errs, fmt.Errorf("%s %s: %w", network, u, err))
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return nil, errors.New("no upstream nameserver")
	}
	return nil, errors.Join(errs...)
}

// exchange asks the upstream at addr over network, on a connection of its own.
func (f *forwarder) exchange(ctx context.Context, network, addr string, req *mdns.Msg) (*mdns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	c, err := f.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	client := &mdns.Client{Net: network, UDPSize: mdns.MinMsgSize}
	m, _, err := client.ExchangeWithConnContext(ctx, req, &mdns.Conn{Conn: c})
	return m, err
}

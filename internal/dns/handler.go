package dns

import (
	"context"
	"log/slog"
	"net"

	mdns "github.com/miekg/dns"
)

// udpPayload is the largest UDP response the server sends (and advertises in EDNS(0)):
// larger answers are truncated and the client asks again over TCP.
const udpPayload = 1232

// respond builds the response to a request that came over TCP (tcp) or UDP.
func (r *resolver) respond(req *mdns.Msg, tcp bool) *mdns.Msg {
	m := new(mdns.Msg)
	m.SetReply(req)
	if req.Opcode != mdns.OpcodeQuery {
		m.Rcode = mdns.RcodeNotImplemented
		return m
	}
	if len(req.Question) != 1 {
		m.Rcode = mdns.RcodeFormatError
		return m
	}
	if opt := req.IsEdns0(); opt != nil {
		m.SetEdns0(udpPayload, false)
		if opt.Version() != 0 {
			m.Rcode = mdns.RcodeBadVers
			return m
		}
	}
	rep := r.resolve(req.Question[0])
	m.Rcode = rep.rcode
	m.Authoritative = rep.authoritative
	m.Answer, m.Ns = rep.answer, rep.ns
	if len(rep.extra) > 0 {
		// The OPT record stays last.
		m.Extra = append(rep.extra, m.Extra...)
	}
	m.Truncate(responseSize(req, tcp))
	return m
}

// responseSize is the largest response to req: over TCP 64 KiB; over UDP the client's
// EDNS(0) buffer, between 512 bytes (also without EDNS(0)) and udpPayload.
func responseSize(req *mdns.Msg, tcp bool) int {
	if tcp {
		return mdns.MaxMsgSize
	}
	if opt := req.IsEdns0(); opt != nil {
		return min(max(int(opt.UDPSize()), mdns.MinMsgSize), udpPayload)
	}
	return mdns.MinMsgSize
}

// handler serves the resolver's answers to miekg/dns servers, and fwd's (when not nil)
// to the queries that go upstream; ctx bounds the forwarded exchanges.
func (r *resolver) handler(ctx context.Context, fwd *forwarder, log *slog.Logger) mdns.Handler {
	return mdns.HandlerFunc(func(w mdns.ResponseWriter, req *mdns.Msg) {
		_, tcp := w.RemoteAddr().(*net.TCPAddr)
		m := r.respond(req, tcp)
		if fwd != nil && r.forwards(req, m.Rcode) {
			m = fwd.respond(ctx, req, tcp)
		}
		if err := w.WriteMsg(m); err != nil {
			log.Debug("write dns response", "client", w.RemoteAddr(), "err", err)
		}
	})
}

package dns

import (
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
	size := mdns.MinMsgSize
	opt := req.IsEdns0()
	if opt != nil {
		m.SetEdns0(udpPayload, false)
		if opt.Version() != 0 {
			m.Rcode = mdns.RcodeBadVers
			return m
		}
		size = min(max(int(opt.UDPSize()), mdns.MinMsgSize), udpPayload)
	}
	if tcp {
		size = mdns.MaxMsgSize
	}
	rep := r.resolve(req.Question[0])
	m.Rcode = rep.rcode
	m.Authoritative = rep.authoritative
	m.Answer, m.Ns = rep.answer, rep.ns
	if len(rep.extra) > 0 {
		// The OPT record stays last.
		m.Extra = append(rep.extra, m.Extra...)
	}
	m.Truncate(size)
	return m
}

// handler serves the resolver's answers to miekg/dns servers.
func (r *resolver) handler(log *slog.Logger) mdns.Handler {
	return mdns.HandlerFunc(func(w mdns.ResponseWriter, req *mdns.Msg) {
		_, tcp := w.RemoteAddr().(*net.TCPAddr)
		if err := w.WriteMsg(r.respond(req, tcp)); err != nil {
			log.Debug("write dns response", "client", w.RemoteAddr(), "err", err)
		}
	})
}

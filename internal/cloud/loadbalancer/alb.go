package loadbalancer

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"sync"
	"time"
)

// copyBuffers are the buffers the ALBs copy bodies with, shared.
var copyBuffers = &bufferPool{sync.Pool{New: func() any { return make([]byte, 32<<10) }}}

type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte  { return b.p.Get().([]byte) }
func (b *bufferPool) Put(x []byte) { b.p.Put(x) } //nolint:staticcheck // a slice header is fine here

// targetKey carries the chosen target's address through a proxied request.
type targetKey struct{}

// httpServer is an application load balancer's listener: HTTP/1.1 and, unless the load
// balancer turned it off, cleartext HTTP/2.
func (p *Plane) httpServer(l *listener) *http.Server {
	cfg := l.cfg.Load()
	idle := cfg.lb.HTTP.IdleTimeout
	if idle <= 0 {
		idle = 60 * time.Second
	}
	proxy := &httputil.ReverseProxy{
		Transport:  p.transport,
		BufferPool: copyBuffers,
		Rewrite: func(pr *httputil.ProxyRequest) {
			addr := pr.In.Context().Value(targetKey{}).(string)
			pr.Out.URL.Scheme, pr.Out.URL.Host = "http", addr
			pr.Out.Host = pr.In.Host
			setForwarded(pr.Out, pr.In, l.cfg.Load())
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			code := http.StatusBadGateway
			var ne net.Error
			if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
				code = http.StatusGatewayTimeout
			}
			p.log.Debug("target failed the request", "target", r.Context().Value(targetKey{}), "err", err)
			writeELBPage(w, code)
		},
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			p.serveHTTP(l, proxy, w, r)
		}),
		ReadHeaderTimeout: 60 * time.Second,
		IdleTimeout:       idle,
		ConnState: func(c net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				if !l.track(c) {
					c.Close()
				}
			case http.StateClosed, http.StateHijacked:
				l.untrack(c)
			}
		},
	}
	srv.Protocols = new(http.Protocols)
	srv.Protocols.SetHTTP1(true)
	if cfg.lb.HTTP.HTTP2 {
		srv.Protocols.SetUnencryptedHTTP2(true)
	}
	return srv
}

// serveHTTP routes one request by the listener's rules.
func (p *Plane) serveHTTP(l *listener, proxy *httputil.ReverseProxy, w http.ResponseWriter, r *http.Request) {
	cfg := l.cfg.Load()
	rule := matchRule(cfg.listener.Rules, r.Host, r.URL.Path)
	if rule == nil {
		writeELBPage(w, http.StatusNotFound)
		return
	}
	if f := rule.Action.Fixed; f != nil {
		if f.ContentType != "" {
			w.Header().Set("Content-Type", f.ContentType)
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(f.Body)))
		w.WriteHeader(f.StatusCode)
		w.Write([]byte(f.Body))
		return
	}
	g := p.pickGroup(rule.Action.Forward)
	if g == nil {
		writeELBPage(w, http.StatusServiceUnavailable)
		return
	}
	addr, ok := g.pick(nil)
	if !ok {
		// No registered targets: ELB answers 503.
		writeELBPage(w, http.StatusServiceUnavailable)
		return
	}
	proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, addr)))
}

// setForwarded sets the headers an ALB adds: X-Forwarded-For (as the load balancer's
// xff_header_processing.mode says), X-Forwarded-Proto, X-Forwarded-Port, and
// X-Amzn-Trace-Id when the request has none.
func setForwarded(out, in *http.Request, cfg *listenerConfig) {
	client, clientPort, err := net.SplitHostPort(in.RemoteAddr)
	if err != nil {
		client = in.RemoteAddr
	}
	if cfg.lb.HTTP.XFFClientPort && clientPort != "" {
		client = net.JoinHostPort(client, clientPort)
	}
	prior := in.Header.Values("X-Forwarded-For")
	out.Header.Del("X-Forwarded-For")
	switch cfg.lb.HTTP.XFFMode {
	case "preserve":
		for _, v := range prior {
			out.Header.Add("X-Forwarded-For", v)
		}
	case "remove":
	default:
		out.Header.Set("X-Forwarded-For", strings.Join(append(prior, client), ", "))
	}
	out.Header.Set("X-Forwarded-Proto", "http")
	out.Header.Set("X-Forwarded-Port", strconv.Itoa(cfg.listener.Port))
	if in.Header.Get("X-Amzn-Trace-Id") == "" {
		b := make([]byte, 12)
		rand.Read(b)
		out.Header.Set("X-Amzn-Trace-Id", fmt.Sprintf("Root=1-%08x-%s", time.Now().Unix(), hex.EncodeToString(b)))
	}
	out.Header.Del("Forwarded")
	out.Header.Del("X-Forwarded-Host")
}

// writeELBPage answers with the small HTML page an ELB sends for its own errors.
func writeELBPage(w http.ResponseWriter, code int) {
	text := strconv.Itoa(code) + " " + http.StatusText(code)
	body := "<html>\r\n<head><title>" + text + "</title></head>\r\n<body>\r\n<center><h1>" + text + "</h1></center>\r\n</body>\r\n</html>\r\n"
	w.Header().Set("Content-Type", "text/html")
	w.Header().Set("Server", "awselb/2.0")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	w.Write([]byte(body))
}

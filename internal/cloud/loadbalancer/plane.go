package loadbalancer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// DialFunc connects to a target.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Config configures a Plane.
type Config struct {
	// Dial reaches targets (and their health check ports). Default: a plain dialer.
	Dial DialFunc
	// OnHealth is told each change of a target's health; it must not call Apply.
	OnHealth func(targetGroupARN, targetKey string, h Health)
	// Logger defaults to slog.Default().
	Logger *slog.Logger
}

// Plane runs the load balancers' listeners and health checks. Build it with New, change
// what it runs with Apply, stop it with Close.
type Plane struct {
	cfg Config
	log *slog.Logger

	mu        sync.Mutex
	listeners map[string]*listener // by bindKey
	groups    map[string]*group    // by target group ARN
	closed    bool

	// snapshot is the groups as the data path reads them.
	snapshot atomic.Pointer[map[string]*group]
	wg       sync.WaitGroup
	// transport carries ALBs' requests to targets.
	transport *http.Transport
}

// New makes a plane that runs nothing yet.
func New(cfg Config) *Plane {
	if cfg.Dial == nil {
		var d net.Dialer
		cfg.Dial = d.DialContext
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.OnHealth == nil {
		cfg.OnHealth = func(string, string, Health) {}
	}
	p := &Plane{cfg: cfg, log: cfg.Logger, listeners: map[string]*listener{}, groups: map[string]*group{}}
	p.transport = &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return cfg.Dial(ctx, network, addr)
		},
		MaxIdleConnsPerHost: 64, IdleConnTimeout: 60 * time.Second, ResponseHeaderTimeout: 60 * time.Second,
	}
	empty := map[string]*group{}
	p.snapshot.Store(&empty)
	return p
}

// group is a target group as the data path and the health checks use it.
type group struct {
	arn string

	mu         sync.Mutex
	hc         HealthCheck
	minHealthy int
	targets    []*target
	rr         int
}

// target is one target and its health checker.
type target struct {
	key, addr string

	mu     sync.Mutex
	state  checkState
	cancel context.CancelFunc
	done   chan struct{}
}

func (t *target) health() Health {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.state.health
}

// pick chooses the address of a target for a new connection, skipping those in avoid;
// false when the group has no target to offer.
func (g *group) pick(avoid map[string]bool) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	states := make([]string, len(g.targets))
	for i, t := range g.targets {
		states[i] = t.health().State
	}
	var cands []int
	for _, i := range eligible(states, g.minHealthy) {
		if !avoid[g.targets[i].addr] {
			cands = append(cands, i)
		}
	}
	if len(cands) == 0 {
		return "", false
	}
	g.rr++
	return g.targets[cands[g.rr%len(cands)]].addr, true
}

// size is how many targets a connection may try.
func (g *group) size() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.targets)
}

func (p *Plane) group(arn string) *group { return (*p.snapshot.Load())[arn] }

// pickGroup chooses a target group of a forward action by weight.
func (p *Plane) pickGroup(fwd []WeightedTargetGroup) *group {
	if len(fwd) == 1 {
		return p.group(fwd[0].ARN)
	}
	weights := make([]int, len(fwd))
	sum := 0
	for i, w := range fwd {
		weights[i] = w.Weight
		sum += w.Weight
	}
	if sum == 0 {
		return nil
	}
	if i := pickWeighted(weights, rand.IntN(sum)); i >= 0 {
		return p.group(fwd[i].ARN)
	}
	return nil
}

// Apply makes the plane run spec: it binds new listeners, closes those that are gone and
// the connections they carry, and starts and stops health checks. It returns the
// listeners it could not bind (they are tried again at the next Apply).
func (p *Plane) Apply(spec Spec) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("load balancer plane: closed")
	}
	p.applyGroupsLocked(spec.TargetGroups)
	return p.applyListenersLocked(spec.LoadBalancers)
}

func (p *Plane) applyGroupsLocked(specs []TargetGroup) {
	next := map[string]*group{}
	for _, s := range specs {
		g := p.groups[s.ARN]
		if g == nil {
			g = &group{arn: s.ARN}
		}
		g.mu.Lock()
		hcChanged := g.hc != s.HealthCheck
		g.hc, g.minHealthy = s.HealthCheck, max(s.MinHealthy, 1)
		old := map[string]*target{}
		for _, t := range g.targets {
			old[t.key] = t
		}
		var ts []*target
		for _, st := range s.Targets {
			t := old[st.Key]
			if t != nil && t.addr == st.Addr && !hcChanged {
				delete(old, st.Key)
				ts = append(ts, t)
				continue
			}
			h := st.Health
			if t != nil {
				h = t.health()
			}
			if h.State == "" {
				h = Health{State: "initial"}
			}
			nt := &target{key: st.Key, addr: st.Addr, state: checkState{health: h}}
			p.startChecker(g.arn, nt, s.HealthCheck)
			ts = append(ts, nt)
		}
		g.targets = ts
		g.mu.Unlock()
		for _, t := range old {
			stopChecker(t)
		}
		next[s.ARN] = g
	}
	for arn, g := range p.groups {
		if next[arn] == nil {
			g.mu.Lock()
			for _, t := range g.targets {
				stopChecker(t)
			}
			g.targets = nil
			g.mu.Unlock()
		}
	}
	p.groups = next
	snap := make(map[string]*group, len(next))
	for k, v := range next {
		snap[k] = v
	}
	p.snapshot.Store(&snap)
}

// bindKey names a listener's socket: address, port and transport.
func bindKey(addr string, port int, transport string) string {
	return transport + "/" + net.JoinHostPort(addr, strconv.Itoa(port))
}

func (p *Plane) applyListenersLocked(lbs []LoadBalancer) error {
	want := map[string]listenerConfig{}
	for _, lb := range lbs {
		for _, l := range lb.Listeners {
			for _, tr := range transportsOf(l.Protocol) {
				want[bindKey(lb.Addr, l.Port, tr)] = listenerConfig{lb: lb, listener: l, transport: tr}
			}
		}
	}
	for key, ln := range p.listeners {
		cfg, ok := want[key]
		if !ok || cfg.kind() != ln.kind {
			ln.close()
			delete(p.listeners, key)
		}
	}
	var errs []error
	for key, cfg := range want {
		if ln := p.listeners[key]; ln != nil {
			ln.cfg.Store(&cfg)
			continue
		}
		ln, err := p.startListener(cfg)
		if err != nil {
			errs = append(errs, fmt.Errorf("listener %s of %s: %w", key, cfg.lb.ARN, err))
			continue
		}
		p.listeners[key] = ln
	}
	return errors.Join(errs...)
}

func transportsOf(protocol string) []string {
	switch protocol {
	case "UDP":
		return []string{"udp"}
	case "TCP_UDP":
		return []string{"tcp", "udp"}
	}
	return []string{"tcp"}
}

// Close stops every listener and health check and waits for them.
func (p *Plane) Close() {
	p.mu.Lock()
	p.closed = true
	for key, ln := range p.listeners {
		ln.close()
		delete(p.listeners, key)
	}
	for _, g := range p.groups {
		g.mu.Lock()
		for _, t := range g.targets {
			stopChecker(t)
		}
		g.mu.Unlock()
	}
	p.groups = map[string]*group{}
	p.mu.Unlock()
	p.wg.Wait()
	p.transport.CloseIdleConnections()
}

// startChecker runs t's health checks until stopChecker.
func (p *Plane) startChecker(arn string, t *target, hc HealthCheck) {
	ctx, cancel := context.WithCancel(context.Background())
	t.cancel, t.done = cancel, make(chan struct{})
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(t.done)
		p.runChecks(ctx, arn, t, hc)
	}()
}

func stopChecker(t *target) {
	if t.cancel != nil {
		t.cancel()
	}
}

// runChecks probes t at hc's interval (the first probe at once) and reports changes.
func (p *Plane) runChecks(ctx context.Context, arn string, t *target, hc HealthCheck) {
	interval := max(hc.Interval, 10*time.Millisecond)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		start := time.Now()
		r := p.probe(ctx, t.addr, hc)
		if ctx.Err() != nil {
			return
		}
		t.mu.Lock()
		before := t.state.health
		t.state = step(t.state, r, hc)
		after := t.state.health
		t.mu.Unlock()
		if after != before {
			p.log.Info("target health changed", "targetGroup", arn, "target", t.key, "from", before.State, "to", after.State, "reason", after.Reason)
			p.cfg.OnHealth(arn, t.key, after)
		}
		timer.Reset(max(interval-time.Since(start), 0))
	}
}

// probe runs one health check of the target at addr.
func (p *Plane) probe(ctx context.Context, addr string, hc HealthCheck) probeResult {
	host, port, _ := net.SplitHostPort(addr)
	if hc.Port != 0 {
		port = strconv.Itoa(hc.Port)
	}
	to := net.JoinHostPort(host, port)
	ctx, cancel := context.WithTimeout(ctx, max(hc.Timeout, 10*time.Millisecond))
	defer cancel()
	if hc.Protocol != "HTTP" {
		conn, err := p.cfg.Dial(ctx, "tcp", to)
		if err != nil {
			return failure(ctx, err)
		}
		conn.Close()
		return probeResult{ok: true}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+to+hc.Path, nil)
	if err != nil {
		return probeResult{reason: reasonFailed, description: "Health checks failed"}
	}
	req.Header.Set("User-Agent", "ELB-HealthChecker/2.0")
	req.Close = true
	resp, err := p.transport.RoundTrip(req)
	if err != nil {
		return failure(ctx, err)
	}
	resp.Body.Close()
	if !matchCode(hc.Matcher, resp.StatusCode) {
		return probeResult{reason: reasonMismatch, description: fmt.Sprintf("Health checks failed with these codes: [%d]", resp.StatusCode)}
	}
	return probeResult{ok: true}
}

func failure(ctx context.Context, err error) probeResult {
	var ne net.Error
	if ctx.Err() != nil || errors.As(err, &ne) && ne.Timeout() {
		return probeResult{reason: reasonTimeout, description: "Request timed out"}
	}
	return probeResult{reason: reasonFailed, description: "Health checks failed"}
}

// TargetHealth is the plane's current view of a target's health (for tests and tools).
func (p *Plane) TargetHealth(arn, key string) (Health, bool) {
	g := p.group(arn)
	if g == nil {
		return Health{}, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range g.targets {
		if t.key == key {
			return t.health(), true
		}
	}
	return Health{}, false
}

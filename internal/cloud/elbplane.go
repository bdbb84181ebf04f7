package cloud

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/kubelab/kubelab/internal/cloud/loadbalancer"
	"github.com/kubelab/kubelab/internal/util/hostsfile"
)

// Load balancers' addresses: each load balancer listens on an address of its own in
// 127.0.0.0/8 (Linux routes the whole block to the loopback device, so binding any of
// its addresses needs no change to the machine). A cloud takes its addresses from one
// block, Config.LoadBalancerCIDR or a /24 it picks at its first start among those on
// which no socket of the machine is bound; the block and each load balancer's address
// are kept in state.db, so that a restarted cloud listens where it did.

const metaLBBlock = "lbBlock"

var loopback = netip.MustParsePrefix("127.0.0.0/8")

// parseLBBlock reads a load balancer block: a prefix of 127.0.0.0/8 with room for at
// least two addresses, away from 127.0.0.0/16 (127.0.0.1 and the resolvers' addresses).
func parseLBBlock(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, fmt.Errorf("load balancer block %q: %w", s, err)
	}
	p = p.Masked()
	if !p.Addr().Is4() || !loopback.Contains(p.Addr()) || p.Bits() > 30 || p.Bits() < 8 {
		return p, fmt.Errorf("load balancer block %q must be a prefix of 127.0.0.0/8 of /8 to /30", s)
	}
	if p.Overlaps(netip.MustParsePrefix("127.0.0.0/16")) {
		return p, fmt.Errorf("load balancer block %q must not overlap 127.0.0.0/16", s)
	}
	return p, nil
}

// loadLBBlock sets the block: the configured one, else the stored one, else a new one.
func (c *Cloud) loadLBBlock() error {
	stored, err := c.store.meta(metaLBBlock)
	if err != nil {
		return fmt.Errorf("read the load balancer block: %w", err)
	}
	s := c.cfg.LoadBalancerCIDR
	if s == "" {
		s = stored
	}
	if s == "" {
		s = pickLBBlock(loopbackInUse()).String()
	}
	if c.lbBlock, err = parseLBBlock(s); err != nil {
		return err
	}
	if s != stored {
		if err := c.store.setMeta(map[string]string{metaLBBlock: s}); err != nil {
			return fmt.Errorf("record the load balancer block: %w", err)
		}
	}
	return nil
}

// pickLBBlock picks a /24 of 127.128.0.0/9 none of whose addresses is in use.
func pickLBBlock(inUse map[netip.Addr]bool) netip.Prefix {
	var p netip.Prefix
	for try := 0; try < 64; try++ {
		p = netip.PrefixFrom(netip.AddrFrom4([4]byte{127, byte(128 + rand.IntN(127)), byte(rand.IntN(256)), 0}), 24)
		free := true
		for a := range inUse {
			if p.Contains(a) {
				free = false
				break
			}
		}
		if free {
			break
		}
	}
	return p
}

// loopbackInUse lists the IPv4 addresses of 127.0.0.0/8 that a TCP or UDP socket of the
// machine's network namespace is bound to (empty when /proc cannot tell).
func loopbackInUse() map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/udp"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 2 {
				continue
			}
			h, _, ok := strings.Cut(fields[1], ":")
			b, err := hex.DecodeString(h)
			if !ok || err != nil || len(b) != 4 {
				continue
			}
			var a [4]byte
			binary.LittleEndian.PutUint32(a[:], binary.BigEndian.Uint32(b))
			if addr := netip.AddrFrom4(a); loopback.Contains(addr) {
				out[addr] = true
			}
		}
		fh.Close()
	}
	return out
}

// LoadBalancerBlock is the block the load balancers' addresses come from.
func (c *Cloud) LoadBalancerBlock() netip.Prefix { return c.lbBlock }

// allocLBAddressLocked gives a new load balancer the first address of the block that no
// other load balancer of the cloud has and no socket of the machine is bound to.
func (c *Cloud) allocLBAddressLocked() (string, *apiError) {
	taken := map[string]bool{}
	for _, lb := range c.lbs {
		taken[lb.Address] = true
	}
	busy := loopbackInUse()
	for a := c.lbBlock.Addr().Next(); c.lbBlock.Contains(a); a = a.Next() {
		if !c.lbBlock.Contains(a.Next()) {
			break // the block's last address is its broadcast address
		}
		if !taken[a.String()] && !busy[a] {
			return a.String(), nil
		}
	}
	return "", elbErr("TooManyLoadBalancers", "The cloud's load balancer addresses (%s) are all in use", c.lbBlock)
}

// startPlaneLocked starts the data plane and hands it the load balancers (Run, once the
// state is reconciled).
func (c *Cloud) startPlaneLocked() {
	c.plane = loadbalancer.New(loadbalancer.Config{
		Dial: c.cfg.Dial, Logger: c.log.With("part", "load-balancers"),
		OnHealth: c.recordHealth,
	})
	c.syncLoadBalancersLocked()
}

// syncLoadBalancersLocked hands the data plane what the API's state says must run, keeps
// the hosts file's entries, and resets the health of targets whose group stopped serving.
// Callers hold c.mu; before Run starts the plane it does nothing.
func (c *Cloud) syncLoadBalancersLocked() {
	if c.plane == nil || c.closed {
		return
	}
	spec := c.planSpecLocked()
	used := map[string]bool{}
	for _, tg := range spec.TargetGroups {
		used[tg.ARN] = true
	}
	for arn := range c.usedTGs {
		if !used[arn] {
			c.resetHealthLocked(arn)
		}
	}
	c.usedTGs = used
	c.planeErr = c.plane.Apply(spec)
	if c.planeErr != nil {
		c.log.Warn("load balancer listeners not bound (retried)", "err", c.planeErr)
	}
	c.syncHostsLocked()
}

// retryPlane applies the state again while some listener could not be bound.
func (c *Cloud) retryPlane(ctx context.Context) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		if c.planeErr != nil {
			c.syncLoadBalancersLocked()
		}
		c.mu.Unlock()
	}
}

// resetHealthLocked makes the targets of a group that no longer serves start over as
// initial when it serves again.
func (c *Cloud) resetHealthLocked(arn string) {
	tg := c.tgs[arn]
	if tg == nil {
		return
	}
	n := tg.clone()
	changed := false
	for i := range n.Targets {
		if n.Targets[i].Health != "draining" && n.Targets[i].Health != "initial" {
			n.Targets[i].Health, n.Targets[i].Reason, n.Targets[i].Description = "initial", "Elb.RegistrationInProgress", "Target registration is in progress"
			changed = true
		}
	}
	if changed && c.persist(put(bucketTargetGroups, arn, n)) == nil {
		c.tgs[arn] = n
	}
}

func activeLB(lb *LoadBalancer) bool { return lb.State == "active" || lb.State == "active_impaired" }

func sortedLBs(m map[string]*LoadBalancer) []*LoadBalancer {
	out := make([]*LoadBalancer, 0, len(m))
	for _, lb := range m {
		out = append(out, lb)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ARN < out[j].ARN })
	return out
}

// planSpecLocked is what the data plane must run: the active load balancers and the
// target groups they forward to, with the health checks' durations divided by the
// profile's divisor.
func (c *Cloud) planSpecLocked() loadbalancer.Spec {
	var spec loadbalancer.Spec
	div := time.Duration(max(c.lat.HealthCheckDivisor, 1))
	users := c.tgUsersLocked()
	for _, lb := range sortedLBs(c.lbs) {
		if !activeLB(lb) {
			continue
		}
		idle, _ := strconv.Atoi(lbAttr(lb, "idle_timeout.timeout_seconds"))
		s := loadbalancer.LoadBalancer{ARN: lb.ARN, Type: lb.Type, Addr: lb.Address, HTTP: loadbalancer.HTTPOptions{
			IdleTimeout: time.Duration(idle) * time.Second, XFFMode: lbAttr(lb, "routing.http.xff_header_processing.mode"),
			XFFClientPort: lbAttr(lb, "routing.http.xff_client_port.enabled") == "true", HTTP2: lbAttr(lb, "routing.http2.enabled") != "false",
		}}
		var ls []*Listener
		for _, l := range c.listeners {
			if l.LoadBalancerARN == lb.ARN {
				ls = append(ls, l)
			}
		}
		sort.Slice(ls, func(i, j int) bool {
			return ls[i].Port < ls[j].Port || ls[i].Port == ls[j].Port && ls[i].Protocol < ls[j].Protocol
		})
		for _, l := range ls {
			sl := loadbalancer.Listener{ARN: l.ARN, Port: l.Port, Protocol: l.Protocol}
			for _, r := range c.rulesOfLocked(l.ARN) {
				sr := loadbalancer.Rule{Action: planAction(r.Actions)}
				for _, cd := range r.Conditions {
					sr.Conditions = append(sr.Conditions, loadbalancer.Condition{Field: cd.Field, Values: cd.Values})
				}
				sl.Rules = append(sl.Rules, sr)
			}
			sl.Rules = append(sl.Rules, loadbalancer.Rule{Action: planAction(l.DefaultActions)})
			s.Listeners = append(s.Listeners, sl)
		}
		spec.LoadBalancers = append(spec.LoadBalancers, s)
	}
	arns := make([]string, 0, len(users))
	for arn, lbARN := range users {
		if lb := c.lbs[lbARN]; lb != nil && activeLB(lb) && c.tgs[arn] != nil {
			arns = append(arns, arn)
		}
	}
	sort.Strings(arns)
	for _, arn := range arns {
		tg := c.tgs[arn]
		hc := tg.HealthCheck
		port, _ := strconv.Atoi(hc.Port) // "traffic-port" is 0
		minHealthy, _ := strconv.Atoi(tgAttr(tg, "target_group_health.unhealthy_state_routing.minimum_healthy_targets.count"))
		st := loadbalancer.TargetGroup{ARN: arn, MinHealthy: minHealthy, HealthCheck: loadbalancer.HealthCheck{
			Protocol: hc.Protocol, Port: port, Path: hc.Path, Matcher: hc.Matcher,
			Interval: time.Duration(hc.Interval) * time.Second / div, Timeout: time.Duration(hc.Timeout) * time.Second / div,
			Healthy: hc.Healthy, Unhealthy: hc.Unhealth,
		}}
		for _, t := range tg.Targets {
			if t.Health == "draining" {
				continue
			}
			host := t.ID
			if tg.TargetType == "instance" {
				inst := c.instances[t.ID]
				if inst == nil || inst.State != "running" {
					continue
				}
				host = inst.PrivateIP
			}
			st.Targets = append(st.Targets, loadbalancer.Target{
				Key: targetKey(t.ID, t.Port), Addr: host + ":" + strconv.Itoa(t.Port),
				Health: loadbalancer.Health{State: t.Health, Reason: t.Reason, Description: t.Description},
			})
		}
		spec.TargetGroups = append(spec.TargetGroups, st)
	}
	return spec
}

func targetKey(id string, port int) string { return id + ":" + strconv.Itoa(port) }

func planAction(as []Action) loadbalancer.Action {
	var out loadbalancer.Action
	for _, a := range as {
		for _, w := range a.Forward {
			out.Forward = append(out.Forward, loadbalancer.WeightedTargetGroup{ARN: w.ARN, Weight: w.Weight})
		}
		if a.Fixed != nil {
			code, _ := strconv.Atoi(a.Fixed.StatusCode)
			out.Fixed = &loadbalancer.FixedResponse{StatusCode: code, ContentType: a.Fixed.ContentType, Body: a.Fixed.MessageBody}
		}
	}
	return out
}

// recordHealth keeps a health change the data plane saw, so that DescribeTargetHealth
// shows it and a restarted cloud starts from it.
func (c *Cloud) recordHealth(arn, key string, h loadbalancer.Health) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return
	}
	tg := c.tgs[arn]
	if tg == nil {
		return
	}
	for i, t := range tg.Targets {
		if targetKey(t.ID, t.Port) != key || t.Health == "draining" {
			continue
		}
		n := tg.clone()
		n.Targets[i].Health, n.Targets[i].Reason, n.Targets[i].Description = h.State, h.Reason, h.Description
		if c.persist(put(bucketTargetGroups, arn, n)) == nil {
			c.tgs[arn] = n
		}
		return
	}
}

// hostsEntriesLocked are the DNS names of the active load balancers and their addresses.
func (c *Cloud) hostsEntriesLocked() map[string]string {
	out := map[string]string{}
	for _, lb := range c.lbs {
		if activeLB(lb) {
			out[lb.DNSName] = lb.Address
		}
	}
	return out
}

func (c *Cloud) syncHostsLocked() {
	if c.cfg.HostsFile == "" {
		return
	}
	if err := hostsfile.Update(context.Background(), c.cfg.HostsFile, c.cfg.DataDir, c.hostsEntriesLocked()); err != nil {
		c.log.Error("keep the load balancers' names in the hosts file", "err", err)
	}
}

// removeHostsEntries removes the cloud's block from the hosts file: its names do not
// answer while it is stopped.
func (c *Cloud) removeHostsEntries() {
	if c.cfg.HostsFile == "" {
		return
	}
	if err := hostsfile.Update(context.Background(), c.cfg.HostsFile, c.cfg.DataDir, nil); err != nil {
		c.log.Error("remove the load balancers' names from the hosts file", "err", err)
	}
}

// reconcileLoadBalancersLocked resumes what was under way at the last stop: load
// balancers still provisioning and targets still draining.
func (c *Cloud) reconcileLoadBalancersLocked() {
	for _, lb := range sortedLBs(c.lbs) {
		if lb.State == "provisioning" {
			c.startProvisionLocked(lb)
		}
	}
	arns := make([]string, 0, len(c.tgs))
	for arn := range c.tgs {
		arns = append(arns, arn)
	}
	sort.Strings(arns)
	for _, arn := range arns {
		for _, t := range c.tgs[arn].Targets {
			if t.Health == "draining" {
				c.startDrainLocked(arn, t)
			}
		}
	}
}

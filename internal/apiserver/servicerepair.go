package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// serviceRepair keeps the ClusterIP and NodePort reservations equal to what the Services
// hold, the way kube-apiserver's repair controllers keep its allocation bitmaps:
//
//   - A reservation no Service holds is leaked: left by a crash between reserving and
//     storing a Service, or between deleting one and releasing its values. It is taken
//     back once it has been seen leaked, unchanged (same etcd revision), on two
//     consecutive passes, and never while a request of this API server that reserved
//     it is in flight (serviceAllocator.inflight): a value a create reserved a moment
//     ago, whose Service is about to be stored, stays with that create.
//   - A value a Service holds without a reservation (lost keys, a restored etcd backup)
//     is reserved again for it, unless it is outside the ranges, which is only logged.
//
// Every repair is logged.
type serviceRepair struct {
	alloc    *serviceAllocator
	services func(ctx context.Context) ([]corev1.Service, error)
	log      *slog.Logger
	// suspects are the reservations found leaked on the last pass, with their revision.
	suspects map[string]int64
}

// repairReport is what one pass did.
type repairReport struct {
	reclaimed []string // leaked reservations taken back
	restored  []string // reservations made again for the Services holding them
	suspects  []string // leaked reservations to take back next pass if still so
}

// run repairs at once and then every interval until ctx ends.
func (r *serviceRepair) run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if _, err := r.pass(ctx); err != nil && ctx.Err() == nil {
			r.log.Warn("service allocation repair failed; retrying at the next pass", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pass compares the reservations with the Services once. The reservations are read
// before the Services, so a Service stored after the read whose values are reserved by
// then is not taken for one missing them (reserving again finds them reserved).
func (r *serviceRepair) pass(ctx context.Context) (repairReport, error) {
	a := r.alloc
	var report repairReport
	// A request in flight now may store its Service after the list below is read.
	busy := a.inflightKeys()
	var reserved []reservation
	for _, prefix := range []string{a.prefix + serviceIPPrefix, a.prefix + nodePortPrefix} {
		list, err := a.store.list(ctx, prefix)
		if err != nil {
			return report, err
		}
		reserved = append(reserved, list...)
	}
	services, err := r.services(ctx)
	if err != nil {
		return report, fmt.Errorf("list services: %w", err)
	}

	held := map[string]string{} // key → owner
	for i := range services {
		s := &services[i]
		for _, k := range a.keysOf(s) {
			if other, ok := held[k]; ok && other != ownerOf(s) {
				r.log.Error("two Services hold the same allocated value", "key", k, "service", ownerOf(s), "other", other)
				continue
			}
			held[k] = ownerOf(s)
		}
	}

	present := map[string]bool{}
	leaked := map[string]int64{}
	for _, res := range reserved {
		present[res.key] = true
		if _, ok := held[res.key]; ok || busy[res.key] || a.isInflight(res.key) {
			continue
		}
		if rev, ok := r.suspects[res.key]; ok && rev == res.revision {
			done, err := a.store.releaseIfUnchanged(ctx, res.key, res.revision)
			if err != nil {
				return report, err
			}
			if done {
				report.reclaimed = append(report.reclaimed, res.key)
				r.log.Info("reclaimed a leaked service allocation: no Service holds it", "key", res.key, "owner", res.owner)
			}
			continue
		}
		leaked[res.key] = res.revision
		report.suspects = append(report.suspects, res.key)
	}
	r.suspects = leaked

	keys := make([]string, 0, len(held))
	for k := range held {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if present[k] {
			continue
		}
		owner := held[k]
		if !a.keyInRange(k) {
			r.log.Warn("a Service holds a value outside the allocation ranges; not reserving it", "key", k, "service", owner,
				"serviceCIDR", a.cidr.String(), "nodePorts", a.ports.String())
			continue
		}
		ok, err := a.store.reserve(ctx, k, owner)
		if err != nil {
			return report, err
		}
		if ok {
			report.restored = append(report.restored, k)
			r.log.Warn("re-reserved a service allocation its Service holds without a reservation", "key", k, "service", owner)
		}
	}
	return report, nil
}

// keyInRange: key is a ClusterIP key of a host of the range or a node port key in range.
func (a *serviceAllocator) keyInRange(key string) bool {
	if ip, ok := strings.CutPrefix(key, a.prefix+serviceIPPrefix); ok {
		return a.ipAllowed(net.ParseIP(ip))
	}
	if port, ok := strings.CutPrefix(key, a.prefix+nodePortPrefix); ok {
		p, err := strconv.Atoi(port)
		return err == nil && a.portAllowed(int32(p))
	}
	return false
}

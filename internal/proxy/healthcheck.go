package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/kubelab/kubelab/internal/util/netns"
)

// healthCheck is what a Service's health check node port answers on this node: a
// load balancer sends an externalTrafficPolicy Local Service's traffic only to nodes that
// have a local endpoint, as kube-proxy's health check server tells it.
type healthCheck struct {
	Namespace, Name string
	// LocalEndpoints is how many ready endpoints of the Service run on this node.
	LocalEndpoints int
}

// healthCheckPorts are the health check node ports of the Services (type LoadBalancer,
// externalTrafficPolicy Local, spec.healthCheckNodePort set) and what each answers on
// node nodeName; slicesOf gives a Service's EndpointSlices.
func healthCheckPorts(svcs []*v1.Service, slicesOf func(*v1.Service) []*discovery.EndpointSlice, nodeName string) map[int32]healthCheck {
	out := map[int32]healthCheck{}
	for _, svc := range svcs {
		if svc.Spec.Type != v1.ServiceTypeLoadBalancer || svc.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal || svc.Spec.HealthCheckNodePort == 0 {
			continue
		}
		local := map[string]bool{}
		for _, s := range slicesOf(svc) {
			if s.AddressType != discovery.AddressTypeIPv4 {
				continue
			}
			for _, e := range s.Endpoints {
				if e.NodeName != nil && *e.NodeName == nodeName && (e.Conditions.Ready == nil || *e.Conditions.Ready) && len(e.Addresses) > 0 {
					local[e.Addresses[0]] = true
				}
			}
		}
		out[svc.Spec.HealthCheckNodePort] = healthCheck{Namespace: svc.Namespace, Name: svc.Name, LocalEndpoints: len(local)}
	}
	return out
}

// ServeHTTP answers as kube-proxy's health check server: 200 while the Service has a
// local endpoint, 503 otherwise, with the count in JSON and in
// X-Load-Balancing-Endpoint-Weight.
func (h healthCheck) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(h.LocalEndpoints))
	if h.LocalEndpoints == 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	body := map[string]any{"service": map[string]string{"namespace": h.Namespace, "name": h.Name},
		"localEndpoints": h.LocalEndpoints, "serviceProxyHealthy": true}
	_ = json.NewEncoder(w).Encode(body)
}

// healthServers listen on the health check node ports in the node's namespace.
type healthServers struct {
	netns string
	log   *slog.Logger

	mu      sync.Mutex
	servers map[int32]*healthServer
}

type healthServer struct {
	srv   *http.Server
	mu    sync.Mutex
	check healthCheck
}

func (s *healthServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.check
	s.mu.Unlock()
	h.ServeHTTP(w, r)
}

// update listens on the ports of want that have no server yet, updates the answers of
// the others and closes those no longer wanted.
func (h *healthServers) update(want map[int32]healthCheck) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.servers == nil {
		h.servers = map[int32]*healthServer{}
	}
	for port, s := range h.servers {
		if _, ok := want[port]; !ok {
			_ = s.srv.Close()
			delete(h.servers, port)
		}
	}
	for port, check := range want {
		if s := h.servers[port]; s != nil {
			s.mu.Lock()
			s.check = check
			s.mu.Unlock()
			continue
		}
		var l net.Listener
		err := netns.Do(h.netns, func() (err error) {
			l, err = net.Listen("tcp4", ":"+strconv.Itoa(int(port)))
			return err
		})
		if err != nil {
			h.log.Warn("health check node port", "service", check.Namespace+"/"+check.Name, "port", port, "err", err)
			continue
		}
		s := &healthServer{check: check}
		s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
		h.servers[port] = s
		go func() {
			if err := s.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
				h.log.Warn("health check node port", "port", port, "err", err)
			}
		}()
	}
}

// close stops every server.
func (h *healthServers) close(context.Context) {
	h.update(nil)
}

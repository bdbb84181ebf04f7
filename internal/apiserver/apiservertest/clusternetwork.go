package apiservertest

import (
	"context"
	"net"
	"sync"
)

// ClusterNetwork stands in for a cluster's network in tests: its Dial, given to the API
// server as Options.ClusterDial, connects an address routed with Route (a pod IP or
// ClusterIP and port) to a server on loopback instead, any other address as it is, and
// records every address dialled.
type ClusterNetwork struct {
	mu     sync.Mutex
	routes map[string]string
	dialed []string
}

// Route sends connections to addr (host:port) to the server at to (host:port).
func (n *ClusterNetwork) Route(addr, to string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.routes == nil {
		n.routes = map[string]string{}
	}
	n.routes[addr] = to
}

// Dial connects to addr, or to where it is routed.
func (n *ClusterNetwork) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	n.mu.Lock()
	n.dialed = append(n.dialed, addr)
	to, ok := n.routes[addr]
	n.mu.Unlock()
	if !ok {
		to = addr
	}
	var d net.Dialer
	return d.DialContext(ctx, network, to)
}

// Dialed says whether addr was dialled.
func (n *ClusterNetwork) Dialed(addr string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, a := range n.dialed {
		if a == addr {
			return true
		}
	}
	return false
}

package cloud

import (
	"fmt"
	"net"
	"strconv"
)

// metaAPIPort is the meta key of the API port of the last start.
const metaAPIPort = "apiPort"

// listenAPI opens the API's listener. A configured port is used as is. With port 0 the
// cloud listens on the port of its previous start on this data dir, so that the endpoint
// clients hold (the endpoint file, scripts, the CSI controller's configuration) stays
// valid across restarts; at the first start it takes a free port. When another process
// now holds the previous port, the cloud takes a free port too, logs a warning naming
// both, and Run rewrites the endpoint file as on every start. The port used is recorded
// in state.db for the next start.
func (c *Cloud) listenAPI() (net.Listener, error) {
	host, port, err := net.SplitHostPort(c.cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", c.cfg.Listen, err)
	}
	prev, err := c.store.meta(metaAPIPort)
	if err != nil {
		return nil, fmt.Errorf("read the api port of the last start: %w", err)
	}
	var ln net.Listener
	var prevErr error
	if port == "0" && prev != "" {
		if ln, prevErr = net.Listen("tcp", net.JoinHostPort(host, prev)); prevErr != nil {
			ln = nil
		}
	}
	if ln == nil {
		if ln, err = net.Listen("tcp", c.cfg.Listen); err != nil {
			return nil, fmt.Errorf("listen %s: %w", c.cfg.Listen, err)
		}
	}
	got := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	if prevErr != nil {
		c.log.Warn("the port of the cloud's endpoint changed: the previous one is taken by another process",
			"previousPort", prev, "err", prevErr, "endpoint", "http://"+ln.Addr().String(), "endpointFile", c.EndpointFile())
	}
	if got != prev {
		if err := c.store.setMeta(map[string]string{metaAPIPort: got}); err != nil {
			ln.Close()
			return nil, fmt.Errorf("record the api port: %w", err)
		}
	}
	return ln, nil
}

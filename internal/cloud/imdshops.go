package cloud

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"time"
)

// The IMDSv2 hop limit (MetadataOptions.HttpPutResponseHopLimit). On EC2 the metadata
// service answers a token request with IP packets whose TTL is the hop limit, so that a
// client more routing hops away never receives the token: with 1, a container behind
// its instance (whose kernel forwards the answer to it, one hop) gets none. Here the
// metadata service listens inside the node's network namespace, where a pod's packets
// are delivered locally rather than forwarded; clientHops counts that hop the node
// would forward on EC2, and the answer leaves with the TTL that remains, so that hops
// further still (a router) are counted by the kernels on the way.

// clientHops is how many forwarding hops lie between the metadata service and the client
// of r as EC2 would count them: none for the node itself (a loopback source, the
// service's own address, or the instance's private address), one for any other source
// (a pod on the node, whose packets the node forwards on EC2).
func clientHops(r *http.Request, instanceIP string) int {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return 1
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return 1
	}
	if ip.IsLoopback() || host == instanceIP {
		return 0
	}
	if la, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok && la.IP.Equal(ip) {
		return 0
	}
	return 1
}

// writeWithHopLimit answers a token request with IP packets whose TTL is ttl: it takes
// the connection over from the HTTP server, sets the socket's TTL, writes the response
// and closes the connection. With no TTL left (ttl < 1) the answer is never sent: it
// keeps the connection, silent, until the client gives up (at most a minute), as a
// client beyond the hop limit sees on EC2. It returns false, having written nothing,
// when the connection is not a socket it can take (a test's recorder); the caller
// answers normally then.
func writeWithHopLimit(w http.ResponseWriter, ttl int, ttlHeader, token string) bool {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return false
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return false
	}
	defer conn.Close()
	if ttl < 1 {
		conn.SetReadDeadline(time.Now().Add(time.Minute))
		io.Copy(io.Discard, buf)
		return true
	}
	if err := setTTL(conn, ttl); err != nil {
		// Without the limit, answering would hand the token to any hop count.
		return true
	}
	conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nServer: EC2ws\r\nContent-Type: text/plain\r\nX-Aws-Ec2-Metadata-Token-Ttl-Seconds: %s\r\n"+
		"Content-Length: %d\r\nConnection: close\r\n\r\n%s", ttlHeader, len(token), token)
	buf.Flush()
	return true
}

// setTTL sets the unicast TTL (IPv4) or hop limit (IPv6) of conn's packets.
func setTTL(conn net.Conn, hops int) error {
	sc, ok := conn.(syscall.Conn)
	if !ok {
		return fmt.Errorf("connection %T has no socket", conn)
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	err = raw.Control(func(fd uintptr) {
		if a, ok := conn.LocalAddr().(*net.TCPAddr); ok && a.IP.To4() == nil {
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IPV6, syscall.IPV6_UNICAST_HOPS, hops)
			return
		}
		serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_IP, syscall.IP_TTL, hops)
	})
	if err != nil {
		return err
	}
	return serr
}

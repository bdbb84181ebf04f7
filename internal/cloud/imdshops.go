package cloud

import (
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"
)

// writeWithHopLimit answers an IMDSv2 token request as EC2 does with
// HttpPutResponseHopLimit: the response's IP packets leave with that TTL, so that a
// client more routing hops away than the limit (a pod behind its node, with limit 1)
// never receives the token. It takes the connection over from the HTTP server, sets the
// socket's TTL, writes the response and closes the connection. It returns false, having
// written nothing, when the connection is not a TCP socket it can take (a test's
// recorder); the caller answers normally then.
func writeWithHopLimit(w http.ResponseWriter, hops int, ttlHeader, token string) bool {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return false
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return false
	}
	defer conn.Close()
	if err := setTTL(conn, hops); err != nil {
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

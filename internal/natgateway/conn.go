package natgateway

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"

	"golang.org/x/sys/unix"
)

// originalDst is where the client of c, a connection the DNAT sent to the gateway, was
// going: the destination of the connection's tracking entry before the DNAT
// (SO_ORIGINAL_DST, which reads a struct sockaddr_in).
func originalDst(c net.Conn) (netip.AddrPort, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("original destination of a %T", c)
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var mreq *unix.IPv6Mreq
	var serr error
	if err := raw.Control(func(fd uintptr) {
		// A sockaddr_in (16 bytes) fits the IPv6Mreq's 20; the getsockopt fills it.
		mreq, serr = unix.GetsockoptIPv6Mreq(int(fd), unix.IPPROTO_IP, unix.SO_ORIGINAL_DST)
	}); err != nil {
		return netip.AddrPort{}, err
	}
	if serr != nil {
		return netip.AddrPort{}, fmt.Errorf("getsockopt SO_ORIGINAL_DST: %w", serr)
	}
	return sockaddrIn(mreq.Multiaddr[:])
}

// sockaddrIn decodes a struct sockaddr_in: family (host order), port and address (network
// order).
func sockaddrIn(b []byte) (netip.AddrPort, error) {
	if len(b) < 8 || binary.NativeEndian.Uint16(b[0:2]) != unix.AF_INET {
		return netip.AddrPort{}, errors.New("original destination is not an IPv4 socket address")
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:4])), nil
}

// reset makes c's Close a reset rather than an end of stream, so its peer stops waiting.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
}

// splice copies between a and b in both directions until both are done: the end of one
// side's stream is passed on as the end of the other's writes (a half-close), so a
// client that shuts down its writes still gets its answer. An error in either direction,
// or ctx ending, closes both. The caller closes a and b.
func splice(ctx context.Context, a, b net.Conn) {
	stop := context.AfterFunc(ctx, func() {
		a.Close()
		b.Close()
	})
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		pipe(a, b)
	}()
	pipe(b, a)
	<-done
}

// pipe copies from src to dst; at src's end of stream it ends dst's writes, and on an
// error it closes both, ending the other direction too.
func pipe(dst, src net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		src.Close()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	dst.Close()
}

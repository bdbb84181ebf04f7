package overlaytest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/sys/unix"
)

// maxKept is how many packets a Capturer keeps; older ones are dropped.
const maxKept = 1 << 16

// Capturer records the IPv4 packets crossing one interface.
type Capturer struct {
	fd      int
	closed  atomic.Bool
	done    chan struct{}
	mu      sync.Mutex
	packets []Packet
	dropped int           // packets dropped from the front of packets
	others  int           // frames that were not IPv4
	notify  chan struct{} // closed and replaced when a packet arrives
}

// Capture starts recording the frames that interface iface of the network
// namespace at netnsPath ("" = the caller's) sends and receives.
func Capture(netnsPath, iface string) (*Capturer, error) {
	fd := -1
	open := func() error {
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			return err
		}
		// Protocol 0 receives nothing until bind, so no frame of another
		// interface slips in before the socket is bound to iface.
		fd, err = unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("packet socket: %w", err)
		}
		sa := &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}
		if err := unix.Bind(fd, sa); err != nil {
			return fmt.Errorf("bind packet socket to %s: %w", iface, err)
		}
		tv := unix.NsecToTimeval((50 * time.Millisecond).Nanoseconds())
		if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
			return fmt.Errorf("receive timeout: %w", err)
		}
		return nil
	}
	var err error
	if netnsPath == "" {
		err = open()
	} else {
		err = ns.WithNetNSPath(netnsPath, func(ns.NetNS) error { return open() })
	}
	if err != nil {
		if fd >= 0 {
			unix.Close(fd)
		}
		return nil, fmt.Errorf("capture on %s in %q: %w", iface, netnsPath, err)
	}
	c := &Capturer{fd: fd, done: make(chan struct{}), notify: make(chan struct{})}
	go c.read()
	return c, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

func (c *Capturer) read() {
	defer close(c.done)
	buf := make([]byte, 256<<10)
	for !c.closed.Load() {
		n, from, err := unix.Recvfrom(c.fd, buf, 0)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return
		}
		p, ok := DecodeFrame(buf[:min(n, len(buf))])
		c.mu.Lock()
		if !ok {
			c.others++
			c.mu.Unlock()
			continue
		}
		if ll, isLL := from.(*unix.SockaddrLinklayer); isLL {
			p.Outgoing = ll.Pkttype == unix.PACKET_OUTGOING
		}
		c.packets = append(c.packets, p)
		if len(c.packets) > maxKept {
			drop := len(c.packets) - maxKept/2
			c.packets = append([]Packet(nil), c.packets[drop:]...)
			c.dropped += drop
		}
		close(c.notify)
		c.notify = make(chan struct{})
		c.mu.Unlock()
	}
}

// Packets returns the packets recorded so far (the last 65536 at most), oldest first.
func (c *Capturer) Packets() []Packet {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Packet(nil), c.packets...)
}

// WaitFor returns the first recorded packet, past or future, for which match holds;
// it fails when ctx ends first, listing what it saw.
func (c *Capturer) WaitFor(ctx context.Context, match func(Packet) bool) (Packet, error) {
	next := 0 // index of the next packet to look at, counting dropped ones
	for {
		c.mu.Lock()
		if next < c.dropped {
			next = c.dropped
		}
		for ; next-c.dropped < len(c.packets); next++ {
			if p := c.packets[next-c.dropped]; match(p) {
				c.mu.Unlock()
				return p, nil
			}
		}
		notify := c.notify
		c.mu.Unlock()
		select {
		case <-notify:
		case <-c.done:
			return Packet{}, errors.New("capture closed before a packet matched")
		case <-ctx.Done():
			return Packet{}, fmt.Errorf("no matching packet among %d seen: %w%s", next, ctx.Err(), c.summary())
		}
	}
}

// summary lists the last packets seen, for failure messages.
func (c *Capturer) summary() string {
	ps := c.Packets()
	if len(ps) > 20 {
		ps = ps[len(ps)-20:]
	}
	s := ""
	for _, p := range ps {
		s += "\n\t" + p.String()
	}
	return s
}

// Close stops recording; the packets stay readable.
func (c *Capturer) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	<-c.done // the reader wakes within its receive timeout
	return unix.Close(c.fd)
}

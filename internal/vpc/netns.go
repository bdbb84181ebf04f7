package vpc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/kubelab/kubelab/internal/util/netns"
)

// ensureNetNS makes a network namespace bound at path, unless one is there already.
func ensureNetNS(path string) error {
	if ns.IsNSorErr(path) == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// A file without a namespace on it (a crash between create and bind) is used as is.
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o444)
	if err != nil {
		return fmt.Errorf("create netns file %s: %w", path, err)
	}
	f.Close()
	errc := make(chan error, 1)
	go func() {
		// The thread that makes the namespace stays in it and is never unlocked: it ends
		// with this goroutine instead of going back to the runtime's pool.
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("unshare: %w", err)
			return
		}
		self := fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		if err := unix.Mount(self, path, "none", unix.MS_BIND, ""); err != nil {
			errc <- fmt.Errorf("bind %s: %w", path, err)
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		_ = os.Remove(path)
		return fmt.Errorf("netns %s: %w", path, err)
	}
	return nil
}

// removeNetNS unbinds and removes the namespace at path; the kernel frees it once no
// process or socket holds it. A missing one is not an error.
func removeNetNS(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount netns %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove netns %s: %w", path, err)
	}
	return nil
}

// withHandle runs f with a netlink handle on the namespace at path.
func withHandle(path string, f func(*netlink.Handle) error) error {
	h, err := netns.Handle(path)
	if err != nil {
		return err
	}
	defer h.Close()
	return f(h)
}

// Listen opens a stream listener inside the namespace at path; it stays there for its life.
func Listen(path, network, address string) (net.Listener, error) {
	var l net.Listener
	err := netns.Do(path, func() (err error) {
		l, err = net.Listen(network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen %s in %s: %w", address, path, err)
	}
	return l, nil
}

// ListenPacket opens a packet socket inside the namespace at path.
func ListenPacket(path, network, address string) (net.PacketConn, error) {
	var c net.PacketConn
	err := netns.Do(path, func() (err error) {
		c, err = net.ListenPacket(network, address)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listen %s in %s: %w", address, path, err)
	}
	return c, nil
}

func setUp(h *netlink.Handle, name string) error {
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("set %s up: %w", name, err)
	}
	return nil
}

// ensureAddr gives link the address cidr unless it has it.
func ensureAddr(h *netlink.Handle, link netlink.Link, cidr string) error {
	addr, err := netlink.ParseAddr(cidr)
	if err != nil {
		return err
	}
	if err := h.AddrAdd(link, addr); err != nil && !errors.Is(err, unix.EEXIST) {
		return fmt.Errorf("add %s to %s: %w", cidr, link.Attrs().Name, err)
	}
	return nil
}

// NamespaceExists says whether a network namespace is bound at path.
func NamespaceExists(path string) bool { return ns.IsNSorErr(path) == nil }

// DialContext dials from inside the namespace at path; the connection stays there.
func DialContext(path string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := netns.Do(path, func() (err error) {
			var d net.Dialer
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

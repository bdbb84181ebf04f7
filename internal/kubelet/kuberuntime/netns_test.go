package kuberuntime

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/kubelab/kubelab/internal/testutil"
)

// testNetNS makes a network namespace with its loopback up and a TCP server on
// 127.0.0.1 in it that writes token to each connection. It returns a path the namespace
// can be opened at (kept open until the test ends) and the server's address. The thread
// that made it goes back to its namespace (or, when it cannot, is never given back).
func testNetNS(t *testing.T, token string) (string, string) {
	t.Helper()
	ch := make(chan madeNetNS, 1)
	go func() {
		goruntime.LockOSThread()
		own, err := os.Open(threadNetNS())
		if err != nil {
			ch <- madeNetNS{err: err, step: "open own namespace"}
			return // still locked: the thread is not reused
		}
		defer own.Close()
		m := makeNetNS()
		if err := unix.Setns(int(own.Fd()), unix.CLONE_NEWNET); err != nil {
			if m.err == nil {
				m.err, m.step = err, "go back"
			}
			ch <- m
			return
		}
		goruntime.UnlockOSThread()
		ch <- m
	}()
	m := <-ch
	if m.err != nil {
		t.Fatalf("make a network namespace: %s: %v", m.step, m.err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := m.ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(token))
			c.Close()
		}
	}()
	t.Cleanup(func() { m.ln.Close(); wg.Wait(); m.ns.Close() })
	return "/proc/self/fd/" + strconv.Itoa(int(m.ns.Fd())), m.ln.Addr().String()
}

type madeNetNS struct {
	ns   *os.File
	ln   net.Listener
	err  error
	step string
}

// makeNetNS moves the calling (locked) thread into a new network namespace, brings its
// loopback up and listens there.
func makeNetNS() madeNetNS {
	fail := func(step string, err error) madeNetNS { return madeNetNS{err: err, step: step} }
	if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
		return fail("unshare", err)
	}
	ns, err := os.Open(threadNetNS())
	if err != nil {
		return fail("open namespace", err)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail("socket", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fail("ifreq", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fail("get lo flags", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fail("set lo up", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail("listen", err)
	}
	return madeNetNS{ns: ns, ln: ln}
}

// threadNetNS is the path of the calling thread's network namespace.
func threadNetNS() string { return "/proc/self/task/" + strconv.Itoa(unix.Gettid()) + "/ns/net" }

// netnsOf is the network namespace of the thread tid ("" when the thread is gone).
func netnsOf(t *testing.T, tid string) string {
	t.Helper()
	link, err := os.Readlink(filepath.Join("/proc/self/task", tid, "ns/net"))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return link
}

// ownNetNS is the network namespace of the test's threads.
func ownNetNS(t *testing.T) string {
	t.Helper()
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	return netnsOf(t, strconv.Itoa(unix.Gettid()))
}

// A connection made by dialInNetNS belongs to the namespace it was made in: it reaches a
// server that the process's own namespace cannot reach, and no thread of the process is
// left in the pod's namespace afterwards.
func TestDialInNetNS(t *testing.T) {
	testutil.RequireRoot(t)
	own := ownNetNS(t)
	nsPath, addr := testNetNS(t, "hello from the namespace")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		b, _ := io.ReadAll(c)
		c.Close()
		if string(b) == "hello from the namespace" {
			t.Fatal("the test's own namespace reaches the server: the test proves nothing")
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := dialInNetNS(ctx, nsPath, "tcp", addr)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			b, err := io.ReadAll(c)
			if err == nil && string(b) != "hello from the namespace" {
				err = errors.New("read " + strconv.Quote(string(b)))
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range tasks {
		if ns := netnsOf(t, task.Name()); ns != "" && ns != own {
			t.Errorf("thread %s left in namespace %s (own %s)", task.Name(), ns, own)
		}
	}

	// Errors name what failed; the process's namespace is used for "".
	if _, err := dialInNetNS(ctx, "/nonexistent/ns", "tcp", addr); err == nil {
		t.Error("dial into a namespace that does not exist succeeded")
	}
	if _, err := dialInNetNS(ctx, "/proc/self/status", "tcp", addr); err == nil {
		t.Error("dial into a file that is no namespace succeeded")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := dialInNetNS(ctx, "", "tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("dial in the own namespace: %v", err)
	}
	c.Close()
}

func TestNetNSPath(t *testing.T) {
	for _, tc := range []struct {
		name, info, want string
	}{
		{"spec path", `{"pid":42,"runtimeSpec":{"linux":{"namespaces":[{"type":"pid"},{"type":"network","path":"/var/run/netns/cni-1"}]}}}`, "/var/run/netns/cni-1"},
		{"pause process", `{"pid":42,"runtimeSpec":{"linux":{"namespaces":[{"type":"pid"}]}}}`, "/proc/42/ns/net"},
		{"nothing", `{"pid":0}`, ""},
		{"garbage", `{`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := netNSPath(map[string]string{"info": tc.info})
			if got != tc.want || (tc.want == "") != (err != nil) {
				t.Errorf("netNSPath = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := netNSPath(nil); !errors.Is(err, errNoNetNS) {
		t.Errorf("no info: %v", err)
	}
}

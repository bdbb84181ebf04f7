package containerd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/kubelab/kubelab/internal/util/atomicfile"
	"github.com/kubelab/kubelab/internal/util/flock"
)

// Timings of supervision.
const (
	// readyTimeout bounds how long a started containerd may take to answer CRI.
	readyTimeout = time.Minute
	// readyPoll is how often CRI is asked while containerd starts.
	readyPoll = 50 * time.Millisecond
	// minBackoff and maxBackoff bound the wait before containerd is started again after it
	// exited; the wait doubles with each exit and is reset once containerd ran stableAfter.
	minBackoff  = 500 * time.Millisecond
	maxBackoff  = 30 * time.Second
	stableAfter = time.Minute
	// stopGrace is how long containerd (or a leftover process) gets after SIGTERM before
	// SIGKILL.
	stopGrace = 5 * time.Second
)

// Containerd runs and supervises one node's containerd.
type Containerd struct {
	cfg   Config
	p     paths
	log   *slog.Logger
	ready chan struct{}

	mu  sync.Mutex
	pid int // the running containerd, 0 when none
}

// New checks cfg and returns a Containerd that Run starts. Nothing is started or written
// before Run.
func New(cfg Config) (*Containerd, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Containerd{
		cfg:   cfg,
		p:     newPaths(cfg.Dir, cfg.SocketDir),
		log:   cfg.Logger,
		ready: make(chan struct{}),
	}, nil
}

// Ready is closed once containerd first answers CRI with RuntimeReady true. It stays closed
// while Run restarts a containerd that exited.
func (c *Containerd) Ready() <-chan struct{} { return c.ready }

// Endpoint is the CRI endpoint to hand to the kubelet: "unix://" and the gRPC socket's
// path, <SocketDir>/containerd.sock.
func (c *Containerd) Endpoint() string { return "unix://" + c.p.socket }

// PID is the process id of the running containerd, 0 when none runs.
func (c *Containerd) PID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pid
}

// Run cleans what an earlier run left, writes the config, starts containerd, closes Ready
// once CRI answers, and restarts containerd (with back-off) whenever it exits. When ctx
// ends it tears everything down (teardown.go) and returns. An error means containerd could
// not be started at all, or that teardown left something behind.
func (c *Containerd) Run(ctx context.Context) (err error) {
	if _, err := exec.LookPath(c.cfg.Binary); err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	if err := os.MkdirAll(c.p.dir, 0o711); err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	unlock, err := lockDir(c.p.lockFile)
	if err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	defer unlock()
	rotateLog(c.p.logFile)
	if err := c.cleanupStale(); err != nil {
		return fmt.Errorf("containerd: clean up an earlier run in %s: %w", c.p.dir, err)
	}
	if err := writeConfig(c.cfg, c.p); err != nil {
		return fmt.Errorf("containerd: %w", err)
	}

	var proc *process
	defer func() {
		if terr := c.teardown(ctx, proc); terr != nil {
			err = errors.Join(err, fmt.Errorf("containerd: tear down %s: %w", c.p.dir, terr))
		}
	}()

	backoff := minBackoff
	for first := true; ; first = false {
		proc, err = c.start()
		if err != nil {
			if first {
				return fmt.Errorf("containerd: %w", err)
			}
			c.log.Error("start containerd", "err", err, "retry_in", backoff)
		} else if err = c.waitCRI(ctx, proc); err == nil {
			c.log.Info("containerd is ready", "pid", proc.pid, "endpoint", c.Endpoint())
			if first {
				close(c.ready)
			}
			began := time.Now()
			select {
			case <-ctx.Done():
				return nil
			case <-proc.done:
			}
			if time.Since(began) > stableAfter {
				backoff = minBackoff
			}
			c.log.Error("containerd exited; starting it again", "pid", proc.pid, "err", proc.err,
				"restart_in", backoff, "log", c.p.logFile)
		} else {
			if ctx.Err() != nil {
				return nil
			}
			c.stop(proc)
			if first {
				return fmt.Errorf("containerd: %w; its log %s ends:\n%s", err, c.p.logFile, tail(c.p.logFile, 20))
			}
			c.log.Error("containerd did not become ready", "err", err, "retry_in", backoff)
		}

		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// process is one containerd process started by start.
type process struct {
	pid  int
	done chan struct{} // closed once the process exited and was reaped
	err  error         // how it exited; set before done is closed
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// start starts containerd with this instance's config, in its own process group (a Ctrl-C
// sent to the terminal's group reaches kubelab, which tears down, but not containerd), with
// SIGKILL as its parent-death signal, so that it does not outlive a killed kubelab, and in
// the configured network namespace. It records the pid in the pid file.
func (c *Containerd) start() (*process, error) {
	c.removeSockets()
	logf, err := os.OpenFile(c.p.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	p := &process{done: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal fires when the thread that forked the child exits, not
		// the process: fork from a thread of our own that lives until containerd exits.
		runtime.LockOSThread()
		defer logf.Close()
		// A child is made in its forking thread's network namespace: this thread joins the
		// configured one to fork and goes back. A thread that cannot go back is never given
		// back to the Go scheduler (it ends with this goroutine).
		leave := func() bool { return true }
		if c.cfg.NetNS != "" {
			var err error
			if leave, err = enterNetNS(c.cfg.NetNS); err != nil {
				runtime.UnlockOSThread()
				started <- err
				return
			}
		}
		cmd := exec.Command(c.cfg.Binary, "--config", c.p.config)
		cmd.Dir = c.p.dir
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		err := cmd.Start()
		if leave() {
			defer runtime.UnlockOSThread()
		}
		if err != nil {
			started <- fmt.Errorf("start %s: %w", c.cfg.Binary, err)
			return
		}
		p.pid = cmd.Process.Pid
		started <- nil
		p.err = cmd.Wait()
		c.mu.Lock()
		if c.pid == p.pid {
			c.pid = 0
		}
		c.mu.Unlock()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.pid = p.pid
	c.mu.Unlock()
	if err := atomicfile.WriteFile(c.p.pidFile, []byte(strconv.Itoa(p.pid)+"\n"), 0o644); err != nil {
		c.log.Warn("record containerd's pid", "err", err)
	}
	c.log.Info("started containerd", "pid", p.pid, "config", c.p.config, "log", c.p.logFile)
	return p, nil
}

// waitCRI waits until containerd answers CRI Version and Status with RuntimeReady true.
func (c *Containerd) waitCRI(ctx context.Context, p *process) error {
	cl, err := Dial(c.Endpoint())
	if err != nil {
		return err
	}
	defer cl.Close()
	deadline := time.NewTimer(readyTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(readyPoll)
	defer tick.Stop()
	var last error
	for {
		if last = criReady(ctx, cl); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			return fmt.Errorf("containerd (pid %d) exited before it answered CRI: %v", p.pid, p.err)
		case <-deadline.C:
			return fmt.Errorf("containerd (pid %d) did not answer CRI within %s: %w", p.pid, readyTimeout, last)
		case <-tick.C:
		}
	}
}

func criReady(ctx context.Context, cl *Client) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	v, err := cl.Runtime.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return fmt.Errorf("CRI version: %w", err)
	}
	st, err := cl.Runtime.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return fmt.Errorf("CRI status: %w", err)
	}
	for _, cond := range st.GetStatus().GetConditions() {
		if cond.Type == runtimeapi.RuntimeReady {
			if !cond.Status {
				return fmt.Errorf("%s %s: runtime not ready: %s %s", v.RuntimeName, v.RuntimeVersion, cond.Reason, cond.Message)
			}
			return nil
		}
	}
	return fmt.Errorf("%s %s: no RuntimeReady condition", v.RuntimeName, v.RuntimeVersion)
}

// stop ends containerd: SIGTERM, then SIGKILL after stopGrace. Its shims and containers
// keep running (teardown ends them).
func (c *Containerd) stop(p *process) {
	if p == nil || p.exited() {
		return
	}
	_ = syscall.Kill(p.pid, syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(stopGrace):
	}
	c.log.Warn("containerd ignored SIGTERM; killing it", "pid", p.pid)
	_ = syscall.Kill(p.pid, syscall.SIGKILL)
	<-p.done
}

// lockDir takes an exclusive lock on path, so that only one Run manages a Dir at a time (a
// second one would end the first one's containerd as stale). The kernel drops the lock
// when the process dies, kill -9 included.
func lockDir(path string) (unlock func(), err error) {
	l, err := flock.TryExclusive(path)
	if errors.Is(err, flock.ErrLocked) {
		return nil, fmt.Errorf("%s is locked: another process runs this containerd", path)
	}
	if err != nil {
		return nil, err
	}
	return func() { _ = l.Unlock() }, nil
}

// maxLogSize is the size beyond which Run moves containerd.log to containerd.log.1 before
// it starts, keeping one earlier log.
const maxLogSize = 16 << 20

func rotateLog(path string) {
	if fi, err := os.Stat(path); err == nil && fi.Size() > maxLogSize {
		_ = os.Rename(path, path+".1")
	}
}

// tail returns the last n lines of the file at path, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// enterNetNS moves the calling thread (locked to its goroutine) into the network namespace
// at path; leave moves it back and says whether it is in its own namespace again.
func enterNetNS(path string) (leave func() bool, err error) {
	own, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, fmt.Errorf("open own network namespace: %w", err)
	}
	target, err := os.Open(path)
	if err != nil {
		own.Close()
		return nil, fmt.Errorf("open network namespace: %w", err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		own.Close()
		return nil, fmt.Errorf("enter network namespace %s: %w", path, err)
	}
	return func() bool {
		defer own.Close()
		return unix.Setns(int(own.Fd()), unix.CLONE_NEWNET) == nil
	}, nil
}

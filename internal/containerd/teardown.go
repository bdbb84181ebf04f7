package containerd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/moby/sys/mountinfo"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// teardownTimeout bounds the CRI part of teardown (stopping and removing pods).
const teardownTimeout = time.Minute

// teardown leaves nothing of this instance running or mounted:
//
//  1. through CRI, every pod sandbox is stopped (containerd runs CNI DEL and removes the
//     network namespace) and removed (with its containers). When containerd is not running
//     but tasks are left, it is started once more for this, so that CNI DEL still runs;
//  2. containerd gets SIGTERM (SIGKILL after stopGrace);
//  3. what is left is removed by hand: runc containers in this instance's runc root
//     (runc delete --force), shims whose command line names this instance's socket (by
//     PID), their sockets, mounts under root/ and state/ (deepest first), this instance's
//     sockets and pid file.
//
// Other instances' shims and mounts are never touched: they carry another socket and live
// under another Dir. Images, snapshots and metadata under root/ stay for the next run.
func (c *Containerd) teardown(ctx context.Context, p *process) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), teardownTimeout)
	defer cancel()

	if (p == nil || p.exited()) && c.tasksLeft() {
		c.log.Info("starting containerd once more to remove the pods it left")
		if np, err := c.start(); err != nil {
			c.log.Warn("start containerd for teardown", "err", err)
		} else {
			p = np
			if err := c.waitCRI(ctx, np); err != nil {
				c.log.Warn("containerd for teardown does not answer CRI", "err", err)
			}
		}
	}
	if p != nil && !p.exited() {
		if err := c.removePods(ctx); err != nil {
			c.log.Warn("remove pods through CRI; removing what is left by hand", "err", err)
		}
	}
	c.stop(p)
	if p != nil {
		c.log.Info("containerd stopped", "pid", p.pid)
	}
	return c.cleanupLeftovers()
}

// removePods stops and removes every pod sandbox, then any container left.
func (c *Containerd) removePods(ctx context.Context) error {
	cl, err := Dial(c.Endpoint())
	if err != nil {
		return err
	}
	defer cl.Close()
	sandboxes, err := cl.Runtime.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("list pod sandboxes: %w", err)
	}
	var errs []error
	for _, s := range sandboxes.Items {
		name := s.GetMetadata().GetNamespace() + "/" + s.GetMetadata().GetName()
		if _, err := cl.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stop pod sandbox %s (%s): %w", s.Id, name, err))
			continue
		}
		if _, err := cl.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: s.Id}); err != nil {
			errs = append(errs, fmt.Errorf("remove pod sandbox %s (%s): %w", s.Id, name, err))
			continue
		}
		c.log.Info("removed pod sandbox", "id", s.Id, "pod", name)
	}
	containers, err := cl.Runtime.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list containers: %w", err))...)
	}
	for _, ctr := range containers.Containers {
		if _, err := cl.Runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: ctr.Id}); err != nil {
			errs = append(errs, fmt.Errorf("remove container %s: %w", ctr.Id, err))
		}
	}
	return errors.Join(errs...)
}

// bundlesDir holds one bundle per task of the CRI namespace: the task's state, the
// address of its shim and the mount point of its rootfs.
func (p paths) bundlesDir() string {
	return filepath.Join(p.state, "io.containerd.runtime.v2.task", criNamespace)
}

// tasksLeft says whether containerd left tasks (bundles) in the state dir.
func (c *Containerd) tasksLeft() bool {
	entries, _ := os.ReadDir(c.p.bundlesDir())
	return len(entries) > 0
}

// cleanupLeftovers removes, once containerd is stopped, whatever it left running or
// mounted. It returns what it could not remove.
func (c *Containerd) cleanupLeftovers() error {
	var errs []error
	if n, err := c.deleteRuncContainers(); err != nil {
		errs = append(errs, err)
	} else if n > 0 {
		c.log.Info("deleted leftover containers with runc", "count", n)
	}
	shimSockets := c.shimSockets()
	if n, err := c.killShims(); err != nil {
		errs = append(errs, err)
	} else if n > 0 {
		c.log.Info("killed leftover shims", "count", n)
	}
	for _, s := range shimSockets {
		if err := removeSocket(s); err != nil {
			errs = append(errs, err)
		}
	}
	if n, err := unmountUnder(c.p.root, c.p.state); err != nil {
		errs = append(errs, err)
	} else if n > 0 {
		c.log.Info("unmounted leftover mounts", "count", n)
	}
	c.removeSockets()
	if err := os.Remove(c.p.pidFile); err != nil && !os.IsNotExist(err) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// deleteRuncContainers force-deletes (kills and removes) every container in this
// instance's runc root.
func (c *Containerd) deleteRuncContainers() (int, error) {
	root := filepath.Join(c.p.runcRoot, criNamespace)
	entries, err := os.ReadDir(root)
	if err != nil {
		if os.IsNotExist(err) {
			return 0, nil
		}
		return 0, err
	}
	var errs []error
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := exec.CommandContext(ctx, "runc", "--root", root, "delete", "--force", e.Name()).CombinedOutput()
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("runc delete --force %s: %w: %s", e.Name(), err, strings.TrimSpace(string(out))))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// shimSockets are the sockets of this instance's shims, as their bundles record them.
func (c *Containerd) shimSockets() []string {
	var out []string
	bundles, _ := filepath.Glob(filepath.Join(c.p.bundlesDir(), "*", "address"))
	for _, f := range bundles {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		addr := strings.TrimPrefix(strings.TrimSpace(string(b)), "unix://")
		if filepath.IsAbs(addr) {
			out = append(out, addr)
		}
	}
	return out
}

// killShims kills every shim serving this instance (its command line carries
// -address <this instance's socket>) and waits until they are gone.
func (c *Containerd) killShims() (int, error) {
	procs, err := listProcesses()
	if err != nil {
		return 0, err
	}
	var pids []int
	for _, pr := range procs {
		if isShimOf(pr.args, c.p.socket) {
			pids = append(pids, pr.pid)
		}
	}
	return len(pids), killAndWait(pids, 0)
}

// cleanupStale ends the containerd an earlier run left (kubelab was killed before its
// teardown and the parent-death signal did not end it): the pid file names it, and its
// command line names this instance's config. Any other containerd running this config
// (the pid file lost) is ended too: two on one root would block on its database. Their
// shims and containers keep running; the containerd that Run starts next adopts them from
// the same root and state.
func (c *Containerd) cleanupStale() error {
	var pids []int
	if b, err := os.ReadFile(c.p.pidFile); err == nil {
		if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid > 0 {
			if args, err := processArgs(pid); err == nil && isContainerdOf(args, c.cfg.Binary, c.p.config) {
				pids = append(pids, pid)
			}
		}
	} else if !os.IsNotExist(err) {
		return err
	}
	procs, err := listProcesses()
	if err != nil {
		return err
	}
	for _, pr := range procs {
		if isContainerdOf(pr.args, c.cfg.Binary, c.p.config) && !slices.Contains(pids, pr.pid) {
			pids = append(pids, pr.pid)
		}
	}
	if len(pids) > 0 {
		c.log.Info("ending the containerd an earlier run left", "pids", pids)
		if err := killAndWait(pids, stopGrace); err != nil {
			return err
		}
	}
	c.removeSockets()
	return nil
}

// removeSockets removes this instance's sockets, and their directory when that is empty.
func (c *Containerd) removeSockets() {
	for _, s := range []string{c.p.socket, c.p.ttrpcSocket} {
		if err := removeSocket(s); err != nil {
			c.log.Warn("remove socket", "err", err)
		}
	}
	_ = os.Remove(c.p.sockDir) // only when empty
}

// removeSocket removes path if it is a socket.
func removeSocket(path string) error {
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&os.ModeSocket == 0 {
		return nil
	}
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove socket: %w", err)
	}
	return nil
}

// unmountUnder unmounts every mount at or below the given dirs, deepest first, and returns
// how many it unmounted.
func unmountUnder(dirs ...string) (int, error) {
	n := 0
	for round := 0; round < 5; round++ {
		var points []string
		for _, d := range dirs {
			mounts, err := mountinfo.GetMounts(mountinfo.PrefixFilter(d))
			if err != nil {
				return n, fmt.Errorf("read mounts: %w", err)
			}
			for _, m := range mounts {
				points = append(points, m.Mountpoint)
			}
		}
		if len(points) == 0 {
			return n, nil
		}
		// A mount below another has a longer path: longest first is deepest first.
		sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
		for _, mp := range points {
			err := unix.Unmount(mp, unix.UMOUNT_NOFOLLOW)
			if err != nil && err != unix.EINVAL && err != unix.ENOENT {
				err = unix.Unmount(mp, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
			}
			if err == nil {
				n++
			}
		}
	}
	var left []string
	for _, d := range dirs {
		mounts, _ := mountinfo.GetMounts(mountinfo.PrefixFilter(d))
		for _, m := range mounts {
			left = append(left, m.Mountpoint)
		}
	}
	if len(left) > 0 {
		return n, fmt.Errorf("still mounted: %s", strings.Join(left, ", "))
	}
	return n, nil
}

// proc is a process as /proc shows it.
type proc struct {
	pid  int
	args []string
}

// listProcesses lists all processes with their command lines (kernel threads, which have
// none, are left out).
func listProcesses() ([]proc, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		args, err := processArgs(pid)
		if err != nil || len(args) == 0 {
			continue
		}
		out = append(out, proc{pid: pid, args: args})
	}
	return out, nil
}

// processArgs is the command line of pid.
func processArgs(pid int) ([]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil, err
	}
	b = []byte(strings.TrimRight(string(b), "\x00"))
	if len(b) == 0 {
		return nil, nil
	}
	return strings.Split(string(b), "\x00"), nil
}

// flagValue returns the value of a Go-style flag (-name v, --name v, -name=v, --name=v).
func flagValue(args []string, names ...string) (string, bool) {
	for i, a := range args {
		for _, n := range names {
			for _, dash := range []string{"-", "--"} {
				f := dash + n
				if a == f && i+1 < len(args) {
					return args[i+1], true
				}
				if v, ok := strings.CutPrefix(a, f+"="); ok {
					return v, true
				}
			}
		}
	}
	return "", false
}

// isShimOf says whether args are the command line of a containerd shim serving the
// containerd at socket.
func isShimOf(args []string, socket string) bool {
	if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
		return false
	}
	addr, ok := flagValue(args[1:], "address")
	return ok && strings.TrimPrefix(addr, "unix://") == socket
}

// isContainerdOf says whether args are the command line of binary (a containerd) running
// with the config file at config.
func isContainerdOf(args []string, binary, config string) bool {
	if len(args) == 0 || filepath.Base(args[0]) != filepath.Base(binary) {
		return false
	}
	v, ok := flagValue(args[1:], "config", "c")
	return ok && v == config
}

// killAndWait ends the processes pids (not children of ours): SIGTERM and up to grace to
// exit, then SIGKILL (at once when grace is 0); it waits until they are gone.
func killAndWait(pids []int, grace time.Duration) error {
	if len(pids) == 0 {
		return nil
	}
	sig := syscall.SIGKILL
	if grace > 0 {
		sig = syscall.SIGTERM
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, sig)
	}
	if grace > 0 && waitGone(pids, grace) {
		return nil
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if !waitGone(pids, 10*time.Second) {
		return fmt.Errorf("processes %v are still running after SIGKILL", alive(pids))
	}
	return nil
}

// waitGone polls until none of pids runs, or timeout.
func waitGone(pids []int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for {
		if len(alive(pids)) == 0 {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive returns those of pids that run: exist and are not zombies (a zombie whose parent
// has not reaped it yet runs no more).
func alive(pids []int) []int {
	var out []int
	for _, pid := range pids {
		if processRunning(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func processRunning(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) S ...: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	state := s[i+2]
	return state != 'Z' && state != 'X'
}

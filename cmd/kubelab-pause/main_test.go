package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildPause builds the command static into a temporary directory.
func buildPause(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubelab-pause")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type pauseProcess struct {
	pid  int
	done chan struct{} // closed when the process has exited
	err  error         // its Wait error, once done is closed
	cmd  *exec.Cmd
}

// startPause starts bin, kills it when the test ends, and, unless it runs as PID 1 of a
// new PID namespace, waits until it has installed its signal handlers (it then prints
// its not-PID-1 warning).
func startPause(t *testing.T, bin string, attr *syscall.SysProcAttr) *pauseProcess {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.SysProcAttr = attr
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	p := &pauseProcess{pid: cmd.Process.Pid, done: make(chan struct{}), cmd: cmd}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	if attr != nil && attr.Cloneflags&syscall.CLONE_NEWPID != 0 {
		return p
	}
	select {
	case line, ok := <-lines:
		if !ok || !strings.Contains(line, "not PID 1") {
			t.Fatalf("pause's first stderr line = %q (open %v), want its not-PID-1 warning", line, ok)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("pause printed nothing")
	}
	go func() {
		for range lines {
		}
	}()
	return p
}

func TestExitsZeroOnSignal(t *testing.T) {
	bin := buildPause(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			p := startPause(t, bin, nil)
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatalf("signal: %v", err)
			}
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				t.Fatalf("pause did not exit on %v", sig)
			}
			if p.err != nil {
				t.Fatalf("pause exited with %v on %v, want status 0", p.err, sig)
			}
		})
	}
}

func TestIgnoresOtherSignals(t *testing.T) {
	bin := buildPause(t)
	p := startPause(t, bin, nil)
	// A SIGCHLD with nothing to reap must leave pause running, as must a stray SIGURG.
	for _, sig := range []syscall.Signal{syscall.SIGCHLD, syscall.SIGURG} {
		if err := p.cmd.Process.Signal(sig); err != nil {
			t.Fatalf("signal %v: %v", sig, err)
		}
	}
	// Then SIGTERM: the exit status shows pause was still in its loop.
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("pause did not exit on SIGTERM")
	}
	if p.err != nil {
		t.Fatalf("pause exited with %v, want status 0", p.err)
	}
}

// TestReapsOrphans runs pause as PID 1 of a new PID namespace, makes a process there
// whose parent exits, and checks that pause, its new parent, reaps it once it exits.
func TestReapsOrphans(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a PID namespace")
	}
	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skip("needs nsenter to enter the PID namespace")
	}
	bin := buildPause(t)
	p := startPause(t, bin, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID})

	// sh starts sleep in the background and exits: sleep becomes pause's child.
	out, err := exec.Command("nsenter", "-t", strconv.Itoa(p.pid), "-p", "--",
		"/bin/sh", "-c", "sleep 1 </dev/null >/dev/null 2>&1 & exit 0").CombinedOutput()
	if err != nil {
		t.Fatalf("nsenter: %v\n%s", err, out)
	}
	orphans := children(t, p.pid)
	if len(orphans) != 1 {
		t.Fatalf("pause's children = %v, want the one orphaned sleep", orphans)
	}
	orphan := orphans[0]
	// Once sleep exits it stays a zombie until its parent waits for it.
	deadline := time.Now().Add(15 * time.Second)
	for {
		state, ok := processState(orphan)
		if !ok {
			break // reaped
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan %d was never reaped (state %s)", orphan, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-p.done:
		t.Fatalf("pause exited: %v", p.err)
	default:
	}
}

// children lists the PIDs whose parent is pid.
func children(t *testing.T, pid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, ok := stat(p); ok && len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// stat returns the fields of /proc/PID/stat after the command name: state, ppid, ….
func stat(pid int) ([]string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, false
	}
	return strings.Fields(s[i+1:]), true
}

func processState(pid int) (string, bool) {
	f, ok := stat(pid)
	if !ok || len(f) < 1 {
		return "", false
	}
	return f[0], true
}

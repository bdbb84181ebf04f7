package app

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kubelab/kubelab/internal/util/flock"
)

// pidFile is where `kubelab up` writes its process id, locked while it runs: a second
// `up` on the data dir is refused with the holder named, and `kubelab down` finds whom
// to stop. The lock goes with the process, even when it is killed.
func pidFile(dataDir string) string { return filepath.Join(dataDir, "kubelab.pid") }

// errNotRunning means no `kubelab up` holds the data dir.
var errNotRunning = errors.New("no kubelab up runs on this data dir")

// lockDataDir takes the data dir for this process; release gives it back.
func lockDataDir(dataDir string) (release func(), err error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, err
	}
	l, err := flock.TryExclusive(pidFile(dataDir))
	if errors.Is(err, flock.ErrLocked) {
		pid, _ := readPID(dataDir)
		return nil, fmt.Errorf("data dir %s is in use by kubelab up (pid %d); stop it with 'kubelab down --data-dir %s'", dataDir, pid, dataDir)
	}
	if err != nil {
		return nil, err
	}
	f := l.File()
	err = f.Truncate(0)
	if err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	if err != nil {
		l.Unlock()
		return nil, fmt.Errorf("write %s: %w", pidFile(dataDir), err)
	}
	return func() {
		f.Truncate(0)
		l.Unlock()
	}, nil
}

// runningPID is the pid of the `kubelab up` holding the data dir, or errNotRunning.
func runningPID(dataDir string) (int, error) {
	if _, err := os.Stat(pidFile(dataDir)); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return 0, errNotRunning
		}
		return 0, err
	}
	if l, err := flock.TryExclusive(pidFile(dataDir)); err == nil {
		l.Unlock()
		return 0, errNotRunning
	}
	return readPID(dataDir)
}

func readPID(dataDir string) (int, error) {
	b, err := os.ReadFile(pidFile(dataDir))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s holds no process id", pidFile(dataDir))
	}
	// The pid is only ever that of a kubelab up: a recycled one is not signalled.
	if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err != nil || !strings.Contains(string(cmd), "kubelab") {
		return 0, errNotRunning
	}
	return pid, nil
}

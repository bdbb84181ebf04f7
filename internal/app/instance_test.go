package app

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestLockDataDir: the data dir is held by one lockDataDir at a time, which writes its
// pid; once released, nobody runs on it and it can be taken again.
func TestLockDataDir(t *testing.T) {
	dir := t.TempDir()
	release, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(pidFile(dir)); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("pid file holds %q, %v; want %d", b, err, os.Getpid())
	}
	if _, err := lockDataDir(dir); err == nil || !strings.Contains(err.Error(), "is in use by kubelab up") {
		t.Errorf("second lock: %v, want the data dir in use", err)
	}
	release()
	if _, err := runningPID(dir); !errors.Is(err, errNotRunning) {
		t.Errorf("runningPID after release: %v, want errNotRunning", err)
	}
	again, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again()
}

func TestRunningPIDWithoutPIDFile(t *testing.T) {
	if _, err := runningPID(t.TempDir()); !errors.Is(err, errNotRunning) {
		t.Errorf("runningPID on an empty dir: %v, want errNotRunning", err)
	}
}

package flock

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kubelab/kubelab/internal/testutil"
)

func TestTryExclusive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.lock")
	l, err := TryExclusive(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := TryExclusive(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("second TryExclusive: %v, want ErrLocked", err)
	}
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := TryExclusive(path)
	if err != nil {
		t.Fatalf("TryExclusive after Unlock: %v", err)
	}
	l2.Unlock()
}

func TestTryExclusiveDir(t *testing.T) {
	dir := t.TempDir()
	l, err := TryExclusive(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("the directory changed: %v, %v", fi, err)
	}
	if _, err := TryExclusive(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("second TryExclusive: %v, want ErrLocked", err)
	}
}

// TestExclusiveWaits: a second locker waits while the first holds the lock and gets it
// once the first lets go.
func TestExclusiveWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.lock")
	first, err := TryExclusive(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waiting := make(chan struct{})
	got := make(chan error, 1)
	go func() {
		close(waiting)
		l, err := Exclusive(ctx, path)
		if err == nil {
			l.Unlock()
		}
		got <- err
	}()
	<-waiting
	waitForWaiter(t, path)
	// The kernel holds the second locker in flock(2): it has not returned.
	select {
	case err := <-got:
		t.Fatalf("Exclusive returned while the lock was held: %v", err)
	default:
	}
	if err := first.Unlock(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Exclusive after the holder let go: %v", err)
	}
}

// TestExclusiveContext: the wait ends with the context, with an error saying the lock is
// held and why the wait ended; the lock stays with its holder.
func TestExclusiveContext(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data.lock")
	first, err := TryExclusive(path)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan error, 1)
	go func() {
		_, err := Exclusive(ctx, path)
		got <- err
	}()
	cancel()
	err = <-got
	if !errors.Is(err, ErrLocked) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Exclusive with a cancelled context: %v, want ErrLocked and context.Canceled", err)
	}
	if _, err := TryExclusive(path); !errors.Is(err, ErrLocked) {
		t.Fatalf("the holder lost its lock: %v", err)
	}
}

// waitForWaiter waits until /proc/locks shows a process blocked on the flock of path.
func waitForWaiter(t *testing.T, path string) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	inode := ":" + strconv.FormatUint(fi.Sys().(*syscall.Stat_t).Ino, 10) + " "
	testutil.Eventually(t, "a waiter on "+path+" in /proc/locks", func() (bool, error) {
		b, err := os.ReadFile("/proc/locks")
		if err != nil {
			return false, err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "-> FLOCK") && strings.Contains(line, inode) {
				return true, nil
			}
		}
		return false, nil
	})
}

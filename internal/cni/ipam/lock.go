package ipam

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// lockDir takes an exclusive flock on dir through a descriptor of its own (so that
// goroutines of one process exclude each other as processes do) and returns the
// function that releases it. It waits until ctx ends, then fails with ErrBusy.
func lockDir(ctx context.Context, dir string) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	fd := int(f.Fd())
	release := func() {
		_ = unix.Flock(fd, unix.LOCK_UN)
		_ = f.Close()
	}
	err = flock(fd, unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		return release, nil
	}
	if !errors.Is(err, unix.EWOULDBLOCK) {
		_ = f.Close()
		return nil, fmt.Errorf("lock store %s: %w", dir, err)
	}
	done := make(chan error, 1)
	go func() { done <- flock(fd, unix.LOCK_EX) }()
	select {
	case err := <-done:
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("lock store %s: %w", dir, err)
		}
		return release, nil
	case <-ctx.Done():
		// The waiting flock may still succeed: the lock goes with the descriptor.
		go func() {
			<-done
			_ = f.Close()
		}()
		return nil, fmt.Errorf("%w: %s locked by another plugin process: %w", ErrBusy, dir, ctx.Err())
	}
}

func flock(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

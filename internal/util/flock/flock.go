package flock

import (
	"context"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ErrLocked means another descriptor holds the lock.
var ErrLocked = errors.New("locked by another holder")

// Lock is a held lock on one file.
type Lock struct {
	f *os.File
}

// File is the locked file, open for reading and writing (for reading only when it is a
// directory).
func (l *Lock) File() *os.File { return l.f }

// Unlock releases the lock and closes the file.
func (l *Lock) Unlock() error {
	return errors.Join(flock(int(l.f.Fd()), unix.LOCK_UN), l.f.Close())
}

// TryExclusive takes an exclusive lock on path (a file it creates when missing, or a
// directory) without waiting; it fails with ErrLocked while another holds it.
func TryExclusive(path string) (*Lock, error) {
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	if err := flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, lockError(path, err)
	}
	return &Lock{f: f}, nil
}

// Exclusive takes an exclusive lock on path (a file it creates when missing, or a
// directory), waiting while another holds it until ctx ends; then it fails with an error that wraps
// both ErrLocked and ctx's error.
func Exclusive(ctx context.Context, path string) (*Lock, error) {
	l, err := TryExclusive(path)
	if !errors.Is(err, ErrLocked) {
		return l, err
	}
	f, err := open(path)
	if err != nil {
		return nil, err
	}
	done := make(chan error, 1)
	go func() { done <- flock(int(f.Fd()), unix.LOCK_EX) }()
	select {
	case err := <-done:
		if err != nil {
			f.Close()
			return nil, lockError(path, err)
		}
		return &Lock{f: f}, nil
	case <-ctx.Done():
		// The waiting flock may still succeed: the lock goes with the descriptor, so
		// closing it once the wait ends releases it.
		go func() {
			<-done
			f.Close()
		}()
		return nil, fmt.Errorf("lock %s: %w: %w", path, ErrLocked, ctx.Err())
	}
}

// open opens path for locking: a directory for reading, anything else for reading and
// writing, created when missing.
func open(path string) (*os.File, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return os.Open(path)
	}
	return os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
}

func lockError(path string, err error) error {
	if errors.Is(err, unix.EWOULDBLOCK) {
		return fmt.Errorf("lock %s: %w", path, ErrLocked)
	}
	return fmt.Errorf("lock %s: %w", path, err)
}

// flock is flock(2), again when a signal interrupts it.
func flock(fd, how int) error {
	for {
		err := unix.Flock(fd, how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

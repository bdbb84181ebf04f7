package ipam

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/kubelab/kubelab/internal/util/flock"
)

// lockDir takes an exclusive flock on dir through a descriptor of its own (so that
// goroutines of one process exclude each other as processes do) and returns the
// function that releases it. It waits until ctx ends, then fails with ErrBusy.
func lockDir(ctx context.Context, dir string) (unlock func(), err error) {
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	l, err := flock.Exclusive(ctx, dir)
	if errors.Is(err, flock.ErrLocked) && ctx.Err() != nil {
		return nil, fmt.Errorf("%w: %s locked by another plugin process: %w", ErrBusy, dir, ctx.Err())
	}
	if err != nil {
		return nil, fmt.Errorf("lock store: %w", err)
	}
	return func() { _ = l.Unlock() }, nil
}

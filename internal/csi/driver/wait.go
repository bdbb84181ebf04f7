package driver

import (
	"context"
	"fmt"
	"time"
)

// poll calls check until it reports done, an error, or the operation timeout
// passes, waiting PollInterval at first and doubling up to a second.
func (d *Driver) poll(ctx context.Context, what string, check func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.OperationTimeout)
	defer cancel()
	wait := d.cfg.PollInterval
	for {
		done, err := check(ctx)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("wait for %s: %w", what, ctx.Err())
		case <-t.C:
		}
		if wait *= 2; wait > time.Second {
			wait = time.Second
		}
	}
}

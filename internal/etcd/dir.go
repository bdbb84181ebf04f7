package etcd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// dirMode is the only mode etcd's data dir may have: its database holds every Secret.
const dirMode fs.FileMode = 0o700

// privateDir makes sure dir exists with mode 0700, creating it (and missing parents) or
// fixing the mode of one another tool or an older kubelab left open to other users.
func (s *Server) privateDir(ctx context.Context, dir string) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, dirMode); err != nil {
			return fmt.Errorf("etcd: create data dir: %w", err)
		}
		fi, err = os.Stat(dir)
	}
	if err != nil {
		return fmt.Errorf("etcd: data dir: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("etcd: data dir %s is not a directory", dir)
	}
	if mode := fi.Mode().Perm(); mode != dirMode {
		if err := os.Chmod(dir, dirMode); err != nil {
			return fmt.Errorf("etcd: data dir %s has mode %04o, and setting 0700 failed: %w", dir, mode, err)
		}
		s.cfg.Logger.WarnContext(ctx, "etcd's data dir was open to other users; its mode is now 0700", "dir", dir, "was", fmt.Sprintf("%04o", mode))
	}
	return nil
}

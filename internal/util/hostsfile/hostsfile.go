package hostsfile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/kubelab/kubelab/internal/util/atomicfile"
	"github.com/kubelab/kubelab/internal/util/flock"
)

func begin(owner string) string { return "# BEGIN kubelab load balancers (" + owner + ")" }
func end(owner string) string   { return "# END kubelab load balancers (" + owner + ")" }

// Render returns content with owner's block set to entries (name to address), sorted by
// name; with no entries the block is removed. Lines outside the block are kept.
func Render(content, owner string, entries map[string]string) string {
	var kept []string
	in := false
	lines := strings.Split(content, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for _, l := range lines {
		switch {
		case l == begin(owner):
			in = true
		case l == end(owner):
			in = false
		case !in:
			kept = append(kept, l)
		}
	}
	if len(entries) > 0 {
		names := make([]string, 0, len(entries))
		for n := range entries {
			names = append(names, n)
		}
		sort.Strings(names)
		kept = append(kept, begin(owner))
		for _, n := range names {
			kept = append(kept, entries[n]+"\t"+n)
		}
		kept = append(kept, end(owner))
	}
	if len(kept) == 0 {
		return ""
	}
	return strings.Join(kept, "\n") + "\n"
}

// Update sets owner's block in the hosts file at path to entries (removing it when
// entries is empty). A missing file is made (mode 0644) unless there is nothing to write.
func Update(ctx context.Context, path, owner string, entries map[string]string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	lock, err := flock.Exclusive(ctx, filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("hosts file %s: lock: %w", path, err)
	}
	defer lock.Unlock()
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("hosts file %s: %w", path, err)
	}
	mode := fs.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	} else if len(entries) == 0 {
		return nil
	}
	next := Render(string(old), owner, entries)
	if next == string(old) {
		return nil
	}
	err = atomicfile.WriteFile(path, []byte(next), mode)
	if err != nil && (errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.EXDEV)) {
		// A mount point (a container's /etc/hosts) cannot be replaced: rewrite it.
		err = os.WriteFile(path, []byte(next), mode)
	}
	if err != nil {
		return fmt.Errorf("hosts file %s: %w", path, err)
	}
	return nil
}

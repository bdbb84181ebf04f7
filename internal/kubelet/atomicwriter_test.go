package kubelet

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/kubelab/kubelab/internal/testutil"
)

// readVolume reads every file visible through dir's top-level names (following their
// symlinks), as a container would, keyed by relative path.
func readVolume(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			continue
		}
		top := filepath.Join(dir, e.Name())
		fi, err := os.Stat(top)
		if err != nil {
			t.Fatal(err)
		}
		if !fi.IsDir() {
			b, err := os.ReadFile(top)
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = string(b)
			continue
		}
		// The trailing slash walks the directory the symlink points at.
		err = filepath.WalkDir(top+"/", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			out[rel] = string(b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func hiddenEntries(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "..") {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}

func TestAtomicWriterLayout(t *testing.T) {
	dir := t.TempDir()
	payload := map[string]fileProjection{
		"greeting":      {data: []byte("hello"), mode: 0o644},
		"conf/app.yaml": {data: []byte("a: 1\n"), mode: 0o600},
		"conf/db.yaml":  {data: []byte("b: 2\n"), mode: 0o640},
	}
	old := syscall.Umask(0o077) // the file modes must not depend on the umask
	changed, err := writeAtomic(dir, payload, nil)
	syscall.Umask(old)
	if err != nil || !changed {
		t.Fatalf("write: changed=%v err=%v", changed, err)
	}
	ts, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(ts, "..") || strings.Contains(ts, "/") {
		t.Errorf("..data → %q, want a hidden timestamped dir next to it", ts)
	}
	if fi, err := os.Stat(filepath.Join(dir, ts)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("timestamped dir: %v %v", fi, err)
	}
	for name, want := range map[string]string{"greeting": "..data/greeting", "conf": "..data/conf"} {
		if got, err := os.Readlink(filepath.Join(dir, name)); err != nil || got != want {
			t.Errorf("%s → %q (%v), want %q", name, got, err, want)
		}
	}
	if got := hiddenEntries(t, dir); len(got) != 2 || got[0] != ts || got[1] != "..data" {
		t.Errorf("hidden entries %v, want ..data and %s", got, ts)
	}
	got := readVolume(t, dir)
	if len(got) != 3 || got["greeting"] != "hello" || got["conf/app.yaml"] != "a: 1\n" || got["conf/db.yaml"] != "b: 2\n" {
		t.Errorf("volume holds %v", got)
	}
	for p, want := range map[string]fs.FileMode{"greeting": 0o644, "conf/app.yaml": 0o600, "conf/db.yaml": 0o640} {
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode().Perm(), err, want)
		}
	}
}

func TestAtomicWriterUpdate(t *testing.T) {
	dir := t.TempDir()
	write := func(p map[string]fileProjection) bool {
		t.Helper()
		changed, err := writeAtomic(dir, p, nil)
		if err != nil {
			t.Fatal(err)
		}
		return changed
	}
	v1 := map[string]fileProjection{"a": {data: []byte("1"), mode: 0o644}, "b": {data: []byte("2"), mode: 0o644},
		"sub/c": {data: []byte("3"), mode: 0o644}}
	write(v1)
	ts1, _ := os.Readlink(filepath.Join(dir, "..data"))

	// The same content: nothing is written.
	if write(v1) {
		t.Error("an identical payload was written again")
	}
	if ts, _ := os.Readlink(filepath.Join(dir, "..data")); ts != ts1 {
		t.Errorf("..data moved to %s on an identical payload", ts)
	}

	// A changed value, a removed key and a removed directory: a new timestamped dir, the
	// old one and the stale names gone.
	v2 := map[string]fileProjection{"a": {data: []byte("one"), mode: 0o644}, "d": {data: []byte("4"), mode: 0o644}}
	if !write(v2) {
		t.Fatal("a changed payload was not written")
	}
	ts2, _ := os.Readlink(filepath.Join(dir, "..data"))
	if ts2 == ts1 {
		t.Fatal("..data still points at the old dir")
	}
	if _, err := os.Lstat(filepath.Join(dir, ts1)); !os.IsNotExist(err) {
		t.Errorf("old data dir %s left: %v", ts1, err)
	}
	for _, gone := range []string{"b", "sub"} {
		if _, err := os.Lstat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
			t.Errorf("stale name %s left: %v", gone, err)
		}
	}
	if got := readVolume(t, dir); len(got) != 2 || got["a"] != "one" || got["d"] != "4" {
		t.Errorf("volume holds %v", got)
	}
	if got := hiddenEntries(t, dir); len(got) != 2 {
		t.Errorf("hidden entries %v, want ..data and one data dir", got)
	}

	// A mode change alone is an update.
	v3 := map[string]fileProjection{"a": {data: []byte("one"), mode: 0o400}, "d": {data: []byte("4"), mode: 0o644}}
	if !write(v3) {
		t.Fatal("a mode change was not written")
	}
	if fi, err := os.Stat(filepath.Join(dir, "a")); err != nil || fi.Mode().Perm() != 0o400 {
		t.Errorf("a: %v %v, want mode 0400", fi, err)
	}

	// An empty payload empties the volume but keeps its ..data.
	if !write(map[string]fileProjection{}) {
		t.Fatal("an empty payload was not written")
	}
	if got := readVolume(t, dir); len(got) != 0 {
		t.Errorf("volume holds %v, want nothing", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "..data")); err != nil {
		t.Errorf("..data of an empty volume: %v", err)
	}
}

func TestAtomicWriterRejectsPaths(t *testing.T) {
	for _, p := range []string{"", "/etc/passwd", "a/../../b", "..", "..secret", "../x", strings.Repeat("x", 256)} {
		if _, err := writeAtomic(t.TempDir(), map[string]fileProjection{p: {data: []byte("x"), mode: 0o644}}, nil); err == nil {
			t.Errorf("path %q accepted", p)
		}
	}
	// A ".." inside a name is fine, as a leading "..": only the element ".." escapes.
	if _, err := writeAtomic(t.TempDir(), map[string]fileProjection{"a..b": {data: []byte("x"), mode: 0o644}}, nil); err != nil {
		t.Errorf("a..b: %v", err)
	}
}

func TestAtomicWriterFSGroup(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	gid := int64(4321)
	if _, err := writeAtomic(dir, map[string]fileProjection{"k": {data: []byte("v"), mode: 0o400}, "d/k": {data: []byte("v"), mode: 0o600}}, &gid); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]fs.FileMode{"k": 0o440, "d/k": 0o640} {
		fi, err := os.Stat(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want || fi.Sys().(*syscall.Stat_t).Gid != uint32(gid) {
			t.Errorf("%s: mode %v gid %d, want %v and %d", p, fi.Mode().Perm(), fi.Sys().(*syscall.Stat_t).Gid, want, gid)
		}
	}
	fi, err := os.Stat(filepath.Join(dir, "d"))
	if err != nil || fi.Mode()&fs.ModeSetgid == 0 || fi.Sys().(*syscall.Stat_t).Gid != uint32(gid) {
		t.Errorf("dir d: %v %v, want setgid and group %d", fi.Mode(), err, gid)
	}
	// Unchanged with the same fsGroup: nothing to write.
	if changed, err := writeAtomic(dir, map[string]fileProjection{"k": {data: []byte("v"), mode: 0o400}, "d/k": {data: []byte("v"), mode: 0o600}}, &gid); err != nil || changed {
		t.Errorf("rewrite: changed=%v err=%v", changed, err)
	}
}

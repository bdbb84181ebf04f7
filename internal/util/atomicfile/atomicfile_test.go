package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.toml")
	for _, tc := range []struct {
		data string
		mode os.FileMode
	}{{"first\n", 0o600}, {"second, longer\n", 0o644}} {
		if err := WriteFile(path, []byte(tc.data), tc.mode); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil || string(b) != tc.data {
			t.Fatalf("read %q, %v; want %q", b, err, tc.data)
		}
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != tc.mode {
			t.Fatalf("mode %v, %v; want %v", fi.Mode().Perm(), err, tc.mode)
		}
	}
	onlyEntries(t, dir, "config.toml")
}

// TestWriteFileError: when the rename fails (the target is a non-empty directory), the
// target is untouched and no temporary file is left.
func TestWriteFileError(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.MkdirAll(filepath.Join(target, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(target, []byte("data"), 0o644); err == nil {
		t.Fatal("writing over a non-empty directory succeeded")
	}
	if fi, err := os.Stat(target); err != nil || !fi.IsDir() {
		t.Fatalf("target changed: %v, %v", fi, err)
	}
	onlyEntries(t, dir, "target")

	if err := WriteFile(filepath.Join(dir, "missing", "file"), []byte("data"), 0o644); err == nil {
		t.Fatal("writing into a missing directory succeeded")
	}
	onlyEntries(t, dir, "target")
}

func TestSymlink(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "dev")
	for _, target := range []string{"/dev/null", "/dev/zero"} {
		if err := Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		if got, err := os.Readlink(link); err != nil || got != target {
			t.Fatalf("link points to %q, %v; want %q", got, err, target)
		}
	}
	onlyEntries(t, dir, "dev")

	busy := filepath.Join(dir, "busy")
	if err := os.MkdirAll(filepath.Join(busy, "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Symlink("/dev/null", busy); err == nil {
		t.Fatal("linking over a non-empty directory succeeded")
	}
	onlyEntries(t, dir, "busy", "dev")
}

// onlyEntries fails unless dir holds exactly names (sorted).
func onlyEntries(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if len(got) != len(names) {
		t.Fatalf("%s holds %v, want %v", dir, got, names)
	}
	for i := range got {
		if got[i] != names[i] {
			t.Fatalf("%s holds %v, want %v", dir, got, names)
		}
	}
}

func TestReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "ipam.json")
	for _, data := range []string{"first\n", "second, longer\n"} {
		if err := Replace(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil || string(b) != data {
			t.Fatalf("read %q, %v; want %q", b, err, data)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	onlyEntries(t, dir, "ipam.json")
	if err := os.Mkdir(filepath.Join(dir, "busy"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "busy", "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Replace(filepath.Join(dir, "busy"), []byte("x"), 0o600); err == nil {
		t.Fatal("replacing a non-empty directory succeeded")
	}
	onlyEntries(t, dir, "busy", "ipam.json")
}

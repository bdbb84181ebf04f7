package image

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/kubelab/kubelab/internal/testutil"
)

// pauseBinary is kubelab-pause as hack/build.sh builds it (testutil.Commands).
func pauseBinary(t testing.TB) string {
	t.Helper()
	return filepath.Join(testutil.Commands(t), "kubelab-pause")
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// runningRegistry is a Registry served by a test.
type runningRegistry struct {
	*Registry
	stop func() error // cancels Run and returns its error
}

// startRegistry runs a Registry on dir, serving on the extra listeners too, and waits until
// it is ready. It is stopped when the test ends.
func startRegistry(t *testing.T, dir string, extra ...net.Listener) *runningRegistry {
	t.Helper()
	return startRegistryWith(t, Config{Dir: dir}, extra...)
}

// startRegistryWith is startRegistry of cfg (the test's pause binary and logger unless
// set).
func startRegistryWith(t *testing.T, cfg Config, extra ...net.Listener) *runningRegistry {
	t.Helper()
	r, errc := startRegistryAsyncWith(t, cfg, extra...)
	select {
	case <-r.Ready():
	case err := <-errc:
		t.Fatalf("Run: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("registry not ready after 60s")
	}
	return r
}

func startRegistryAsync(t *testing.T, dir string, extra ...net.Listener) (*runningRegistry, chan error) {
	t.Helper()
	return startRegistryAsyncWith(t, Config{Dir: dir}, extra...)
}

func startRegistryAsyncWith(t *testing.T, cfg Config, extra ...net.Listener) (*runningRegistry, chan error) {
	t.Helper()
	if cfg.PauseBinary == "" {
		cfg.PauseBinary = pauseBinary(t)
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	reg, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, l := range extra {
		if err := reg.AddListener(l); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	done := make(chan struct{})
	var runErr error
	go func() {
		runErr = reg.Run(ctx)
		errc <- runErr
		close(done)
	}()
	stopped := false
	stop := func() error {
		cancel()
		<-done
		stopped = true
		return runErr
	}
	t.Cleanup(func() {
		if !stopped {
			cancel()
			<-done
		}
	})
	return &runningRegistry{Registry: reg, stop: stop}, errc
}

// pull reads ref (e.g. "library/nginx:latest") from the registry at addr.
func pull(t *testing.T, addr, repoPath string) v1.Image {
	t.Helper()
	ref, err := name.ParseReference(addr+"/"+repoPath, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatalf("pull %s: %v", ref, err)
	}
	return img
}

// fileInfo is a file of an image's flattened filesystem.
type fileInfo struct {
	typ  byte
	mode int64
	link string
	data []byte // regular files up to 4 MiB
	size int64
}

// imageFiles lists the files of img's flattened filesystem by path (no leading slash).
func imageFiles(t *testing.T, img v1.Image) map[string]fileInfo {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]fileInfo{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("read image filesystem: %v", err)
		}
		fi := fileInfo{typ: hdr.Typeflag, mode: hdr.Mode, link: hdr.Linkname, size: hdr.Size}
		if hdr.Typeflag == tar.TypeReg && hdr.Size <= 4<<20 {
			fi.data, err = io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
		}
		files[strings.TrimSuffix(strings.TrimPrefix(hdr.Name, "/"), "/")] = fi
	}
	return files
}

// extractImage writes img's flattened filesystem into dir, with modes and links.
func extractImage(t *testing.T, img v1.Image, dir string) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("read image filesystem: %v", err)
		}
		target := filepath.Join(dir, filepath.Clean("/"+hdr.Name))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			t.Fatal(err)
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(target, os.FileMode(hdr.Mode&0o777)|modeBits(hdr.Mode)); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(hdr.Mode&0o777))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		case tar.TypeSymlink:
			if err := os.Symlink(hdr.Linkname, target); err != nil {
				t.Fatal(err)
			}
		case tar.TypeLink:
			if err := os.Link(filepath.Join(dir, filepath.Clean("/"+hdr.Linkname)), target); err != nil {
				t.Fatal(err)
			}
			// As containerd does: the link's mode is applied to the shared file.
			if err := os.Chmod(target, os.FileMode(hdr.Mode&0o777)); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("unexpected tar entry type %c for %s", hdr.Typeflag, hdr.Name)
		}
	}
}

func modeBits(m int64) os.FileMode {
	var out os.FileMode
	if m&0o1000 != 0 {
		out |= os.ModeSticky
	}
	return out
}

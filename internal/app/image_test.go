package app

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kubelab/kubelab/internal/image"
	"github.com/kubelab/kubelab/internal/testutil"
)

// TestImageImportCommand runs `kubelab image import` against no registry, a recorded
// but dead one, and a running one.
func TestImageImportCommand(t *testing.T) {
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "app.tar")
	if err := tarball.WriteToFile(file, name.MustParseReference("example.com/app:1"), img); err != nil {
		t.Fatal(err)
	}
	run := func(dataDir string) (string, error) {
		var out, errOut bytes.Buffer
		err := Run(context.Background(), []string{"image", "import", file, "--data-dir", dataDir}, &out, &errOut)
		return out.String(), err
	}

	// Nothing ever ran with this data dir.
	empty := t.TempDir()
	if _, err := run(empty); err == nil || !strings.Contains(err.Error(), "kubelab up") || !strings.Contains(err.Error(), empty) {
		t.Errorf("import with no registry state = %v, want an error saying to start kubelab up", err)
	}

	// A recorded address nobody serves.
	dead := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	ln.Close()
	if err := os.MkdirAll(imagesDir(dead), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(image.AddrFile(imagesDir(dead)), []byte(deadAddr+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := run(dead); err == nil || !strings.Contains(err.Error(), deadAddr) || !strings.Contains(err.Error(), "kubelab up") {
		t.Errorf("import with a dead registry = %v, want an error naming %s", err, deadAddr)
	}

	// A running registry on DATA-DIR/images. Any file serves as the pause binary here.
	live := t.TempDir()
	pause := filepath.Join(t.TempDir(), "pause")
	if err := os.WriteFile(pause, []byte("not run in this test"), 0o755); err != nil {
		t.Fatal(err)
	}
	reg, err := image.New(image.Config{Dir: imagesDir(live), PauseBinary: pause})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Start(t, "registry", time.Minute, reg.Run, testutil.Closed(reg.Ready()))
	out, err := run(live)
	if err != nil {
		t.Fatalf("import: %v", err)
	}
	if out != "imported example.com/app:1\n" {
		t.Errorf("output %q, want the imported reference", out)
	}

	// `image build` and `image tag` go to the same registry.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"image", "build", "example.com/tools:1", "--busybox", "--cmd", "sh", "--expose", "80", "--label", "a=b"}, "built example.com/tools:1\n"},
		{[]string{"image", "tag", "example.com/app:1", "example.com/app:2"}, "tagged example.com/app:2\n"},
	} {
		var out, errOut bytes.Buffer
		if err := Run(context.Background(), append(c.args, "--data-dir", live), &out, &errOut); err != nil || out.String() != c.want {
			t.Errorf("%q = %q, %v; want %q", c.args, out.String(), err, c.want)
		}
	}
	for _, args := range [][]string{
		{"image", "build", "example.com/tools:1", "--file", "relative/path"},
		{"image", "build", "example.com/tools:1", "--busybox", "--label", "novalue"},
		{"image", "tag", "example.com/absent:1", "example.com/app:3"},
	} {
		var out, errOut bytes.Buffer
		if err := Run(context.Background(), append(args, "--data-dir", live), &out, &errOut); err == nil {
			t.Errorf("%q succeeded, want an error", args)
		}
	}
}

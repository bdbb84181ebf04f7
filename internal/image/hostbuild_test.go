package image

import (
	"archive/tar"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kubelab/kubelab/internal/testutil"
)

func TestBuildHost(t *testing.T) {
	testutil.RequireRoot(t, "chroot")
	dir := t.TempDir()
	r := startRegistry(t, dir)
	site := t.TempDir()
	if err := os.WriteFile(filepath.Join(site, "index.html"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env, err := exec.LookPath("env") // coreutils' env: dynamically linked
	if err != nil {
		t.Fatal(err)
	}
	// A tree put at the image's root; its executables bring their libraries too.
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "opt", "tree"), 0o755); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(env); err != nil {
		t.Fatal(err)
	} else if err := os.WriteFile(filepath.Join(root, "opt", "tree", "env2"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	h := HostImage{
		Refs:    []string{"example.com/tools/env:1", "env-tool"},
		Files:   []HostFile{{Src: site, Dest: "/www"}, {Src: root, Dest: "/"}, {Src: env, Dest: "/opt/env"}},
		Busybox: true,
		Config:  v1.Config{Entrypoint: []string{"/opt/env"}, Cmd: []string{"true"}, Env: []string{"GREETING=hi"}},
	}
	refs, err := BuildHost(context.Background(), r.Addr(), LayoutDir(dir), CacheDir(dir), h)
	if err != nil {
		t.Fatalf("BuildHost: %v", err)
	}
	if want := []string{"example.com/tools/env:1", "docker.io/library/env-tool:latest"}; !slices.Equal(refs, want) {
		t.Fatalf("BuildHost = %q, want %q", refs, want)
	}
	check := func(addr string) {
		t.Helper()
		img := pull(t, addr, "tools/env:1")
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cf.Config.Entrypoint, []string{"/opt/env"}) || !slices.Contains(cf.Config.Env, "GREETING=hi") ||
			!slices.ContainsFunc(cf.Config.Env, func(e string) bool { return strings.HasPrefix(e, "PATH=") }) {
			t.Errorf("config = %+v, want Entrypoint /opt/env, GREETING=hi and a PATH", cf.Config)
		}
		files := imageFiles(t, img)
		if f := files["www/index.html"]; string(f.data) != "hello\n" {
			t.Errorf("www/index.html = %q, want hello", f.data)
		}
		if f, ok := files["etc/passwd"]; !ok || !strings.HasPrefix(string(f.data), "root:") {
			t.Errorf("etc/passwd = %q, want root's line", f.data)
		}
		if f := files["usr/bin/sh"]; f.typ != tar.TypeLink && files["bin/sh"].typ != tar.TypeLink {
			t.Errorf("no busybox sh applet")
		}
		// The executable runs in the image's root: its loader and libraries came along.
		root := t.TempDir()
		extractImage(t, img, root)
		out, err := exec.Command("chroot", root, "/opt/tree/env2", "/bin/sh", "-c", "cat /www/index.html").CombinedOutput()
		if err != nil || string(out) != "hello\n" {
			t.Errorf("chroot /opt/tree/env2 sh -c 'cat /www/index.html' = %q, %v", out, err)
		}
	}
	check(r.Addr())
	tagged, err := Tag(context.Background(), r.Addr(), LayoutDir(dir), "example.com/tools/env:1", []string{"registry.k8s.io/other/env:2"})
	if err != nil || !slices.Equal(tagged, []string{"registry.k8s.io/other/env:2"}) {
		t.Fatalf("Tag = %q, %v", tagged, err)
	}
	if _, err := Tag(context.Background(), r.Addr(), LayoutDir(dir), "example.com/tools/absent:1", []string{"example.com/x:1"}); err == nil {
		t.Error("Tag of an image the registry does not serve succeeded")
	}

	// Like imported images, built and tagged ones are served again after a restart.
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	addr := startRegistry(t, dir).Addr()
	check(addr)
	sameImage(t, pull(t, addr, "other/env:2"), pull(t, addr, "tools/env:1"))
}

func TestBuildHostRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	r := startRegistry(t, dir)
	before, err := os.ReadFile(filepath.Join(LayoutDir(dir), "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, h := range map[string]HostImage{
		"no files":       {Refs: []string{"example.com/a:1"}},
		"no reference":   {Files: []HostFile{{Src: "/bin/busybox"}}},
		"bad reference":  {Refs: []string{"Example.com/UPPER:1"}, Busybox: true},
		"missing source": {Refs: []string{"example.com/a:1"}, Files: []HostFile{{Src: "/nonexistent/kubelab-test"}}},
	} {
		if _, err := BuildHost(context.Background(), r.Addr(), LayoutDir(dir), CacheDir(dir), h); err == nil {
			t.Errorf("%s: BuildHost succeeded, want an error", name)
		}
	}
	after, err := os.ReadFile(filepath.Join(LayoutDir(dir), "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Errorf("layout index changed by refused builds:\n%s\n→\n%s", before, after)
	}
}

func TestParseHostFile(t *testing.T) {
	for in, want := range map[string]HostFile{
		"/usr/bin/dig":          {Src: "/usr/bin/dig"},
		"/opt/agnhost:/agnhost": {Src: "/opt/agnhost", Dest: "/agnhost"},
	} {
		got, err := ParseHostFile(in)
		if err != nil || got != want {
			t.Errorf("ParseHostFile(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"rel/path", "/a:rel"} {
		if _, err := ParseHostFile(in); err == nil {
			t.Errorf("ParseHostFile(%q) succeeded, want an error", in)
		}
	}
}

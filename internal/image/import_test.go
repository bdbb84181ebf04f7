package image

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func randomImage(t *testing.T, layers int64) v1.Image {
	t.Helper()
	img, err := random.Image(2048, layers)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// sameImage fails unless got has want's config and layer contents.
func sameImage(t *testing.T, got, want v1.Image) {
	t.Helper()
	gc, err := got.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	wc, err := want.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if gc != wc {
		t.Errorf("config %s, want %s", gc, wc)
	}
	gl, _ := got.Layers()
	wl, _ := want.Layers()
	if len(gl) != len(wl) {
		t.Fatalf("%d layers, want %d", len(gl), len(wl))
	}
	for i := range gl {
		g, _ := gl[i].DiffID()
		w, _ := wl[i].DiffID()
		if g != w {
			t.Errorf("layer %d diff ID %s, want %s", i, g, w)
		}
	}
}

func layoutIndex(t *testing.T, dir string) v1.IndexManifest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(LayoutDir(dir), "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var im v1.IndexManifest
	if err := json.Unmarshal(b, &im); err != nil {
		t.Fatal(err)
	}
	return im
}

func TestImportDockerArchive(t *testing.T) {
	dir := t.TempDir()
	r := startRegistry(t, dir)
	img := randomImage(t, 2)
	other := randomImage(t, 1)
	file := filepath.Join(t.TempDir(), "images.tar")
	if err := tarball.MultiRefWriteToFile(file, map[name.Reference]v1.Image{
		name.MustParseReference("example.com/team/app:1.0"): img,
		name.MustParseReference("app"):                      img,
		name.MustParseReference("quay.io/org/other:2"):      other,
	}); err != nil {
		t.Fatal(err)
	}
	refs, err := Import(context.Background(), r.Addr(), LayoutDir(dir), file)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	slices.Sort(refs)
	want := []string{"docker.io/library/app:latest", "example.com/team/app:1.0", "quay.io/org/other:2"}
	if !slices.Equal(refs, want) {
		t.Fatalf("Import = %q, want %q", refs, want)
	}
	check := func(addr string) {
		t.Helper()
		sameImage(t, pull(t, addr, "team/app:1.0"), img)
		sameImage(t, pull(t, addr, "library/app:latest"), img)
		sameImage(t, pull(t, addr, "org/other:2"), other)
	}
	check(r.Addr())

	// Importing again replaces the layout's entries rather than adding to them.
	if _, err := Import(context.Background(), r.Addr(), LayoutDir(dir), file); err != nil {
		t.Fatalf("second Import: %v", err)
	}
	var names []string
	for _, d := range layoutIndex(t, dir).Manifests {
		names = append(names, d.Annotations[annotationRefName])
	}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Errorf("layout index names %q, want %q", names, want)
	}

	// The registry keeps manifests in memory: a restart pushes the imported images again.
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	r2 := startRegistry(t, dir)
	check(r2.Addr())
}

// writeTarOfDir writes dir's regular files and directories as a (gzip-compressed) tar.
func writeTarOfDir(t *testing.T, dir, file string, compress bool) {
	t.Helper()
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var w io.Writer = f
	var zw *gzip.Writer
	if compress {
		zw = gzip.NewWriter(f)
		w = zw
	}
	tw := tar.NewWriter(w)
	err = filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		hdr, err := tar.FileInfoHeader(fi, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			src, err := os.Open(p)
			if err != nil {
				return err
			}
			defer src.Close()
			_, err = io.Copy(tw, src)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestImportOCIArchive(t *testing.T) {
	dir := t.TempDir()
	r := startRegistry(t, dir)

	img := randomImage(t, 1)
	here := mutate.MediaType(randomImage(t, 1), "application/vnd.oci.image.manifest.v1+json")
	elsewhere := randomImage(t, 1)
	otherArch := "arm64"
	if runtime.GOARCH == "arm64" {
		otherArch = "amd64"
	}
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: elsewhere, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: otherArch}}},
		mutate.IndexAddendum{Add: here, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}},
	)
	src := t.TempDir()
	p, err := layout.Write(src, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{annotationRefName: "quay.io/org/tool:2"})); err != nil {
		t.Fatal(err)
	}
	// As containerd exports: the short name in ref.name, the full one in its own annotation.
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		annotationRefName: "1", annotationContainerdName: "registry.example/multi:1",
	})); err != nil {
		t.Fatal(err)
	}
	// An unnamed entry is not imported.
	if err := p.AppendImage(randomImage(t, 1)); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "oci.tar.gz")
	writeTarOfDir(t, src, file, true)

	refs, err := Import(context.Background(), r.Addr(), LayoutDir(dir), file)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	slices.Sort(refs)
	if want := []string{"quay.io/org/tool:2", "registry.example/multi:1"}; !slices.Equal(refs, want) {
		t.Fatalf("Import = %q, want %q", refs, want)
	}
	sameImage(t, pull(t, r.Addr(), "org/tool:2"), img)
	// The index is imported as its image for this machine's platform.
	sameImage(t, pull(t, r.Addr(), "multi:1"), here)
}

func TestImportRejectsOtherFiles(t *testing.T) {
	dir := t.TempDir()
	r := startRegistry(t, dir)
	tmp := t.TempDir()

	text := filepath.Join(tmp, "notes.txt")
	if err := os.WriteFile(text, []byte("not an image\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	plainTar := filepath.Join(tmp, "files.tar")
	srcDir := filepath.Join(tmp, "src")
	if err := os.MkdirAll(srcDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(srcDir, "hello.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	writeTarOfDir(t, srcDir, plainTar, false)

	before := layoutIndex(t, dir)
	blobsBefore := blobStats(t, dir)
	for _, file := range []string{text, plainTar, filepath.Join(tmp, "missing.tar")} {
		_, err := Import(context.Background(), r.Addr(), LayoutDir(dir), file)
		if err == nil || !strings.Contains(err.Error(), file) {
			t.Errorf("Import(%s) = %v, want an error naming the file", file, err)
			continue
		}
		if file != filepath.Join(tmp, "missing.tar") && !strings.Contains(err.Error(), "docker save") {
			t.Errorf("Import(%s) = %v, want it to say what was expected", file, err)
		}
	}
	if after := layoutIndex(t, dir); len(after.Manifests) != len(before.Manifests) {
		t.Errorf("layout index changed: %d entries, had %d", len(after.Manifests), len(before.Manifests))
	}
	if n := len(blobStats(t, dir)); n != len(blobsBefore) {
		t.Errorf("blob store has %d blobs, had %d", n, len(blobsBefore))
	}
}

func TestImportWithoutRegistry(t *testing.T) {
	// A port nobody listens on: take one and release it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	file := filepath.Join(t.TempDir(), "app.tar")
	if err := tarball.WriteToFile(file, name.MustParseReference("app:1"), randomImage(t, 1)); err != nil {
		t.Fatal(err)
	}
	layoutDir := filepath.Join(t.TempDir(), "layout")
	_, err = Import(context.Background(), addr, layoutDir, file)
	if !errors.Is(err, ErrNoRegistry) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Import without a registry = %v, want ErrNoRegistry naming %s", err, addr)
	}
	if _, err := os.Stat(layoutDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("layout %s was created (%v)", layoutDir, err)
	}
}

// TestImportLeavesNothingOnError imports an archive whose second image lacks a layer
// file: the first image's blobs, already written, are removed and the index is as before.
func TestImportLeavesNothingOnError(t *testing.T) {
	dir := t.TempDir()
	r := startRegistry(t, dir)
	good := randomImage(t, 1)
	broken := randomImage(t, 2)
	whole := filepath.Join(t.TempDir(), "whole.tar")
	if err := tarball.MultiRefWriteToFile(whole, map[name.Reference]v1.Image{
		name.MustParseReference("good:1"):   good,
		name.MustParseReference("broken:1"): broken,
	}); err != nil {
		t.Fatal(err)
	}
	// Drop the broken image's second layer from the archive.
	layers, _ := broken.Layers()
	missing, err := layers[1].Digest()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "cut.tar")
	copyTarWithout(t, whole, file, missing.Hex)

	before := layoutIndex(t, dir)
	blobsBefore := blobStats(t, dir)
	_, err = Import(context.Background(), r.Addr(), LayoutDir(dir), file)
	if err == nil || !strings.Contains(err.Error(), file) {
		t.Fatalf("Import of an archive missing a layer = %v, want an error naming the file", err)
	}
	t.Logf("Import: %v", err)
	if after := layoutIndex(t, dir); len(after.Manifests) != len(before.Manifests) {
		t.Errorf("layout index changed: %d entries, had %d", len(after.Manifests), len(before.Manifests))
	}
	blobsAfter := blobStats(t, dir)
	for p := range blobsAfter {
		if _, ok := blobsBefore[p]; !ok {
			t.Errorf("blob %s left in the layout", filepath.Base(p))
		}
	}
	goodLayers, _ := good.Layers()
	d, _ := goodLayers[0].Digest()
	if _, ok := blobsAfter[filepath.Join(LayoutDir(dir), "blobs", "sha256", d.Hex)]; ok {
		t.Errorf("the good image's layer stayed")
	}
}

// copyTarWithout copies a docker save tarball, leaving out the entries whose name
// contains drop and ordering manifest.json so that the image tagged good comes first.
func copyTarWithout(t *testing.T, src, dst, drop string) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	tr := tar.NewReader(in)
	tw := tar.NewWriter(out)
	dropped := false
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(hdr.Name, drop) {
			dropped = true
			continue
		}
		if hdr.Name == "manifest.json" {
			// The image named first is imported first: put the intact one there, so
			// that its blobs are written before the broken one fails.
			var m tarball.Manifest
			if err := json.NewDecoder(tr).Decode(&m); err != nil {
				t.Fatal(err)
			}
			slices.SortFunc(m, func(a, b tarball.Descriptor) int {
				return strings.Compare(strings.Join(b.RepoTags, ","), strings.Join(a.RepoTags, ","))
			})
			if !strings.HasPrefix(m[0].RepoTags[0], "good") {
				t.Fatalf("manifest order %v", m)
			}
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			hdr.Size = int64(len(b))
			if err := tw.WriteHeader(hdr); err != nil {
				t.Fatal(err)
			}
			if _, err := tw.Write(b); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if !dropped {
		t.Fatalf("no entry of %s contains %s", src, drop)
	}
}

// TestImportClassicDockerSave imports the layout `docker save` has long written:
// uncompressed layers as <id>/layer.tar, the config as <hex>.json, manifest.json.
func TestImportClassicDockerSave(t *testing.T) {
	dir := t.TempDir()
	r := startRegistry(t, dir)
	img := randomImage(t, 2)
	cfgName, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "save.tar")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	tw := tar.NewWriter(f)
	add := func(name string, data []byte) {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			t.Fatal(err)
		}
	}
	add(cfgName.Hex+".json", cfg)
	layers, _ := img.Layers()
	var layerNames []string
	for _, l := range layers {
		diffID, _ := l.DiffID()
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		add(diffID.Hex+"/layer.tar", data)
		layerNames = append(layerNames, diffID.Hex+"/layer.tar")
	}
	manifest, _ := json.Marshal(tarball.Manifest{{Config: cfgName.Hex + ".json", RepoTags: []string{"registry.example:5000/ns/saved:v1"}, Layers: layerNames}})
	add("manifest.json", manifest)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	refs, err := Import(context.Background(), r.Addr(), LayoutDir(dir), file)
	if err != nil {
		t.Fatalf("Import: %v", err)
	}
	if want := []string{"registry.example:5000/ns/saved:v1"}; !slices.Equal(refs, want) {
		t.Fatalf("Import = %q, want %q", refs, want)
	}
	sameImage(t, pull(t, r.Addr(), "ns/saved:v1"), img)
}

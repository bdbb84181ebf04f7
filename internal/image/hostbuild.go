package image

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// HostFile is a file or directory of this machine put into an image.
type HostFile struct {
	// Src is the host path: a regular file (through symbolic links) or a directory,
	// which is added with everything in it.
	Src string
	// Dest is the absolute path in the image; empty means Src's own path.
	Dest string
}

// ParseHostFile reads SRC[:DEST].
func ParseHostFile(s string) (HostFile, error) {
	src, dest, _ := strings.Cut(s, ":")
	if !filepath.IsAbs(src) {
		return HostFile{}, fmt.Errorf("%q: the host path must be absolute", s)
	}
	if dest != "" && !filepath.IsAbs(dest) {
		return HostFile{}, fmt.Errorf("%q: the image path must be absolute", s)
	}
	return HostFile{Src: src, Dest: dest}, nil
}

// HostImage is an image made of this machine's files, as `kubelab image build` makes it.
type HostImage struct {
	// Refs are the references it is served under (at least one).
	Refs []string
	// Files are put in the image in order (a later one replaces an earlier one at the
	// same path). A dynamically linked ELF executable brings its interpreter and shared
	// libraries at their host paths, with the host's merged-usr links.
	Files []HostFile
	// Busybox adds the host's busybox-static at /bin/busybox with its applets where
	// they are missing: a shell and the usual tools.
	Busybox bool
	// Config is the image's run configuration (Entrypoint, Cmd, Env, User, WorkingDir,
	// ExposedPorts, Labels). Env gets PATH when it has none.
	Config v1.Config
}

func (h *HostImage) validate() error {
	if len(h.Refs) == 0 {
		return errors.New("an image needs at least one reference")
	}
	for i, ref := range h.Refs {
		c, err := Canonical(ref)
		if err != nil {
			return err
		}
		h.Refs[i] = c
	}
	if len(h.Files) == 0 && !h.Busybox {
		return errors.New("an image needs files: give --file or --busybox")
	}
	return nil
}

// layer is the image's one layer.
func (h *HostImage) layer() (*layerSpec, error) {
	spec := newLayerSpec()
	mergedUsr(spec)
	var elfs []string
	for _, f := range h.Files {
		fi, err := os.Stat(f.Src)
		if err != nil {
			return nil, err
		}
		dest := f.Dest
		if dest == "" {
			dest = f.Src
		}
		if fi.IsDir() {
			found, err := addTreeAt(spec, f.Src, dest)
			if err != nil {
				return nil, err
			}
			elfs = append(elfs, found...)
			continue
		}
		if err := spec.hostFile(spec.resolve(dest), f.Src); err != nil {
			return nil, err
		}
		if isDynamicELF(f.Src) {
			elfs = append(elfs, f.Src)
		}
	}
	if len(elfs) > 0 {
		libs, err := libraryClosure(elfs, nssModules)
		if err != nil {
			return nil, err
		}
		for _, l := range libs {
			if _, err := spec.hostPath(l); err != nil {
				return nil, err
			}
		}
	}
	if h.Busybox {
		busybox := spec.resolve("bin/busybox")
		if !spec.has(busybox) {
			if err := spec.hostFile(busybox, hostBusybox); err != nil {
				return nil, fmt.Errorf("busybox (package busybox-static): %w", err)
			}
		}
		if err := addApplets(spec, busybox); err != nil {
			return nil, err
		}
	}
	baseDirs(spec)
	if !spec.has("etc/passwd") {
		spec.file("etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"))
	}
	if !spec.has("etc/group") {
		spec.file("etc/group", 0o644, []byte("root:x:0:\nnobody:x:65534:\n"))
	}
	return spec, spec.check()
}

// addTreeAt adds the host directory src and what it holds at dest (which may be the
// root). It returns the dynamically linked ELF files among them.
func addTreeAt(spec *layerSpec, src, dest string) (elfs []string, err error) {
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		at := spec.resolve(filepath.Join(dest, rel))
		if at == "" { // the image's root itself
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			spec.symlink(at, target)
		case d.IsDir():
			spec.dir(at, tarMode(fi.Mode()))
		case fi.Mode().IsRegular():
			if isDynamicELF(p) {
				elfs = append(elfs, p)
			}
			return spec.hostFile(at, p)
		default:
			return fmt.Errorf("%s: unsupported file type %v", p, fi.Mode().Type())
		}
		return nil
	})
	return elfs, err
}

// isDynamicELF tells whether file is an ELF object with a program interpreter.
func isDynamicELF(file string) bool {
	f, err := elf.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

// BuildHost builds h from this machine's files, pushes it to the registry at
// registryAddr under each of its references and records it in the OCI image layout
// layoutDir, so that the registry serves it again after a restart, as imported images
// are. cacheDir keeps built layers by their inputs. It returns the canonical references.
func BuildHost(ctx context.Context, registryAddr, layoutDir, cacheDir string, h HostImage) ([]string, error) {
	if err := h.validate(); err != nil {
		return nil, err
	}
	spec, err := h.layer()
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", h.Refs[0], err)
	}
	if err := ping(ctx, registryAddr); err != nil {
		return nil, err
	}
	if err := ensureLayout(layoutDir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return nil, err
	}
	cfg := h.Config
	if !hasEnv(cfg.Env, "PATH") {
		cfg.Env = append([]string{"PATH=" + defaultPath}, cfg.Env...)
	}
	b := &builder{cache: &layerCache{dir: cacheDir, blobDir: filepath.Join(layoutDir, "blobs")}, log: slog.New(slog.DiscardHandler)}
	img, err := b.image(h.Refs[0], spec, cfg)
	if err != nil {
		return nil, err
	}
	images := make([]namedImage, 0, len(h.Refs))
	for _, ref := range h.Refs {
		images = append(images, namedImage{ref: ref, img: img})
	}
	return store(ctx, registryAddr, layoutDir, images)
}

func hasEnv(env []string, name string) bool {
	for _, e := range env {
		if strings.HasPrefix(e, name+"=") {
			return true
		}
	}
	return false
}

// Tag serves the image the registry at registryAddr serves under source under each of
// targets too, and records them in the OCI image layout layoutDir, so that the registry
// serves them again after a restart. It returns the canonical target references.
func Tag(ctx context.Context, registryAddr, layoutDir, source string, targets []string) ([]string, error) {
	if len(targets) == 0 {
		return nil, errors.New("tag: no target reference")
	}
	if err := ping(ctx, registryAddr); err != nil {
		return nil, err
	}
	p, err := RepoPath(source)
	if err != nil {
		return nil, err
	}
	src, err := localRef(registryAddr, p)
	if err != nil {
		return nil, err
	}
	img, err := remote.Image(src, remote.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("tag: %s is not served: %w", source, err)
	}
	images := make([]namedImage, 0, len(targets))
	for _, t := range targets {
		c, err := Canonical(t)
		if err != nil {
			return nil, err
		}
		images = append(images, namedImage{ref: c, img: img})
	}
	return store(ctx, registryAddr, layoutDir, images)
}

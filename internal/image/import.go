package image

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubelab/kubelab/internal/util/atomicfile"
	"github.com/kubelab/kubelab/internal/util/flock"
)

// Annotations naming an image in an OCI image layout's index.json.
const (
	annotationRefName        = "org.opencontainers.image.ref.name"
	annotationContainerdName = "io.containerd.image.name"
)

// ErrNoRegistry is wrapped by Import's error when no registry answers at its address.
var ErrNoRegistry = errors.New("no image registry answers")

// namedImage is an image read from an archive, with its canonical reference.
type namedImage struct {
	ref string
	img v1.Image
}

// Import reads the image archive file, a `docker save` tarball (every RepoTag of
// manifest.json) or an OCI image layout tarball (index.json entries named by the
// annotation org.opencontainers.image.ref.name or io.containerd.image.name), either
// possibly gzip-compressed, pushes each image to the registry at registryAddr under
// RepoPath of its name, and records it in the OCI image layout layoutDir so that
// Registry.Run pushes it again at its next start. An index in an OCI archive is
// imported as its linux image of this machine's architecture. It returns the
// canonical references imported. On error the layout's index is unchanged and the
// blobs this call added to it are removed.
func Import(ctx context.Context, registryAddr, layoutDir, file string) ([]string, error) {
	images, cleanup, err := readArchive(file)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	refs, err := store(ctx, registryAddr, layoutDir, images)
	if err != nil {
		return nil, fmt.Errorf("import %s: %w", file, err)
	}
	return refs, nil
}

// store pushes images to the registry at registryAddr and records them in the OCI image
// layout layoutDir. On error the layout's index is unchanged and the blobs this call
// added to it are removed.
func store(ctx context.Context, registryAddr, layoutDir string, images []namedImage) ([]string, error) {
	if err := ping(ctx, registryAddr); err != nil {
		return nil, err
	}
	if err := ensureLayout(layoutDir); err != nil {
		return nil, err
	}
	unlock, err := lockLayout(ctx, layoutDir)
	if err != nil {
		return nil, err
	}
	defer unlock()

	// Blobs first (the registry finds them there when it shares the layout's blob
	// store), then the pushes, then the index that makes the images part of the layout.
	w := &blobWriter{dir: filepath.Join(layoutDir, "blobs")}
	fail := func(err error) ([]string, error) {
		w.removeCreated()
		return nil, err
	}
	var descs []v1.Descriptor
	for _, ni := range images {
		desc, err := w.writeImage(ni.img)
		if err != nil {
			return fail(fmt.Errorf("%s: %w", ni.ref, err))
		}
		desc.Annotations = map[string]string{annotationRefName: ni.ref}
		descs = append(descs, *desc)
	}
	var refs []string
	for _, ni := range images {
		if err := push(ctx, registryAddr, ni.ref, ni.img); err != nil {
			return fail(fmt.Errorf("%s: %w", ni.ref, err))
		}
		refs = append(refs, ni.ref)
	}
	if err := updateIndex(layoutDir, descs); err != nil {
		return fail(err)
	}
	return refs, nil
}

// readArchive reads the images of a docker save or OCI layout tarball. cleanup
// removes the temporary files it needed.
func readArchive(file string) (images []namedImage, cleanup func(), err error) {
	var tmps []string
	cleanup = func() {
		for _, t := range tmps {
			os.RemoveAll(t)
		}
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	tarFile := file
	gz, err := isGzip(file)
	if err != nil {
		return nil, cleanup, fmt.Errorf("import %s: %w", file, err)
	}
	if gz {
		t, err := gunzipToTemp(file)
		if err != nil {
			return nil, cleanup, fmt.Errorf("import %s: %w", file, err)
		}
		tmps = append(tmps, t)
		tarFile = t
	}
	names, err := tarNames(tarFile)
	notArchive := fmt.Errorf("import %s: not an image archive: expected a `docker save` tarball (with manifest.json) or an OCI image layout tarball (with oci-layout and index.json)", file)
	if err != nil {
		return nil, cleanup, fmt.Errorf("%w: %w", notArchive, err)
	}
	switch {
	case names["manifest.json"]:
		images, err = readDockerArchive(tarFile)
	case names["index.json"] && names["oci-layout"]:
		dir, err2 := os.MkdirTemp("", "kubelab-import-")
		if err2 != nil {
			return nil, cleanup, fmt.Errorf("import %s: %w", file, err2)
		}
		tmps = append(tmps, dir)
		images, err = readOCIArchive(tarFile, dir)
	default:
		return nil, cleanup, notArchive
	}
	if err != nil {
		return nil, cleanup, fmt.Errorf("import %s: %w", file, err)
	}
	if len(images) == 0 {
		return nil, cleanup, fmt.Errorf("import %s: the archive names no image (no RepoTags, no %s annotation)", file, annotationRefName)
	}
	return images, cleanup, nil
}

func isGzip(file string) (bool, error) {
	f, err := os.Open(file)
	if err != nil {
		return false, err
	}
	defer f.Close()
	b, err := bufio.NewReader(f).Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return len(b) == 2 && b[0] == 0x1f && b[1] == 0x8b, nil
}

func gunzipToTemp(file string) (string, error) {
	zr, err := gunzipFile(file)
	if err != nil {
		return "", err
	}
	defer zr.Close()
	f, err := os.CreateTemp("", "kubelab-import-*.tar")
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, zr); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", fmt.Errorf("decompress: %w", err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// tarNames lists the cleaned names of the regular files of a tar file.
func tarNames(file string) (map[string]bool, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read tar: %w", err)
		}
		if hdr.Typeflag == tar.TypeReg {
			names[path.Clean(hdr.Name)] = true
		}
	}
	if len(names) == 0 {
		return nil, errors.New("read tar: no files")
	}
	return names, nil
}

func readDockerArchive(file string) ([]namedImage, error) {
	opener := func() (io.ReadCloser, error) { return os.Open(file) }
	m, err := tarball.LoadManifest(opener)
	if err != nil {
		return nil, fmt.Errorf("read manifest.json: %w", err)
	}
	var out []namedImage
	seen := map[string]bool{}
	for _, d := range m {
		for _, repoTag := range d.RepoTags {
			ref, err := Canonical(repoTag)
			if err != nil {
				return nil, err
			}
			if seen[ref] {
				continue
			}
			seen[ref] = true
			tag, err := name.NewTag(repoTag)
			if err != nil {
				return nil, fmt.Errorf("image reference %q: %w", repoTag, err)
			}
			img, err := tarball.Image(opener, &tag)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", repoTag, err)
			}
			out = append(out, namedImage{ref: ref, img: img})
		}
	}
	return out, nil
}

// readOCIArchive extracts the layout tarball into dir and reads its named images.
func readOCIArchive(file, dir string) ([]namedImage, error) {
	if err := extractTar(file, dir); err != nil {
		return nil, err
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("read OCI layout: %w", err)
	}
	return layoutImages(p)
}

// layoutImages lists the named images of a layout's index.json. An index entry gives
// its image for this machine's platform.
func layoutImages(p layout.Path) ([]namedImage, error) {
	ii, err := p.ImageIndex()
	if err != nil {
		return nil, fmt.Errorf("read OCI layout: %w", err)
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, fmt.Errorf("read OCI layout index.json: %w", err)
	}
	var out []namedImage
	seen := map[string]bool{}
	for _, desc := range im.Manifests {
		refName := desc.Annotations[annotationContainerdName]
		if refName == "" {
			refName = desc.Annotations[annotationRefName]
		}
		if refName == "" {
			continue
		}
		ref, err := Canonical(refName)
		if err != nil {
			return nil, err
		}
		if seen[ref] {
			continue
		}
		var img v1.Image
		switch {
		case desc.MediaType.IsImage():
			img, err = ii.Image(desc.Digest)
		case desc.MediaType.IsIndex():
			var child v1.ImageIndex
			child, err = ii.ImageIndex(desc.Digest)
			if err == nil {
				img, err = platformImage(child)
			}
		default:
			err = fmt.Errorf("unsupported media type %s", desc.MediaType)
		}
		if err != nil {
			return nil, fmt.Errorf("read %s (%s): %w", ref, desc.Digest, err)
		}
		seen[ref] = true
		out = append(out, namedImage{ref: ref, img: img})
	}
	return out, nil
}

// platformImage picks linux/GOARCH from an index, or its only image.
func platformImage(ii v1.ImageIndex) (v1.Image, error) {
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, err
	}
	var images []v1.Descriptor
	for _, d := range im.Manifests {
		if !d.MediaType.IsImage() {
			continue
		}
		images = append(images, d)
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == runtime.GOARCH {
			return ii.Image(d.Digest)
		}
	}
	if len(images) == 1 && images[0].Platform == nil {
		return ii.Image(images[0].Digest)
	}
	return nil, fmt.Errorf("the index has no image for linux/%s", runtime.GOARCH)
}

// extractTar extracts the regular files and directories of a tar file into dir.
func extractTar(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		// Cleaned from the root, a name cannot climb out of dir.
		clean := path.Clean("/" + hdr.Name)
		if clean == "/" {
			continue
		}
		target := filepath.Join(dir, filepath.FromSlash(clean))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, tr); err != nil {
				out.Close()
				return fmt.Errorf("extract %s: %w", hdr.Name, err)
			}
			if err := out.Close(); err != nil {
				return err
			}
		}
	}
}

// ping checks that a registry answers at addr.
func ping(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/v2/", nil)
	if err != nil {
		return fmt.Errorf("%w at %s: %w", ErrNoRegistry, addr, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w at %s: %w", ErrNoRegistry, addr, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w at %s: GET /v2/ answered %s", ErrNoRegistry, addr, resp.Status)
	}
	return nil
}

// ensureLayout makes dir an OCI image layout if it is not one yet.
func ensureLayout(dir string) error {
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(dir, "oci-layout")); errors.Is(err, os.ErrNotExist) {
		if err := atomicfile.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
			return err
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "index.json")); errors.Is(err, os.ErrNotExist) {
		b, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: []v1.Descriptor{}})
		if err != nil {
			return err
		}
		if err := atomicfile.WriteFile(filepath.Join(dir, "index.json"), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// lockLayout serialises the imports into one layout.
func lockLayout(ctx context.Context, dir string) (func(), error) {
	l, err := flock.Exclusive(ctx, filepath.Join(dir, ".kubelab-import.lock"))
	if err != nil {
		return nil, err
	}
	return func() { _ = l.Unlock() }, nil
}

// updateIndex writes the layout's index.json with descs, replacing the entries of the
// same name, in one rename.
func updateIndex(dir string, descs []v1.Descriptor) error {
	indexFile := filepath.Join(dir, "index.json")
	b, err := os.ReadFile(indexFile)
	if err != nil {
		return err
	}
	var im v1.IndexManifest
	if err := json.Unmarshal(b, &im); err != nil {
		return fmt.Errorf("%s: %w", indexFile, err)
	}
	replaced := map[string]bool{}
	for _, d := range descs {
		replaced[d.Annotations[annotationRefName]] = true
	}
	kept := im.Manifests[:0]
	for _, d := range im.Manifests {
		if !replaced[d.Annotations[annotationRefName]] {
			kept = append(kept, d)
		}
	}
	im.Manifests = append(kept, descs...)
	if im.SchemaVersion == 0 {
		im.SchemaVersion = 2
	}
	if im.MediaType == "" {
		im.MediaType = types.OCIImageIndex
	}
	out, err := json.MarshalIndent(im, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(indexFile, out, 0o644)
}

// blobWriter writes an image's blobs into a layout's blob directory, each through a
// temporary file checked against its digest, and remembers which it created.
type blobWriter struct {
	dir     string
	created []string
}

func (w *blobWriter) writeImage(img v1.Image) (*v1.Descriptor, error) {
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return nil, err
		}
		if err := w.write(d, l.Compressed); err != nil {
			return nil, fmt.Errorf("layer %s: %w", d, err)
		}
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return nil, err
	}
	cfg, err := img.RawConfigFile()
	if err != nil {
		return nil, err
	}
	if err := w.write(cfgName, bytesOpener(cfg)); err != nil {
		return nil, fmt.Errorf("config %s: %w", cfgName, err)
	}
	manifest, err := img.RawManifest()
	if err != nil {
		return nil, err
	}
	desc, err := partial.Descriptor(img)
	if err != nil {
		return nil, err
	}
	if err := w.write(desc.Digest, bytesOpener(manifest)); err != nil {
		return nil, fmt.Errorf("manifest %s: %w", desc.Digest, err)
	}
	return desc, nil
}

func bytesOpener(b []byte) func() (io.ReadCloser, error) {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

func (w *blobWriter) write(h v1.Hash, open func() (io.ReadCloser, error)) error {
	if h.Algorithm != "sha256" {
		return fmt.Errorf("unsupported digest algorithm %s", h.Algorithm)
	}
	final := filepath.Join(w.dir, h.Algorithm, h.Hex)
	if _, err := os.Stat(final); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return err
	}
	rc, err := open()
	if err != nil {
		return err
	}
	defer rc.Close()
	f, err := os.CreateTemp(filepath.Dir(final), ".import-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	hash := sha256.New()
	if _, err := io.Copy(io.MultiWriter(f, hash), rc); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if got := hex.EncodeToString(hash.Sum(nil)); got != h.Hex {
		return fmt.Errorf("content has digest sha256:%s, expected %s", got, h)
	}
	if err := os.Rename(f.Name(), final); err != nil {
		return err
	}
	w.created = append(w.created, final)
	return nil
}

func (w *blobWriter) removeCreated() {
	for _, p := range w.created {
		os.Remove(p)
	}
	w.created = nil
}

// pushLayout pushes the named images of the layout at dir to the registry at addr. An
// image that cannot be read or pushed is logged and skipped: the others are still
// served. It returns the references pushed.
func pushLayout(ctx context.Context, addr, dir string, log *slog.Logger) ([]string, error) {
	p, err := layout.FromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("read the layout of imported images: %w", err)
	}
	images, err := layoutImages(p)
	if err != nil {
		return nil, fmt.Errorf("read the layout of imported images %s: %w", dir, err)
	}
	var refs []string
	for _, ni := range images {
		if err := push(ctx, addr, ni.ref, ni.img); err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			log.Warn("imported image not served", "image", ni.ref, "err", err)
			continue
		}
		refs = append(refs, ni.ref)
	}
	return refs, nil
}

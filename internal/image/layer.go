package image

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/kubelab/kubelab/internal/util/atomicfile"
)

// epoch is the time stamp of every file, layer and config kubelab builds, so that the
// same inputs always give the same digests.
var epoch = time.Unix(0, 0).UTC()

// layerFormat versions the way a layer is made from its spec; changing the tar or
// compression settings must change it so that cached layers are rebuilt.
const layerFormat = "kubelab-layer-v3 tar+gzip(fastest) epoch-mtime hardlink-mode-of-target"

// fsEntry is one file of a layer.
type fsEntry struct {
	typ  byte  // tar.TypeDir, tar.TypeReg, tar.TypeSymlink or tar.TypeLink
	mode int64 // permission bits, with setuid, setgid and sticky
	uid  int
	gid  int
	// A regular file's content is either the host file src (of size and mtime, which
	// key the cache) or data.
	src   string
	size  int64
	mtime int64
	data  []byte
	link  string // a symlink's target, or the layer path a hard link points at
}

// layerSpec lists the files of a layer by path (relative, without a leading slash).
// Later additions at a path replace earlier ones.
type layerSpec struct {
	entries map[string]*fsEntry
}

func newLayerSpec() *layerSpec { return &layerSpec{entries: map[string]*fsEntry{}} }

func cleanPath(p string) string {
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}

func (s *layerSpec) dir(p string, mode int64) {
	s.entries[cleanPath(p)] = &fsEntry{typ: tar.TypeDir, mode: mode}
}

// dirIfAbsent adds a directory unless p already has an entry.
func (s *layerSpec) dirIfAbsent(p string, mode int64) {
	if _, ok := s.entries[cleanPath(p)]; !ok {
		s.dir(p, mode)
	}
}

func (s *layerSpec) file(p string, mode int64, data []byte) {
	s.entries[cleanPath(p)] = &fsEntry{typ: tar.TypeReg, mode: mode, data: data, size: int64(len(data))}
}

func (s *layerSpec) symlink(p, target string) {
	s.entries[cleanPath(p)] = &fsEntry{typ: tar.TypeSymlink, mode: 0o777, link: target}
}

// hardlink makes p another name of the layer's regular file target.
func (s *layerSpec) hardlink(p, target string) {
	s.entries[cleanPath(p)] = &fsEntry{typ: tar.TypeLink, link: cleanPath(target)}
}

func (s *layerSpec) has(p string) bool {
	_, ok := s.entries[cleanPath(p)]
	return ok
}

// hostFile adds the host's regular file src at p.
func (s *layerSpec) hostFile(p, src string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", src)
	}
	s.entries[cleanPath(p)] = &fsEntry{typ: tar.TypeReg, mode: tarMode(fi.Mode()), src: src, size: fi.Size(), mtime: fi.ModTime().UnixNano()}
	return nil
}

// hostPath adds the host's file src at the same path, with every symbolic link met on
// the way as a link of the layer (so /lib/x86_64-linux-gnu/libz.so.1 brings lib ->
// usr/lib, usr/lib/x86_64-linux-gnu/libz.so.1 -> libz.so.1.2.13 and the file itself) and
// the directories on the way. It returns the file's resolved path.
func (s *layerSpec) hostPath(src string) (string, error) {
	return s.hostPathDepth(src, 0)
}

func (s *layerSpec) hostPathDepth(src string, depth int) (string, error) {
	if depth > 40 {
		return "", fmt.Errorf("%s: too many levels of symbolic links", src)
	}
	if !filepath.IsAbs(src) {
		return "", fmt.Errorf("%s: not an absolute path", src)
	}
	comps := strings.Split(cleanPath(src), "/")
	cur := "/"
	for i, c := range comps {
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if err != nil {
			return "", err
		}
		last := i == len(comps)-1
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(next)
			if err != nil {
				return "", err
			}
			s.symlink(next, target)
			resolved := target
			if !filepath.IsAbs(target) {
				resolved = filepath.Join(cur, target)
			}
			return s.hostPathDepth(filepath.Join(append([]string{resolved}, comps[i+1:]...)...), depth+1)
		case fi.IsDir():
			s.dirIfAbsent(next, tarMode(fi.Mode()))
		case fi.Mode().IsRegular() && last:
			return next, s.hostFile(next, next)
		default:
			return "", fmt.Errorf("%s: unsupported file type %v", next, fi.Mode().Type())
		}
		cur = next
	}
	return cur, nil
}

// hostTree adds the host directory src and everything in it at the same paths:
// directories, regular files and symbolic links (kept as links).
func (s *layerSpec) hostTree(src string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
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
			s.symlink(p, target)
		case d.IsDir():
			s.dir(p, tarMode(fi.Mode()))
		case fi.Mode().IsRegular():
			return s.hostFile(p, p)
		default:
			return fmt.Errorf("%s: unsupported file type %v", p, fi.Mode().Type())
		}
		return nil
	})
}

// resolve follows the layer's symbolic links in p's parent directories, so that an
// entry added at the result is reachable as p.
func (s *layerSpec) resolve(p string) string {
	comps := strings.Split(cleanPath(p), "/")
	cur := ""
	for i := 0; i < len(comps); i++ {
		next := path.Join(cur, comps[i])
		e, ok := s.entries[next]
		if ok && e.typ == tar.TypeSymlink && i < len(comps)-1 {
			target := e.link
			if !path.IsAbs(target) {
				target = path.Join(cur, target)
			}
			return s.resolve(path.Join(append([]string{target}, comps[i+1:]...)...))
		}
		cur = next
	}
	return cur
}

func tarMode(m fs.FileMode) int64 {
	mode := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		mode |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		mode |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		mode |= 0o1000
	}
	return mode
}

// sortedPaths lists the entries in tar order: every directory before what it holds,
// and hard links after everything else, so that their targets come first.
func (s *layerSpec) sortedPaths() []string {
	paths := make([]string, 0, len(s.entries))
	for p := range s.entries {
		paths = append(paths, p)
	}
	sort.Slice(paths, func(i, j int) bool {
		li, lj := s.entries[paths[i]].typ == tar.TypeLink, s.entries[paths[j]].typ == tar.TypeLink
		if li != lj {
			return lj
		}
		return paths[i] < paths[j]
	})
	return paths
}

// check rejects specs whose paths go through one of their own symbolic links (the
// file would land outside the link's target on extraction) or whose hard links do not
// point at a regular file of the spec.
func (s *layerSpec) check() error {
	for p, e := range s.entries {
		for dir := path.Dir(p); dir != "."; dir = path.Dir(dir) {
			if d, ok := s.entries[dir]; ok && d.typ != tar.TypeDir {
				return fmt.Errorf("layer path %s: parent %s is not a directory", p, dir)
			}
		}
		if e.typ == tar.TypeLink {
			if t, ok := s.entries[e.link]; !ok || t.typ != tar.TypeReg {
				return fmt.Errorf("layer path %s: hard link target %s is not a regular file of the layer", p, e.link)
			}
		}
	}
	return nil
}

// key identifies the layer's content: the format, every path with its type, mode,
// owner and link, and for regular files the host file's path, size and modification
// time or the hash of the given data.
func (s *layerSpec) key() string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n", layerFormat)
	for _, p := range s.sortedPaths() {
		e := s.entries[p]
		fmt.Fprintf(h, "%q %c %o %d %d %q %q %d %d", p, e.typ, e.mode, e.uid, e.gid, e.link, e.src, e.size, e.mtime)
		if e.src == "" && e.typ == tar.TypeReg {
			fmt.Fprintf(h, " %x", sha256.Sum256(e.data))
		}
		fmt.Fprintln(h)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// writeTar writes the layer as an uncompressed tar stream, every time stamp the epoch.
func (s *layerSpec) writeTar(w io.Writer) error {
	if err := s.check(); err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	written := map[string]bool{}
	var writeDir func(string) error
	// writeDir writes the parent directories an entry needs that the spec does not list.
	writeDir = func(dir string) error {
		if dir == "." || written[dir] || s.entries[dir] != nil {
			return nil
		}
		if err := writeDir(path.Dir(dir)); err != nil {
			return err
		}
		written[dir] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: epoch})
	}
	for _, p := range s.sortedPaths() {
		e := s.entries[p]
		if err := writeDir(path.Dir(p)); err != nil {
			return err
		}
		hdr := &tar.Header{Typeflag: e.typ, Name: p, Mode: e.mode, Uid: e.uid, Gid: e.gid, ModTime: epoch, Linkname: e.link}
		switch e.typ {
		case tar.TypeDir:
			hdr.Name += "/"
		case tar.TypeReg:
			hdr.Size = e.size
		case tar.TypeLink:
			// Extractors apply a hard link's mode and owner to the file it shares with
			// its target: they must be the target's.
			t := s.entries[e.link]
			hdr.Mode, hdr.Uid, hdr.Gid = t.mode, t.uid, t.gid
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		written[p] = true
		if e.typ != tar.TypeReg {
			continue
		}
		if e.src == "" {
			if _, err := tw.Write(e.data); err != nil {
				return err
			}
			continue
		}
		if err := copyHostFile(tw, e); err != nil {
			return err
		}
	}
	return tw.Close()
}

func copyHostFile(w io.Writer, e *fsEntry) error {
	f, err := os.Open(e.src)
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := io.Copy(w, io.LimitReader(f, e.size))
	if err != nil {
		return fmt.Errorf("%s: %w", e.src, err)
	}
	if n != e.size {
		return fmt.Errorf("%s: changed while building the layer (%d bytes, expected %d)", e.src, n, e.size)
	}
	return nil
}

// layerCache keeps built layers as blobs of the registry's store (blobDir, laid out
// <algorithm>/<hex>) and their digests in dir, keyed by the spec's key, so that a start
// with unchanged inputs builds nothing.
type layerCache struct {
	dir     string
	blobDir string
}

// cachedMeta is what the cache records of a built layer.
type cachedMeta struct {
	Digest v1.Hash `json:"digest"`
	DiffID v1.Hash `json:"diffID"`
	Size   int64   `json:"size"`
}

// layer returns the layer of spec, building it unless the cache has it. hit tells
// whether it came from the cache.
func (c *layerCache) layer(spec *layerSpec) (l v1.Layer, hit bool, err error) {
	key := spec.key()
	metaFile := filepath.Join(c.dir, key+".json")
	if b, err := os.ReadFile(metaFile); err == nil {
		var m cachedMeta
		if json.Unmarshal(b, &m) == nil && m.Digest.Algorithm != "" {
			blob := c.blobPath(m.Digest)
			if fi, err := os.Stat(blob); err == nil && fi.Size() == m.Size {
				return &fileLayer{path: blob, meta: m}, true, nil
			}
		}
	}
	m, err := c.build(spec)
	if err != nil {
		return nil, false, err
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, false, err
	}
	if err := atomicfile.WriteFile(metaFile, b, 0o644); err != nil {
		return nil, false, err
	}
	return &fileLayer{path: c.blobPath(m.Digest), meta: m}, false, nil
}

func (c *layerCache) blobPath(h v1.Hash) string {
	return filepath.Join(c.blobDir, h.Algorithm, h.Hex)
}

// build writes the spec's gzip-compressed tar into the blob store, hashing it on the way.
func (c *layerCache) build(spec *layerSpec) (cachedMeta, error) {
	dir := filepath.Join(c.blobDir, "sha256")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return cachedMeta{}, err
	}
	f, err := os.CreateTemp(dir, ".build-*")
	if err != nil {
		return cachedMeta{}, err
	}
	defer os.Remove(f.Name()) // after the rename, a no-op
	defer f.Close()
	compressed := sha256.New()
	counter := &countWriter{}
	zw, err := gzip.NewWriterLevel(io.MultiWriter(f, compressed, counter), gzip.BestSpeed)
	if err != nil {
		return cachedMeta{}, err
	}
	uncompressed := sha256.New()
	if err := spec.writeTar(io.MultiWriter(zw, uncompressed)); err != nil {
		return cachedMeta{}, err
	}
	if err := zw.Close(); err != nil {
		return cachedMeta{}, err
	}
	if err := f.Close(); err != nil {
		return cachedMeta{}, err
	}
	m := cachedMeta{
		Digest: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(compressed.Sum(nil))},
		DiffID: v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(uncompressed.Sum(nil))},
		Size:   counter.n,
	}
	if err := os.Rename(f.Name(), c.blobPath(m.Digest)); err != nil {
		return cachedMeta{}, err
	}
	return m, nil
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
}

// fileLayer is a gzip-compressed layer stored in a file whose digests are known.
type fileLayer struct {
	path string
	meta cachedMeta
}

var _ v1.Layer = (*fileLayer)(nil)

func (l *fileLayer) Digest() (v1.Hash, error)             { return l.meta.Digest, nil }
func (l *fileLayer) DiffID() (v1.Hash, error)             { return l.meta.DiffID, nil }
func (l *fileLayer) Size() (int64, error)                 { return l.meta.Size, nil }
func (l *fileLayer) MediaType() (types.MediaType, error)  { return types.OCILayer, nil }
func (l *fileLayer) Compressed() (io.ReadCloser, error)   { return os.Open(l.path) }
func (l *fileLayer) Uncompressed() (io.ReadCloser, error) { return gunzipFile(l.path) }

func gunzipFile(p string) (io.ReadCloser, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return &gzipFile{Reader: zr, f: f}, nil
}

type gzipFile struct {
	*gzip.Reader
	f *os.File
}

func (g *gzipFile) Close() error {
	return errors.Join(g.Reader.Close(), g.f.Close())
}

package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/kubelab/kubelab/internal/util/atomicfile"
)

// upstreamCache is what the registry fetched from upstream registries without the
// pull's own credentials, kept in Dir/upstream for every node and every later start:
//
//	blobs/sha256/<hex>                           layers, configs and manifests, by digest
//	repos/<host>/<repo>/_manifests/sha256/<hex>  a manifest of the repository: its media type
//	repos/<host>/<repo>/_tags/<tag>              "<digest> <media type>"; its mtime is when
//	                                             upstream last confirmed it
//	tmp/                                         blobs being fetched
//
// Repository components never start with "_", so the two directories of a repository
// never meet one of its sub-repositories.
type upstreamCache struct {
	dir string

	mu       sync.Mutex
	fetching map[v1.Hash]*blobFetch
}

func newUpstreamCache(dir string) *upstreamCache {
	return &upstreamCache{dir: dir, fetching: map[v1.Hash]*blobFetch{}}
}

func (c *upstreamCache) blobPath(h v1.Hash) string {
	return filepath.Join(c.dir, "blobs", h.Algorithm, h.Hex)
}

func (c *upstreamCache) repoDir(host, repo string) string {
	return filepath.Join(c.dir, "repos", host, filepath.FromSlash(repo))
}

// cachedManifest is a manifest the cache holds.
type cachedManifest struct {
	digest    v1.Hash
	mediaType string
	body      []byte
	confirmed time.Time // tags only: when upstream last named this digest for the tag
}

// manifest is the cached manifest of host/repo by tag or digest ref, or nil.
func (c *upstreamCache) manifest(host, repo, ref string) *cachedManifest {
	m := &cachedManifest{}
	if h, err := v1.NewHash(ref); err == nil {
		b, err := os.ReadFile(filepath.Join(c.repoDir(host, repo), "_manifests", h.Algorithm, h.Hex))
		if err != nil {
			return nil
		}
		m.digest, m.mediaType = h, strings.TrimSpace(string(b))
	} else {
		p := filepath.Join(c.repoDir(host, repo), "_tags", ref)
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		st, err := os.Stat(p)
		if err != nil {
			return nil
		}
		digest, mediaType, ok := strings.Cut(strings.TrimSpace(string(b)), " ")
		h, err := v1.NewHash(digest)
		if !ok || err != nil {
			return nil
		}
		m.digest, m.mediaType, m.confirmed = h, mediaType, st.ModTime()
	}
	body, err := os.ReadFile(c.blobPath(m.digest))
	if err != nil || !matches(body, m.digest) {
		return nil
	}
	m.body = body
	return m
}

// storeManifest keeps the manifest body of host/repo under its digest and, when ref is
// a tag, under the tag.
func (c *upstreamCache) storeManifest(host, repo, ref string, body []byte, digest v1.Hash, mediaType string) error {
	if err := c.writeBlob(digest, body); err != nil {
		return err
	}
	rd := c.repoDir(host, repo)
	if err := os.MkdirAll(filepath.Join(rd, "_manifests", digest.Algorithm), 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(filepath.Join(rd, "_manifests", digest.Algorithm, digest.Hex), []byte(mediaType+"\n"), 0o644); err != nil {
		return err
	}
	if _, err := v1.NewHash(ref); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(rd, "_tags"), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(filepath.Join(rd, "_tags", ref), []byte(digest.String()+" "+mediaType+"\n"), 0o644)
}

// confirmTag records that upstream still names the cached digest for tag.
func (c *upstreamCache) confirmTag(host, repo, tag string) {
	now := time.Now()
	_ = os.Chtimes(filepath.Join(c.repoDir(host, repo), "_tags", tag), now, now)
}

// writeBlob stores b under digest unless it is there.
func (c *upstreamCache) writeBlob(digest v1.Hash, b []byte) error {
	p := c.blobPath(digest)
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return atomicfile.WriteFile(p, b, 0o644)
}

// matches says whether b has digest h.
func matches(b []byte, h v1.Hash) bool {
	if h.Algorithm != "sha256" {
		return false
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]) == h.Hex
}

// blobFetch is one blob on its way from upstream into the cache: the first pull of it
// starts it, and every pull of it meanwhile (all nodes pulling one image at once) reads
// the part fetched so far and follows as it grows. It outlives the pulls: one given up
// leaves it running for the next.
type blobFetch struct {
	tmp   string // the file it grows in; renamed to final once complete and verified
	final string

	mu      sync.Mutex
	changed chan struct{} // closed and replaced at every change
	started bool          // upstream answered 200; size is set
	size    int64         // -1 when upstream did not say
	written int64
	done    bool
	status  int   // upstream's status when it did not answer 200
	err     error // the fetch failed (status 0) or the blob did not match its digest
}

// state is a snapshot of f and the channel closed at its next change.
func (f *blobFetch) state() (started, done bool, written int64, status int, err error, changed <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.started, f.done, f.written, f.status, f.err, f.changed
}

func (f *blobFetch) update(fn func()) {
	f.mu.Lock()
	fn()
	close(f.changed)
	f.changed = make(chan struct{})
	f.mu.Unlock()
}

// fetchBlob returns the fetch of digest under way, or starts one that get performs
// (the upstream's response to GET of the blob) until ctx ends.
func (c *upstreamCache) fetchBlob(ctx context.Context, digest v1.Hash, get func(context.Context) (*http.Response, error)) (*blobFetch, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if f, ok := c.fetching[digest]; ok {
		return f, nil
	}
	tmpDir := filepath.Join(c.dir, "tmp")
	if err := os.MkdirAll(tmpDir, 0o755); err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(tmpDir, digest.Hex+".*")
	if err != nil {
		return nil, err
	}
	f := &blobFetch{tmp: tmp.Name(), final: c.blobPath(digest), changed: make(chan struct{}), size: -1}
	c.fetching[digest] = f
	go func() {
		err := c.runFetch(ctx, f, tmp, digest, get)
		if err != nil {
			os.Remove(f.tmp)
		}
		c.mu.Lock()
		delete(c.fetching, digest)
		c.mu.Unlock()
		f.update(func() { f.done, f.err = true, err })
	}()
	return f, nil
}

func (c *upstreamCache) runFetch(ctx context.Context, f *blobFetch, tmp *os.File, digest v1.Hash, get func(context.Context) (*http.Response, error)) error {
	defer tmp.Close()
	resp, err := get(ctx)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		f.update(func() { f.status = resp.StatusCode })
		return fmt.Errorf("upstream answered %s", resp.Status)
	}
	f.update(func() { f.started, f.size = true, resp.ContentLength })
	var h hash.Hash = sha256.New()
	buf := make([]byte, 256<<10)
	for {
		n, rerr := resp.Body.Read(buf)
		if n > 0 {
			if _, err := tmp.Write(buf[:n]); err != nil {
				return err
			}
			h.Write(buf[:n])
			f.update(func() { f.written += int64(n) })
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if got := hex.EncodeToString(h.Sum(nil)); digest.Algorithm != "sha256" || got != digest.Hex {
		return fmt.Errorf("blob %s from upstream has digest sha256:%s", digest, got)
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(f.final), 0o755); err != nil {
		return err
	}
	return os.Rename(f.tmp, f.final)
}

// removeTemp removes the files of fetches an earlier run left unfinished.
func (c *upstreamCache) removeTemp() error {
	return os.RemoveAll(filepath.Join(c.dir, "tmp"))
}

// follow copies f's blob to w as it grows, from the start; it returns once the blob is
// complete (nil), the fetch failed, or ctx ended.
func (f *blobFetch) follow(ctx context.Context, w io.Writer) error {
	file, err := os.Open(f.tmp)
	if errors.Is(err, os.ErrNotExist) {
		// Renamed once complete, or removed after a failure.
		if err = f.wait(ctx); err == nil {
			file, err = os.Open(f.final)
		}
	}
	if err != nil {
		return err
	}
	defer file.Close()
	var pos int64
	buf := make([]byte, 256<<10)
	for {
		_, done, written, _, ferr, changed := f.state()
		for pos < written {
			n, err := file.ReadAt(buf[:min(int64(len(buf)), written-pos)], pos)
			if n > 0 {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return werr
				}
				pos += int64(n)
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
		}
		if done {
			return ferr
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// wait waits until f is done and returns its error.
func (f *blobFetch) wait(ctx context.Context) error {
	for {
		_, done, _, _, err, changed := f.state()
		if done {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitStarted waits until upstream answered f's request: with 200 (started), with
// another status, or not at all (err).
func (f *blobFetch) waitStarted(ctx context.Context) (size int64, status int, err error) {
	for {
		f.mu.Lock()
		started, done, size, status, ferr, changed := f.started, f.done, f.size, f.status, f.err, f.changed
		f.mu.Unlock()
		switch {
		case started:
			return size, http.StatusOK, nil
		case status != 0:
			return 0, status, nil
		case done:
			return 0, 0, ferr
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		}
	}
}

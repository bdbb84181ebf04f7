package image

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// tagFreshFor is how long a tag fetched from upstream is served without asking
// upstream again; after that a HEAD asks whether it still names the same manifest (and
// when upstream cannot be reached, the cached one is served).
const tagFreshFor = 5 * time.Minute

// maxManifestSize bounds a manifest fetched from upstream.
const maxManifestSize = 8 << 20

// manifestTypes are the media types a pull accepts when it names none.
var manifestTypes = []string{
	string(types.OCIImageIndex), string(types.OCIManifestSchema1),
	string(types.DockerManifestList), string(types.DockerManifestSchema2),
}

// pullThrough serves the local registry's images and, for pulls through containerd's
// mirror configuration (?ns=<registry host>) of what it does not hold, the registry's
// own: from the upstream cache, else fetched from upstream (and cached when fetched
// without the pull's own credentials). Everything else goes to the local registry.
type pullThrough struct {
	local      http.Handler
	localBlobs string // the local registry's blob store (<dir>/sha256/<hex>)
	cache      *upstreamCache
	up         *upstreams // nil: offline
	log        *slog.Logger
	ctx        context.Context // fetches into the cache run until it ends
}

func (p *pullThrough) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host := strings.ToLower(r.URL.Query().Get("ns"))
	if host == "" || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		p.local.ServeHTTP(w, r)
		return
	}
	repo, kind, ref, ok := splitPullPath(r.URL.Path)
	if !ok {
		p.local.ServeHTTP(w, r)
		return
	}
	switch kind {
	case "manifests":
		p.manifest(w, r, host, repo, ref)
	case "blobs":
		p.blob(w, r, host, repo, ref)
	}
}

// splitPullPath splits /v2/<repo>/manifests/<tag or digest> and /v2/<repo>/blobs/<digest>.
func splitPullPath(path string) (repo, kind, ref string, ok bool) {
	rest, ok := strings.CutPrefix(path, "/v2/")
	if !ok {
		return "", "", "", false
	}
	for _, k := range []string{"manifests", "blobs"} {
		i := strings.LastIndex(rest, "/"+k+"/")
		if i <= 0 {
			continue
		}
		repo, ref = rest[:i], rest[i+len(k)+2:]
		if !repoPattern.MatchString(repo) || len(repo) > 255 {
			return "", "", "", false
		}
		if _, err := v1.NewHash(ref); err == nil {
			return repo, k, ref, true
		}
		if k == "manifests" && tagPattern.MatchString(ref) {
			return repo, k, ref, true
		}
		return "", "", "", false
	}
	return "", "", "", false
}

// offlineMessage says why an image the registry does not hold is not found.
const offlineMessage = "kubelab runs offline (kubelab up --offline): images come only from kubelab's registry (kubelab image import, build or tag add them)"

func (p *pullThrough) manifest(w http.ResponseWriter, r *http.Request, host, repo, ref string) {
	rec := newRecorder()
	p.local.ServeHTTP(rec, r)
	if rec.status != http.StatusNotFound {
		rec.replay(w)
		return
	}
	_, digestErr := v1.NewHash(ref)
	isDigest := digestErr == nil
	cached := p.cache.manifest(host, repo, ref)
	if cached != nil && (isDigest || p.up == nil || time.Since(cached.confirmed) < tagFreshFor) {
		serveManifest(w, r, cached.body, cached.digest, cached.mediaType)
		return
	}
	if p.up == nil {
		writeError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", fmt.Sprintf("%s/%s:%s: %s", host, repo, ref, offlineMessage))
		return
	}
	if err := p.up.checkHost(host); err != nil {
		writeError(w, http.StatusNotFound, "MANIFEST_UNKNOWN", err.Error())
		return
	}
	creds := requestCredentials(r)
	accept := r.Header.Values("Accept")
	if len(accept) == 0 {
		accept = manifestTypes
	}
	if cached != nil && creds == nil {
		// A tag fetched a while ago: is it still the same manifest upstream?
		resp, err := p.up.do(r.Context(), http.MethodHead, host, repo, "manifests", ref, accept, nil)
		if err != nil {
			p.log.Warn("image registry: upstream unreachable; serving the cached manifest", "image", host+"/"+repo+":"+ref, "err", err)
			serveManifest(w, r, cached.body, cached.digest, cached.mediaType)
			return
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && resp.Header.Get("Docker-Content-Digest") == cached.digest.String() {
			p.cache.confirmTag(host, repo, ref)
			serveManifest(w, r, cached.body, cached.digest, cached.mediaType)
			return
		}
	}
	resp, err := p.up.do(r.Context(), http.MethodGet, host, repo, "manifests", ref, accept, creds)
	if err != nil {
		if cached != nil {
			p.log.Warn("image registry: upstream unreachable; serving the cached manifest", "image", host+"/"+repo+":"+ref, "err", err)
			serveManifest(w, r, cached.body, cached.digest, cached.mediaType)
			return
		}
		p.log.Warn("image registry: upstream unreachable", "image", host+"/"+repo+":"+ref, "err", err)
		writeError(w, http.StatusBadGateway, "UNKNOWN", err.Error())
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		p.upstreamError(w, resp, host, repo+":"+ref, "MANIFEST_UNKNOWN", creds != nil)
		return
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxManifestSize+1))
	if err != nil {
		writeError(w, http.StatusBadGateway, "UNKNOWN", fmt.Sprintf("read manifest %s/%s:%s: %v", host, repo, ref, err))
		return
	}
	if len(body) > maxManifestSize {
		writeError(w, http.StatusBadGateway, "MANIFEST_INVALID", fmt.Sprintf("manifest %s/%s:%s is larger than %d bytes", host, repo, ref, maxManifestSize))
		return
	}
	digest, _, err := v1.SHA256(bytes.NewReader(body))
	if err != nil {
		writeError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
		return
	}
	if isDigest && digest.String() != ref {
		writeError(w, http.StatusBadGateway, "DIGEST_INVALID", fmt.Sprintf("manifest %s/%s@%s from upstream has digest %s", host, repo, ref, digest))
		return
	}
	mediaType := manifestMediaType(resp.Header.Get("Content-Type"), body)
	if creds == nil {
		if err := p.cache.storeManifest(host, repo, ref, body, digest, mediaType); err != nil {
			p.log.Warn("image registry: cache a manifest", "image", host+"/"+repo+":"+ref, "err", err)
		} else {
			p.log.Info("image registry: fetched from upstream", "image", host+"/"+repo+":"+ref, "digest", digest.String())
		}
	}
	serveManifest(w, r, body, digest, mediaType)
}

func (p *pullThrough) blob(w http.ResponseWriter, r *http.Request, host, repo, ref string) {
	h, err := v1.NewHash(ref)
	if err != nil {
		p.local.ServeHTTP(w, r)
		return
	}
	if _, err := os.Stat(filepath.Join(p.localBlobs, h.Algorithm, h.Hex)); err == nil {
		p.local.ServeHTTP(w, r)
		return
	}
	if f, err := os.Open(p.cache.blobPath(h)); err == nil {
		defer f.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Docker-Content-Digest", h.String())
		http.ServeContent(w, r, "", time.Time{}, f)
		return
	}
	if p.up == nil {
		writeError(w, http.StatusNotFound, "BLOB_UNKNOWN", fmt.Sprintf("%s/%s@%s: %s", host, repo, ref, offlineMessage))
		return
	}
	if err := p.up.checkHost(host); err != nil {
		writeError(w, http.StatusNotFound, "BLOB_UNKNOWN", err.Error())
		return
	}
	creds := requestCredentials(r)
	if r.Method == http.MethodHead || creds != nil {
		// Passed through: a HEAD fetches nothing, and what the pull's own credentials
		// fetch stays out of the cache every pull reads.
		p.passBlob(w, r, host, repo, ref, creds)
		return
	}
	f, err := p.cache.fetchBlob(p.ctx, h, func(ctx context.Context) (*http.Response, error) {
		return p.up.do(ctx, http.MethodGet, host, repo, "blobs", ref, nil, nil)
	})
	if err != nil {
		writeError(w, http.StatusInternalServerError, "UNKNOWN", err.Error())
		return
	}
	size, status, err := f.waitStarted(r.Context())
	switch {
	case err != nil:
		p.log.Warn("image registry: upstream unreachable", "blob", host+"/"+repo+"@"+ref, "err", err)
		writeError(w, http.StatusBadGateway, "UNKNOWN", err.Error())
		return
	case status != http.StatusOK:
		p.upstreamError(w, &http.Response{StatusCode: status, Status: strconv.Itoa(status) + " " + http.StatusText(status)}, host, repo+"@"+ref, "BLOB_UNKNOWN", false)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Docker-Content-Digest", h.String())
	if size >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	}
	w.WriteHeader(http.StatusOK)
	if err := f.follow(r.Context(), w); err != nil {
		// The pull sees a short body and tries again; the next may find it cached.
		p.log.Warn("image registry: a blob from upstream was cut short", "blob", host+"/"+repo+"@"+ref, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// passBlob answers a blob request with upstream's answer, caching nothing.
func (p *pullThrough) passBlob(w http.ResponseWriter, r *http.Request, host, repo, ref string, creds *credentials) {
	resp, err := p.up.do(r.Context(), r.Method, host, repo, "blobs", ref, nil, creds)
	if err != nil {
		writeError(w, http.StatusBadGateway, "UNKNOWN", err.Error())
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		p.upstreamError(w, resp, host, repo+"@"+ref, "BLOB_UNKNOWN", creds != nil)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Docker-Content-Digest", ref)
	if resp.ContentLength >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		if _, err := io.Copy(w, resp.Body); err != nil {
			panic(http.ErrAbortHandler)
		}
	}
}

// upstreamError answers a pull with what upstream's status means for it. When upstream
// wants credentials the pull did not bring, the answer is a Basic challenge: containerd
// then sends the credentials the kubelet gave it (the pod's imagePullSecrets), and the
// pull is tried again with them.
func (p *pullThrough) upstreamError(w http.ResponseWriter, resp *http.Response, host, what, notFoundCode string, hadCredentials bool) {
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		if !hadCredentials {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf("Basic realm=%q", "kubelab registry: credentials for "+host))
			writeError(w, http.StatusUnauthorized, "UNAUTHORIZED", fmt.Sprintf("%s/%s: %s asks for credentials", host, what, host))
			return
		}
		writeError(w, http.StatusForbidden, "DENIED", fmt.Sprintf("%s/%s: %s refused the credentials (%s)", host, what, host, resp.Status))
	case http.StatusNotFound:
		writeError(w, http.StatusNotFound, notFoundCode, fmt.Sprintf("%s/%s: not found at %s", host, what, host))
	case http.StatusTooManyRequests:
		writeError(w, http.StatusTooManyRequests, "TOOMANYREQUESTS", fmt.Sprintf("%s/%s: %s limits the pulls (%s)", host, what, host, resp.Status))
	default:
		writeError(w, http.StatusBadGateway, "UNKNOWN", fmt.Sprintf("%s/%s: %s answered %s", host, what, host, resp.Status))
	}
}

// requestCredentials are the Basic credentials a pull carries, or nil.
func requestCredentials(r *http.Request) *credentials {
	user, pass, ok := r.BasicAuth()
	if !ok || (user == "" && pass == "") {
		return nil
	}
	return &credentials{username: user, password: pass}
}

// manifestMediaType is a manifest's media type: upstream's Content-Type, else the
// manifest's own mediaType field.
func manifestMediaType(contentType string, body []byte) string {
	if mt, _, err := mime.ParseMediaType(contentType); err == nil && mt != "" && mt != "application/octet-stream" && mt != "text/plain" {
		return mt
	}
	var m struct {
		MediaType string `json:"mediaType"`
	}
	if json.Unmarshal(body, &m) == nil && m.MediaType != "" {
		return m.MediaType
	}
	return string(types.OCIManifestSchema1)
}

func serveManifest(w http.ResponseWriter, r *http.Request, body []byte, digest v1.Hash, mediaType string) {
	w.Header().Set("Content-Type", mediaType)
	w.Header().Set("Docker-Content-Digest", digest.String())
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}

// writeError answers with the distribution API's error form.
func writeError(w http.ResponseWriter, status int, code, message string) {
	type e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	b, _ := json.Marshal(struct {
		Errors []e `json:"errors"`
	}{[]e{{code, message}}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// recorder keeps a response of the local registry, to be replayed unless it is a 404.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

func (r *recorder) replay(w http.ResponseWriter) {
	for k, v := range r.header {
		w.Header()[k] = v
	}
	if r.status == 0 {
		r.status = http.StatusOK
	}
	w.WriteHeader(r.status)
	_, _ = w.Write(r.body.Bytes())
}

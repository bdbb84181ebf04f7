package kuberuntime

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sort"
	"strings"

	"github.com/distribution/reference"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A pod's imagePullSecrets give the credentials its images are pulled with, as
// upstream's kubelet reads them: the kubernetes.io/dockerconfigjson secrets'
// .dockerconfigjson ({"auths": {location: entry}}) and the kubernetes.io/dockercfg
// secrets' .dockercfg ({location: entry}); an entry has username and password, or auth
// (base64 of "username:password", which wins). A location is a registry host with an
// optional port and path ("registry.example:5000/team", "https://index.docker.io/v1/"
// — a scheme and a leading /v1 or /v2 do not count) whose host labels may be globs
// ("*.example.com"). An image matches a location when their hosts have as many labels,
// each label matches, the ports are equal and the location's path is a prefix of the
// image's repository path. Every matching credential is tried, the most specific
// location first (the locations sorted in reverse); with none, an image of Docker Hub
// takes those of index.docker.io. The credentials go to CRI PullImage without a server
// address, so the runtime hands them to whichever registry host asks for them.

// dockerConfigEntry is one location's credentials in a docker config.
type dockerConfigEntry struct {
	Username string `json:"username,omitempty"`
	Password string `json:"password,omitempty"`
	Auth     string `json:"auth,omitempty"`
}

// credentials of the entry, with auth decoded.
func (e dockerConfigEntry) credentials() (username, password string, err error) {
	if e.Auth == "" {
		return e.Username, e.Password, nil
	}
	b, err := base64.StdEncoding.DecodeString(e.Auth)
	if err != nil {
		return "", "", fmt.Errorf("auth: %w", err)
	}
	user, pass, ok := strings.Cut(string(b), ":")
	if !ok {
		return "", "", fmt.Errorf("auth is not the base64 of username:password")
	}
	return user, pass, nil
}

// keyring is the pull credentials of a pod's secrets by location key (host[/path]).
type keyring struct {
	index []string // keys, most specific first
	creds map[string][]*runtimeapi.AuthConfig
}

// dockerHubKey is the key under which Docker Hub's credentials are written.
const dockerHubKey = "index.docker.io"

// newKeyring reads the docker configs of secrets; secrets of other types are ignored.
func newKeyring(secrets []*corev1.Secret) (*keyring, error) {
	k := &keyring{creds: map[string][]*runtimeapi.AuthConfig{}}
	for _, s := range secrets {
		var entries map[string]dockerConfigEntry
		switch b := s.Data[corev1.DockerConfigJsonKey]; {
		case s.Type == corev1.SecretTypeDockerConfigJson && len(b) > 0:
			var cfg struct {
				Auths map[string]dockerConfigEntry `json:"auths"`
			}
			if err := json.Unmarshal(b, &cfg); err != nil {
				return nil, fmt.Errorf("image pull secret %s/%s: %w", s.Namespace, s.Name, err)
			}
			entries = cfg.Auths
		case s.Type == corev1.SecretTypeDockercfg && len(s.Data[corev1.DockerConfigKey]) > 0:
			if err := json.Unmarshal(s.Data[corev1.DockerConfigKey], &entries); err != nil {
				return nil, fmt.Errorf("image pull secret %s/%s: %w", s.Namespace, s.Name, err)
			}
		default:
			continue
		}
		for _, loc := range sortedKeys(entries) {
			user, pass, err := entries[loc].credentials()
			if err != nil {
				return nil, fmt.Errorf("image pull secret %s/%s, %s: %w", s.Namespace, s.Name, loc, err)
			}
			key, ok := locationKey(loc)
			if !ok {
				continue
			}
			if _, seen := k.creds[key]; !seen {
				k.index = append(k.index, key)
			}
			k.creds[key] = append(k.creds[key], &runtimeapi.AuthConfig{Username: user, Password: pass})
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(k.index)))
	return k, nil
}

func sortedKeys(m map[string]dockerConfigEntry) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// locationKey is a config location as host[/path]: no scheme, no leading /v1 or /v2.
func locationKey(loc string) (string, bool) {
	if !strings.HasPrefix(loc, "https://") && !strings.HasPrefix(loc, "http://") {
		loc = "https://" + loc
	}
	u, err := url.Parse(loc)
	if err != nil || u.Host == "" {
		return "", false
	}
	p := u.Path
	if strings.HasPrefix(p, "/v1/") || strings.HasPrefix(p, "/v2/") {
		p = p[3:]
	}
	if p == "" || p == "/" {
		return u.Host, true
	}
	return u.Host + p, true
}

// lookup is the credentials for image, most specific first; none when nothing matches.
func (k *keyring) lookup(image string) []*runtimeapi.AuthConfig {
	repo := image
	if named, err := reference.ParseNormalizedNamed(image); err == nil {
		repo = named.Name()
	}
	var out []*runtimeapi.AuthConfig
	for _, key := range k.index {
		if locationMatches(key, repo) {
			out = append(out, k.creds[key]...)
		}
	}
	if len(out) == 0 && isDockerHub(repo) {
		out = k.creds[dockerHubKey]
	}
	return out
}

// locationMatches says whether repo (host/path, no scheme) is under the location key,
// whose host labels may be globs.
func locationMatches(key, repo string) bool {
	kh, kp, _ := strings.Cut(key, "/")
	rh, rp, _ := strings.Cut(repo, "/")
	kHost, kPort := splitPort(kh)
	rHost, rPort := splitPort(rh)
	if kPort != rPort {
		return false
	}
	kLabels, rLabels := strings.Split(kHost, "."), strings.Split(rHost, ".")
	if len(kLabels) != len(rLabels) {
		return false
	}
	if !strings.HasPrefix("/"+rp, "/"+kp) {
		return false
	}
	for i := range kLabels {
		if ok, err := filepath.Match(kLabels[i], rLabels[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

func splitPort(hostport string) (host, port string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return h, p
	}
	return hostport, ""
}

// isDockerHub says whether repo is pulled from Docker Hub: no registry host, or
// docker.io / index.docker.io.
func isDockerHub(repo string) bool {
	first, _, hasSlash := strings.Cut(repo, "/")
	if first == "" {
		return false
	}
	if !hasSlash || first == "docker.io" || first == "index.docker.io" {
		return true
	}
	return !strings.ContainsAny(first, ".:")
}

// pullCredentials are the credentials of the pod's imagePullSecrets for image. Secrets
// that cannot be read are left out, with a FailedToRetrieveImagePullSecret event naming
// them, and the pull goes on.
func (r *Runtime) pullCredentials(pod *corev1.Pod, image string) ([]*runtimeapi.AuthConfig, error) {
	var secrets []*corev1.Secret
	var missing []string
	for _, ref := range pod.Spec.ImagePullSecrets {
		if ref.Name == "" {
			continue
		}
		if r.cfg.Objects == nil {
			missing = append(missing, ref.Name)
			continue
		}
		s, err := r.cfg.Objects.Secret(pod.Namespace, ref.Name)
		if err != nil {
			r.log.Info("Unable to retrieve pull secret, the image pull may not succeed.", "pod", pod.Namespace+"/"+pod.Name, "secret", ref.Name, "err", err)
			missing = append(missing, ref.Name)
			continue
		}
		secrets = append(secrets, s)
	}
	if len(missing) > 0 {
		r.event(pod, "", corev1.EventTypeWarning, eventFailedToRetrieveImagePullSecret,
			"Unable to retrieve some image pull secrets (%s); attempting to pull the image may not succeed.", strings.Join(missing, ", "))
	}
	k, err := newKeyring(secrets)
	if err != nil {
		return nil, err
	}
	return k.lookup(image), nil
}

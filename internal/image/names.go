package image

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
)

// dockerHub is the registry that references without a registry name point at, as
// kubelets, containerd and docker spell it.
const dockerHub = "docker.io"

// RepoPath is the path under which the registry serves ref: its repository within its
// registry, then ":tag" or "@digest". It normalises ref as a kubelet and containerd do:
// no registry means docker.io, a single-component docker.io repository gets "library/",
// no tag means ":latest", and a digest wins over a tag. So "nginx" is
// "library/nginx:latest", "registry.k8s.io/pause:3.10" is "pause:3.10" and
// "quay.io/a/b" is "a/b:latest". The registry's name is dropped: every registry's
// images share the one namespace this registry serves, which is how containerd asks
// for them through a mirror.
func RepoPath(ref string) (string, error) {
	r, err := parseRef(ref)
	if err != nil {
		return "", err
	}
	return r.Context().RepositoryStr() + identifierSuffix(r), nil
}

// Canonical is ref normalised as RepoPath does, with its registry: "nginx" is
// "docker.io/library/nginx:latest".
func Canonical(ref string) (string, error) {
	r, err := parseRef(ref)
	if err != nil {
		return "", err
	}
	return canonical(r), nil
}

func parseRef(ref string) (name.Reference, error) {
	if ref == "" {
		return nil, fmt.Errorf("image reference %q: empty", ref)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w", ref, err)
	}
	return r, nil
}

func canonical(r name.Reference) string {
	registry := r.Context().RegistryStr()
	if registry == name.DefaultRegistry {
		registry = dockerHub
	}
	return registry + "/" + r.Context().RepositoryStr() + identifierSuffix(r)
}

// identifierSuffix is ":tag" or "@digest".
func identifierSuffix(r name.Reference) string {
	if d, ok := r.(name.Digest); ok {
		return "@" + d.DigestStr()
	}
	return ":" + r.Identifier()
}

// localRef is the reference of repoPath in the registry at addr, for pushing.
func localRef(addr, repoPath string) (name.Reference, error) {
	r, err := name.ParseReference(addr+"/"+repoPath, name.Insecure, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("reference %s/%s: %w", addr, repoPath, err)
	}
	return r, nil
}

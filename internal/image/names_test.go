package image

import (
	"strings"
	"testing"
)

func TestRepoPath(t *testing.T) {
	const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, tc := range []struct{ ref, path, canonical string }{
		{"nginx", "library/nginx:latest", "docker.io/library/nginx:latest"},
		{"busybox:1.36", "library/busybox:1.36", "docker.io/library/busybox:1.36"},
		{"docker.io/nginx", "library/nginx:latest", "docker.io/library/nginx:latest"},
		{"docker.io/library/nginx:1.22.1", "library/nginx:1.22.1", "docker.io/library/nginx:1.22.1"},
		{"index.docker.io/library/nginx", "library/nginx:latest", "docker.io/library/nginx:latest"},
		{"bitnami/redis:7", "bitnami/redis:7", "docker.io/bitnami/redis:7"},
		{"registry.k8s.io/pause:3.10", "pause:3.10", "registry.k8s.io/pause:3.10"},
		{"registry.k8s.io/sig-storage/csi-provisioner:v5.2.0", "sig-storage/csi-provisioner:v5.2.0", "registry.k8s.io/sig-storage/csi-provisioner:v5.2.0"},
		{"quay.io/a/b", "a/b:latest", "quay.io/a/b:latest"},
		{"quay.io/foo/bar:1", "foo/bar:1", "quay.io/foo/bar:1"},
		{"localhost:5000/app:dev", "app:dev", "localhost:5000/app:dev"},
		{"nginx@" + digest, "library/nginx@" + digest, "docker.io/library/nginx@" + digest},
		{"nginx:1.0@" + digest, "library/nginx@" + digest, "docker.io/library/nginx@" + digest},
		{"quay.io/a/b@" + digest, "a/b@" + digest, "quay.io/a/b@" + digest},
	} {
		got, err := RepoPath(tc.ref)
		if err != nil || got != tc.path {
			t.Errorf("RepoPath(%q) = %q, %v; want %q", tc.ref, got, err, tc.path)
		}
		c, err := Canonical(tc.ref)
		if err != nil || c != tc.canonical {
			t.Errorf("Canonical(%q) = %q, %v; want %q", tc.ref, c, err, tc.canonical)
		}
	}
	for _, bad := range []string{"", "Nginx", "nginx:", "a b", "nginx@sha256:1234", "http://nginx", "nginx:tag:extra", "UPPER/case:1"} {
		got, err := RepoPath(bad)
		if err == nil {
			t.Errorf("RepoPath(%q) = %q, want an error", bad, got)
			continue
		}
		if !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("RepoPath(%q) error %q does not name the reference", bad, err)
		}
	}
}

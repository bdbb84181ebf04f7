package clustertest

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kubelab/kubelab/internal/testutil"
)

// Seed is the directory of the example manifests, examples/seed.
func Seed() string { return filepath.Join(testutil.RepoRoot(), "examples", "seed") }

// SeedObject decodes the manifest file of examples/seed, which holds one object of type T.
func SeedObject[T runtime.Object](t testing.TB, file string) T {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Seed(), file))
	if err != nil {
		t.Fatal(err)
	}
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(b, nil, nil)
	if err != nil {
		t.Fatalf("decode %s: %v", file, err)
	}
	out, ok := obj.(T)
	if !ok {
		t.Fatalf("%s holds a %T", file, obj)
	}
	return out
}

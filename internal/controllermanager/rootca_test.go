package controllermanager

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
)

// The root-ca-cert-publisher publishes Config.RootCA, else the CA the client config
// trusts the API server with.
func TestRootCA(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(file, []byte("from file"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		configured string
		rc         rest.Config
		want       string
	}{
		{"configured", "configured", rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: []byte("data")}}, "configured"},
		{"CA data", "", rest.Config{TLSClientConfig: rest.TLSClientConfig{CAData: []byte("data"), CAFile: file}}, "data"},
		{"CA file", "", rest.Config{TLSClientConfig: rest.TLSClientConfig{CAFile: file}}, "from file"},
	} {
		got, err := rootCA([]byte(tc.configured), &tc.rc)
		if err != nil || string(got) != tc.want {
			t.Errorf("%s: %q, %v; want %q", tc.name, got, err, tc.want)
		}
	}
	if _, err := rootCA(nil, &rest.Config{}); err == nil {
		t.Error("no CA anywhere is accepted")
	}
	if _, err := rootCA(nil, &rest.Config{TLSClientConfig: rest.TLSClientConfig{CAFile: file + ".missing"}}); err == nil {
		t.Error("a missing CA file is accepted")
	}
}

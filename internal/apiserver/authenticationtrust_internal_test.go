package apiserver

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	certutil "k8s.io/client-go/util/cert"
)

// writeTestCA writes a new CA named cn under dir and gives its certificate as PEM.
func writeTestCA(t *testing.T, dir, cn string) []byte {
	t.Helper()
	cert, key := filepath.Join(dir, cn+".crt"), filepath.Join(dir, cn+".key")
	if err := createCA(cert, key, cn); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(cert)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func certNames(t *testing.T, bundle string) []string {
	t.Helper()
	certs, err := certutil.ParseCertsPEM([]byte(bundle))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range certs {
		out = append(out, c.Subject.CommonName)
	}
	return out
}

// TestAuthenticationTrustData: the ConfigMap says the client CA, the front-proxy CA,
// the allowed name and the X-Remote-* headers under kube-apiserver's keys, the lists as
// JSON arrays of strings, and reads back as it was written.
func TestAuthenticationTrustData(t *testing.T) {
	dir := t.TempDir()
	required, err := requiredAuthenticationTrust(writeTestCA(t, dir, "client-ca"), writeTestCA(t, dir, "front-ca"))
	if err != nil {
		t.Fatal(err)
	}
	data := required.data()
	for key, want := range map[string][]string{
		"requestheader-allowed-names":        {"front-proxy-client"},
		"requestheader-username-headers":     {"X-Remote-User"},
		"requestheader-uid-headers":          {"X-Remote-Uid"},
		"requestheader-group-headers":        {"X-Remote-Group"},
		"requestheader-extra-headers-prefix": {"X-Remote-Extra-"},
	} {
		var got []string
		if err := json.Unmarshal([]byte(data[key]), &got); err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %q (%v), want the JSON array %q", key, data[key], err, want)
		}
	}
	if got := certNames(t, data["client-ca-file"]); !reflect.DeepEqual(got, []string{"client-ca"}) {
		t.Errorf("client-ca-file: %v, want client-ca", got)
	}
	if got := certNames(t, data["requestheader-client-ca-file"]); !reflect.DeepEqual(got, []string{"front-ca"}) {
		t.Errorf("requestheader-client-ca-file: %v, want front-ca", got)
	}
	if len(data) != 7 {
		t.Errorf("data has %d keys, want 7: %v", len(data), data)
	}
	back, err := parseAuthenticationTrust(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.data(), data) {
		t.Errorf("read back: %v, want %v", back.data(), data)
	}

	// Without a front-proxy CA nothing is said of request headers.
	noFront := authenticationTrust{clientCA: required.clientCA, usernameHeaders: requestHeaderUsername}
	if d := noFront.data(); len(d) != 1 || d["client-ca-file"] == "" {
		t.Errorf("without a front-proxy CA: %v, want client-ca-file only", d)
	}
}

// TestMergeAuthenticationTrust: what another writer put in the ConfigMap stays (after
// what it had, this server's is added, each once); certificates expired for more than
// five minutes go.
func TestMergeAuthenticationTrust(t *testing.T) {
	dir := t.TempDir()
	required, err := requiredAuthenticationTrust(writeTestCA(t, dir, "client-ca"), writeTestCA(t, dir, "front-ca"))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := certutil.ParseCertsPEM(writeTestCA(t, dir, "other-ca"))
	expired := &x509.Certificate{Raw: []byte("expired"), NotAfter: time.Now().Add(-time.Hour)}
	justExpired := &x509.Certificate{Raw: []byte("just expired"), NotAfter: time.Now().Add(-time.Minute)}
	existing := authenticationTrust{
		clientCA:        []*x509.Certificate{other[0], expired, justExpired, required.clientCA[0]},
		requestHeaderCA: required.requestHeaderCA,
		allowedNames:    []string{"aggregator"},
		usernameHeaders: []string{"X-Remote-User"},
	}
	got := mergeAuthenticationTrust(existing, required, time.Now())
	if len(got.clientCA) != 3 || got.clientCA[0] != other[0] || got.clientCA[1] != justExpired || got.clientCA[2] != required.clientCA[0] {
		t.Errorf("client CAs: %d, want the other CA, the one expired a minute ago and this server's", len(got.clientCA))
	}
	if len(got.requestHeaderCA) != 1 {
		t.Errorf("front-proxy CAs: %d, want 1", len(got.requestHeaderCA))
	}
	if !reflect.DeepEqual(got.allowedNames, []string{"aggregator", "front-proxy-client"}) ||
		!reflect.DeepEqual(got.usernameHeaders, []string{"X-Remote-User"}) ||
		!reflect.DeepEqual(got.groupHeaders, []string{"X-Remote-Group"}) {
		t.Errorf("lists: names %v, user headers %v, group headers %v", got.allowedNames, got.usernameHeaders, got.groupHeaders)
	}
}

// TestAuthenticationTrustWriter: the ConfigMap is created when missing, left alone when
// it says all this server needs, and completed when it lacks some of it.
func TestAuthenticationTrustWriter(t *testing.T) {
	dir := t.TempDir()
	required, err := requiredAuthenticationTrust(writeTestCA(t, dir, "client-ca"), writeTestCA(t, dir, "front-ca"))
	if err != nil {
		t.Fatal(err)
	}
	client := fake.NewClientset()
	w := &authenticationTrustWriter{client: client, required: required, now: time.Now}
	ctx := context.Background()
	get := func() *corev1.ConfigMap {
		t.Helper()
		cm, err := client.CoreV1().ConfigMaps("kube-system").Get(ctx, "extension-apiserver-authentication", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}
	if err := w.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if cm := get(); !reflect.DeepEqual(cm.Data, required.data()) {
		t.Errorf("created: %v", cm.Data)
	}
	writes := func() int {
		n := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "create" || a.GetVerb() == "update" {
				n++
			}
		}
		return n
	}
	if err := w.sync(ctx); err != nil || writes() != 1 {
		t.Errorf("second sync: %v, %d writes; want none more", err, writes())
	}
	cm := get()
	delete(cm.Data, "requestheader-client-ca-file")
	cm.Data["requestheader-allowed-names"] = `["aggregator"]`
	if _, err := client.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := w.sync(ctx); err != nil {
		t.Fatal(err)
	}
	cm = get()
	if cm.Data["requestheader-client-ca-file"] != required.data()["requestheader-client-ca-file"] ||
		cm.Data["requestheader-allowed-names"] != `["aggregator","front-proxy-client"]` {
		t.Errorf("completed: %v", cm.Data)
	}
	if strings.Contains(cm.Data["requestheader-allowed-names"], "null") {
		t.Error("a list was written as null")
	}
}

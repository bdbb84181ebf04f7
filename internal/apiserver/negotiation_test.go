package apiserver_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
)

// The snapshot kinds have no protobuf form: as for custom resources upstream, a client
// that prefers protobuf but accepts JSON gets JSON, one that accepts only protobuf gets
// 406, a protobuf body gets 415; the core kinds still speak protobuf.
func TestSnapshotKindsNegotiateJSON(t *testing.T) {
	s := apiservertest.Start(t, apiservertest.Options{})
	hc, err := rest.HTTPClientFor(s.Config)
	if err != nil {
		t.Fatal(err)
	}
	do := func(method, path, accept, contentType, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, s.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Accept", accept)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type")
	}
	const list = "/apis/snapshot.storage.k8s.io/v1/volumesnapshotclasses"
	if code, ct := do("GET", list, runtime.ContentTypeProtobuf+", "+runtime.ContentTypeJSON, "", ""); code != 200 || ct != runtime.ContentTypeJSON {
		t.Errorf("protobuf-or-JSON list: %d %s, want 200 JSON", code, ct)
	}
	if code, _ := do("GET", list, runtime.ContentTypeProtobuf, "", ""); code != http.StatusNotAcceptable {
		t.Errorf("protobuf-only list: %d, want 406", code)
	}
	if code, _ := do("POST", list, runtime.ContentTypeJSON, runtime.ContentTypeProtobuf, "k8s\x00"); code != http.StatusUnsupportedMediaType {
		t.Errorf("protobuf body: %d, want 415", code)
	}
	if code, ct := do("GET", "/api/v1/namespaces", runtime.ContentTypeProtobuf+", "+runtime.ContentTypeJSON, "", ""); code != 200 || ct != runtime.ContentTypeProtobuf {
		t.Errorf("core list: %d %s, want 200 protobuf", code, ct)
	}

	// A snapshot clientset configured for protobuf, as components configure their
	// clients, still works: it sends JSON bodies it can encode and reads JSON back.
	cfg := rest.CopyConfig(s.Config)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	snaps := snapclient.NewForConfigOrDie(cfg)
	if _, err := snaps.SnapshotV1().VolumeSnapshotClasses().List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Errorf("list through a protobuf-preferring client: %v", err)
	}
}

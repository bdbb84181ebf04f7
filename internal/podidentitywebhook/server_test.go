package podidentitywebhook

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// reviewJSON is an AdmissionReview as the API server sends it for a pod being created.
const reviewJSON = `{
  "kind": "AdmissionReview",
  "apiVersion": "admission.k8s.io/v1",
  "request": {
    "uid": "0df28fbd-5f5f-11e8-bc74-36e6bb280816",
    "kind": {"group": "", "version": "v1", "kind": "Pod"},
    "resource": {"group": "", "version": "v1", "resource": "pods"},
    "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
    "requestResource": {"group": "", "version": "v1", "resource": "pods"},
    "namespace": "team",
    "operation": "CREATE",
    "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
    "object": {
      "apiVersion": "v1",
      "kind": "Pod",
      "metadata": {"generateName": "web-", "namespace": "team"},
      "spec": {
        "serviceAccountName": "SA",
        "containers": [{"name": "app", "image": "busybox"}]
      }
    },
    "oldObject": null,
    "dryRun": false,
    "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}
  }
}`

func newTestHandler() *handler {
	accounts := map[string]*corev1.ServiceAccount{
		"team/builder": {ObjectMeta: sa(map[string]string{RoleARNAnnotation: role}).ObjectMeta},
		"team/plain":   {ObjectMeta: sa(nil).ObjectMeta},
	}
	return &handler{settings: Settings{Region: "us-east-1", RegionalSTS: true}, log: slog.New(slog.DiscardHandler),
		serviceAccounts: func(_ context.Context, ns, name string) (*corev1.ServiceAccount, error) {
			if a, ok := accounts[ns+"/"+name]; ok {
				return a, nil
			}
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "serviceaccounts"}, name)
		}}
}

type reviewOut struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Response   struct {
		UID       string           `json:"uid"`
		Allowed   bool             `json:"allowed"`
		PatchType string           `json:"patchType"`
		Patch     []byte           `json:"patch"`
		Status    *json.RawMessage `json:"status"`
	} `json:"response"`
}

func post(t *testing.T, h http.Handler, contentType, body string) (int, reviewOut, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	res, err := http.Post(srv.URL+MutatePath, contentType, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out reviewOut
	if res.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("response %s: %v", raw, err)
		}
	}
	return res.StatusCode, out, string(raw)
}

// The webhook answers the API server's AdmissionReview for the pod of an annotated
// ServiceAccount with a JSON Patch, echoing the request's uid and version; the pods of
// other ServiceAccounts, missing ones and other requests are allowed without one.
func TestServeAdmissionReview(t *testing.T) {
	h := newTestHandler()
	code, out, raw := post(t, h, "application/json", strings.Replace(reviewJSON, `"SA"`, `"builder"`, 1))
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, raw)
	}
	r := out.Response
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || r.UID != "0df28fbd-5f5f-11e8-bc74-36e6bb280816" ||
		!r.Allowed || r.PatchType != "JSONPatch" {
		t.Fatalf("response %s", raw)
	}
	var patch []PatchOperation
	if err := json.Unmarshal(r.Patch, &patch); err != nil {
		t.Fatal(err)
	}
	got := apply(t, &corev1.Pod{Spec: corev1.PodSpec{ServiceAccountName: "builder", Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}, patch)
	if len(got.Spec.Volumes) != 1 || got.Spec.Volumes[0].Name != VolumeName || len(got.Spec.Containers[0].Env) != 5 {
		t.Errorf("patched pod %+v", got.Spec)
	}

	for name, body := range map[string]string{
		"unannotated":         strings.Replace(reviewJSON, `"SA"`, `"plain"`, 1),
		"missing":             strings.Replace(reviewJSON, `"SA"`, `"nobody"`, 1),
		"default, missing":    strings.Replace(reviewJSON, `"serviceAccountName": "SA",`, ``, 1),
		"update":              strings.Replace(strings.Replace(reviewJSON, `"SA"`, `"builder"`, 1), `"CREATE"`, `"UPDATE"`, 1),
		"another resource":    strings.Replace(strings.Replace(reviewJSON, `"SA"`, `"builder"`, 1), `"resource": "pods"`, `"resource": "configmaps"`, 1),
		"v1beta1 unannotated": strings.Replace(strings.Replace(reviewJSON, `"SA"`, `"plain"`, 1), "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1),
	} {
		code, out, raw := post(t, h, "application/json", body)
		if code != http.StatusOK || !out.Response.Allowed || out.Response.Patch != nil || out.Response.UID == "" {
			t.Errorf("%s: %d %s, want allowed without a patch", name, code, raw)
		}
		if name == "v1beta1 unannotated" && out.APIVersion != "admission.k8s.io/v1beta1" {
			t.Errorf("%s: answered as %s", name, out.APIVersion)
		}
	}

	if code, _, raw := post(t, h, "text/plain", reviewJSON); code != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain: %d %s, want 415", code, raw)
	}
	if code, _, raw := post(t, h, "application/json", `{"kind":"AdmissionReview"}`); code != http.StatusBadRequest {
		t.Errorf("no request: %d %s, want 400", code, raw)
	}
	bad := strings.Replace(reviewJSON, `"containers": [`, `"containers": 7, "x": [`, 1)
	if code, out, raw := post(t, h, "application/json", bad); code != http.StatusOK || out.Response.Allowed || out.Response.Status == nil {
		t.Errorf("a pod that does not decode: %d %s, want a refusal with a status", code, raw)
	}
}

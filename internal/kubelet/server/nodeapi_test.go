package server

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// GET /pods answers the node's pods as a v1 PodList, by namespace and name.
func TestPodList(t *testing.T) {
	f := newFixture(t)
	f.addPod("web", "b", "main")
	f.addPod("web", "a", "main")
	f.addPod("db", "z", "main")
	code, body := f.get("/pods")
	if code != http.StatusOK {
		t.Fatalf("GET /pods: %d %s", code, body)
	}
	var list corev1.PodList
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("GET /pods: %v\n%s", err, body)
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	if list.Kind != "PodList" || list.APIVersion != "v1" || strings.Join(names, " ") != "db/z web/a web/b" {
		t.Errorf("GET /pods: %s %s %v, want a v1 PodList of db/z web/a web/b", list.APIVersion, list.Kind, names)
	}
}

// GET /logs/ serves the node's log directory: pods/ and the pods' log files in it, and
// nothing outside.
func TestNodeLogs(t *testing.T) {
	f := newFixture(t)
	pod := f.addPod("web", "a", "main")
	path := f.runContainer(pod, "main", "c1", 0, true)
	appendFile(t, path, cri(t0, "stdout", "F", "hello"))
	if err := os.WriteFile(filepath.Join(filepath.Dir(f.logsDir), "secret"), []byte("no"), 0o600); err != nil {
		t.Fatal(err)
	}
	podDir := "web_a_" + string(pod.UID)
	for _, tc := range []struct {
		path, want string
		code       int
	}{
		{"/logs/", `<a href="pods/">pods/</a>`, http.StatusOK},
		{"/logs/pods/", `<a href="` + podDir + `/">` + podDir + `/</a>`, http.StatusOK},
		{"/logs/pods/" + podDir + "/main/0.log", cri(t0, "stdout", "F", "hello"), http.StatusOK},
		{"/logs/secret", "", http.StatusNotFound},
		{"/logs/pods/../../secret", "", http.StatusNotFound},
	} {
		code, body := f.get(tc.path)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d %q; want %d with %q", tc.path, code, body, tc.code, tc.want)
		}
	}
}

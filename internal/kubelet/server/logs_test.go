package server

import (
	"bufio"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2024, 5, 1, 10, 0, 0, 0, time.UTC)

func TestParseRecord(t *testing.T) {
	for _, tc := range []struct {
		line    string
		stream  int
		partial bool
		text    string
		bad     bool
	}{
		{line: "2024-05-01T10:00:00.123456789Z stdout F hello world", stream: streamStdout, text: "hello world"},
		{line: "2024-05-01T10:00:00Z stderr P part", stream: streamStderr, partial: true, text: "part"},
		{line: "2024-05-01T10:00:00+02:00 stdout F ", stream: streamStdout, text: ""},
		{line: "2024-05-01T10:00:00Z stdout F", stream: streamStdout, text: ""},
		{line: "2024-05-01T10:00:00Z stdout F:x  two  spaces ", stream: streamStdout, text: " two  spaces "},
		{line: "not-a-time stdout F x", bad: true},
		{line: "2024-05-01T10:00:00Z stdin F x", bad: true},
		{line: "2024-05-01T10:00:00Z stdout X x", bad: true},
		{line: "2024-05-01T10:00:00Z", bad: true},
		{line: "", bad: true},
	} {
		r, err := parseRecord([]byte(tc.line))
		if tc.bad {
			if err == nil {
				t.Errorf("%q: parsed, want an error", tc.line)
			}
			continue
		}
		if err != nil || r.stream != tc.stream || r.partial != tc.partial || string(r.text) != tc.text {
			t.Errorf("%q: got %+v %v, want stream %d partial %v text %q", tc.line, r, err, tc.stream, tc.partial, tc.text)
		}
	}
	if r, _ := parseRecord([]byte("2024-05-01T10:00:00.5Z stdout F x")); !r.ts.Equal(t0.Add(500 * time.Millisecond)) {
		t.Errorf("time = %v", r.ts)
	}
}

// running sets the container's status: running with the given instance, with lastID as
// the last terminated one ("" for none).
func running(pod *corev1.Pod, name, id, lastID string) {
	st := corev1.ContainerStatus{Name: name, ContainerID: "containerd://" + id,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	if lastID != "" {
		st.RestartCount = 1
		st.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ContainerID: "containerd://" + lastID, ExitCode: 1}
	}
	pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, st)
}

func TestContainerLogs(t *testing.T) {
	f := newFixture(t)
	pod := f.addPod("default", "web", "app", "side")
	running(pod, "app", "app-1", "app-0")
	pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: "side",
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}})
	oldLog := f.runContainer(pod, "app", "app-0", 0, false)
	appendFile(t, oldLog, cri(t0.Add(-time.Hour), "stdout", "F", "old"))
	log := f.runContainer(pod, "app", "app-1", 1, true)
	appendFile(t, log, cri(t0, "stdout", "F", "one")+
		cri(t0.Add(time.Second), "stderr", "F", "two")+
		cri(t0.Add(2*time.Second), "stdout", "P", "thr")+
		"garbage that is no record\n"+
		cri(t0.Add(2*time.Second), "stdout", "F", "ee")+
		cri(t0.Add(3*time.Second), "stdout", "F", "")+
		cri(t0.Add(4*time.Second), "stderr", "F", "five"))

	for _, tc := range []struct{ query, want string }{
		{"", "one\ntwo\nthree\n\nfive\n"},
		{"tailLines=100", "one\ntwo\nthree\n\nfive\n"},
		{"tailLines=3", "three\n\nfive\n"},
		{"tailLines=2", "\nfive\n"},
		{"tailLines=0", ""},
		{"limitBytes=5", "one\nt"},
		{"limitBytes=11", "one\ntwo\nthr"},
		{"tailLines=1&limitBytes=100", "five\n"},
		{"sinceTime=" + url.QueryEscape(t0.Add(2*time.Second).Format(time.RFC3339)), "three\n\nfive\n"},
		{"sinceTime=" + url.QueryEscape(t0.Add(2500*time.Millisecond).Format(time.RFC3339Nano)), "\nfive\n"},
		{"stream=Stderr", "two\nfive\n"},
		{"stream=Stdout&tailLines=2", "three\n\n"},
		{"timestamps=true&tailLines=3", "2024-05-01T10:00:02.000000000Z three\n2024-05-01T10:00:03.000000000Z \n2024-05-01T10:00:04.000000000Z five\n"},
		{"previous=true", "old\n"},
		{"previous=1&timestamps=1", "2024-05-01T09:00:00.000000000Z old\n"},
		{"previous=false&tailLines=1", "five\n"},
	} {
		code, body := f.get("/containerLogs/default/web/app?" + tc.query)
		if code != http.StatusOK || body != tc.want {
			t.Errorf("?%s: %d %q, want %q", tc.query, code, body, tc.want)
		}
	}

	for _, tc := range []struct {
		path string
		code int
		msg  string
	}{
		{"/containerLogs/default/nope/app", http.StatusNotFound, `pod "nope" does not exist`},
		{"/containerLogs/other/web/app", http.StatusNotFound, `pod "web" does not exist`},
		{"/containerLogs/default/web/nope", http.StatusNotFound, `container "nope" not found in pod "web"`},
		{"/containerLogs/default/web/side", http.StatusBadRequest, `container "side" in pod "web" is waiting to start: ContainerCreating`},
		{"/containerLogs/default/web/side?previous=true", http.StatusBadRequest, `previous terminated container "side" in pod "web" not found`},
		{"/containerLogs/default/web/app?tailLines=-1", http.StatusBadRequest, "tailLines must be at least 0"},
		{"/containerLogs/default/web/app?tailLines=x", http.StatusBadRequest, `tailLines "x" is not an integer`},
		{"/containerLogs/default/web/app?limitBytes=0", http.StatusBadRequest, "limitBytes must be at least 1"},
		{"/containerLogs/default/web/app?sinceSeconds=5&sinceTime=2024-05-01T10:00:00Z", http.StatusBadRequest, "at most one of sinceTime or sinceSeconds"},
		{"/containerLogs/default/web/app?sinceTime=yesterday", http.StatusBadRequest, "is not an RFC 3339 time"},
		{"/containerLogs/default/web/app?stream=Both", http.StatusBadRequest, `stream "Both" must be All, Stdout or Stderr`},
	} {
		code, body := f.get(tc.path)
		if code != tc.code || !strings.Contains(body, tc.msg) {
			t.Errorf("%s: %d %q, want %d with %q", tc.path, code, body, tc.code, tc.msg)
		}
	}

	// sinceSeconds counts back from now.
	recent := f.addPod("default", "recent", "app")
	running(recent, "app", "recent-1", "")
	appendFile(t, f.runContainer(recent, "app", "recent-1", 0, true),
		cri(time.Now().Add(-time.Hour), "stdout", "F", "an hour ago")+cri(time.Now(), "stdout", "F", "now"))
	if code, body := f.get("/containerLogs/default/recent/app?sinceSeconds=60"); code != http.StatusOK || body != "now\n" {
		t.Errorf("sinceSeconds=60: %d %q", code, body)
	}

	// Once the runtime no longer knows the instances, their files are still read.
	f.rt.Forget("app-1")
	f.rt.Forget("app-0")
	if code, body := f.get("/containerLogs/default/web/app?tailLines=1"); code != http.StatusOK || body != "five\n" {
		t.Errorf("removed container: %d %q", code, body)
	}
	if code, body := f.get("/containerLogs/default/web/app?previous=true"); code != http.StatusOK || body != "old\n" {
		t.Errorf("removed previous container: %d %q", code, body)
	}
}

// A line whose first part is left out (tail, since) is left out as a whole.
func TestContainerLogsPartialLines(t *testing.T) {
	f := newFixture(t)
	pod := f.addPod("default", "split", "app")
	running(pod, "app", "split-1", "")
	appendFile(t, f.runContainer(pod, "app", "split-1", 0, true),
		cri(t0, "stdout", "P", "ab")+cri(t0.Add(time.Second), "stderr", "F", "x")+cri(t0.Add(2*time.Second), "stdout", "F", "cd"))
	for _, tc := range []struct{ query, want string }{
		{"", "abx\ncd\n"},
		{"tailLines=1", "x\n"},
		{"tailLines=2", "abx\ncd\n"},
		{"sinceTime=" + url.QueryEscape(t0.Add(time.Second).Format(time.RFC3339)), "x\n"},
		{"timestamps=1", "2024-05-01T10:00:00.000000000Z ab2024-05-01T10:00:01.000000000Z x\ncd\n"},
	} {
		if code, body := f.get("/containerLogs/default/split/app?" + tc.query); code != http.StatusOK || body != tc.want {
			t.Errorf("?%s: %d %q, want %q", tc.query, code, body, tc.want)
		}
	}
}

func TestContainerLogsFollow(t *testing.T) {
	f := newFixture(t)
	pod := f.addPod("default", "tail", "app")
	running(pod, "app", "tail-1", "")
	log := f.runContainer(pod, "app", "tail-1", 0, true)
	appendFile(t, log, cri(t0, "stdout", "F", "zero")+cri(t0, "stdout", "F", "one"))

	resp, err := f.client.Get(f.base + "/containerLogs/default/tail/app?follow=true&tailLines=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/plain" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := make(chan string, 10)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	next := func(want string) {
		t.Helper()
		select {
		case got := <-lines:
			if got != want {
				t.Fatalf("got line %q, want %q", got, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("no line %q within 10s", want)
		}
	}
	next("one")
	appendFile(t, log, cri(t0.Add(time.Second), "stdout", "F", "two"))
	next("two")
	// A record the runtime has not finished writing waits for its end.
	appendFile(t, log, strings.TrimSuffix(cri(t0.Add(2*time.Second), "stderr", "P", "thr"), "\n"))
	appendFile(t, log, "\n"+cri(t0.Add(2*time.Second), "stderr", "F", "ee"))
	next("three")
	// The container exits: what it wrote last is read, then the response ends.
	appendFile(t, log, cri(t0.Add(3*time.Second), "stdout", "F", "last"))
	f.rt.SetRunning("tail-1", false)
	next("last")
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the followed log did not end after the container stopped")
	}
	if len(lines) != 0 {
		t.Errorf("extra line %q", <-lines)
	}

	// limitBytes ends a followed log too, though the container runs.
	f.rt.SetRunning("tail-1", true)
	code, body := f.get("/containerLogs/default/tail/app?follow=true&limitBytes=7")
	if code != http.StatusOK || body != "zero\non" {
		t.Errorf("follow with limitBytes: %d %q", code, body)
	}
	// A followed log of an exited container ends at the end of the file.
	f.rt.SetRunning("tail-1", false)
	if code, body := f.get("/containerLogs/default/tail/app?follow=true&tailLines=1"); code != http.StatusOK || body != "last\n" {
		t.Errorf("follow of an exited container: %d %q", code, body)
	}
}

func TestClientCertificateRequired(t *testing.T) {
	f := newFixture(t)
	if code, body := f.get("/healthz"); code != http.StatusOK || body != "ok" {
		t.Fatalf("healthz with the client certificate: %d %q", code, body)
	}
	if _, err := f.httpClient(nil, nil).Get(f.base + "/healthz"); err == nil {
		t.Error("a client without a certificate was served")
	}
	// The cluster CA signs other clients too (a node, a user): they may not use it.
	nodeCert, nodeKey := f.ca.issue(t, "system:node:other", false)
	if resp, err := f.httpClient(nodeCert, nodeKey).Get(f.base + "/containerLogs/default/p/c"); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("another client of the cluster CA: %v %v, want 403", resp, err)
	} else {
		resp.Body.Close()
	}
	other := newTestCA(t, "other-ca")
	cert, key := other.issue(t, "intruder", false)
	if _, err := f.httpClient(cert, key).Get(f.base + "/healthz"); err == nil {
		t.Error("a client with a certificate of another CA was served")
	}
}

func TestConfigValidate(t *testing.T) {
	_, err := New(Config{Addr: "nowhere", PodLogsDir: "relative"})
	if err == nil {
		t.Fatal("an empty config was accepted")
	}
	for _, want := range []string{"listen address", "serving certificate", "client CA", "pod logs dir", "container runtime", "pod lookup"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestLogContainerID(t *testing.T) {
	term := func(id string) *corev1.ContainerStateTerminated {
		return &corev1.ContainerStateTerminated{ContainerID: id}
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	for _, tc := range []struct {
		name     string
		st       corev1.ContainerStatus
		previous bool
		want     string
		err      string
	}{
		{name: "running", st: corev1.ContainerStatus{ContainerID: "containerd://a", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}, want: "a"},
		{name: "terminated", st: corev1.ContainerStatus{State: corev1.ContainerState{Terminated: term("containerd://b")}}, want: "b"},
		{name: "terminated without id", st: corev1.ContainerStatus{State: corev1.ContainerState{Terminated: term("")},
			LastTerminationState: corev1.ContainerState{Terminated: term("containerd://c")}}, want: "c"},
		{name: "crash loop", st: corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: term("containerd://d")}}, want: "d"},
		{name: "previous", previous: true, st: corev1.ContainerStatus{ContainerID: "containerd://a", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
			LastTerminationState: corev1.ContainerState{Terminated: term("containerd://e")}}, want: "e"},
		{name: "image pull", st: corev1.ContainerStatus{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}},
			err: `container "x" in pod "p" is waiting to start: image can't be pulled`},
		{name: "no state", st: corev1.ContainerStatus{}, err: "is waiting to start - no logs yet"},
	} {
		tc.st.Name = "x"
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{tc.st}
		got, err := logContainerID(pod, "x", tc.previous)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: %q %v, want error %q", tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %q %v, want %q", tc.name, got, err, tc.want)
		}
	}
	pod.Status.ContainerStatuses = nil
	if _, err := logContainerID(pod, "x", false); err == nil || !strings.Contains(err.Error(), "is not available") {
		t.Errorf("no status: %v", err)
	}
}

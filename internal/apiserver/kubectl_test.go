package apiserver_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubelab/kubelab/internal/apiserver/apiservertest"
	"github.com/kubelab/kubelab/internal/testutil"
	"github.com/kubelab/kubelab/internal/version"
)

// kubectl runs one of the two kubectls against a server.
type kubectl struct {
	t          *testing.T
	argv       []string
	kubeconfig string
}

// newKubectl is the kubectl the tests drive (testutil.Kubectl) against kubeconfig.
func newKubectl(t *testing.T, kubeconfig string) kubectl {
	return kubectl{t: t, argv: testutil.Kubectl(t), kubeconfig: kubeconfig}
}

func (k kubectl) cmd(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, k.argv[0], append(append(k.argv[1:], "--kubeconfig", k.kubeconfig), args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=", "KUBECTL_KUBERC=false")
	return cmd
}

func (k kubectl) run(args ...string) string {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := k.cmd(ctx, args...).CombinedOutput()
	if err != nil {
		k.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func expectLines(t *testing.T, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

// TestKubectl drives the server with the real kubectl (where installed) and with
// `kubelab kubectl`, default flags (strict validation included), through the commands
// users run every day.
func TestKubectl(t *testing.T) {
	clients := map[string][]string{}
	if argv := testutil.Kubectl(t); !testutil.IsEmbedded(argv) {
		clients["real"] = argv
	} else {
		t.Log("the real kubectl is not installed; only `kubelab kubectl` is tested")
	}
	clients["embedded"] = []string{filepath.Join(testutil.Commands(t), "kubelab"), "kubectl"}
	for name, argv := range clients {
		t.Run(name, func(t *testing.T) {
			s := apiservertest.Start(t, apiservertest.Options{})
			k := kubectl{t: t, argv: argv, kubeconfig: s.Kubeconfig}
			testKubectl(t, s, k)
		})
	}
}

func testKubectl(t *testing.T, s *apiservertest.Server, k kubectl) {
	ctx := context.Background()
	_, file, _, _ := runtime.Caller(0)
	dir := t.TempDir()
	seed := filepath.Join(filepath.Dir(file), "..", "..", "examples", "seed")
	entries, err := os.ReadDir(seed)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(seed, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	expectLines(t, k.run("apply", "-f", dir),
		"storageclass.storage.k8s.io/gp2 created", "persistentvolumeclaim/my-app-pvc created",
		"pod/my-app-pod created", "deployment.apps/web created", "service/web created")
	// The pod's lists hold the service account token volume and mounts the API server
	// added, so kubectl's three-way patch restates their order ($setElementOrder) and it
	// says "configured", as it does on any cluster that mounts tokens.
	expectLines(t, k.run("apply", "-f", dir),
		"storageclass.storage.k8s.io/gp2 unchanged", "persistentvolumeclaim/my-app-pvc unchanged",
		"pod/my-app-pod configured", "deployment.apps/web unchanged", "service/web unchanged")

	deploy := filepath.Join(dir, "30-deployment.yaml")
	b, _ := os.ReadFile(deploy)
	if err := os.WriteFile(deploy, bytes.Replace(b, []byte("replicas: 3"), []byte("replicas: 2"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	expectLines(t, k.run("apply", "-f", dir), "deployment.apps/web configured", "service/web unchanged")
	expectLines(t, k.run("apply", "--server-side", "-f", dir),
		"deployment.apps/web serverside-applied", "persistentvolumeclaim/my-app-pvc serverside-applied")

	// get: the upstream columns, and the other output formats.
	header := regexp.MustCompile(`NAME\s+READY\s+STATUS\s+RESTARTS\s+AGE`)
	if out := k.run("get", "pods"); !header.MatchString(out) || !strings.Contains(out, "Pending") {
		t.Errorf("get pods:\n%s", out)
	}
	if out := k.run("get", "pvc"); !regexp.MustCompile(`NAME\s+STATUS\s+VOLUME\s+CAPACITY\s+ACCESS MODES\s+STORAGECLASS`).MatchString(out) {
		t.Errorf("get pvc:\n%s", out)
	}
	if out := k.run("get", "sc"); !regexp.MustCompile(`gp2\s+ebs.csi.aws.com\s+Delete\s+WaitForFirstConsumer`).MatchString(out) {
		t.Errorf("get sc:\n%s", out)
	}
	if out := k.run("get", "pods", "-o", "wide"); !regexp.MustCompile(`IP\s+NODE\s+NOMINATED NODE`).MatchString(out) {
		t.Errorf("get -o wide:\n%s", out)
	}
	expectLines(t, k.run("get", "pod", "my-app-pod", "-o", "yaml"), "kind: Pod", "claimName: my-app-pvc", "mountPath: /usr/share/nginx/html")
	var obj map[string]interface{}
	if err := json.Unmarshal([]byte(k.run("get", "deploy", "web", "-o", "json")), &obj); err != nil || obj["kind"] != "Deployment" {
		t.Errorf("get -o json: %v %v", err, obj["kind"])
	}
	if out := k.run("get", "deploy", "web", "-o", "jsonpath={.spec.replicas}"); out != "2" {
		t.Errorf("jsonpath: %q", out)
	}
	if out := k.run("get", "svc", "web", "-o", "jsonpath={.spec.clusterIP}"); !strings.HasPrefix(out, "10.") {
		t.Errorf("service got no ClusterIP: %q", out)
	}

	// get -w prints changes as they happen.
	watchCtx, stopWatch := context.WithCancel(ctx)
	watch := k.cmd(watchCtx, "get", "pods", "-w")
	stdout, _ := watch.StdoutPipe()
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	seen := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			seen <- sc.Text()
		}
		close(seen)
	}()
	awaitLine := func(prefix string) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			select {
			case line, ok := <-seen:
				if !ok {
					t.Fatalf("get -w ended before a line starting %q", prefix)
				}
				if strings.HasPrefix(line, prefix) {
					return
				}
			case <-deadline:
				t.Fatalf("get -w printed no line starting %q", prefix)
			}
		}
	}
	// The list's header comes first; the pod made after it is shown by the watch.
	awaitLine("NAME ")
	k.run("run", "watched", "--image=busybox", "--restart=Never")
	awaitLine("watched ")
	stopWatch()
	_ = watch.Wait()

	// describe shows the claim, and the pod's events.
	pod, err := s.Client.CoreV1().Pods("default").Get(ctx, "my-app-pod", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, reason := range []string{"FailedScheduling", "Scheduled"} {
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{Name: "my-app-pod." + reason, Namespace: "default"},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod.Name, UID: pod.UID, APIVersion: "v1"},
			Reason:         reason, Message: "event " + reason, Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: "default-scheduler"},
			FirstTimestamp: metav1.NewTime(time.Now().Add(time.Duration(i) * time.Second)), LastTimestamp: metav1.NewTime(time.Now().Add(time.Duration(i) * time.Second)), Count: 1,
		}
		if _, err := s.Client.CoreV1().Events("default").Create(ctx, ev, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(1100 * time.Millisecond) // distinct creationTimestamps, for --sort-by
	}
	expectLines(t, k.run("describe", "pod", "my-app-pod"), "Name:", "my-app-pod", "ClaimName:", "my-app-pvc", "Events:", "event Scheduled")
	out := k.run("get", "events", "--sort-by=.metadata.creationTimestamp")
	if i, j := strings.Index(out, "event FailedScheduling"), strings.Index(out, "event Scheduled"); i < 0 || j < 0 || i > j {
		t.Errorf("get events --sort-by:\n%s", out)
	}

	// label, annotate, the three patch types.
	expectLines(t, k.run("label", "pod", "my-app-pod", "tier=db"), "pod/my-app-pod labeled")
	expectLines(t, k.run("annotate", "pod", "my-app-pod", "note=hello"), "pod/my-app-pod annotated")
	expectLines(t, k.run("patch", "deploy", "web", "-p", `{"spec":{"replicas":4}}`), "deployment.apps/web patched")
	expectLines(t, k.run("patch", "deploy", "web", "--type=merge", "-p", `{"metadata":{"labels":{"patched":"merge"}}}`), "deployment.apps/web patched")
	expectLines(t, k.run("patch", "deploy", "web", "--type=json", "-p", `[{"op":"replace","path":"/spec/replicas","value":5}]`), "deployment.apps/web patched")
	if out := k.run("get", "deploy", "web", "-o", "jsonpath={.spec.replicas} {.metadata.labels.patched}"); out != "5 merge" {
		t.Errorf("after patches: %q", out)
	}
	if out := k.run("get", "pod", "my-app-pod", "-o", "jsonpath={.metadata.labels.tier} {.metadata.annotations.note}"); out != "db hello" {
		t.Errorf("after label/annotate: %q", out)
	}

	// wait, and delete --wait.
	expectLines(t, k.run("wait", "--for=jsonpath={.status.phase}=Pending", "pod/watched", "--timeout=30s"), "condition met")
	expectLines(t, k.run("delete", "pod", "watched", "--wait"), `pod "watched" deleted`)
	expectLines(t, k.run("wait", "--for=delete", "pod/watched", "--timeout=30s"))

	expectLines(t, k.run("api-resources"), "persistentvolumeclaims", "pvc", "volumeattachments", "volumesnapshots", "storageclasses")
	// kubectl parses both versions as semantic versions (and exits 1 if it cannot).
	expectLines(t, k.run("version"), "Client Version: v1.", "Server Version: v"+version.Major+"."+version.Minor+".")
}

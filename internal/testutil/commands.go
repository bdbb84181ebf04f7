package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// RepoRoot is the root of the kubelab checkout the tests run in.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Commands builds kubelab, kubelab-pause and kubelab-cni with hack/build.sh, once per
// test process, and returns the directory that holds them. The directory is named after
// the process; those of test processes that have ended are removed at the next build,
// so an interrupted run leaves at most one behind.
func Commands(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		parent := filepath.Join(os.TempDir(), "kubelab-test-commands")
		if buildErr = os.MkdirAll(parent, 0o755); buildErr != nil {
			return
		}
		removeEnded(parent)
		buildDir = filepath.Join(parent, strconv.Itoa(os.Getpid()))
		out, err := exec.Command("bash", filepath.Join(RepoRoot(), "hack", "build.sh"), filepath.Join(buildDir, "kubelab")).CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("hack/build.sh: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatalf("build kubelab's commands: %v", buildErr)
	}
	return buildDir
}

// removeEnded removes the build directories of test processes that no longer run.
func removeEnded(parent string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
			os.RemoveAll(filepath.Join(parent, e.Name()))
		}
	}
}

// Kubectl is the command line of the kubectl a test drives: /usr/bin/kubectl when it is
// installed, else kubelab's embedded kubectl (`kubelab kubectl`).
func Kubectl(t testing.TB) []string {
	t.Helper()
	if _, err := os.Stat(realKubectl); err == nil {
		return []string{realKubectl}
	}
	return []string{filepath.Join(Commands(t), "kubelab"), "kubectl"}
}

// realKubectl is where the real kubectl is installed on the machines kubelab runs on.
const realKubectl = "/usr/bin/kubectl"

// KubectlCommand is an exec.Cmd that runs the test's kubectl (Kubectl) with args
// against the cluster of kubeconfig, whatever KUBECONFIG the environment has.
func KubectlCommand(t testing.TB, kubeconfig string, args ...string) *exec.Cmd {
	t.Helper()
	argv := append(Kubectl(t), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "KUBECONFIG=", "KUBECTL_KUBERC=false")
	return cmd
}

// IsEmbedded says whether the kubectl command line is kubelab's embedded kubectl.
func IsEmbedded(kubectl []string) bool {
	return len(kubectl) > 1 && strings.HasSuffix(kubectl[0], "kubelab") && kubectl[1] == "kubectl"
}

package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestKubectlDirRunsTheTestsKubectl(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: may build kubelab")
	}
	dir := KubectlDir(t)
	cmd := exec.Command("sh", "-c", "kubectl version --client")
	cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"), "KUBECTL_KUBERC=false")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Client Version") {
		t.Fatalf("kubectl version --client from %s: %v\n%s", dir, err, out)
	}
	if kubectl := Kubectl(t); !IsEmbedded(kubectl) && filepath.Join(dir, "kubectl") != kubectl[0] {
		t.Errorf("KubectlDir %s does not hold the real kubectl %s", dir, kubectl[0])
	}
}

func TestShellQuote(t *testing.T) {
	out, err := exec.Command("sh", "-c", "printf %s "+shellQuote("it's a $path")).Output()
	if err != nil || string(out) != "it's a $path" {
		t.Fatalf("sh printed %q (%v), want the quoted string back", out, err)
	}
}

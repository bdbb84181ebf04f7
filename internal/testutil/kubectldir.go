package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// KubectlDir is a directory whose `kubectl` is the test's kubectl (Kubectl), for a
// test that runs command lines verbatim as a user types them (`kubectl logs …` in a
// shell): put it first on the shell's PATH. It is /usr/bin when the real kubectl is
// installed, else a directory of the test's holding a `kubectl` script that runs
// kubelab's embedded one.
func KubectlDir(t testing.TB) string {
	t.Helper()
	kubectl := Kubectl(t)
	if !IsEmbedded(kubectl) {
		return filepath.Dir(kubectl[0])
	}
	dir := t.TempDir()
	script := "#!/bin/sh\nexec " + shellQuote(kubectl[0]) + " " + strings.Join(kubectl[1:], " ") + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "kubectl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

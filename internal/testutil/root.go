package testutil

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// RequireRoot skips t unless it runs as root and every one of tools is on PATH. The
// reason names what is missing: root, or the tools (hack/setup.sh installs them).
func RequireRoot(t testing.TB, tools ...string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	var missing []string
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		t.Skipf("needs %s on PATH (hack/setup.sh installs it)", strings.Join(missing, ", "))
	}
}

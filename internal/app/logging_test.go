package app

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
)

// sidecarLogLine logs one line through a sidecar command's logger built from args, and
// returns what the command wrote to stderr.
func sidecarLogLine(t *testing.T, args ...string) string {
	t.Helper()
	prev := slog.Default()
	t.Cleanup(func() {
		slog.SetDefault(prev)
		klog.ClearLogger()
	})
	var stderr bytes.Buffer
	var verbosity int
	cmd := &cobra.Command{Use: "csi-attacher"}
	cmd.SetErr(&stderr)
	addVerbosityFlag(cmd, &verbosity)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	log, err := sidecarLogger(cmd, "csi-attacher", verbosity)
	if err != nil {
		t.Fatal(err)
	}
	log.Info("attached", "volume", "vol-1", "node", "i-1")
	return stderr.String()
}

func TestSidecarLogsKlogTextEachKeyOnce(t *testing.T) {
	out := strings.TrimSuffix(sidecarLogLine(t), "\n")
	line := regexp.MustCompile(`^I\d{4} \d{2}:\d{2}:\d{2}\.\d{6} +\d+ \S+\.go:\d+\] "attached" component="csi-attacher" volume="vol-1" node="i-1"$`)
	if strings.Count(out, "\n") != 0 || !line.MatchString(out) {
		t.Fatalf("want one klog text line naming the component once, got %q", out)
	}
}

func TestSidecarLogsJSON(t *testing.T) {
	out := strings.TrimSuffix(sidecarLogLine(t, "--log-format", "json"), "\n")
	var rec map[string]any
	if err := json.Unmarshal([]byte(out), &rec); err != nil || strings.Count(out, "\n") != 0 {
		t.Fatalf("want one JSON line, got %q (%v)", out, err)
	}
	if rec["msg"] != "attached" || rec["component"] != "csi-attacher" || strings.Count(out, `"component"`) != 1 {
		t.Fatalf("record %q", out)
	}
}

func TestLogFormatRejectsUnknown(t *testing.T) {
	cmd := &cobra.Command{Use: "x"}
	addLogFormatFlag(cmd)
	if err := cmd.ParseFlags([]string{"--log-format", "logfmt"}); err != nil {
		t.Fatal(err)
	}
	if _, err := setupLogging(cmd, slog.LevelInfo); err == nil || !strings.Contains(err.Error(), "--log-format") {
		t.Fatalf("err %v, want one naming --log-format", err)
	}
}

func TestRepeatedKey(t *testing.T) {
	for line, want := range map[string]string{
		`I1128 09:45:22.123456   12345 attacher.go:88] "attached" component="csi-attacher" volume="vol-1"`:                    "",
		`I1128 09:45:22.123456   12345 attacher.go:88] "a=b c=d" component="csi-attacher" msg="x component=y"`:                "",
		`I1128 09:45:22.123456   12345 attacher.go:88] "attached" component="csi-attacher" component="csi-attacher" node="n"`: "component",
	} {
		if got := repeatedKey(line); got != want {
			t.Errorf("repeatedKey(%q) = %q, want %q", line, got, want)
		}
	}
}

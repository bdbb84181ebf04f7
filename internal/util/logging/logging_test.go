package logging

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"
)

// klogLine is a klog text line: severity, date, time, pid, file:line, quoted message.
var klogLine = regexp.MustCompile(`^([IWE])\d{4} \d{2}:\d{2}:\d{2}\.\d{6} +\d+ [\w.]+\.go:\d+\] "([^"]*)"(.*)$`)

func TestTextIsKlogFormatEachKeyOnce(t *testing.T) {
	var out bytes.Buffer
	log := New(&out, Text, slog.LevelInfo).With("component", "csi-attacher")
	log.Info("ControllerPublishVolume: done", "volume", "vol-1", "node", "i-1", "duration", 12*time.Millisecond)
	log.Debug("not shown at info")
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one line, got %d: %q", len(lines), out.String())
	}
	m := klogLine.FindStringSubmatch(lines[0])
	if m == nil {
		t.Fatalf("not klog's text format: %q", lines[0])
	}
	if m[1] != "I" || m[2] != "ControllerPublishVolume: done" {
		t.Fatalf("severity %q message %q in %q", m[1], m[2], lines[0])
	}
	for _, kv := range []string{`component="csi-attacher"`, `volume="vol-1"`, `node="i-1"`, `duration="12ms"`} {
		if n := strings.Count(m[3], " "+strings.SplitN(kv, "=", 2)[0]+"="); n != 1 {
			t.Errorf("key of %s %d times in %q", kv, n, lines[0])
		}
		if !strings.Contains(m[3], kv) {
			t.Errorf("no %s in %q", kv, lines[0])
		}
	}
}

func TestTextLevels(t *testing.T) {
	var out bytes.Buffer
	log := New(&out, Text, slog.LevelWarn)
	log.Info("dropped")
	log.Warn("kept")
	log.Error("failed", "err", "boom")
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "W") || !strings.HasPrefix(lines[1], "E") {
		t.Fatalf("want a W and an E line, got %q", out.String())
	}
	out.Reset()
	New(&out, Text, slog.LevelDebug).Debug("shown")
	if m := klogLine.FindStringSubmatch(strings.TrimSpace(out.String())); m == nil || m[1] != "I" || m[2] != "shown" {
		t.Fatalf("debug line %q", out.String())
	}
}

func TestJSONEachKeyOnce(t *testing.T) {
	var out bytes.Buffer
	log := New(&out, JSON, slog.LevelInfo).With("component", "csi-attacher")
	log.Info("ControllerPublishVolume: called", "volume", "vol-1")
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 1 {
		t.Fatalf("want one line, got %q", out.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil {
		t.Fatalf("not JSON: %q: %v", lines[0], err)
	}
	if rec["msg"] != "ControllerPublishVolume: called" || rec["level"] != "INFO" || rec["component"] != "csi-attacher" || rec["volume"] != "vol-1" {
		t.Fatalf("record %v", rec)
	}
	if n := strings.Count(lines[0], `"component":`); n != 1 {
		t.Fatalf("component %d times in %q", n, lines[0])
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]Format{"": Text, "text": Text, "json": JSON} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("logfmt"); err == nil {
		t.Error("ParseFormat(logfmt) did not fail")
	}
	if l, err := ParseLevel("warn"); err != nil || l != slog.LevelWarn {
		t.Errorf("ParseLevel(warn) = %v, %v", l, err)
	}
	if _, err := ParseLevel("loud"); err == nil {
		t.Error("ParseLevel(loud) did not fail")
	}
}

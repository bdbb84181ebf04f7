package calllog

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestRoundTrip: what LogCalled, LogDone and LogFailed write through slog's text and JSON
// handlers, Parse reads back: the method, the phase and the duration.
func TestRoundTrip(t *testing.T) {
	for name, handler := range map[string]func(*bytes.Buffer) slog.Handler{
		"text": func(b *bytes.Buffer) slog.Handler { return slog.NewTextHandler(b, nil) },
		"json": func(b *bytes.Buffer) slog.Handler { return slog.NewJSONHandler(b, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			log := slog.New(handler(&buf)).With("component", "ebs-plugin")
			LogCalled(log, "NodeStageVolume", "volume", "vol-0123", "node", "i-0abc")
			LogDone(log, "NodeStageVolume", 1234567*time.Nanosecond, "volume", "vol-0123")
			LogFailed(log, "ControllerPublishVolume", 2*time.Second, errors.New("attached elsewhere: done"), "volume", "vol-0123", "code", "FailedPrecondition")
			want := []Entry{
				{Method: "NodeStageVolume", Phase: Called},
				{Method: "NodeStageVolume", Phase: Done, Duration: 1234567 * time.Nanosecond, HasDuration: true},
				{Method: "ControllerPublishVolume", Phase: Failed, Duration: 2 * time.Second, HasDuration: true},
			}
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if len(lines) != len(want) {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
			}
			for i, line := range lines {
				got, ok := Parse(line)
				if !ok || got != want[i] {
					t.Errorf("Parse(%s) = %+v, %v; want %+v", line, got, ok, want[i])
				}
				if !strings.Contains(line, "vol-0123") {
					t.Errorf("line %q does not name the volume", line)
				}
			}
		})
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Entry
		ok   bool
	}{
		{`level=INFO msg="CreateVolume: done" volume=vol-1 duration=12ms`,
			Entry{Method: "CreateVolume", Phase: Done, Duration: 12 * time.Millisecond, HasDuration: true}, true},
		{`I0301 12:00:03.000000       1 calllog.go:30] "NodePublishVolume: done" volume="vol-1" duration="3ms"`,
			Entry{Method: "NodePublishVolume", Phase: Done, Duration: 3 * time.Millisecond, HasDuration: true}, true},
		{`msg="NodeStageVolume: done" volume=vol-1`, Entry{Method: "NodeStageVolume", Phase: Done}, true},
		{`msg="NodeStageVolume: done" volume=vol-1 duration=soon`, Entry{Method: "NodeStageVolume", Phase: Done}, true},
		{`level=DEBUG msg="csi call done" duration=1ms`, Entry{}, false},
		{`level=INFO msg="pod network configured" node=n1`, Entry{}, false},
	} {
		got, ok := Parse(tc.line)
		if ok != tc.ok || got != tc.want {
			t.Errorf("Parse(%s) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

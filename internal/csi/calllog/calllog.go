package calllog

import (
	"log/slog"
	"regexp"
	"strconv"
	"time"
)

// Phase is where a call stands when its line is written.
type Phase string

// The phases of a call.
const (
	Called Phase = "called"
	Done   Phase = "done"
	Failed Phase = "failed"
)

// DurationKey is the attribute of a done or failed line that says how long the call took.
const DurationKey = "duration"

// Message is the log message of method's call at phase: "<Method>: <phase>".
func Message(method string, phase Phase) string { return method + ": " + string(phase) }

// LogCalled writes that method was called; attrs name what it acts on.
func LogCalled(log *slog.Logger, method string, attrs ...any) {
	log.Info(Message(method, Called), attrs...)
}

// LogDone writes that method returned after took; attrs name what it acted on.
func LogDone(log *slog.Logger, method string, took time.Duration, attrs ...any) {
	log.Info(Message(method, Done), append(attrs, DurationKey, took)...)
}

// LogFailed writes that method failed with err after took; attrs name what it acted on.
func LogFailed(log *slog.Logger, method string, took time.Duration, err error, attrs ...any) {
	log.Info(Message(method, Failed), append(attrs, "error", err, DurationKey, took)...)
}

// Entry is what Parse reads of a call's line.
type Entry struct {
	Method string
	Phase  Phase
	// Duration is how long the call took, when HasDuration (done and failed lines).
	Duration    time.Duration
	HasDuration bool
}

var (
	messageRE  = regexp.MustCompile(`\b([A-Z][A-Za-z]*): (called|done|failed)\b`)
	durationRE = regexp.MustCompile(`\b` + DurationKey + `"?[=:]"?([^"\s,}]+)`)
)

// Parse reads a call's line, as slog's text or JSON handler or klog's text format
// writes it; ok is false for any other line.
func Parse(line string) (e Entry, ok bool) {
	m := messageRE.FindStringSubmatch(line)
	if m == nil {
		return Entry{}, false
	}
	e = Entry{Method: m[1], Phase: Phase(m[2])}
	if d := durationRE.FindStringSubmatch(line); d != nil {
		e.Duration, e.HasDuration = parseDuration(d[1])
	}
	return e, true
}

// parseDuration reads a Go duration ("1.5ms"), or a number of nanoseconds (slog's JSON).
func parseDuration(s string) (time.Duration, bool) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, true
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Duration(n), true
	}
	return 0, false
}

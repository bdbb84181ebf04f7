package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// Format is how log lines are written.
type Format string

const (
	// Text is klog's text format, the default.
	Text Format = "text"
	// JSON is one slog JSON object per line, for machines.
	JSON Format = "json"
)

// FormatUsage is the help of a --log-format flag.
const FormatUsage = `log format: "text" (klog's, as the Kubernetes components write) or "json"`

// ParseFormat reads a --log-format value; "" is Text.
func ParseFormat(s string) (Format, error) {
	switch Format(s) {
	case "", Text:
		return Text, nil
	case JSON:
		return JSON, nil
	}
	return "", fmt.Errorf("unknown log format %q (want text or json)", s)
}

// ParseLevel reads a --log-level value: debug, info, warn or error.
func ParseLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, err
	}
	return l, nil
}

// NewHandler is the handler writing the records at level and above to w in format f.
func NewHandler(w io.Writer, f Format, level slog.Level) slog.Handler {
	if f == JSON {
		return slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})
	}
	// The text logger maps slog's levels below Info to klog's verbosity (Debug is V(4));
	// it lets through all that the level does, the level filter does the rest.
	v := 0
	if level < slog.LevelInfo {
		v = int(slog.LevelInfo - level)
	}
	tl := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(w), textlogger.Verbosity(v)))
	return minLevel{min: level, next: logr.ToSlogHandler(tl)}
}

// New is a logger writing the records at level and above to w in format f.
func New(w io.Writer, f Format, level slog.Level) *slog.Logger {
	return slog.New(NewHandler(w, f, level))
}

// Setup makes New(w, f, level) the process's logger: it becomes slog's default (the
// logger of components given none) and klog logs through it.
func Setup(w io.Writer, f Format, level slog.Level) *slog.Logger {
	l := New(w, f, level)
	slog.SetDefault(l)
	klog.SetSlogLogger(l)
	return l
}

// minLevel drops the records below min.
type minLevel struct {
	min  slog.Level
	next slog.Handler
}

func (h minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.min && h.next.Enabled(ctx, l)
}

func (h minLevel) Handle(ctx context.Context, r slog.Record) error { return h.next.Handle(ctx, r) }

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{min: h.min, next: h.next.WithAttrs(attrs)}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{min: h.min, next: h.next.WithGroup(name)}
}

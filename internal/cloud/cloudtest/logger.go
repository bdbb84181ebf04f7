package cloudtest

import (
	"io"
	"log/slog"
	"testing"
)

// Logger sends records at level and above to t.Log.
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(Writer(t), &slog.HandlerOptions{Level: level}))
}

// Writer sends what is written to it to t.Log (a process's output, say).
func Writer(t testing.TB) io.Writer { return tWriter{t} }

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

package cloudtest

import (
	"log/slog"
	"testing"
)

// Logger sends records at level and above to t.Log.
func Logger(t testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: level}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

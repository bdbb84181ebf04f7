package etcd

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"testing"

	"go.uber.org/zap"
)

// recorder keeps the records a slog.Logger handles at debug and above.
type recorder struct{ records []slog.Record }

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	r.records = append(r.records, rec)
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

func TestLoggerLevelsAndShutdown(t *testing.T) {
	for _, tc := range []struct {
		name     string
		log      func(*zap.Logger)
		stopping bool
		want     slog.Level
		wantMsg  string
	}{
		{"an error stays an error", func(l *zap.Logger) { l.Error("failed to apply request", zap.Error(errors.New("boom"))) }, false, slog.LevelError, "failed to apply request"},
		{"a warning is etcd's internals", func(l *zap.Logger) { l.Warn("apply request took too long") }, false, slog.LevelDebug, "apply request took too long"},
		{"info is etcd's internals", func(l *zap.Logger) { l.Info("ready to serve client requests") }, false, slog.LevelDebug, "ready to serve client requests"},
		{"a listener failing while etcd runs is an error", func(l *zap.Logger) { l.Error(servingEnded, zap.Error(http.ErrServerClosed)) }, false, slog.LevelError, servingEnded},
		{"a listener closing because etcd stops is not", func(l *zap.Logger) { l.Error(servingEnded, zap.Error(http.ErrServerClosed)) }, true, slog.LevelDebug, servingEnded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			tc.log(newLogger(slog.New(rec), func() bool { return tc.stopping }))
			if len(rec.records) != 1 {
				t.Fatalf("%d records, want 1", len(rec.records))
			}
			got := rec.records[0]
			if got.Level != tc.want || got.Message != tc.wantMsg {
				t.Errorf("got %v %q, want %v %q", got.Level, got.Message, tc.want, tc.wantMsg)
			}
		})
	}
}

func TestLoggerKeepsFields(t *testing.T) {
	rec := &recorder{}
	newLogger(slog.New(rec), func() bool { return false }).
		With(zap.String("member", "kubelab")).
		Error("lost leader", zap.Int("term", 3), zap.Error(errors.New("timeout")))
	if len(rec.records) != 1 {
		t.Fatalf("%d records, want 1", len(rec.records))
	}
	got := map[string]string{}
	rec.records[0].Attrs(func(a slog.Attr) bool {
		got[a.Key] = a.Value.String()
		return true
	})
	want := map[string]string{"member": "kubelab", "term": "3", "error": "timeout", "component": "etcd"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("attribute %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}

func TestLoggerFollowsTheSlogLevel(t *testing.T) {
	l := newLogger(slog.New(slog.DiscardHandler), func() bool { return false })
	if l.Core().Enabled(zap.ErrorLevel) {
		t.Error("a discarding logger enables etcd's errors")
	}
	info := newLogger(slog.New(slog.NewTextHandler(nil, &slog.HandlerOptions{Level: slog.LevelInfo})), func() bool { return false })
	if info.Core().Enabled(zap.InfoLevel) {
		t.Error("at slog's info level, etcd's info (debug to kubelab) is enabled")
	}
	if !info.Core().Enabled(zap.ErrorLevel) {
		t.Error("at slog's info level, etcd's errors are not enabled")
	}
}

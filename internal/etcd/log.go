package etcd

import (
	"context"
	"log/slog"
	"slices"
	"sort"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// servingEnded is what etcd logs, at error, for each of its listeners when they close,
// including when it is being stopped.
const servingEnded = "setting up serving from embedded etcd failed."

// newLogger gives etcd a zap logger that writes to l, so that etcd's lines read like the
// rest of kubelab's. etcd's errors stay errors; its warnings and everything below are
// its internals and go to debug. Once stopping reports true, the listeners' "serving
// failed" errors are the stop itself and go to debug too. opts are zap's (Run gives the
// hooks of failure.go).
func newLogger(l *slog.Logger, stopping func() bool, opts ...zap.Option) *zap.Logger {
	return zap.New(&slogCore{logger: l, stopping: stopping}, opts...)
}

// slogCore is a zapcore.Core over a slog.Logger.
type slogCore struct {
	logger   *slog.Logger
	attrs    []slog.Attr
	stopping func() bool
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	return c.logger.Enabled(context.Background(), level(l))
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	with := *c
	with.attrs = append(slices.Clip(c.attrs), attrsOf(fields)...)
	return &with
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	lvl := level(e.Level)
	if e.Message == servingEnded && c.stopping() {
		lvl = slog.LevelDebug
	}
	attrs := append(slices.Clip(c.attrs), attrsOf(fields)...)
	c.logger.LogAttrs(context.Background(), lvl, e.Message, append(attrs, slog.String("component", "etcd"))...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

// level maps etcd's levels: error and above are errors, the rest debug.
func level(l zapcore.Level) slog.Level {
	if l >= zapcore.ErrorLevel {
		return slog.LevelError
	}
	return slog.LevelDebug
}

// attrsOf turns zap fields into slog attributes, by key.
func attrsOf(fields []zapcore.Field) []slog.Attr {
	if len(fields) == 0 {
		return nil
	}
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	keys := make([]string, 0, len(enc.Fields))
	for k := range enc.Fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	attrs := make([]slog.Attr, 0, len(keys))
	for _, k := range keys {
		attrs = append(attrs, slog.Any(k, enc.Fields[k]))
	}
	return attrs
}

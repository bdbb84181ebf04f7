package etcd

import (
	"errors"
	"fmt"
	"sync"
	"syscall"

	"go.uber.org/zap/zapcore"
)

// failure is the hook of etcd's logger for its fatal and panic levels. etcd logs at those
// levels when it meets an error it cannot go on from (a write to its database or its
// write-ahead log failing, as when the filesystem is full), and its code relies on the log
// call not returning: zap's own hooks end the process or panic. failure instead records
// the first such error and stops the goroutine that logged it for good; Run then returns
// the error, so that kubelab shuts down cleanly and says why instead of exiting from
// inside etcd or crashing.
type failure struct {
	once sync.Once
	done chan struct{} // closed once err is set
	err  error
}

func newFailure() *failure { return &failure{done: make(chan struct{})} }

// OnWrite records the entry and never returns.
func (f *failure) OnWrite(ce *zapcore.CheckedEntry, fields []zapcore.Field) {
	f.once.Do(func() {
		f.err = entryError(ce.Message, fields)
		close(f.done)
	})
	select {}
}

// entryError is msg, wrapping the entry's error field when it has one.
func entryError(msg string, fields []zapcore.Field) error {
	for _, fl := range fields {
		if err, ok := fl.Interface.(error); ok && fl.Type == zapcore.ErrorType {
			return fmt.Errorf("%s: %w", msg, err)
		}
	}
	return errors.New(msg)
}

// stopped is the error Run returns when etcd stops on err.
func (s *Server) stopped(dir string, err error) error {
	if errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("etcd in %s stopped, its filesystem is out of space (free space there and start again): %w", dir, err)
	}
	if s.spaceIsLow(dir) {
		return fmt.Errorf("etcd in %s stopped, its filesystem is out of space (free space there and start again): %w: %w", dir, err, syscall.ENOSPC)
	}
	return fmt.Errorf("etcd in %s stopped: %w", dir, err)
}

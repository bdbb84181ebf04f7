package etcd

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
)

// TestFailureHook: etcd's fatal and panic logs neither end the process nor panic; the
// first one becomes the error Run returns.
func TestFailureHook(t *testing.T) {
	for _, tc := range []struct {
		name string
		log  func(*zap.Logger)
	}{
		{"fatal", func(l *zap.Logger) {
			l.Fatal("failed to commit tx", zap.Error(fmt.Errorf("write db: %w", syscall.ENOSPC)))
		}},
		{"panic", func(l *zap.Logger) {
			l.Panic("failed to commit tx", zap.Error(fmt.Errorf("write db: %w", syscall.ENOSPC)))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFailure()
			rec := &recorder{}
			l := newLogger(slog.New(rec), func() bool { return false }, zap.WithFatalHook(f), zap.WithPanicHook(f))
			go tc.log(l.With(zap.String("member", "kubelab"))) // stays stopped in the hook
			select {
			case <-f.done:
			case <-time.After(5 * time.Second):
				t.Fatal("the failure was not recorded")
			}
			if !errors.Is(f.err, syscall.ENOSPC) || !strings.HasPrefix(f.err.Error(), "failed to commit tx: write db") {
				t.Errorf("recorded %v, want the message wrapping the entry's error", f.err)
			}
			if len(rec.records) != 1 || rec.records[0].Level != slog.LevelError {
				t.Errorf("records %v, want the entry logged once as an error", rec.records)
			}
		})
	}
}

func TestStoppedSaysNoSpace(t *testing.T) {
	s := &Server{cfg: Config{DataDir: "/var/lib/kubelab/etcd", MinFreeBytes: -1}}
	err := s.stopped("/var/lib/kubelab/etcd", fmt.Errorf("failed to create WAL: %w", syscall.ENOSPC))
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "/var/lib/kubelab/etcd") ||
		!strings.Contains(err.Error(), "out of space") {
		t.Errorf("got %v, want an error naming the data dir and that it is out of space", err)
	}
	err = s.stopped("/var/lib/kubelab/etcd", errors.New("raft: lost"))
	if errors.Is(err, syscall.ENOSPC) || strings.Contains(err.Error(), "space") {
		t.Errorf("got %v for an error that is not about space", err)
	}
}

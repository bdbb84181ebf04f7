package pluginmanager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/fsnotify/fsnotify"
)

// errSocketRemoved is the cancel cause of a plugin's worker when its socket went away.
var errSocketRemoved = errors.New("registration socket removed")

// pluginSocket is a registration socket the manager serves with a worker goroutine.
type pluginSocket struct {
	info   os.FileInfo // the socket file the worker was started for
	cancel context.CancelCauseFunc
	done   chan struct{} // closed when the worker (and its de-registration) ended
}

// Run watches the registration directory and registers the plugins whose sockets appear
// there until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	defer m.stop()
	dir := m.cfg.RegistryDir()
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("pluginmanager: make %s: %w", dir, err)
	}
	// plugins_registry may be a link to a short directory (kubelab links it into the data
	// dir's run directory), so that the sockets' paths fit in a unix socket address
	// whatever the root's length; the manager scans, watches and dials through the link's
	// target. A linked directory rather than a link per socket, because that is what the
	// other side tolerates as it is: a node-driver-registrar binds its socket in the
	// directory it is given and makes no link, and a kubelet's watcher sees new sockets
	// in a linked plugins_registry (inotify follows the link).
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("pluginmanager: %w", err)
	}
	dir = resolved
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("pluginmanager: %w", err)
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("pluginmanager: watch %s: %w", dir, err)
	}
	var wg sync.WaitGroup
	sockets := map[string]*pluginSocket{}
	defer func() {
		for _, s := range sockets {
			s.cancel(context.Canceled)
		}
		wg.Wait()
	}()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("pluginmanager: scan %s: %w", dir, err)
	}
	for _, e := range entries {
		m.socketAdded(ctx, &wg, sockets, filepath.Join(dir, e.Name()))
	}
	m.log.Info("watching plugin registrations", "dir", dir, "sockets", len(sockets))
	close(m.ready)
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return errors.New("pluginmanager: watcher closed")
			}
			switch {
			case ev.Has(fsnotify.Create):
				m.socketAdded(ctx, &wg, sockets, ev.Name)
			case ev.Has(fsnotify.Remove) || ev.Has(fsnotify.Rename):
				m.socketRemoved(sockets, ev.Name)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("pluginmanager: watcher closed")
			}
			m.log.Warn("plugin watcher", "err", err)
		}
	}
}

// socketAdded starts a worker for a new registration socket. A socket that replaced one
// at the same path gets a new worker once the old one ended; the same socket seen twice
// (by the scan and an event) keeps its worker.
func (m *Manager) socketAdded(ctx context.Context, wg *sync.WaitGroup, sockets map[string]*pluginSocket, path string) {
	if strings.HasPrefix(filepath.Base(path), ".") {
		return
	}
	info, err := os.Lstat(path)
	if err != nil || info.Mode()&os.ModeSocket == 0 {
		return
	}
	prev := sockets[path]
	if prev != nil {
		if prev.info != nil && os.SameFile(prev.info, info) {
			return
		}
		prev.cancel(context.Canceled)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	s := &pluginSocket{info: info, cancel: cancel, done: make(chan struct{})}
	sockets[path] = s
	m.log.Info("plugin socket found", "socket", path)
	wg.Go(func() {
		defer close(s.done)
		if prev != nil {
			<-prev.done
		}
		m.servePlugin(wctx, ctx, path)
	})
}

// socketRemoved stops the worker of a socket that went away; the worker unregisters the
// plugin. The entry stays (without file info) so that a new socket at the same path
// waits for that.
func (m *Manager) socketRemoved(sockets map[string]*pluginSocket, path string) {
	s := sockets[path]
	if s == nil || s.info == nil {
		return
	}
	m.log.Info("plugin socket removed", "socket", path)
	s.cancel(errSocketRemoved)
	s.info = nil
}

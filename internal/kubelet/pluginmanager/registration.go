package pluginmanager

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// registrationCallTimeout bounds GetInfo and NotifyRegistrationStatus.
const registrationCallTimeout = 10 * time.Second

// permanentError is a registration failure that retrying the same socket cannot fix (an
// unknown plugin type, no supported version): it is reported once.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// servePlugin registers the plugin behind a registration socket, retrying with back-off,
// then waits until ctx ends; when that is because the socket was removed, it unregisters
// the plugin (with runCtx, the manager's context).
func (m *Manager) servePlugin(ctx, runCtx context.Context, path string) {
	delay := m.cfg.RetryInitial
	for {
		err := m.registerPlugin(ctx, path)
		if ctx.Err() != nil {
			break
		}
		if err == nil {
			m.notifyHook("settled", path)
			break
		}
		var perm permanentError
		if errors.As(err, &perm) {
			m.log.Error("plugin refused", "socket", path, "err", err)
			m.notifyHook("settled", path)
			break
		}
		m.log.Warn("plugin registration failed; retrying", "socket", path, "in", delay, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(delay):
		}
		delay = min(2*delay, m.cfg.RetryMax)
	}
	<-ctx.Done()
	if errors.Is(context.Cause(ctx), errSocketRemoved) {
		m.unregisterSocket(runCtx, path)
	}
	m.notifyHook("done", path)
}

func (m *Manager) notifyHook(event, path string) {
	if m.hook != nil {
		m.hook(event, path)
	}
}

// registerPlugin asks the plugin behind path what it is, hands it to the handler of its
// type and reports the outcome to the plugin.
func (m *Manager) registerPlugin(ctx context.Context, path string) error {
	conn, err := dialUnix(path)
	if err != nil {
		return err
	}
	defer conn.Close()
	client := registerapi.NewRegistrationClient(conn)
	cctx, cancel := context.WithTimeout(ctx, registrationCallTimeout)
	info, err := client.GetInfo(cctx, &registerapi.InfoRequest{})
	cancel()
	if err != nil {
		return fmt.Errorf("GetInfo on %s: %w", path, err)
	}
	switch info.GetType() {
	case registerapi.CSIPlugin:
		err = m.registerCSI(ctx, path, info)
	default:
		err = permanentError{fmt.Errorf("plugin %q: plugin type %q is not supported on this node (supported: %s)",
			info.GetName(), info.GetType(), registerapi.CSIPlugin)}
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	st := &registerapi.RegistrationStatus{PluginRegistered: err == nil}
	if err != nil {
		st.Error = err.Error()
	}
	cctx, cancel = context.WithTimeout(ctx, registrationCallTimeout)
	_, nerr := client.NotifyRegistrationStatus(cctx, st)
	cancel()
	if nerr != nil {
		m.log.Warn("notify plugin of its registration status", "socket", path, "plugin", info.GetName(), "registered", err == nil, "err", nerr)
	}
	return err
}

// validateVersions returns the highest 1.x version of versions, or an error when there is
// none.
func validateVersions(versions []string) (*utilversion.Version, error) {
	if len(versions) == 0 {
		return nil, errors.New("the plugin lists no supported versions")
	}
	var best *utilversion.Version
	for _, s := range versions {
		v, err := utilversion.ParseGeneric(s)
		if err != nil || v.Major() != 1 {
			continue
		}
		if best == nil || best.LessThan(v) {
			best = v
		}
	}
	if best == nil {
		return nil, fmt.Errorf("none of the versions %s is supported (want 1.x)", strings.Join(versions, ", "))
	}
	return best, nil
}

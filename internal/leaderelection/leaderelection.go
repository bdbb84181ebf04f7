package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Config names the Lease and sets its timing; the zero durations are upstream's
// defaults (15 s lease, 10 s renew deadline, 2 s retry).
type Config struct {
	// Name is the Lease's name (kube-scheduler, kube-controller-manager).
	Name string
	// Namespace is the Lease's namespace; kube-system when empty.
	Namespace string
	// Identity is the holder's identity; "<hostname>_<uuid>" when empty, as upstream.
	Identity      string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	Logger        *slog.Logger
}

func (c *Config) setDefaults() {
	if c.Namespace == "" {
		c.Namespace = metav1.NamespaceSystem
	}
	if c.Identity == "" {
		host, _ := os.Hostname()
		c.Identity = host + "_" + string(uuid.NewUUID())
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = 15 * time.Second
	}
	if c.RenewDeadline == 0 {
		c.RenewDeadline = 10 * time.Second
	}
	if c.RetryPeriod == 0 {
		c.RetryPeriod = 2 * time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Run campaigns for the Lease and runs lead while it holds it. When the Lease is lost,
// lead's context ends and Run campaigns again once lead has returned, as a restarted
// process would. Run returns when ctx ends, giving the Lease up so that a successor
// need not wait for it to expire, or with lead's error when lead fails while leading.
func Run(ctx context.Context, cfg Config, client kubernetes.Interface, lead func(ctx context.Context) error) error {
	if cfg.Name == "" {
		return errors.New("leaderelection: no lease name")
	}
	cfg.setDefaults()
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Client:     client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}
	for {
		term, err := campaign(ctx, cfg, lock, lead)
		if err != nil || ctx.Err() != nil {
			return err
		}
		if term {
			cfg.Logger.WarnContext(ctx, "lost the lease; campaigning again", "lease", cfg.Name, "identity", cfg.Identity)
		}
	}
}

// campaign waits to hold the Lease, runs lead while it does, and returns once the Lease
// is lost or ctx ends (led: whether lead ran), or with lead's own failure.
func campaign(ctx context.Context, cfg Config, lock resourcelock.Interface, lead func(ctx context.Context) error) (led bool, err error) {
	electorCtx, stop := context.WithCancel(ctx)
	defer stop()
	held := &heldLock{Interface: lock}
	done := make(chan error, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: held, Name: cfg.Name, ReleaseOnCancel: true,
		LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline, RetryPeriod: cfg.RetryPeriod,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) {
				cfg.Logger.InfoContext(leadCtx, "leading", "lease", cfg.Name, "identity", cfg.Identity)
				err := lead(leadCtx)
				if leadCtx.Err() == nil {
					// lead gave up while still leading: stop renewing.
					stop()
				}
				done <- err
			},
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		return false, fmt.Errorf("leaderelection %s: %w", cfg.Name, err)
	}
	elector.Run(electorCtx)
	// Once the Lease was written in our name, the elector has started lead.
	if !held.acquired.Load() {
		return false, nil
	}
	err = <-done
	if ctx.Err() != nil {
		return true, nil
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return true, fmt.Errorf("%s: %w", cfg.Name, err)
	}
	return true, nil
}

// heldLock notes, as the elector writes it, that the Lease was taken in our name: the
// elector starts lead right after, in a goroutine of its own.
type heldLock struct {
	resourcelock.Interface
	acquired atomic.Bool
}

func (l *heldLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, r)
	l.note(r, err)
	return err
}

func (l *heldLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, r)
	l.note(r, err)
	return err
}

func (l *heldLock) note(r resourcelock.LeaderElectionRecord, err error) {
	if err == nil && r.HolderIdentity == l.Identity() {
		l.acquired.Store(true)
	}
}

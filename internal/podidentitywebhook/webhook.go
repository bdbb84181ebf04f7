package podidentitywebhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

// Config configures the webhook.
type Config struct {
	// Addr is where Run listens (host:port); Serve takes a listener instead.
	Addr string
	// CertFile and KeyFile are the serving certificate and its key (PEM), which the
	// MutatingWebhookConfiguration's caBundle verifies.
	CertFile, KeyFile string
	// Settings are the defaults ServiceAccounts' annotations override; Region is
	// required.
	Settings
	// Logger receives the webhook's logs (slog.Default() when nil).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	var errs []error
	if c.CertFile == "" || c.KeyFile == "" {
		errs = append(errs, errors.New("a serving certificate and key are required"))
	}
	if c.Region == "" {
		errs = append(errs, errors.New("a region is required"))
	}
	if c.TokenExpiration != 0 && c.TokenExpiration < MinTokenExpiration {
		errs = append(errs, fmt.Errorf("token expiration %d is under the minimum %d seconds", c.TokenExpiration, MinTokenExpiration))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("pod identity webhook: %w", err)
	}
	return nil
}

// Webhook is the pod identity webhook.
type Webhook struct {
	cfg    Config
	client kubernetes.Interface
}

// New checks cfg and returns the webhook, which reads ServiceAccounts with client.
func New(cfg Config, client kubernetes.Interface) (*Webhook, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if client == nil {
		return nil, errors.New("pod identity webhook: a client is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Webhook{cfg: cfg, client: client}, nil
}

// Run listens on Config.Addr and serves until ctx ends.
func (w *Webhook) Run(ctx context.Context) error {
	l, err := net.Listen("tcp", w.cfg.Addr)
	if err != nil {
		return fmt.Errorf("pod identity webhook: %w", err)
	}
	return w.Serve(ctx, l)
}

// Serve serves HTTPS on l until ctx ends, then closes it: MutatePath answers
// AdmissionReviews (from the start: until the ServiceAccounts' cache has synced, they
// are read from the API), /healthz says it is up.
func (w *Webhook) Serve(ctx context.Context, l net.Listener) error {
	defer l.Close()
	pair, err := tls.LoadX509KeyPair(w.cfg.CertFile, w.cfg.KeyFile)
	if err != nil {
		return fmt.Errorf("pod identity webhook: serving certificate: %w", err)
	}
	factory := informers.NewSharedInformerFactory(w.client, 0)
	sas := factory.Core().V1().ServiceAccounts()
	lister := sas.Lister()
	informer := sas.Informer()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	h := &handler{settings: w.cfg.Settings, log: w.cfg.Logger,
		serviceAccounts: func(ctx context.Context, namespace, name string) (*corev1.ServiceAccount, error) {
			if informer.HasSynced() {
				sa, err := lister.ServiceAccounts(namespace).Get(name)
				if !apierrors.IsNotFound(err) {
					return sa, err
				}
			}
			// Before the cache has synced, or created a moment ago, before the cache
			// heard of it: from the API.
			return w.client.CoreV1().ServiceAccounts(namespace).Get(ctx, name, metav1.GetOptions{})
		}}
	mux := http.NewServeMux()
	mux.Handle(MutatePath, h)
	mux.HandleFunc("/healthz", func(rw http.ResponseWriter, _ *http.Request) { _, _ = rw.Write([]byte("ok")) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}}
	stop := context.AfterFunc(ctx, func() { srv.Close() })
	defer stop()
	w.cfg.Logger.Info("pod identity webhook serving", "addr", l.Addr().String(), "region", w.cfg.Region)
	if err := srv.ServeTLS(l, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("pod identity webhook: %w", err)
	}
	return nil
}

package driver

import (
	"context"
	"path"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// metrics counts every CSI call by method and gRPC code and times it.
type metrics struct {
	calls    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kubelab", Subsystem: "csi", Name: "operations_total",
			Help: "CSI calls served, by method and gRPC code.",
		}, []string{"driver", "method", "code"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kubelab", Subsystem: "csi", Name: "operation_errors_total",
			Help: "CSI calls that ended with an error, by method and gRPC code.",
		}, []string{"driver", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "kubelab", Subsystem: "csi", Name: "operation_duration_seconds",
			Help:    "Latency of CSI calls, by method.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
		}, []string{"driver", "method"}),
	}
	reg.MustRegister(m.calls, m.errors, m.duration)
	return m
}

// interceptor records metrics and logs each call, with secrets stripped.
func (d *Driver) interceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	method := path.Base(info.FullMethod)
	log := d.log.With("method", method)
	start := time.Now()
	log.Debug("csi call", "request", stripSecrets(req))
	resp, err := handler(ctx, req)
	elapsed := time.Since(start)
	code := status.Code(err)
	d.metrics.calls.WithLabelValues(d.cfg.DriverName, method, code.String()).Inc()
	d.metrics.duration.WithLabelValues(d.cfg.DriverName, method).Observe(elapsed.Seconds())
	if err != nil {
		d.metrics.errors.WithLabelValues(d.cfg.DriverName, method, code.String()).Inc()
		log.Info("csi call failed", "code", code.String(), "error", err, "duration", elapsed)
	} else {
		log.Debug("csi call done", "duration", elapsed, "response", stripSecrets(resp))
	}
	return resp, err
}

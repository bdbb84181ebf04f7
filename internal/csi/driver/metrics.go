package driver

import (
	"context"
	"path"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
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

// interceptor records metrics and logs each call, with secrets stripped. The calls that
// act on a volume are logged at Info with the volume's id (and node), when they start and
// when they end, so that a volume's story can be read from the log; the others, and the
// requests' bodies, at Debug.
func (d *Driver) interceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	method := path.Base(info.FullMethod)
	log := d.log.With("method", method)
	subject := volumeAttrs(req)
	start := time.Now()
	if subject != nil {
		log.Info(method+": called", subject...)
	}
	log.Debug("csi call", "request", stripSecrets(req))
	resp, err := handler(ctx, req)
	elapsed := time.Since(start)
	code := status.Code(err)
	d.metrics.calls.WithLabelValues(d.cfg.DriverName, method, code.String()).Inc()
	d.metrics.duration.WithLabelValues(d.cfg.DriverName, method).Observe(elapsed.Seconds())
	if err != nil {
		d.metrics.errors.WithLabelValues(d.cfg.DriverName, method, code.String()).Inc()
		log.Info(method+": failed", append(subject, "code", code.String(), "error", err, "duration", elapsed)...)
		return resp, err
	}
	if subject != nil {
		if v, ok := resp.(interface{ GetVolume() *csi.Volume }); ok && v.GetVolume() != nil {
			subject = append(subject, "volume", v.GetVolume().GetVolumeId())
		}
		log.Info(method+": done", append(subject, "duration", elapsed)...)
	}
	log.Debug("csi call done", "duration", elapsed, "response", stripSecrets(resp))
	return resp, err
}

// volumeAttrs are the log attributes that name what a call acts on: its volume id (its
// name for CreateVolume) and node; nil for calls that act on no volume.
func volumeAttrs(req any) []any {
	var attrs []any
	if r, ok := req.(interface{ GetVolumeId() string }); ok && r.GetVolumeId() != "" {
		attrs = append(attrs, "volume", r.GetVolumeId())
	}
	if r, ok := req.(*csi.CreateVolumeRequest); ok {
		attrs = append(attrs, "name", r.GetName())
	}
	if r, ok := req.(interface{ GetNodeId() string }); ok && r.GetNodeId() != "" {
		attrs = append(attrs, "node", r.GetNodeId())
	}
	return attrs
}

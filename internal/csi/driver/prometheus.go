package driver

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
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

// observe counts one call of driver's method that ended with code after elapsed.
func (m *metrics) observe(driver, method string, code codes.Code, elapsed time.Duration) {
	m.calls.WithLabelValues(driver, method, code.String()).Inc()
	m.duration.WithLabelValues(driver, method).Observe(elapsed.Seconds())
	if code != codes.OK {
		m.errors.WithLabelValues(driver, method, code.String()).Inc()
	}
}

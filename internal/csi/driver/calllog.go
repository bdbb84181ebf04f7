package driver

import (
	"context"
	"path"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/kubelab/kubelab/internal/csi/calllog"
)

// interceptor records metrics and logs each call, with secrets stripped. The calls that
// act on a volume are logged at Info with the volume's id (and node), when they start and
// when they end (calllog's lines), so that a volume's story can be read from the log; the
// others, and the requests' bodies, at Debug.
func (d *Driver) interceptor(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	method := path.Base(info.FullMethod)
	log := d.log.With("method", method)
	subject := volumeAttrs(req)
	start := time.Now()
	if subject != nil {
		calllog.LogCalled(log, method, subject...)
	}
	log.Debug("csi call", "request", stripSecrets(req))
	resp, err := handler(ctx, req)
	elapsed := time.Since(start)
	code := status.Code(err)
	d.metrics.observe(d.cfg.DriverName, method, code, elapsed)
	if err != nil {
		calllog.LogFailed(log, method, elapsed, err, append(subject, "code", code.String())...)
		return resp, err
	}
	if subject != nil {
		if v, ok := resp.(interface{ GetVolume() *csi.Volume }); ok && v.GetVolume() != nil {
			subject = append(subject, "volume", v.GetVolume().GetVolumeId())
		}
		calllog.LogDone(log, method, elapsed, subject...)
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

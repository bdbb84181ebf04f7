package client

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// Recorder records core/v1 Events as component (e.g. "ebs.csi.aws.com_<host>" for
// the provisioner, "csi-attacher" for the attacher). Start sends them to the API
// server; stop ends that.
type Recorder struct {
	record.EventRecorder
	b      record.EventBroadcaster
	client kubernetes.Interface
}

// NewRecorder builds a recorder over s (scheme.Scheme when nil).
func NewRecorder(client kubernetes.Interface, component string, s *runtime.Scheme) *Recorder {
	if s == nil {
		s = scheme.Scheme
	}
	b := record.NewBroadcaster()
	return &Recorder{EventRecorder: b.NewRecorder(s, corev1.EventSource{Component: component}), b: b, client: client}
}

// Start sends recorded events to the API server until the returned stop is called.
func (r *Recorder) Start() (stop func()) {
	r.b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: r.client.CoreV1().Events("")})
	return r.b.Shutdown
}

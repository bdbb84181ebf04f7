package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/kubelab/kubelab/internal/etcd"
)

// TestApplyLimits: the generic server keeps the request limits kubelab documents, and no
// flow-control configuration replaces the in-flight limits.
func TestApplyLimits(t *testing.T) {
	cfg := genericapiserver.NewConfig(serializer.NewCodecFactory(runtime.NewScheme()))
	applyLimits(cfg)
	if cfg.MaxRequestsInFlight != 400 || cfg.MaxMutatingRequestsInFlight != 200 || cfg.MaxRequestBodyBytes != 3<<20 || cfg.FlowControl != nil {
		t.Fatalf("limits %d/%d in flight, body %d, flow control %v; want 400/200, 3 MiB, none",
			cfg.MaxRequestsInFlight, cfg.MaxMutatingRequestsInFlight, cfg.MaxRequestBodyBytes, cfg.FlowControl)
	}
	if EtcdMaxRequestBytes != etcd.DefaultMaxRequestBytes {
		t.Errorf("the limit named in 413s (%d) is not the embedded etcd's default (%d)", EtcdMaxRequestBytes, etcd.DefaultMaxRequestBytes)
	}
}

// TestTooLargeTranslation: etcd's and gRPC's size errors become a 413 naming the limit;
// other errors pass unchanged.
func TestTooLargeTranslation(t *testing.T) {
	s := tooLargeStorage{resource: corev1.Resource("pods")}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	for _, tc := range []struct {
		name  string
		err   error
		large bool
	}{
		{"etcd's limit", rpctypes.ErrRequestTooLarge, true},
		{"etcd's limit, wrapped", fmt.Errorf("txn: %w", rpctypes.ErrRequestTooLarge), true},
		{"client send limit", status.Error(codes.ResourceExhausted, "trying to send message larger than max (2560586 vs. 2097152)"), true},
		{"server receive limit", status.Error(codes.ResourceExhausted, "grpc: received message larger than max (3000000 vs. 2097152)"), true},
		{"database full", rpctypes.ErrNoSpace, false},
		{"conflict", apierrors.NewConflict(corev1.Resource("pods"), "p", errors.New("changed")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := s.translate(tc.err, pod)
			if !tc.large {
				if got != tc.err {
					t.Fatalf("translated %v into %v", tc.err, got)
				}
				return
			}
			st := apierrors.APIStatus(nil)
			if !errors.As(got, &st) {
				t.Fatalf("%v is not an API status", got)
			}
			if st.Status().Code != http.StatusRequestEntityTooLarge || st.Status().Reason != metav1.StatusReasonRequestEntityTooLarge ||
				!strings.Contains(st.Status().Message, "limit is 1572864 bytes") || !strings.Contains(st.Status().Message, `pods "p"`) {
				t.Fatalf("status %+v, want 413 naming the object and the limit", st.Status())
			}
			if !errors.Is(got, tc.err) {
				t.Errorf("the cause %v is lost", tc.err)
			}
		})
	}
}

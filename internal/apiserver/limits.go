package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
)

// The limits a request meets, from the outside in:
//
//   - at most MaxRequestsInFlight read-only and MaxMutatingRequestsInFlight mutating
//     requests are served at once (watches and the pods' streams do not count); one more
//     gets 429 Too Many Requests with Retry-After. Members of system:masters (the admin,
//     the server's own loopback client) are never turned away.
//   - a create, update or patch body larger than MaxRequestBodyBytes gets 413
//     ("limit is 3145728").
//   - kinds' own rules: a ConfigMap's or Secret's values total at most 1 MiB (422).
//   - etcd takes a write of at most EtcdMaxRequestBytes; a larger object gets 413
//     naming that limit (tooLargeStorage).
const (
	MaxRequestsInFlight         = 400
	MaxMutatingRequestsInFlight = 200
	MaxRequestBodyBytes         = 3 << 20
	// EtcdMaxRequestBytes is the embedded etcd's request limit (etcd's default).
	EtcdMaxRequestBytes = 1536 * 1024
)

// applyLimits sets the generic server's limits. Without a flow-control (priority and
// fairness) configuration, the server's handler chain enforces the two in-flight limits.
func applyLimits(cfg *genericapiserver.Config) {
	cfg.MaxRequestsInFlight = MaxRequestsInFlight
	cfg.MaxMutatingRequestsInFlight = MaxMutatingRequestsInFlight
	cfg.MaxRequestBodyBytes = MaxRequestBodyBytes
	cfg.FlowControl = nil
}

// tooLargeStorage is a store's storage whose writes of objects larger than etcd takes
// fail with 413 Request Entity Too Large naming etcd's limit, instead of a 500 carrying
// etcd's or gRPC's text.
type tooLargeStorage struct {
	storage.Interface
	resource schema.GroupResource
}

func (s tooLargeStorage) Create(ctx context.Context, key string, obj, out runtime.Object, ttl uint64) error {
	return s.translate(s.Interface.Create(ctx, key, obj, out, ttl), obj)
}

func (s tooLargeStorage) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	err := s.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, cachedExistingObject)
	return s.translate(err, destination)
}

func (s tooLargeStorage) translate(err error, obj runtime.Object) error {
	if err == nil || !isTooLarge(err) {
		return err
	}
	name := ""
	if m, merr := meta.Accessor(obj); merr == nil {
		name = m.GetName()
	}
	return &tooLargeError{cause: err, status: apierrors.NewRequestEntityTooLargeError(
		fmt.Sprintf("%s %q is larger than etcd stores in one request (limit is %d bytes, etcd's --max-request-bytes)",
			s.resource.String(), name, EtcdMaxRequestBytes)).ErrStatus}
}

// isTooLarge says whether err is etcd refusing a request over its size limit, or the
// gRPC layer refusing to send or receive a message over its own.
func isTooLarge(err error) bool {
	if errors.Is(err, rpctypes.ErrRequestTooLarge) {
		return true
	}
	s, ok := status.FromError(err)
	return ok && s.Code() == codes.ResourceExhausted && strings.Contains(s.Message(), "larger than max")
}

// tooLargeError answers as a 413 Status (Status) while the API handlers still recognise
// it as etcd's size error (Error, Code, GRPCStatus), so that they retry the write once
// without managedFields, as they do for etcd's own error, before answering.
type tooLargeError struct {
	cause  error
	status metav1.Status
}

func (e *tooLargeError) Error() string         { return e.cause.Error() }
func (e *tooLargeError) Unwrap() error         { return e.cause }
func (e *tooLargeError) Status() metav1.Status { return e.status }

func (e *tooLargeError) Code() codes.Code {
	var ee rpctypes.EtcdError
	if errors.As(e.cause, &ee) {
		return ee.Code()
	}
	return status.Code(e.cause)
}

func (e *tooLargeError) GRPCStatus() *status.Status {
	s, _ := status.FromError(e.cause)
	return s
}

// tooLargeOptions decorates every store's storage with tooLargeStorage as the store is
// built, before anything reads it.
type tooLargeOptions struct{ generic.RESTOptionsGetter }

func (g tooLargeOptions) GetRESTOptions(resource schema.GroupResource, example runtime.Object) (generic.RESTOptions, error) {
	opts, err := g.RESTOptionsGetter.GetRESTOptions(resource, example)
	if err != nil {
		return opts, err
	}
	decorate := opts.Decorator
	opts.Decorator = func(cfg *storagebackend.ConfigForResource, prefix string, keyFunc func(runtime.Object) (string, error),
		newFunc, newListFunc func() runtime.Object, attrs storage.AttrFunc, trigger storage.IndexerFuncs, indexers *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
		s, destroy, err := decorate(cfg, prefix, keyFunc, newFunc, newListFunc, attrs, trigger, indexers)
		if err != nil {
			return s, destroy, err
		}
		return tooLargeStorage{Interface: s, resource: resource}, destroy, nil
	}
	return opts, nil
}

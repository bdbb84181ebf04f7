package apiserver

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
)

// Service ClusterIPs and NodePorts are allocated here, each reservation an etcd key
// created only if absent, so two API servers never hand out the same address.
const (
	serviceIPPrefix = "/kubelab/serviceips/"
	nodePortPrefix  = "/kubelab/nodeports/"
	nodePortMin     = 30000
	nodePortMax     = 32767
)

var errAllocated = errors.New("provided IP is already allocated")

type serviceAllocator struct {
	etcd   *clientv3.Client
	prefix string // the API server's etcd prefix, e.g. /registry
	cidr   *net.IPNet
}

// firstIP is the address of the "kubernetes" Service: the range's first host.
func (a *serviceAllocator) firstIP() net.IP { return addIP(a.cidr.IP, 1) }

func (a *serviceAllocator) reserve(ctx context.Context, key, owner string) (bool, error) {
	resp, err := a.etcd.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, owner)).
		Commit()
	if err != nil {
		return false, fmt.Errorf("reserve %s: %w", key, err)
	}
	return resp.Succeeded, nil
}

func (a *serviceAllocator) release(ctx context.Context, key string) {
	_, _ = a.etcd.Delete(ctx, key)
}

func (a *serviceAllocator) ipKey(ip string) string { return a.prefix + serviceIPPrefix + ip }
func (a *serviceAllocator) portKey(p int32) string {
	return a.prefix + nodePortPrefix + strconv.Itoa(int(p))
}
func ownerOf(s *corev1.Service) string { return s.Namespace + "/" + s.Name }
func needsClusterIP(s *corev1.Service) bool {
	return s.Spec.Type != corev1.ServiceTypeExternalName && s.Spec.ClusterIP != corev1.ClusterIPNone
}
func needsNodePorts(s *corev1.Service) bool {
	return s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer
}

// allocate gives s its ClusterIP and node ports, or fails naming the field; on failure
// nothing stays reserved.
func (a *serviceAllocator) allocate(ctx context.Context, s *corev1.Service) (func(), error) {
	var keys []string
	release := func() {
		for _, k := range keys {
			a.release(context.WithoutCancel(ctx), k)
		}
	}
	done := false
	defer func() {
		if !done {
			release()
		}
	}()
	if needsClusterIP(s) {
		ip, err := a.allocateIP(ctx, s)
		if err != nil {
			return nil, err
		}
		keys = append(keys, a.ipKey(ip))
		s.Spec.ClusterIP, s.Spec.ClusterIPs = ip, []string{ip}
	}
	if needsNodePorts(s) {
		for i := range s.Spec.Ports {
			p := &s.Spec.Ports[i]
			port, err := a.allocatePort(ctx, s, p.NodePort, field.NewPath("spec", "ports").Index(i).Child("nodePort"))
			if err != nil {
				return nil, err
			}
			keys = append(keys, a.portKey(port))
			p.NodePort = port
		}
	}
	done = true
	return release, nil
}

func (a *serviceAllocator) allocateIP(ctx context.Context, s *corev1.Service) (string, error) {
	p := field.NewPath("spec", "clusterIPs").Index(0)
	if s.Spec.ClusterIP != "" {
		ip := net.ParseIP(s.Spec.ClusterIP)
		if ip == nil || ip.To4() == nil || !a.cidr.Contains(ip) {
			return "", invalidService(s, field.Invalid(p, s.Spec.ClusterIP,
				fmt.Sprintf("failed to allocate IP %s: the provided IP (%s) is not in the valid range. The range of valid IPs is %s", s.Spec.ClusterIP, s.Spec.ClusterIP, a.cidr)))
		}
		ok, err := a.reserve(ctx, a.ipKey(ip.String()), ownerOf(s))
		if err != nil {
			return "", err
		}
		if !ok {
			return "", invalidService(s, field.Invalid(p, s.Spec.ClusterIP, fmt.Sprintf("failed to allocate IP %s: %v", s.Spec.ClusterIP, errAllocated)))
		}
		return ip.String(), nil
	}
	ones, bits := a.cidr.Mask.Size()
	size := int64(1) << (bits - ones)
	for try := 0; try < 64; try++ {
		// Skip the network address, the "kubernetes" Service's .1 and the broadcast address.
		ip := addIP(a.cidr.IP, 2+rand.Int64N(size-3)).String()
		ok, err := a.reserve(ctx, a.ipKey(ip), ownerOf(s))
		if err != nil {
			return "", err
		}
		if ok {
			return ip, nil
		}
	}
	return "", apierrors.NewInternalError(fmt.Errorf("failed to allocate a serviceIP: range %s is full", a.cidr))
}

func (a *serviceAllocator) allocatePort(ctx context.Context, s *corev1.Service, want int32, p *field.Path) (int32, error) {
	if want != 0 {
		if want < nodePortMin || want > nodePortMax {
			return 0, invalidService(s, field.Invalid(p, want, fmt.Sprintf("provided port is not in the valid range. The range of valid ports is %d-%d", nodePortMin, nodePortMax)))
		}
		ok, err := a.reserve(ctx, a.portKey(want), ownerOf(s))
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, invalidService(s, field.Invalid(p, want, "provided port is already allocated"))
		}
		return want, nil
	}
	for try := 0; try < 64; try++ {
		port := int32(nodePortMin + rand.IntN(nodePortMax-nodePortMin+1))
		ok, err := a.reserve(ctx, a.portKey(port), ownerOf(s))
		if err != nil {
			return 0, err
		}
		if ok {
			return port, nil
		}
	}
	return 0, apierrors.NewInternalError(errors.New("failed to allocate a nodePort: range is full"))
}

func (a *serviceAllocator) releaseService(s *corev1.Service) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if needsClusterIP(s) && s.Spec.ClusterIP != "" {
		a.release(ctx, a.ipKey(s.Spec.ClusterIP))
	}
	for _, p := range s.Spec.Ports {
		if p.NodePort != 0 {
			a.release(ctx, a.portKey(p.NodePort))
		}
	}
}

func invalidService(s *corev1.Service, errs ...*field.Error) error {
	return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), s.Name, errs)
}

// decorate installs the allocator on the services store: reserve before the object is
// written (released again if the write fails), release after it is deleted.
func (a *serviceAllocator) decorate(store *genericregistry.Store) {
	store.BeginCreate = func(ctx context.Context, obj runtime.Object, _ *metav1.CreateOptions) (genericregistry.FinishFunc, error) {
		release, err := a.allocate(ctx, obj.(*corev1.Service))
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, success bool) {
			if !success {
				release()
			}
		}, nil
	}
	store.AfterDelete = func(obj runtime.Object, _ *metav1.DeleteOptions) {
		a.releaseService(obj.(*corev1.Service))
	}
}

func addIP(base net.IP, n int64) net.IP {
	v := new(big.Int).SetBytes(base.To4())
	v.Add(v, big.NewInt(n))
	b := v.Bytes()
	out := make(net.IP, 4)
	copy(out[4-len(b):], b)
	return out
}

func parseCIDR(s string) (*net.IPNet, error) {
	_, n, err := net.ParseCIDR(s)
	return n, err
}

func serviceHooks() hooks {
	return hooks{
		name: func(name string, prefix bool) []string {
			if prefix {
				name = maskTrailingDash(name)
			}
			return utilvalidation.IsDNS1035Label(name)
		},
		validate: validateService,
		prepareForUpdate: func(o, old runtime.Object) {
			// Allocated values stay when the writer (kubectl apply, say) left them out.
			s, os := o.(*corev1.Service), old.(*corev1.Service)
			if s.Spec.ClusterIP == "" && needsClusterIP(s) {
				s.Spec.ClusterIP, s.Spec.ClusterIPs = os.Spec.ClusterIP, os.Spec.ClusterIPs
			}
			for i := range s.Spec.Ports {
				for _, op := range os.Spec.Ports {
					if s.Spec.Ports[i].NodePort == 0 && op.Port == s.Spec.Ports[i].Port && op.Protocol == s.Spec.Ports[i].Protocol {
						s.Spec.Ports[i].NodePort = op.NodePort
					}
				}
			}
		},
		validateUpdate: func(o, old runtime.Object) field.ErrorList {
			s, os := o.(*corev1.Service), old.(*corev1.Service)
			if needsClusterIP(os) && s.Spec.ClusterIP != os.Spec.ClusterIP {
				return field.ErrorList{field.Invalid(field.NewPath("spec", "clusterIPs").Index(0), s.Spec.ClusterIP, "may not change once set")}
			}
			return nil
		},
	}
}

// maskTrailingDash lets a generateName prefix end in "-" (a name made from it goes on with
// random characters).
func maskTrailingDash(name string) string {
	if len(name) > 1 && name[len(name)-1] == '-' {
		return name[:len(name)-1] + "a"
	}
	return name
}

func validateService(o runtime.Object) field.ErrorList {
	s := o.(*corev1.Service)
	spec := field.NewPath("spec")
	var errs field.ErrorList
	switch s.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		if len(s.Spec.Ports) == 0 && s.Spec.ClusterIP != corev1.ClusterIPNone {
			errs = append(errs, field.Required(spec.Child("ports"), ""))
		}
	case corev1.ServiceTypeExternalName:
		if s.Spec.ExternalName == "" {
			errs = append(errs, field.Required(spec.Child("externalName"), ""))
		}
	default:
		errs = append(errs, field.NotSupported(spec.Child("type"), s.Spec.Type, []string{"ClusterIP", "ExternalName", "LoadBalancer", "NodePort"}))
	}
	names := map[string]bool{}
	for i, p := range s.Spec.Ports {
		pp := spec.Child("ports").Index(i)
		if len(s.Spec.Ports) > 1 && p.Name == "" {
			errs = append(errs, field.Required(pp.Child("name"), ""))
		}
		if names[p.Name] {
			errs = append(errs, field.Duplicate(pp.Child("name"), p.Name))
		}
		names[p.Name] = true
		if p.Port < 1 || p.Port > 65535 {
			errs = append(errs, field.Invalid(pp.Child("port"), p.Port, "must be between 1 and 65535, inclusive"))
		}
		if p.TargetPort.Type == intstr.Int && (p.TargetPort.IntVal < 0 || p.TargetPort.IntVal > 65535) {
			errs = append(errs, field.Invalid(pp.Child("targetPort"), p.TargetPort.IntVal, "must be between 1 and 65535, inclusive"))
		}
		switch p.Protocol {
		case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		default:
			errs = append(errs, field.NotSupported(pp.Child("protocol"), p.Protocol, []string{"SCTP", "TCP", "UDP"}))
		}
	}
	return errs
}

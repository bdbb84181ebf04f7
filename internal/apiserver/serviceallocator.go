package apiserver

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/util/dryrun"
)

// Service ClusterIPs and NodePorts are allocated here. Each value handed out is a
// reservation (reservations.go): <etcd prefix>/kubelab/serviceips/<ip> or
// <etcd prefix>/kubelab/nodeports/<port>, holding "<namespace>/<name>" of its Service.
const (
	serviceIPPrefix = "/kubelab/serviceips/"
	nodePortPrefix  = "/kubelab/nodeports/"
	nodePortMin     = 30000
	nodePortMax     = 32767
)

// quickTries is how many values from a random start are tried one by one before the
// allocator reads which values are taken and walks the whole range.
const quickTries = 8

var (
	errIPAllocated   = errors.New("provided IP is already allocated")
	errPortAllocated = errors.New("provided port is already allocated")
	errRangeFull     = errors.New("range is full")
)

// serviceAllocator gives Services their ClusterIP and NodePorts and takes them back.
//
// ClusterIPs come from cidr without its network and broadcast addresses; its first host
// (firstIP) is the "kubernetes" Service's and is handed out only on request. NodePorts
// come from ports. A Service asking for a value gets it or a field error; one asking for
// none gets a free one, picked from a random start and going round the whole range, so
// that "range is full" means every value is taken.
type serviceAllocator struct {
	store  reservations
	prefix string // the API server's etcd prefix, e.g. /registry
	cidr   *net.IPNet
	ports  portRange
	log    *slog.Logger
	// listServices reads every Service; decorate sets it (the repair loop's view).
	listServices func(ctx context.Context) ([]corev1.Service, error)

	// inflight counts, per key, the requests that reserved it and have not ended: the
	// repair loop never takes such a key back, whose Service may be about to be stored.
	mu       sync.Mutex
	inflight map[string]int
}

// portRange is an inclusive range of ports.
type portRange struct{ min, max int32 }

func (r portRange) String() string { return fmt.Sprintf("%d-%d", r.min, r.max) }

func newServiceAllocator(store reservations, etcdPrefix string, cidr *net.IPNet, log *slog.Logger) *serviceAllocator {
	return &serviceAllocator{store: store, prefix: etcdPrefix, cidr: cidr,
		ports: portRange{nodePortMin, nodePortMax}, log: log, inflight: map[string]int{}}
}

func (a *serviceAllocator) track(key string) {
	a.mu.Lock()
	a.inflight[key]++
	a.mu.Unlock()
}

func (a *serviceAllocator) untrack(keys []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, k := range keys {
		if a.inflight[k]--; a.inflight[k] <= 0 {
			delete(a.inflight, k)
		}
	}
}

// inflightKeys are the keys reserved by requests that have not ended.
func (a *serviceAllocator) inflightKeys() map[string]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make(map[string]bool, len(a.inflight))
	for k := range a.inflight {
		out[k] = true
	}
	return out
}

func (a *serviceAllocator) isInflight(key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.inflight[key] > 0
}

// firstIP is the address of the "kubernetes" Service: the range's first host.
func (a *serviceAllocator) firstIP() net.IP { return addIP(a.cidr.IP, 1) }

func (a *serviceAllocator) ipKey(ip string) string { return a.prefix + serviceIPPrefix + ip }
func (a *serviceAllocator) portKey(p int32) string {
	return a.prefix + nodePortPrefix + strconv.Itoa(int(p))
}

// ipBounds are the range as numbers: its network address and its size.
func (a *serviceAllocator) ipBounds() (base uint32, size int64) {
	ones, bits := a.cidr.Mask.Size()
	return binary.BigEndian.Uint32(a.cidr.IP.To4()), int64(1) << (bits - ones)
}

// ipAllowed: ip is a host of the range (neither its network nor its broadcast address).
func (a *serviceAllocator) ipAllowed(ip net.IP) bool {
	v4 := ip.To4()
	if v4 == nil || !a.cidr.Contains(v4) {
		return false
	}
	base, size := a.ipBounds()
	n := int64(binary.BigEndian.Uint32(v4)) - int64(base)
	return n > 0 && n < size-1
}

func (a *serviceAllocator) portAllowed(p int32) bool { return p >= a.ports.min && p <= a.ports.max }

// pool is a range of values kept as reservations under prefix: the numbers first …
// first+size-1.
type pool struct {
	prefix      string
	first, size int64
	name        func(v int64) string
	parse       func(s string) (int64, bool)
}

// ipPool is what a Service asking for no particular ClusterIP gets one from: the range's
// hosts but the first.
func (a *serviceAllocator) ipPool() pool {
	base, size := a.ipBounds()
	return pool{
		prefix: a.prefix + serviceIPPrefix, first: int64(base) + 2, size: size - 3,
		name: func(v int64) string { return uint32IP(uint32(v)).String() },
		parse: func(s string) (int64, bool) {
			ip := net.ParseIP(s).To4()
			if ip == nil {
				return 0, false
			}
			return int64(binary.BigEndian.Uint32(ip)), true
		},
	}
}

func (a *serviceAllocator) portPool() pool {
	return pool{
		prefix: a.prefix + nodePortPrefix, first: int64(a.ports.min), size: int64(a.ports.max-a.ports.min) + 1,
		name: func(v int64) string { return strconv.FormatInt(v, 10) },
		parse: func(s string) (int64, bool) {
			v, err := strconv.ParseInt(s, 10, 32)
			return v, err == nil
		},
	}
}

// pick reserves a free value of p for owner. It tries a few values from a random start;
// when they are taken it reads what is taken and tries every other value from that
// start on, round the whole range, so errRangeFull means every value was taken.
func (a *serviceAllocator) pick(ctx context.Context, p pool, owner string) (int64, error) {
	return a.pickTracked(ctx, p, owner, nil)
}

// pickTracked is pick calling track with each key before trying to reserve it.
func (a *serviceAllocator) pickTracked(ctx context.Context, p pool, owner string, track func(key string)) (int64, error) {
	reserve := func(key string) (bool, error) {
		if track != nil {
			track(key)
		}
		return a.store.reserve(ctx, key, owner)
	}
	if p.size <= 0 {
		return 0, errRangeFull
	}
	start := rand.Int64N(p.size)
	member := func(i int64) int64 { return p.first + (start+i)%p.size }
	for i := int64(0); i < min(quickTries, p.size); i++ {
		v := member(i)
		ok, err := reserve(p.prefix + p.name(v))
		if err != nil {
			return 0, err
		}
		if ok {
			return v, nil
		}
	}
	taken, err := a.store.list(ctx, p.prefix)
	if err != nil {
		return 0, err
	}
	used := make(map[int64]bool, len(taken))
	for _, r := range taken {
		if v, ok := p.parse(strings.TrimPrefix(r.key, p.prefix)); ok {
			used[v] = true
		}
	}
	for i := int64(0); i < p.size; i++ {
		v := member(i)
		if used[v] {
			continue
		}
		ok, err := reserve(p.prefix + p.name(v))
		if err != nil {
			return 0, err
		}
		if ok {
			return v, nil
		}
	}
	return 0, errRangeFull
}

// attempt collects what one create or update attempt reserved, so that a failure can
// give all of it back. Every key it tries is in flight until its request ends (txn).
type attempt struct {
	a     *serviceAllocator
	txn   *serviceTxn
	owner string
	keys  []string
}

// track marks key in flight for the rest of the request.
func (t *attempt) track(key string) {
	if t.txn == nil {
		return
	}
	t.a.track(key)
	t.txn.mu.Lock()
	t.txn.tracked = append(t.txn.tracked, key)
	t.txn.mu.Unlock()
}

func (t *attempt) reserve(ctx context.Context, key string) (bool, error) {
	t.track(key)
	ok, err := t.a.store.reserve(ctx, key, t.owner)
	if ok {
		t.keys = append(t.keys, key)
	}
	return ok, err
}

func (t *attempt) pick(ctx context.Context, p pool) (int64, error) {
	v, err := t.a.pickTracked(ctx, p, t.owner, t.track)
	if err == nil {
		t.keys = append(t.keys, p.prefix+p.name(v))
	}
	return v, err
}

// allocateIP reserves the ClusterIP s asks for, or a free one when it asks for none, and
// writes it to spec.clusterIP and spec.clusterIPs[0].
func (t *attempt) allocateIP(ctx context.Context, s *corev1.Service) error {
	a := t.a
	p := field.NewPath("spec", "clusterIPs")
	if s.Spec.ClusterIP == "" {
		if len(s.Spec.ClusterIPs) > 0 && s.Spec.ClusterIPs[0] != "" {
			return invalidService(s, field.Invalid(p, s.Spec.ClusterIPs, "must be empty when `clusterIP` is not specified"))
		}
		v, err := t.pick(ctx, a.ipPool())
		if errors.Is(err, errRangeFull) {
			return invalidService(s, field.Invalid(p, s.Spec.ClusterIPs, fmt.Sprintf("failed to allocate a serviceIP: range %s is full", a.cidr)))
		}
		if err != nil {
			return apierrors.NewInternalError(fmt.Errorf("failed to allocate a serviceIP: %w", err))
		}
		setClusterIP(s, uint32IP(uint32(v)).String())
		return nil
	}
	ip := net.ParseIP(s.Spec.ClusterIP)
	if !a.ipAllowed(ip) {
		return invalidService(s, field.Invalid(p, s.Spec.ClusterIPs,
			fmt.Sprintf("failed to allocate IP %s: the provided IP (%s) is not in the valid range. The range of valid IPs is %s", s.Spec.ClusterIP, s.Spec.ClusterIP, a.cidr)))
	}
	ok, err := t.reserve(ctx, a.ipKey(ip.String()))
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("failed to allocate IP %s: %w", s.Spec.ClusterIP, err))
	}
	if !ok {
		return invalidService(s, field.Invalid(p, s.Spec.ClusterIPs, fmt.Sprintf("failed to allocate IP %s: %v", s.Spec.ClusterIP, errIPAllocated)))
	}
	setClusterIP(s, ip.String())
	return nil
}

func setClusterIP(s *corev1.Service, ip string) {
	s.Spec.ClusterIP = ip
	if len(s.Spec.ClusterIPs) == 0 {
		s.Spec.ClusterIPs = []string{ip}
	} else {
		s.Spec.ClusterIPs[0] = ip
	}
}

// reservePort reserves the node port a Service asks for at path.
func (t *attempt) reservePort(ctx context.Context, s *corev1.Service, port int32, path *field.Path) error {
	if !t.a.portAllowed(port) {
		return invalidService(s, field.Invalid(path, port, fmt.Sprintf("provided port is not in the valid range. The range of valid ports is %s", t.a.ports)))
	}
	ok, err := t.reserve(ctx, t.a.portKey(port))
	if err != nil {
		return apierrors.NewInternalError(fmt.Errorf("failed to allocate nodePort %d: %w", port, err))
	}
	if !ok {
		return invalidService(s, field.Invalid(path, port, errPortAllocated.Error()))
	}
	return nil
}

// pickPort reserves a free node port for the port at path.
func (t *attempt) pickPort(ctx context.Context, s *corev1.Service, path *field.Path) (int32, error) {
	v, err := t.pick(ctx, t.a.portPool())
	if errors.Is(err, errRangeFull) {
		return 0, invalidService(s, field.Invalid(path, 0, fmt.Sprintf("failed to allocate a nodePort: range %s is full", t.a.ports)))
	}
	if err != nil {
		return 0, apierrors.NewInternalError(fmt.Errorf("failed to allocate a nodePort: %w", err))
	}
	return int32(v), nil
}

// allocateCreate gives a new Service its ClusterIP and node ports, returning the keys
// it reserved; on failure nothing stays reserved. Ports of the same number (one per
// protocol) share a node port.
func (a *serviceAllocator) allocateCreate(ctx context.Context, txn *serviceTxn, s *corev1.Service) (keys []string, err error) {
	t := &attempt{a: a, txn: txn, owner: ownerOf(s)}
	defer func() {
		if err != nil {
			a.releaseKeys(ctx, t.owner, t.keys)
		}
	}()
	normalizeClusterIPs(s, nil)
	if allocatesClusterIP(s) {
		if err := t.allocateIP(ctx, s); err != nil {
			return nil, err
		}
	}
	if needsNodePorts(s) {
		byPort := map[int32]int32{}
		for i := range s.Spec.Ports {
			sp := &s.Spec.Ports[i]
			if sp.NodePort == 0 && !allocatesNodePorts(s) {
				continue
			}
			path := field.NewPath("spec", "ports").Index(i).Child("nodePort")
			if got := byPort[sp.Port]; got != 0 {
				switch {
				case sp.NodePort == 0:
					sp.NodePort = got
				case sp.NodePort != got:
					if err := t.reservePort(ctx, s, sp.NodePort, path); err != nil {
						return nil, err
					}
				}
				continue
			}
			if want := requestedNodePort(sp.Port, s.Spec.Ports[i:]); want != 0 {
				if err := t.reservePort(ctx, s, want, path); err != nil {
					return nil, err
				}
				sp.NodePort = want
			} else {
				port, err := t.pickPort(ctx, s, path)
				if err != nil {
					return nil, err
				}
				sp.NodePort = port
			}
			byPort[sp.Port] = sp.NodePort
		}
	}
	return t.keys, nil
}

// requestedNodePort is the first node port asked for by a port numbered port.
func requestedNodePort(port int32, ports []corev1.ServicePort) int32 {
	for _, p := range ports {
		if p.Port == port && p.NodePort != 0 {
			return p.NodePort
		}
	}
	return 0
}

// allocateUpdate reserves what an update adds: a ClusterIP when the Service leaves
// ExternalName, node ports when it becomes NodePort or LoadBalancer or gains ports. It
// returns the keys it reserved; on failure nothing stays reserved. What the update drops
// is released once the new Service is stored (serviceTxn).
func (a *serviceAllocator) allocateUpdate(ctx context.Context, txn *serviceTxn, s, old *corev1.Service) (keys []string, err error) {
	t := &attempt{a: a, txn: txn, owner: ownerOf(s)}
	defer func() {
		if err != nil {
			a.releaseKeys(ctx, t.owner, t.keys)
		}
	}()
	if old.Spec.Type == corev1.ServiceTypeExternalName && allocatesClusterIP(s) {
		if err := t.allocateIP(ctx, s); err != nil {
			return nil, err
		}
	}
	if needsNodePorts(s) {
		had := map[int32]bool{}
		for _, p := range old.Spec.Ports {
			had[p.NodePort] = p.NodePort != 0
		}
		reserved := map[int32]bool{}
		for i := range s.Spec.Ports {
			sp := &s.Spec.Ports[i]
			if sp.NodePort == 0 && !allocatesNodePorts(s) {
				continue
			}
			path := field.NewPath("spec", "ports").Index(i).Child("nodePort")
			if sp.NodePort != 0 {
				if !had[sp.NodePort] && !reserved[sp.NodePort] {
					if err := t.reservePort(ctx, s, sp.NodePort, path); err != nil {
						return nil, err
					}
					reserved[sp.NodePort] = true
				}
				continue
			}
			port, err := t.pickPort(ctx, s, path)
			if err != nil {
				return nil, err
			}
			sp.NodePort = port
		}
	}
	return t.keys, nil
}

// keysOf are the reservations s holds.
func (a *serviceAllocator) keysOf(s *corev1.Service) []string {
	if s == nil {
		return nil
	}
	var keys []string
	if allocatesClusterIP(s) && s.Spec.ClusterIP != "" {
		keys = append(keys, a.ipKey(s.Spec.ClusterIP))
	}
	seen := map[int32]bool{}
	for _, p := range s.Spec.Ports {
		if p.NodePort != 0 && !seen[p.NodePort] {
			seen[p.NodePort] = true
			keys = append(keys, a.portKey(p.NodePort))
		}
	}
	return keys
}

// releaseKeys gives keys of owner back, even when ctx has ended: a reservation must not
// outlive the request that made it.
func (a *serviceAllocator) releaseKeys(ctx context.Context, owner string, keys []string) {
	if len(keys) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	for _, k := range keys {
		if err := a.store.release(ctx, k, owner); err != nil {
			// The repair loop (servicerepair.go) takes it back later.
			a.log.Warn("could not release a service allocation", "key", k, "owner", owner, "err", err)
		}
	}
}

// without returns keys minus drop.
func without(keys, drop []string) []string {
	gone := map[string]bool{}
	for _, k := range drop {
		gone[k] = true
	}
	var out []string
	for _, k := range keys {
		if !gone[k] {
			gone[k] = true
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// serviceTxn follows what one create or update request reserves across the attempts the
// store makes: an update meeting a concurrent write is tried again with the new stored
// object, and the store calls an attempt's finish with success before it writes. So an
// attempt that finished well is only pending; the request's outcome decides (end): a
// stored Service keeps its reservations and gives back what it no longer holds, a failed
// or dry-run request gives back everything it reserved.
type serviceTxn struct {
	dryRun bool

	mu      sync.Mutex
	owner   string
	pending []string        // reserved by the last attempt that reached the write
	old     *corev1.Service // the Service that attempt replaced; nil for a create
	tracked []string        // every key any attempt tried: in flight until end
}

type serviceTxnKey struct{}

func txnFrom(ctx context.Context) *serviceTxn {
	t, _ := ctx.Value(serviceTxnKey{}).(*serviceTxn)
	return t
}

// discardPending gives back what an earlier attempt of the request reserved: a new
// attempt means that one's write did not happen.
func (a *serviceAllocator) discardPending(ctx context.Context, txn *serviceTxn) {
	txn.mu.Lock()
	keys, owner, old := txn.pending, txn.owner, txn.old
	txn.pending, txn.old = nil, nil
	txn.mu.Unlock()
	a.releaseKeys(ctx, owner, without(keys, a.keysOf(old)))
}

func (a *serviceAllocator) finish(txn *serviceTxn, s, old *corev1.Service, keys []string) genericregistry.FinishFunc {
	return func(ctx context.Context, success bool) {
		if !success {
			a.releaseKeys(ctx, ownerOf(s), without(keys, a.keysOf(old)))
			return
		}
		txn.mu.Lock()
		txn.owner, txn.pending, txn.old = ownerOf(s), keys, old
		txn.mu.Unlock()
	}
}

// end settles a request once the store has answered: out is what it stored. Its keys
// are no longer in flight.
func (a *serviceAllocator) end(ctx context.Context, txn *serviceTxn, out runtime.Object, err error) {
	txn.mu.Lock()
	keys, owner, old, tracked := txn.pending, txn.owner, txn.old, txn.tracked
	txn.tracked = nil
	txn.mu.Unlock()
	defer a.untrack(tracked)
	if err != nil || txn.dryRun {
		a.releaseKeys(ctx, owner, without(keys, a.keysOf(old)))
		return
	}
	stored, ok := out.(*corev1.Service)
	if !ok {
		return
	}
	a.releaseKeys(ctx, owner, without(append(keys, a.keysOf(old)...), a.keysOf(stored)))
}

// beginCreate is the services store's BeginCreate: a create (or a create through an
// update, as server-side apply does) gets its ClusterIP and node ports.
func (a *serviceAllocator) beginCreate(ctx context.Context, obj runtime.Object, _ *metav1.CreateOptions) (genericregistry.FinishFunc, error) {
	txn := txnFrom(ctx)
	if txn == nil {
		return nil, apierrors.NewInternalError(errors.New("service allocation outside a service request"))
	}
	a.discardPending(ctx, txn)
	s := obj.(*corev1.Service)
	keys, err := a.allocateCreate(ctx, txn, s)
	if err != nil {
		return nil, err
	}
	return a.finish(txn, s, nil, keys), nil
}

// beginUpdate is the services store's BeginUpdate: it fills in the allocated values a
// writer left out, drops the ones the new type does not use, and reserves what the
// update adds.
func (a *serviceAllocator) beginUpdate(ctx context.Context, obj, oldObj runtime.Object, _ *metav1.UpdateOptions) (genericregistry.FinishFunc, error) {
	txn := txnFrom(ctx)
	if txn == nil {
		return nil, apierrors.NewInternalError(errors.New("service allocation outside a service request"))
	}
	a.discardPending(ctx, txn)
	s, old := obj.(*corev1.Service), oldObj.(*corev1.Service)
	prepareServiceUpdate(s, old)
	keys, err := a.allocateUpdate(ctx, txn, s, old)
	if err != nil {
		return nil, err
	}
	return a.finish(txn, s, old.DeepCopy(), keys), nil
}

// afterDelete gives a deleted Service's values back (not for a dry run).
func (a *serviceAllocator) afterDelete(obj runtime.Object, options *metav1.DeleteOptions) {
	if options != nil && dryrun.IsDryRun(options.DryRun) {
		return
	}
	s := obj.(*corev1.Service)
	a.releaseKeys(context.Background(), ownerOf(s), a.keysOf(s))
}

// serviceREST is the services endpoint: the store, with each create and update inside
// a serviceTxn.
type serviceREST struct {
	*genericregistry.Store
	alloc *serviceAllocator
}

// decorate installs the allocator on the services store and returns its endpoint.
func (a *serviceAllocator) decorate(store *genericregistry.Store) *serviceREST {
	store.BeginCreate = a.beginCreate
	store.BeginUpdate = a.beginUpdate
	store.AfterDelete = a.afterDelete
	r := &serviceREST{Store: store, alloc: a}
	a.listServices = r.listServices
	return r
}

func (r *serviceREST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	txn := &serviceTxn{dryRun: dryrun.IsDryRun(options.DryRun)}
	out, err := r.Store.Create(context.WithValue(ctx, serviceTxnKey{}, txn), obj, createValidation, options)
	r.alloc.end(ctx, txn, out, err)
	return out, err
}

func (r *serviceREST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	txn := &serviceTxn{dryRun: dryrun.IsDryRun(options.DryRun)}
	out, created, err := r.Store.Update(context.WithValue(ctx, serviceTxnKey{}, txn), name, objInfo, createValidation, updateValidation, forceAllowCreate, options)
	r.alloc.end(ctx, txn, out, err)
	return out, created, err
}

// listServices reads every Service from the store (a consistent read).
func (r *serviceREST) listServices(ctx context.Context) ([]corev1.Service, error) {
	obj, err := r.Store.List(ctx, nil)
	if err != nil {
		return nil, err
	}
	list, ok := obj.(*corev1.ServiceList)
	if !ok {
		return nil, fmt.Errorf("list services: got %T", obj)
	}
	return list.Items, nil
}

func ownerOf(s *corev1.Service) string { return s.Namespace + "/" + s.Name }

// allocatesClusterIP: s has a ClusterIP from the range (not ExternalName, not headless).
func allocatesClusterIP(s *corev1.Service) bool {
	return hasClusterIP(s) && s.Spec.ClusterIP != corev1.ClusterIPNone
}

// hasClusterIP: s's type uses spec.clusterIP (where even "None" is a value).
func hasClusterIP(s *corev1.Service) bool { return s.Spec.Type != corev1.ServiceTypeExternalName }

func needsNodePorts(s *corev1.Service) bool {
	return s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer
}

// allocatesNodePorts: ports of s asking for no node port get one (a LoadBalancer may
// opt out with allocateLoadBalancerNodePorts: false).
func allocatesNodePorts(s *corev1.Service) bool {
	switch s.Spec.Type {
	case corev1.ServiceTypeNodePort:
		return true
	case corev1.ServiceTypeLoadBalancer:
		return s.Spec.AllocateLoadBalancerNodePorts == nil || *s.Spec.AllocateLoadBalancerNodePorts
	}
	return false
}

func invalidService(s *corev1.Service, errs ...*field.Error) error {
	return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), s.Name, errs)
}

func addIP(base net.IP, n int64) net.IP {
	return uint32IP(binary.BigEndian.Uint32(base.To4()) + uint32(n))
}

func uint32IP(v uint32) net.IP {
	ip := make(net.IP, 4)
	binary.BigEndian.PutUint32(ip, v)
	return ip
}

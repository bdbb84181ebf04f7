package apiserver

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// The "kubernetes" Service of the default namespace is how pods find the API server: its
// ClusterIP is the first host of the service range, its port 443 named "https". When the
// API server has an address on the cluster network (Config.AdvertiseAddress), the Service
// targets that address through an Endpoints and an EndpointSlice of the same name, which
// the API server writes itself (the Service has no selector, so no controller does):
//
//	Endpoints     kubernetes: subsets [{addresses [{ip: <address>}], ports [{name: https, port: <port>, protocol: TCP}]}],
//	              labelled endpointslice.kubernetes.io/skip-mirror=true
//	EndpointSlice kubernetes: addressType IPv4, labelled kubernetes.io/service-name=kubernetes,
//	              endpoints [{addresses [<address>], conditions {ready: true}}],
//	              ports [{name: https, port: <port>, protocol: TCP}]
//
// kubernetesService creates the three at start and puts them back whenever they change
// or go, as kube-apiserver's endpoint reconciler does.
const kubernetesServiceName = "kubernetes"

// kubernetesServiceResync is how often the "kubernetes" Service and its endpoints are
// checked besides when they change.
const kubernetesServiceResync = 30 * time.Second

// skipMirrorLabel keeps an Endpoints object from being mirrored into EndpointSlices.
const skipMirrorLabel = "endpointslice.kubernetes.io/skip-mirror"

// kubernetesService keeps the "kubernetes" Service, and with an address its Endpoints
// and EndpointSlice, as they should be.
type kubernetesService struct {
	client     kubernetes.Interface
	clusterIP  string
	targetPort int32  // the Service's targetPort: the advertised port, else the loopback port
	address    string // the advertised address; "" for no endpoints
	log        *slog.Logger
}

// desiredService is the "kubernetes" Service to create.
func (k *kubernetesService) desiredService() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: kubernetesServiceName, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceTypeClusterIP,
			ClusterIP: k.clusterIP,
			Ports:     k.servicePorts(),
		},
	}
}

func (k *kubernetesService) servicePorts() []corev1.ServicePort {
	return []corev1.ServicePort{{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP, TargetPort: intstr.FromInt32(k.targetPort)}}
}

// serviceUpdate returns cur changed back to the desired type and ports, or nil when it is
// as it should be.
func (k *kubernetesService) serviceUpdate(cur *corev1.Service) *corev1.Service {
	if cur.Spec.Type == corev1.ServiceTypeClusterIP && apiequality.Semantic.DeepEqual(cur.Spec.Ports, k.servicePorts()) {
		return nil
	}
	s := cur.DeepCopy()
	s.Spec.Type = corev1.ServiceTypeClusterIP
	s.Spec.Ports = k.servicePorts()
	return s
}

func (k *kubernetesService) desiredEndpoints() *corev1.Endpoints {
	return &corev1.Endpoints{
		ObjectMeta: metav1.ObjectMeta{Name: kubernetesServiceName, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{skipMirrorLabel: "true"}},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: k.address}},
			Ports:     []corev1.EndpointPort{{Name: "https", Port: k.targetPort, Protocol: corev1.ProtocolTCP}},
		}},
	}
}

// endpointsUpdate returns cur with the desired subsets and label, or nil when it has them.
func (k *kubernetesService) endpointsUpdate(cur *corev1.Endpoints) *corev1.Endpoints {
	want := k.desiredEndpoints()
	if cur.Labels[skipMirrorLabel] == "true" && apiequality.Semantic.DeepEqual(cur.Subsets, want.Subsets) {
		return nil
	}
	ep := cur.DeepCopy()
	if ep.Labels == nil {
		ep.Labels = map[string]string{}
	}
	ep.Labels[skipMirrorLabel] = "true"
	ep.Subsets = want.Subsets
	return ep
}

func (k *kubernetesService) desiredSlice() *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: kubernetesServiceName, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{discoveryv1.LabelServiceName: kubernetesServiceName}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{k.address},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(k.targetPort), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
}

// sliceUpdate returns cur with the desired content and label, or nil when it has them.
// The address type cannot change: a slice of another type is deleted and made anew.
func (k *kubernetesService) sliceUpdate(cur *discoveryv1.EndpointSlice) *discoveryv1.EndpointSlice {
	want := k.desiredSlice()
	if cur.Labels[discoveryv1.LabelServiceName] == kubernetesServiceName &&
		apiequality.Semantic.DeepEqual(cur.Endpoints, want.Endpoints) && apiequality.Semantic.DeepEqual(cur.Ports, want.Ports) {
		return nil
	}
	s := cur.DeepCopy()
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels[discoveryv1.LabelServiceName] = kubernetesServiceName
	s.Endpoints, s.Ports = want.Endpoints, want.Ports
	return s
}

// ensureService creates the Service when it is missing and, with an address, puts its
// type and ports back when they changed. What exists is left alone otherwise.
func (k *kubernetesService) ensureService(ctx context.Context) error {
	services := k.client.CoreV1().Services(metav1.NamespaceDefault)
	cur, err := services.Get(ctx, kubernetesServiceName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = services.Create(ctx, k.desiredService(), metav1.CreateOptions{})
		if err == nil {
			k.log.Info("created the kubernetes Service", "clusterIP", k.clusterIP, "targetPort", k.targetPort)
		}
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	}
	if err != nil || k.address == "" {
		return err
	}
	if s := k.serviceUpdate(cur); s != nil {
		if _, err := services.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("repair the kubernetes Service: %w", err)
		}
		k.log.Info("repaired the kubernetes Service's ports", "targetPort", k.targetPort)
	}
	return nil
}

// reconcile makes the Service, Endpoints and EndpointSlice what they should be.
func (k *kubernetesService) reconcile(ctx context.Context) error {
	if err := k.ensureService(ctx); err != nil {
		return err
	}
	if k.address == "" {
		return nil
	}
	endpoints := k.client.CoreV1().Endpoints(metav1.NamespaceDefault)
	ep, err := endpoints.Get(ctx, kubernetesServiceName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := endpoints.Create(ctx, k.desiredEndpoints(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create the kubernetes Endpoints: %w", err)
		}
		k.log.Info("created the kubernetes Endpoints", "address", k.address, "port", k.targetPort)
	case err != nil:
		return err
	default:
		if up := k.endpointsUpdate(ep); up != nil {
			if _, err := endpoints.Update(ctx, up, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("repair the kubernetes Endpoints: %w", err)
			}
			k.log.Info("repaired the kubernetes Endpoints", "address", k.address, "port", k.targetPort)
		}
	}
	slices := k.client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault)
	sl, err := slices.Get(ctx, kubernetesServiceName, metav1.GetOptions{})
	if err == nil && sl.AddressType != discoveryv1.AddressTypeIPv4 {
		if err := slices.Delete(ctx, sl.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &sl.UID}}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("replace the kubernetes EndpointSlice: %w", err)
		}
		err = apierrors.NewNotFound(discoveryv1.Resource("endpointslices"), sl.Name)
	}
	switch {
	case apierrors.IsNotFound(err):
		if _, err := slices.Create(ctx, k.desiredSlice(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create the kubernetes EndpointSlice: %w", err)
		}
		k.log.Info("created the kubernetes EndpointSlice", "address", k.address, "port", k.targetPort)
	case err != nil:
		return err
	default:
		if up := k.sliceUpdate(sl); up != nil {
			if _, err := slices.Update(ctx, up, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("repair the kubernetes EndpointSlice: %w", err)
			}
			k.log.Info("repaired the kubernetes EndpointSlice", "address", k.address, "port", k.targetPort)
		}
	}
	return nil
}

// run reconciles at once, whenever one of the three objects changes or goes, and every
// resync, until ctx ends.
func (k *kubernetesService) run(ctx context.Context, resync time.Duration) {
	wake := make(chan struct{}, 1)
	poke := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(k.client, 0,
		informers.WithNamespace(metav1.NamespaceDefault),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", kubernetesServiceName).String()
		}))
	handler := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(any, any) { poke() },
		DeleteFunc: func(any) { poke() },
	}
	for _, inf := range []cache.SharedIndexInformer{
		factory.Core().V1().Services().Informer(),
		factory.Core().V1().Endpoints().Informer(),
		factory.Discovery().V1().EndpointSlices().Informer(),
	} {
		if _, err := inf.AddEventHandler(handler); err != nil {
			k.log.Error("kubernetes Service reconciler: cannot watch", "err", err)
		}
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	t := time.NewTicker(resync)
	defer t.Stop()
	backoff := 100 * time.Millisecond
	for {
		if err := k.reconcile(ctx); err != nil && ctx.Err() == nil {
			k.log.Warn("could not reconcile the kubernetes Service; retrying", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, 10*time.Second)
			continue
		}
		backoff = 100 * time.Millisecond
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-t.C:
		}
	}
}

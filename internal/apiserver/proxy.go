package apiserver

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/proxy"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	apiproxy "k8s.io/apiserver/pkg/util/proxy"
)

// The proxy subresources carry an HTTP request of any method, with the path after
// /proxy (or none) and the query, to a backend on the cluster's network, and its answer
// back, as kube-apiserver's do:
//
//	pods/{[scheme:]name[:port]}/proxy[/path]      scheme://<pod IP>[:port]/path
//	services/{[scheme:]name[:port]}/proxy[/path]  scheme://<a ready endpoint>:<its port>/path
//	nodes/{[scheme:]name[:port]}/proxy[/path]     https://<kubelet>/path, or scheme://<node IP>:port/path
//
// scheme is http (default) or https (the backend's certificate is not verified). A
// Service is not reached at its ClusterIP but, as kube-apiserver does, at one of its
// EndpointSlices' ready endpoints, picked at random among those that are pods of the
// Service's namespace with that IP, on the port of the Service port the name gives (by
// number or by name; none: the unnamed port). A node's kubelet (no port, or the
// kubelet's) is reached as pods' logs are, with the API server's kubelet client
// certificate (kubelet.go); another port at the node's InternalIP on the cluster network. An
// empty path answers GET and HEAD with a redirect to the same URL with a trailing slash.
// Links in text/html answers are rewritten to go through the proxy again; a backend that
// cannot be reached is 503 ServiceUnavailable "error trying to reach service: …".
// Authorization is that of the subresource (pods/proxy, services/proxy, nodes/proxy) with the method's verb: get
// (GET, HEAD), create (POST), update (PUT), patch (PATCH), delete (DELETE).

// proxyMethods are the methods the proxy subresources carry.
var proxyMethods = []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodHead, http.MethodOptions}

// splitProxyName splits a proxy subresource's name, "name", "name:port" or
// "scheme:name:port"; kind names the resource in the error.
func splitProxyName(kind, id string) (scheme, name, port string, err error) {
	scheme, name, port, ok := utilnet.SplitSchemeNamePort(id)
	if !ok {
		return "", "", "", apierrors.NewBadRequest(fmt.Sprintf("invalid %s request %q", kind, id))
	}
	return scheme, name, port, nil
}

// podProxyLocation is where pods/proxy sends a request for pod at scheme and port: the
// pod's IP and the port, a number or the name of one of its containers' ports, or when
// empty the first port its containers declare (none: the scheme's default port).
func podProxyLocation(pod *corev1.Pod, scheme, port string) (*url.URL, error) {
	switch {
	case port == "":
		port = firstContainerPort(pod)
	case !isPortNumber(port):
		n, ok := namedContainerPort(pod, port)
		if !ok {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("pod %s has no container port named %q", pod.Name, port))
		}
		port = strconv.Itoa(int(n))
	}
	ip := net.ParseIP(podIP(pod))
	if ip == nil || !ip.IsGlobalUnicast() {
		return nil, apierrors.NewBadRequest("address not allowed")
	}
	host := ip.String()
	switch {
	case port != "":
		host = net.JoinHostPort(host, port)
	case ip.To4() == nil:
		host = "[" + host + "]"
	}
	return &url.URL{Scheme: scheme, Host: host}, nil
}

// podIP is the pod's primary IP.
func podIP(pod *corev1.Pod) string {
	if len(pod.Status.PodIPs) > 0 {
		return pod.Status.PodIPs[0].IP
	}
	return pod.Status.PodIP
}

// firstContainerPort is the first port the pod's containers declare, "" when none does.
func firstContainerPort(pod *corev1.Pod) string {
	for _, c := range pod.Spec.Containers {
		if len(c.Ports) > 0 {
			return strconv.Itoa(int(c.Ports[0].ContainerPort))
		}
	}
	return ""
}

// namedContainerPort is the number of the pod's container port called name.
func namedContainerPort(pod *corev1.Pod, name string) (int32, bool) {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}

// isPortNumber says whether port is a port number (1-65535).
func isPortNumber(port string) bool {
	n, err := strconv.Atoi(port)
	return err == nil && n > 0 && n <= 65535
}

// newProxyHandler proxies to loc over transport, rewriting links in HTML answers to
// the proxy's own path, errors answered through responder.
func newProxyHandler(loc *url.URL, transport http.RoundTripper, responder rest.Responder) http.Handler {
	return proxy.NewUpgradeAwareHandler(loc, transport, true, false, proxy.NewErrorResponder(responder))
}

// podProxyREST serves pods/proxy.
type podProxyREST struct {
	pods rest.Getter
	// transport reaches the cluster network.
	transport http.RoundTripper
}

var _ rest.Connecter = &podProxyREST{}

func (r *podProxyREST) New() runtime.Object      { return &corev1.PodProxyOptions{} }
func (r *podProxyREST) Destroy()                 {}
func (r *podProxyREST) NamespaceScoped() bool    { return true }
func (r *podProxyREST) ConnectMethods() []string { return proxyMethods }
func (r *podProxyREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.PodProxyOptions{}, true, "path"
}

func (r *podProxyREST) Connect(ctx context.Context, id string, options runtime.Object, responder rest.Responder) (http.Handler, error) {
	opts, ok := options.(*corev1.PodProxyOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %T", options))
	}
	scheme, name, port, err := splitProxyName("pod", id)
	if err != nil {
		return nil, err
	}
	obj, err := r.pods.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, fmt.Errorf("not a Pod: %T", obj)
	}
	loc, err := podProxyLocation(pod, scheme, port)
	if err != nil {
		return nil, err
	}
	loc.Path = utilnet.JoinPreservingTrailingSlash(loc.Path, opts.Path)
	return newProxyHandler(loc, r.transport, responder), nil
}

// servicePortName is the name of svc's port that port gives: a port number is looked up
// among the Service's ports (503 when it has none such, as kube-apiserver answers);
// anything else is a port name already ("" the unnamed port).
func servicePortName(svc *corev1.Service, port string) (string, error) {
	n, err := strconv.Atoi(port)
	if err != nil {
		return port, nil
	}
	for _, p := range svc.Spec.Ports {
		if int(p.Port) == n {
			return p.Name, nil
		}
	}
	return "", apierrors.NewServiceUnavailable(fmt.Sprintf("no service port %d found for service %q", n, svc.Name))
}

// endpointIsPod says whether ep is a pod of namespace whose IPs include the endpoint's
// address, as a Service's endpoint must be for the API server to proxy to it: an
// EndpointSlice anyone may write must not send the API server elsewhere.
func endpointIsPod(ep *discoveryv1.Endpoint, namespace string, getPod func(name string) (*corev1.Pod, error)) bool {
	ref := ep.TargetRef
	if ref == nil || ref.Namespace != namespace || (ref.Kind != "" && ref.Kind != "Pod") || len(ep.Addresses) == 0 {
		return false
	}
	pod, err := getPod(ref.Name)
	if err != nil || pod == nil {
		return false
	}
	if pod.Status.PodIP == ep.Addresses[0] {
		return true
	}
	for _, ip := range pod.Status.PodIPs {
		if ip.IP == ep.Addresses[0] {
			return true
		}
	}
	return false
}

// serviceProxyREST serves services/proxy.
type serviceProxyREST struct {
	services, pods rest.Getter
	// slices finds a Service's EndpointSlices.
	slices    apiproxy.EndpointSliceGetter
	transport http.RoundTripper
}

var _ rest.Connecter = &serviceProxyREST{}

func (r *serviceProxyREST) New() runtime.Object      { return &corev1.ServiceProxyOptions{} }
func (r *serviceProxyREST) Destroy()                 {}
func (r *serviceProxyREST) NamespaceScoped() bool    { return true }
func (r *serviceProxyREST) ConnectMethods() []string { return proxyMethods }
func (r *serviceProxyREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.ServiceProxyOptions{}, true, "path"
}

func (r *serviceProxyREST) Connect(ctx context.Context, id string, options runtime.Object, responder rest.Responder) (http.Handler, error) {
	opts, ok := options.(*corev1.ServiceProxyOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %T", options))
	}
	scheme, name, port, err := splitProxyName("service", id)
	if err != nil {
		return nil, err
	}
	namespace := genericapirequest.NamespaceValue(ctx)
	if namespace == "" {
		return nil, apierrors.NewBadRequest("missing required namespace")
	}
	// Only a port number needs the Service (to find the port's name), as upstream.
	portName := port
	if isPortNumber(port) {
		obj, err := r.services.Get(ctx, name, &metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		svc, ok := obj.(*corev1.Service)
		if !ok {
			return nil, fmt.Errorf("not a Service: %T", obj)
		}
		if portName, err = servicePortName(svc, port); err != nil {
			return nil, err
		}
	}
	slices, err := r.slices.GetEndpointSlices(namespace, name)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	getPod := func(pod string) (*corev1.Pod, error) {
		obj, err := r.pods.Get(ctx, pod, &metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		p, _ := obj.(*corev1.Pod)
		return p, nil
	}
	hostPort, err := apiproxy.RandomEndpoint(name, slices, portName, corev1.IPv4Protocol, func(ep *discoveryv1.Endpoint) bool {
		return endpointIsPod(ep, namespace, getPod)
	})
	if err != nil {
		return nil, err
	}
	loc := &url.URL{Scheme: scheme, Host: hostPort}
	loc.Path = utilnet.JoinPreservingTrailingSlash(loc.Path, opts.Path)
	return newProxyHandler(loc, r.transport, responder), nil
}

// nodeProxyLocation is where nodes/proxy sends a request for node at scheme and port:
// with an empty port or the kubelet's, the kubelet's server (kubeletURL over the address
// types, reached with the kubelet client: kubelet is true); with another port number,
// scheme://<the node's InternalIP, else ExternalIP>:port on the cluster network.
func nodeProxyLocation(node *corev1.Node, kubeletTypes []corev1.NodeAddressType, scheme, port string) (loc *url.URL, kubelet bool, err error) {
	if port == "" || port == strconv.Itoa(kubeletPort(node)) {
		loc, err := kubeletURL(node, kubeletTypes)
		return loc, true, err
	}
	if !isPortNumber(port) {
		return nil, false, apierrors.NewBadRequest(fmt.Sprintf("invalid port %q for node %s", port, node.Name))
	}
	ip := net.ParseIP(nodeAddress(node, []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP}))
	if ip == nil || !ip.IsGlobalUnicast() {
		return nil, false, apierrors.NewBadRequest("address not allowed")
	}
	return &url.URL{Scheme: scheme, Host: net.JoinHostPort(ip.String(), port)}, false, nil
}

// nodeProxyREST serves nodes/proxy.
type nodeProxyREST struct {
	kubelet *kubeletClient
	// transport reaches the cluster network, for ports other than the kubelet's.
	transport http.RoundTripper
}

var _ rest.Connecter = &nodeProxyREST{}

func (r *nodeProxyREST) New() runtime.Object      { return &corev1.NodeProxyOptions{} }
func (r *nodeProxyREST) Destroy()                 {}
func (r *nodeProxyREST) NamespaceScoped() bool    { return false }
func (r *nodeProxyREST) ConnectMethods() []string { return proxyMethods }
func (r *nodeProxyREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &corev1.NodeProxyOptions{}, true, "path"
}

func (r *nodeProxyREST) Connect(ctx context.Context, id string, options runtime.Object, responder rest.Responder) (http.Handler, error) {
	opts, ok := options.(*corev1.NodeProxyOptions)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("invalid options object: %T", options))
	}
	scheme, name, port, err := splitProxyName("node", id)
	if err != nil {
		return nil, err
	}
	node, err := r.kubelet.node(ctx, name)
	if err != nil {
		return nil, err
	}
	loc, toKubelet, err := nodeProxyLocation(node, r.kubelet.types, scheme, port)
	if err != nil {
		return nil, err
	}
	transport := r.transport
	if toKubelet {
		transport = r.kubelet.transport
	}
	loc.Path = utilnet.JoinPreservingTrailingSlash(loc.Path, opts.Path)
	return newProxyHandler(loc, transport, responder), nil
}

// addProxyOptionsConversions lets the server read the proxy subresources' options (the
// path after /proxy, which the server puts in the query as "path").
func addProxyOptionsConversions(scheme *runtime.Scheme) error {
	for _, f := range []struct {
		out  interface{}
		path func(out interface{}) *string
	}{
		{(*corev1.PodProxyOptions)(nil), func(o interface{}) *string { return &o.(*corev1.PodProxyOptions).Path }},
		{(*corev1.ServiceProxyOptions)(nil), func(o interface{}) *string { return &o.(*corev1.ServiceProxyOptions).Path }},
		{(*corev1.NodeProxyOptions)(nil), func(o interface{}) *string { return &o.(*corev1.NodeProxyOptions).Path }},
	} {
		err := scheme.AddConversionFunc((*url.Values)(nil), f.out, func(a, b interface{}, _ conversion.Scope) error {
			d := queryDecoder{q: *a.(*url.Values)}
			d.str("path", f.path(b))
			return d.err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

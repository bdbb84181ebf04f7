package cluster

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kubelab/kubelab/internal/apiserver/auth"
)

// Every component reaches the API server as itself: a client certificate of the cluster
// CA (apiserver.PKI.ClientCert, under DATA-DIR/pki/clients) whose CN is the component's
// user and whose O are its groups, so that RBAC and the Node authorizer give it its own
// rights and no more. Only kubelab up's own client (the add-ons, the wait for the nodes)
// is the admin, in system:masters.
//
//   - the scheduler: system:kube-scheduler (system:kube-scheduler, system:volume-scheduler);
//   - the cloud-controller-manager: the service account kube-system/cloud-controller-manager
//     (system:cloud-controller-manager);
//   - the controller-manager: system:kube-controller-manager for its informers, and each
//     controller the service account kube-system/<controller> (system:controller:<controller>);
//   - the kubelet of node n: system:node:<n> in system:nodes (the Node authorizer);
//   - the CSI sidecars: the service account kube-system/ebs-csi-controller-sa
//     (ebs-external-provisioner-role, -attacher-, -resizer-, -snapshotter-role);
//   - kube-proxy: system:kube-proxy (system:node-proxier);
//   - the cluster DNS: the service account kube-system/coredns (system:coredns);
//   - the overlay and NetworkPolicy agents: the service accounts kube-system/kubelab-overlay
//     and kube-system/kubelab-netpol (kubelab:overlay, kubelab:netpol);
//   - the pod identity webhook: the service account kube-system/pod-identity-webhook
//     (kubelab:pod-identity-webhook).
//
// The EBS CSI node plugin and its registrar do not call the API server; the service
// account kube-system/ebs-csi-node-sa and its role exist as the driver deploys them.

// identity is who a component is to the API server.
type identity struct {
	User   string
	Groups []string
}

func (id identity) String() string {
	if len(id.Groups) == 0 {
		return id.User
	}
	return id.User + " (" + strings.Join(id.Groups, ", ") + ")"
}

var (
	schedulerIdentity         = identity{User: user.KubeScheduler}
	controllerManagerIdentity = identity{User: user.KubeControllerManager}
	kubeProxyIdentity         = identity{User: user.KubeProxy}
	csiControllerIdentity     = serviceAccountIdentity(metav1.NamespaceSystem, csiControllerSA)
	clusterDNSIdentity        = serviceAccountIdentity(metav1.NamespaceSystem, clusterDNSSA)
	overlayIdentity           = serviceAccountIdentity(metav1.NamespaceSystem, overlaySA)
	netpolIdentity            = serviceAccountIdentity(metav1.NamespaceSystem, netpolSA)
	ccmIdentity               = serviceAccountIdentity(metav1.NamespaceSystem, ccmSA)
	podIdentityIdentity       = serviceAccountIdentity(metav1.NamespaceSystem, podIdentitySA)
)

// nodeIdentity is the identity of node's kubelet.
func nodeIdentity(node string) identity {
	return identity{User: auth.NodeUserPrefix + node, Groups: []string{user.NodesGroup}}
}

// serviceAccountIdentity is the identity of the service account namespace/name:
// system:serviceaccount:<namespace>:<name> in system:serviceaccounts and
// system:serviceaccounts:<namespace>.
func serviceAccountIdentity(namespace, name string) identity {
	return identity{User: serviceaccount.MakeUsername(namespace, name), Groups: serviceaccount.MakeGroupNames(namespace)}
}

// credentials are the PEM files of one identity, read once.
type credentials struct {
	ca, cert, key []byte
}

// identities issues and remembers the client certificates of the components.
type identities struct {
	mu    sync.Mutex
	creds map[string]credentials // by user
	used  map[string]identity    // component → identity
}

// restConfig is the client config of component name (its user agent) as id: protobuf, as
// the upstream components send.
func (c *Cluster) restConfig(name string, id identity) (*rest.Config, error) {
	creds, err := c.ids.credentials(c, name, id)
	if err != nil {
		return nil, err
	}
	cfg := &rest.Config{Host: c.URL(), UserAgent: name, QPS: 200, Burst: 400,
		TLSClientConfig: rest.TLSClientConfig{CAData: creds.ca, CertData: creds.cert, KeyData: creds.key}}
	cfg.ContentType = runtime.ContentTypeProtobuf
	// The components reach the API server of their own process: gzip on their watches
	// and lists would cost CPU on both ends and a decompressor's window for each watch.
	cfg.DisableCompression = true
	return cfg, nil
}

// clientset is a client of component name as id.
func (c *Cluster) clientset(name string, id identity) (kubernetes.Interface, error) {
	cfg, err := c.restConfig(name, id)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// credentials issues (or reuses) id's certificate; one identity at a time, so that two
// components of one identity starting together never read a half-written pair.
func (ids *identities) credentials(c *Cluster, component string, id identity) (credentials, error) {
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if ids.used == nil {
		ids.creds, ids.used = map[string]credentials{}, map[string]identity{}
	}
	ids.used[component] = id
	if cr, ok := ids.creds[id.User]; ok {
		return cr, nil
	}
	pki := c.cp.APIServer.PKI()
	certFile, keyFile, err := pki.ClientCert(id.User, id.Groups...)
	if err != nil {
		return credentials{}, fmt.Errorf("%s: credentials of %s: %w", component, id.User, err)
	}
	var cr credentials
	for _, f := range []struct {
		path string
		dst  *[]byte
	}{{pki.CACert(), &cr.ca}, {certFile, &cr.cert}, {keyFile, &cr.key}} {
		if *f.dst, err = os.ReadFile(f.path); err != nil {
			return credentials{}, fmt.Errorf("%s: credentials of %s: %w", component, id.User, err)
		}
	}
	ids.creds[id.User] = cr
	return cr, nil
}

// clientIdentities lists the identity each component has used so far, by component
// ("scheduler", "kubelet/<node>", "kube-controller-manager/<service account>"…), sorted.
func (c *Cluster) clientIdentities() []componentIdentity {
	c.ids.mu.Lock()
	defer c.ids.mu.Unlock()
	out := make([]componentIdentity, 0, len(c.ids.used))
	for name, id := range c.ids.used {
		out = append(out, componentIdentity{Component: name, Identity: id})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Component < out[j].Component })
	return out
}

// componentIdentity is one component and who it is to the API server.
type componentIdentity struct {
	Component string
	Identity  identity
}

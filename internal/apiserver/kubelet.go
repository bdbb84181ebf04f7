package apiserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// defaultKubeletPort is the kubelet's port when its Node does not say.
const defaultKubeletPort = 10250

// kubeletClient reaches the kubelets, for the pods' log, exec, attach and portforward
// subresources: over HTTPS with the API server's kubelet client certificate, trusting
// kubelets' serving certificates the cluster CA signed, through the cluster's network
// (Config.ClusterDial: real nodes' kubelets listen on their addresses in the VPC).
type kubeletClient struct {
	transport *http.Transport
	// types are the node address types tried in order.
	types []corev1.NodeAddressType
	// nodes is the Node store; set once the Node row is built.
	nodes rest.Getter
}

// defaultKubeletAddressTypes are the node addresses tried when Config names none.
var defaultKubeletAddressTypes = []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeHostName}

func newKubeletClient(p PKI, types []corev1.NodeAddressType, dial dialFunc) (*kubeletClient, error) {
	if len(types) == 0 {
		types = defaultKubeletAddressTypes
	}
	cert, err := tls.LoadX509KeyPair(p.KubeletClientCert(), p.KubeletClientKey())
	if err != nil {
		return nil, fmt.Errorf("kubelet client certificate: %w", err)
	}
	caPEM, err := os.ReadFile(p.CACert())
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("cluster CA file holds no PEM certificate")
	}
	return &kubeletClient{types: types, transport: &http.Transport{
		TLSClientConfig:     &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12},
		DialContext:         dial,
		TLSHandshakeTimeout: 10 * time.Second,
		MaxIdleConnsPerHost: 25,
		IdleConnTimeout:     90 * time.Second,
	}}, nil
}

// location is the base URL of a node's kubelet (kubeletURL).
func (k *kubeletClient) location(ctx context.Context, nodeName string) (*url.URL, error) {
	node, err := k.node(ctx, nodeName)
	if err != nil {
		return nil, err
	}
	return kubeletURL(node, k.types)
}

// node gets the Node.
func (k *kubeletClient) node(ctx context.Context, nodeName string) (*corev1.Node, error) {
	if k.nodes == nil {
		return nil, apierrors.NewServiceUnavailable("nodes are not served")
	}
	obj, err := k.nodes.Get(genericapirequest.WithNamespace(ctx, ""), nodeName, &metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	node, ok := obj.(*corev1.Node)
	if !ok {
		return nil, fmt.Errorf("not a Node: %T", obj)
	}
	return node, nil
}

// kubeletURL is the base URL of node's kubelet: https://<address>:<port>, the address
// being the Node's first of the address types (InternalIP, else Hostname by default),
// and the port status.daemonEndpoints.kubeletEndpoint.port (10250 when unset).
func kubeletURL(node *corev1.Node, types []corev1.NodeAddressType) (*url.URL, error) {
	host := nodeAddress(node, types)
	if host == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("node %s reports no address of the types %v", node.Name, types))
	}
	return &url.URL{Scheme: "https", Host: net.JoinHostPort(host, strconv.Itoa(kubeletPort(node)))}, nil
}

// kubeletPort is the port node's kubelet serves on.
func kubeletPort(node *corev1.Node) int {
	if port := int(node.Status.DaemonEndpoints.KubeletEndpoint.Port); port > 0 {
		return port
	}
	return defaultKubeletPort
}

// nodeAddress is the address the kubelet is reached at: the node's first address of the
// first of types it has.
func nodeAddress(node *corev1.Node, types []corev1.NodeAddressType) string {
	for _, typ := range types {
		for _, a := range node.Status.Addresses {
			if a.Type == typ && a.Address != "" {
				return a.Address
			}
		}
	}
	return ""
}

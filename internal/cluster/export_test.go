package cluster

import (
	"k8s.io/client-go/rest"

	"github.com/kubelab/kubelab/internal/cloud"
	"github.com/kubelab/kubelab/internal/containerd"
	"github.com/kubelab/kubelab/internal/image"
	"github.com/kubelab/kubelab/internal/vpc"
)

// What the package's external tests (package cluster_test, which start their clusters
// with clustertest) read of the cluster's inside.

// Identity is who a component is to the API server.
type Identity = identity

// ComponentIdentity is one component and who it is to the API server.
type ComponentIdentity = componentIdentity

// The identities of the components.
var (
	SchedulerIdentity         = schedulerIdentity
	ControllerManagerIdentity = controllerManagerIdentity
	CSIControllerIdentity     = csiControllerIdentity
	ServiceAccountIdentity    = serviceAccountIdentity
	KubeProxyIdentity         = kubeProxyIdentity
	ClusterDNSIdentity        = clusterDNSIdentity
	OverlayIdentity           = overlayIdentity
	NetpolIdentity            = netpolIdentity
	NodeIdentity              = nodeIdentity
	PodIdentityIdentity       = podIdentityIdentity
)

// The names of the EBS CSI add-on's service accounts and of its controller's app.
const (
	CSIControllerSA  = csiControllerSA
	CSINodeSA        = csiNodeSA
	AppCSIController = appCSIController
)

// ClientIdentities lists the identity each component has used so far.
func (c *Cluster) ClientIdentities() []ComponentIdentity { return c.clientIdentities() }

// RestConfig is the client config of component name as id.
func (c *Cluster) RestConfig(name string, id Identity) (*rest.Config, error) {
	return c.restConfig(name, id)
}

// KubeletRoot is node n's kubelet root dir.
func (c *Cluster) KubeletRoot(n Node) string { return c.kubeletRoot(n) }

// NodeContainerd is node n's containerd (not started).
func (c *Cluster) NodeContainerd(n Node) (*containerd.Containerd, error) { return c.nodeContainerd(n) }

// Cloud is the cluster's cloud.
func (c *Cluster) Cloud() *cloud.Cloud { return c.cloud }

// VPC is the real nodes' network (nil in hollow mode).
func (c *Cluster) VPC() *vpc.VPC { return c.vpc }

// CSISocket is where the driver's controller plugin serves.
func (c *Cluster) CSISocket() string { return c.csiSocket() }

// Registry is the real nodes' image registry (nil in hollow mode).
func (c *Cluster) Registry() *image.Registry { return c.registry }

// APIServerReady is closed once the API server serves.
func (c *Cluster) APIServerReady() <-chan struct{} { return c.cp.APIServer.Ready() }

// Package cloudnode is the cloud-controller-manager's node controller
// ("cloud-node-controller"): it initializes the Nodes kubelets register with
// `--cloud-provider=external` from what the cloud knows of their instances.
//
// A kubelet of an external cloud registers its Node with the taint
// node.cloudprovider.kubernetes.io/uninitialized=true:NoSchedule and without cloud facts.
// For such a node the controller asks the cloud for the instance (by providerID, or by
// the node's name, the instance's private DNS name), then:
//   - writes status.addresses: the instance's InternalIP, InternalDNS and Hostname; when the
//     kubelet named its address (annotation alpha.kubernetes.io/provided-node-ip), that
//     address must be one of the instance's and is the only InternalIP kept;
//   - sets spec.providerID (aws:///<zone>/<instance-id>) when empty, and the labels
//     node.kubernetes.io/instance-type, topology.kubernetes.io/zone and /region with their
//     beta names;
//   - removes the uninitialized taint, so that pods schedule there.
//
// An instance the cloud does not know leaves the node tainted and the key retried with
// backoff. Every Config.NodeStatusUpdateFrequency the addresses of initialized nodes are
// brought up to date. The controller reaches the cloud only through
// cloudprovider.Instances and the API server only through client-go.
package cloudnode

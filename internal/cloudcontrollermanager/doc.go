// Package cloudcontrollermanager is `kubelab cloud-controller-manager`: the controllers
// that talk to the cloud, as the AWS cloud-controller-manager runs them:
//   - the node controller (cloud-node-controller: a node registered by a kubelet of an
//     external cloud gets its provider id, instance type, zone, region and addresses,
//     then loses the node.cloudprovider.kubernetes.io/uninitialized taint);
//   - the node lifecycle controller (cloud-node-lifecycle-controller: the Node of a
//     terminated instance is deleted, that of a stopped one tainted
//     node.cloudprovider.kubernetes.io/shutdown);
//   - the service controller (service-controller: a Service of type LoadBalancer gets a
//     network load balancer of the cloud and its status);
//   - and, as the AWS Load Balancer Controller, the Ingress controller of class alb (a
//     group of Ingresses gets an application load balancer).
//
// They reach the cloud only through internal/cloudprovider (the EC2 and ELBv2 APIs) and
// the API server only through client-go, as the service account
// kube-system/cloud-controller-manager (the ClusterRole system:cloud-controller-manager);
// writes carry the field manager cloud-controller-manager.
package cloudcontrollermanager

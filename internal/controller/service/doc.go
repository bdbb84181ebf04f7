// Package service is the cloud-controller-manager's service controller
// (service-controller): a Service of type LoadBalancer (and no spec.loadBalancerClass)
// gets a network load balancer of the cloud, as the AWS cloud provider and the AWS Load
// Balancer Controller make one — named after the Service's UID, tagged with the Service
// and the cluster, one listener and target group per Service port, the Ready nodes at the
// port's node port (target type instance) or the Service's ready endpoints (target type
// ip) as targets, kept in sync as nodes and endpoints change — and its status names the
// load balancer's DNS name and address. The finalizer
// service.kubernetes.io/load-balancer-cleanup, added before the load balancer is made,
// holds the Service until the load balancer is deleted (on deletion of the Service or a
// change of its type).
//
// The decisions (name, target groups, health checks, targets, status) are pure functions
// in decide.go; the controller only reads the informers, asks the cloud through
// internal/cloudprovider and writes the Service.
package service

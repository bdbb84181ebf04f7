// Package aws answers the cloud-controller-manager's questions about instances over the
// EC2 API (DescribeInstances), as the AWS cloud provider does: a node's instance by its
// provider id, or by its private DNS name before it has one; and it makes load balancers
// match what the service and Ingress controllers want over the ELBv2 API, finding each by
// name.
package aws

// Package cloudprovider is the boundary between the cloud-controller-manager's
// controllers and a cloud: what a controller may ask about the instance behind a Node
// (Instances) and, later, about load balancers. The aws package answers over the EC2 API;
// fakecloud answers from memory for tests.
//
// A Node names its instance by spec.providerID, aws:///<zone>/<instance-id>; before the
// node controller has set it, by its name, the instance's private DNS name.
package cloudprovider

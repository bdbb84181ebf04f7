// Package endpointutil holds the facts about a Service's endpoints that the controllers
// writing them read the same way: which pods can back a Service, which port a Service
// port's targetPort names on a pod, which hostname a pod publishes, and, for the
// controllers writing EndpointSlices, a tracker of their own writes that tells when an
// informer cache has not caught up with them yet.
//
// It is a leaf: it imports no kubelab component, so the EndpointSlice controller, the
// Endpoints controller and the EndpointSlice mirroring controller may all use it.
package endpointutil

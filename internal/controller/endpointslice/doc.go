// Package endpointslice is the EndpointSlice controller of the controller-manager
// ("endpointslice-controller.k8s.io"): a pod whose readiness probe fails is listed as not
// ready, so Service traffic leaves it. The core/v1 Endpoints of the same Services are the
// endpoint controller's (internal/controller/endpoint), as upstream.
//
// Contract, for each Service with a selector:
//   - EndpointSlices (generateName "<service>-", owned by the Service, labelled
//     kubernetes.io/service-name=<service> and
//     endpointslice.kubernetes.io/managed-by=endpointslice-controller.k8s.io, plus the
//     Service's labels) list its selected pods that have an IP and are not finished, with
//     conditions ready (Ready and not terminating, or publishNotReadyAddresses), serving
//     (Ready) and terminating (being deleted), nodeName, zone, targetRef and hostname.
//     Ports come from the Service's ports with named targetPorts resolved against each
//     pod's container ports, so pods resolving differently go to different slices; at
//     most Config.MaxEndpointsPerSlice (100) endpoints per slice; existing slices are
//     updated in place and only when their content changes.
//
// Decisions (desired.go) are pure and tested with tables. It talks to the API server only
// through client-go (informers on Services, Pods, Nodes and EndpointSlices).
package endpointslice

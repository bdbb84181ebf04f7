// Package endpointslicemirroring is the EndpointSlice mirroring controller of the
// controller-manager ("endpointslicemirroring-controller.k8s.io"): the Endpoints that
// users write by hand for a Service without a selector are mirrored into
// EndpointSlices, so that everything that reads slices (the service proxy, cluster DNS)
// serves such Services too. It runs as the service account
// kube-system/endpointslicemirroring-controller, whose role
// system:controller:endpointslicemirroring-controller allows exactly these writes.
//
// Contract, for each Endpoints whose Service exists and has no selector, unless the
// Endpoints is labelled endpointslice.kubernetes.io/skip-mirror=true or holds a
// leader-election record:
//   - Its addresses become EndpointSlices, one per address family and port set (subsets
//     with the same ports are merged; an address listed twice counts once, ready over
//     not ready): addresses ready, notReadyAddresses not ready, with their nodeName,
//     hostname and targetRef. At most Config.MaxEndpointsPerSubset (1000) addresses of a
//     subset are mirrored; addresses that are not IPs are skipped. Either is reported by
//     a Warning Event on the Endpoints (TooManyAddressesToMirror, InvalidIPAddress).
//   - The slices (generateName "<name>-") carry the Endpoints' labels plus
//     kubernetes.io/service-name=<name> and endpointslice.kubernetes.io/managed-by=
//     endpointslicemirroring-controller.k8s.io, its annotations but
//     endpoints.kubernetes.io/last-change-trigger-time and
//     kubectl.kubernetes.io/last-applied-configuration, and a controller reference to
//     the Endpoints. They are updated in place, only when they differ.
//   - When the Endpoints goes, its Service goes or gains a selector, or the Endpoints
//     stops being mirrored, its mirrored slices are deleted.
//
// Decisions (desired.go) are pure and tested with tables. It talks to the API server only
// through client-go (informers on Services, Endpoints and EndpointSlices).
package endpointslicemirroring

// Package endpoint is the Endpoints controller of the controller-manager
// ("endpoint-controller"): for each Service with a selector it keeps the core/v1
// Endpoints object of the same name, which clients that predate EndpointSlices (and
// `kubectl get endpoints`) read. It runs as the service account
// kube-system/endpoint-controller, whose role system:controller:endpoint-controller
// allows exactly these writes.
//
// Contract, for each Service with a selector that is not of type ExternalName:
//   - The Endpoints lists the selected pods that have an IP and have not finished:
//     ready pods (or every pod, with publishNotReadyAddresses) in addresses, the others
//     in notReadyAddresses, terminating pods left out (unless publishNotReadyAddresses),
//     each with its nodeName, targetRef and, when its subdomain is the Service, its
//     hostname. Ports are the Service's ports with named targetPorts resolved against
//     each pod's container ports; pods resolving alike share a subset. A headless
//     Service without ports lists its pods without ports.
//   - Its labels are the Service's, plus endpoints.kubernetes.io/managed-by=
//     endpoint-controller and, for a headless Service, service.kubernetes.io/headless.
//   - At most 1000 addresses are kept, ready ones first and each subset cut in
//     proportion to its size; a truncated object is annotated
//     endpoints.kubernetes.io/over-capacity=truncated.
//   - endpoints.kubernetes.io/last-change-trigger-time is, when the object is written,
//     the earliest change that triggered the write: the Service's creation on its first
//     sync, else the earliest Ready transition of a pod (or the Service's creation)
//     that is new since the previous sync; without one the annotation is removed.
//   - The object is written only when its addresses, labels or capacity annotation
//     differ; it is deleted with its Service when it carries the managed-by label
//     (Endpoints others wrote for a Service-less name are left alone).
//   - A write refused because the namespace is going is not retried (worker.Gone).
//
// Decisions (desired.go, triggertime.go) are pure or self-contained and tested alone.
// It talks to the API server only through client-go (informers on Services, Pods and
// Endpoints).
package endpoint

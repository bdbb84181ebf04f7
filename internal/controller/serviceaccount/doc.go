// Package serviceaccount is the service-account controller of the controller-manager:
// every active namespace gets a ServiceAccount named "default" (Config.ServiceAccounts),
// and gets it back if it is deleted, as upstream's serviceaccount-controller does. Pods
// are defaulted to spec.serviceAccountName "default" by the API server, so this is the
// account they run as.
//
// Contract: informers on Namespaces and ServiceAccounts; handlers enqueue namespace
// names; sync(ctx, namespace) creates the missing accounts, and does nothing for a
// namespace that is gone or terminating. It talks to the API server only through
// client-go.
package serviceaccount

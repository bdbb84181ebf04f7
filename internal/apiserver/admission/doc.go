// Package admission is the API server's admission chain: the step of the request path
// after authentication and authorization and before etcd, where a request's object is
// first mutated (defaults, injected volumes) and then validated (policies, quotas). A
// request any plugin refuses is answered with the plugin's error and nothing is stored.
//
// New builds the chain in kube-apiserver's order; each plugin has a file named after
// upstream's plugin name. Plugins read the cluster through the server's loopback client
// and shared informers (Deps), never through its storage.
//
// The webhooks and ValidatingAdmissionPolicy come after the built-in plugins, and
// ResourceQuota last, so that a request is charged only once nothing refused it.
// Webhooks are called from the API server's process: a clientConfig.url as given; a
// clientConfig.service at the Service's ClusterIP and port (an ExternalName Service at
// its name, the default/kubernetes Service at the server itself), with the TLS name
// <service>.<namespace>.svc.
package admission

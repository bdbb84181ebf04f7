// Package rootcacertpublisher is the root-ca-cert-publisher controller of the
// controller-manager: every namespace gets a ConfigMap kube-root-ca.crt whose ca.crt is
// the cluster's CA bundle (Config.RootCA) and whose kubernetes.io/description
// annotation says what it is for. Pods read it through the ca.crt of their service
// account token volume (the ServiceAccount admission plugin projects it next to the
// token), to trust the API server at kubernetes.default.svc.
//
// Contract: informers on Namespaces and on the ConfigMaps named kube-root-ca.crt;
// namespace adds and updates and the ConfigMap's updates and deletes enqueue the
// namespace; sync(ctx, namespace) creates the ConfigMap when it is missing and puts
// data and the annotation back when they differ (other keys of data are dropped;
// other annotations, labels and binaryData are kept). A namespace that is gone or
// terminating is left alone. The decision is desired, a pure function.
package rootcacertpublisher

// Package resourceversion orders resourceVersions the way controllers need to when they
// read their own writes back from an informer (every write returns the object's new
// resourceVersion, and watches deliver it later). The API server promises
// only that they are opaque; kubelab's, like upstream's, are etcd revisions, which within
// one cluster compare as numbers.
package resourceversion

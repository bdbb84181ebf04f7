// Package storageclass knows which StorageClass is the default (the cluster's gp2, marked
// `storageclass.kubernetes.io/is-default-class: "true"`): the one a claim that names no
// class gets, from the API server's DefaultStorageClass admission when it is created
// and from the PV controller for claims created before a default existed.
package storageclass

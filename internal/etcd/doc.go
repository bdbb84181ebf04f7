// Package etcd runs the state store of the flow: every object that `kubectl apply` sends
// to the API server ends up as a key /registry/<resource>/<ns>/<name> in the etcd this
// package starts, embedded in the data dir.
//
// Contract: New validates the Config; Run starts etcd, closes Ready() once it serves
// clients on the loopback address, and blocks until ctx ends, then stops etcd cleanly.
// Only the API server talks to it, over etcd's gRPC API. Use an external etcd cluster
// instead by giving the API server its endpoints (--etcd-servers); then this package is
// not started at all.
//
// Security: etcd serves clients and its peer port over mutual TLS only (https URLs,
// client-cert-auth on both): a connection without a client certificate signed by the CA
// of Config.ClientTLS fails in the TLS handshake, so no other local process reads the
// keys (Secrets among them). The caller makes the certificates before Run; kubelab keeps
// them in the cluster's PKI as kubeadm lays it out (apiserver.PKI.EnsureEtcd:
// pki/etcd/ca.crt, server.crt, peer.crt, healthcheck-client.crt, and
// pki/apiserver-etcd-client.crt for the API server). Run creates the data dir with mode
// 0700, and sets 0700 on one it finds open to others. etcd takes requests up to
// Config.MaxRequestBytes (1.5 MiB by default); a larger write fails with "etcdserver:
// request is too large".
//
// Disk space (space.go): Run does not start etcd when the data dir's filesystem lacks
// room for the write-ahead log etcd allocates plus Config.MinFreeBytes; it returns an
// error naming the dir and wrapping syscall.ENOSPC instead. While etcd runs, less than
// MinFreeBytes free raises etcd's NOSPACE alarm: writes fail with "etcdserver: mvcc:
// database space exceeded" (a 500 Status from the API server), reads and deletes work,
// and an error is logged; once a quarter more than MinFreeBytes is free again the alarm
// is disarmed, unless etcd's database is over its quota. Errors etcd cannot go on from
// (failure.go), such as a write failing on a full filesystem anyway, stop etcd and
// Run returns them; they never end or crash the process from inside etcd.
package etcd

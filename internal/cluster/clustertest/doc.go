// Package clustertest is the one way kubelab's tests start a whole cluster, hollow or
// real: the cluster package's own tests, the command line's, and any test that needs
// every component running together. It is imported only from _test.go files; it imports
// the cluster package, so the cluster package's tests that use it are in the external
// package cluster_test.
//
// Start (start.go) runs a cluster on a fresh data dir until the test ends and waits
// until it is ready; Options pick hollow or real nodes, how many, in which zones, the
// add-on in process, and any other setting of cluster.Config. The Cluster it returns
// carries an admin client, the kubeconfig, an EC2 client of the cluster's cloud and the
// helpers a test of the whole flow uses (cluster.go): a namespace per test, events about
// an object, the cloud's volumes and attachments, a pod waited for until it runs, the
// test's kubectl on the cluster. Seed and SeedObject (seed.go) read the manifests of
// examples/seed. AssertNothingLeft (left.go) checks that a stopped real cluster left
// nothing on the machine.
//
// What is not a whole cluster has its own harness: the storage flow's sidecars and
// controllers against an in-process driver (internal/csi/sidecar/flowtest) and the CSI
// driver's own tests (internal/csi/driver); both start their parts with testutil.Start.
package clustertest

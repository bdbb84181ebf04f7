// Package calllog is the log line of one CSI call: "<Method>: called" when a call that
// acts on a volume starts, "<Method>: done" with its duration when it returns, and
// "<Method>: failed" with the error and the duration when it fails, each with attributes
// naming the volume (and node) it acts on.
//
// The EBS CSI driver writes these lines for the calls it serves, and the hollow kubelet
// writes them for the node calls it plays, so that a volume's story reads the same in
// either's log. `kubelab trace` reads them back with Parse to place the CSI steps of the
// storage flow (CreateVolume, ControllerPublishVolume, NodeStageVolume,
// NodePublishVolume) on the pod's timeline and time them. LogCalled, LogDone and
// LogFailed are the one way to write the line; Parse is the one way to read it.
//
// It is a leaf: it imports no kubelab component.
package calllog

// Package fakecri is an in-memory CRI v1 runtime and image service for tests of code that
// speaks CRI (kubelab's kubelet runtime): sandboxes and containers move through their
// states as in containerd (created, running, exited; ready, not ready), images are
// present or pulled, and tests make containers exit, sandboxes die and pulls fail. Nothing
// runs and nothing touches the machine.
//
// CRI calls the fake does not implement panic (the embedded client interfaces are nil).
package fakecri

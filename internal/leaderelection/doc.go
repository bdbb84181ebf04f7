// Package leaderelection lets a component work only while it holds its Lease (in
// kube-system unless told otherwise), as kube-scheduler, kube-controller-manager and the
// CSI controller sidecars do (their Leases are named after them): two copies of a
// component are then safe, and `kubectl get lease -n kube-system` shows who leads. It is
// the controllers step of the flow's guard against two schedulers binding the same pod,
// two controller-managers racing on an object or two attachers attaching one volume.
package leaderelection

// Package history holds what the workload controllers keeping a revision history (the
// DaemonSet and StatefulSet controllers) share about ControllerRevisions: the data a
// revision holds (a patch that puts a template back), the hash that names a template,
// the order of revisions, which old ones go, and creating one (a name taken by another
// template is a hash collision). Upstream's pkg/controller/history plays this part.
//
// It is a leaf: it imports no kubelab component.
package history

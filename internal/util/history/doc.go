// Package history holds the facts about ControllerRevisions that the workload
// controllers keeping a revision history (the DaemonSet controller) share: the data a
// revision holds (a patch that puts a template back), the hash that names a template,
// and the order of revisions. Upstream's pkg/controller/history plays this part.
//
// It is a leaf: it imports no kubelab component.
package history

// Package fakecri is an in-memory CRI v1 runtime and image service for tests of code that
// speaks CRI (kubelab's kubelet runtime): sandboxes and containers move through their
// states as in containerd (created, running, exited; ready, not ready), images are
// present or pulled, and tests make containers exit, sandboxes die and pulls fail. Nothing
// runs and nothing touches the machine.
//
// ListContainerStats and ListPodSandboxStats report, for running containers, the usage
// the pod declares in the hollow annotations of internal/hollow (copied onto the sandbox's config, or set on the
// container's): kubelab.dev/hollow-cpu-usage (a CPU quantity such as "250m") and
// kubelab.dev/hollow-memory-usage (a memory quantity such as "64Mi"), each per container;
// zero when absent. CPU is reported both as a rate (usageNanoCores) and as the cumulative
// usage that rate makes over the container's running time.
//
// A container exits on its own when the pod asks for it in the hollow annotations (copied onto the
// sandbox's config, or set on the container's): kubelab.dev/hollow-run-seconds (seconds
// after its start, a decimal number) and kubelab.dev/hollow-exit-code (default 0). The
// exit shows on the next call that reads or changes the container.
//
// Sandboxes run with the default runtime handler or runc, as on a kubelab node's
// containerd; another handler is refused with containerd's error ("no runtime for "x" is
// configured").
//
// UpdateContainerResources replaces a created or running container's Linux resources,
// which ContainerStatus reports (as containerd does) unless HideResources says not to;
// FailUpdates makes it fail.
//
// CRI calls the fake does not implement panic (the embedded client interfaces are nil).
package fakecri

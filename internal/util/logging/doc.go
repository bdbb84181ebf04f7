// Package logging builds the loggers kubelab's commands hand to their components: one
// stream, one format. By default a line is klog's text format, as every upstream
// Kubernetes component writes it (so `kubectl logs` of kubelab's pods reads as on EKS):
//
//	I1128 09:45:22.123456   12345 controller.go:272] "attached" volume="vol-1" node="i-1"
//
// (severity I/W/E, date, time, process id, file:line, the quoted message, key=value
// pairs); with the json format a line is an slog JSON object. Setup also sends klog —
// the logger of the Kubernetes libraries (client-go's leader election, informers) — to
// the same handler, so that their lines share the stream's format and level.
//
// It is a leaf package: it imports no kubelab component.
package logging

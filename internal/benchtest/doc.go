// Package benchtest holds what kubelab's benchmarks share: latency percentiles reported
// as benchmark metrics, so that every section of docs/benchmarks.md reads p50 and p99 the
// same way. It is imported only from _test.go files and hack's benchmark commands.
package benchtest

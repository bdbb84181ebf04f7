// Package cloudtest holds helpers shared by the tests of the cloud and of the CSI components
// built on it. It is imported only from _test.go files.
//
// Contract: Logger returns a *slog.Logger whose records go to t.Log at the given level and
// above, so that a test's output carries the logs of what it ran, and Writer sends a
// process's output there too. VolumesOfPV lists the cloud volumes the CSI driver made for
// a PV, through the EC2 API, and EC2Client and ELBClient are clients of that API and of the
// Elastic Load Balancing API on the same endpoint, from the files the cloud writes.
package cloudtest

// Package livenessprobe is the CSI livenessprobe sidecar: an HTTP endpoint, /healthz,
// that answers 200 while the driver answers the CSI Identity service's Probe call and 500
// (with the driver's error) when it does not, so that a kubelet's liveness probe of the
// driver's container can restart a driver that no longer serves.
//
// Contract: Config{Addr, Listen, ProbeTimeout, Logger}, New(cfg, conn), Run(ctx) serves until ctx
// ends; Addr() is where it listens once Ready() is closed.
package livenessprobe

// Package registrar is kubelab's node-driver-registrar: the node sidecar that
// registers the CSI driver's node plugin with the kubelet through the kubelet
// plugin registration API (k8s.io/kubelet pluginregistration v1).
//
// It is how the kubelet learns of the node plugin's socket: it asks the driver
// its name over the driver's socket (GetPluginInfo, after Probe), then
// serves the Registration service on <plugins_registry>/<driver>-reg.sock. The
// kubelet's plugin watcher finds that socket, calls GetInfo (type CSIPlugin, the
// driver's name, the endpoint of the driver's socket as the kubelet reaches it,
// e.g. <kubelet root>/plugins/ebs.csi.aws.com/csi.sock, and the supported versions)
// and reports the outcome with NotifyRegistrationStatus; Healthy reports it. The
// kubelet then calls NodeGetInfo itself and writes the node's CSINode entry.
//
// Contract: New(cfg, conn) checks the paths; Run(ctx) serves until ctx ends and
// removes its socket; Ready is closed once it serves.
package registrar

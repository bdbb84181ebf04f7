// Package trace is `kubelab trace` and `kubelab why`: it makes one pod's flow visible, from
// `kubectl apply` of its claim and pod to the pod running with its volume mounted.
//
// Collect reads everything that shows the flow: the pod, its claims, their volumes,
// classes and VolumeAttachments, the node, the Events about all of them and the pod's
// owners, the volumes as the cloud's EC2 API describes them (create and attach times), and
// the EBS CSI add-on pods' log lines about the volumes (each CSI call with its duration).
// Watch follows the same objects while the flow happens and records the moment it sees
// each state change. Build turns that snapshot into a Trace, with no I/O: the sequence of
// arrows (who asked whom for what, when, how long it took) in causal order, the claim's,
// volume's and attachment's state transitions with their durations, and Diagnose's
// answer for a pod that does not reach Running: the stage where it is stuck (admission,
// scheduling, provisioning, binding, attach, mount, network, image, container creation,
// probes, crashes, OOM, termination), the reason, the evidence and the command that
// shows it. WriteText draws the trace as a terminal sequence diagram, WriteSVG and
// WriteHTML as a picture a browser opens.
package trace

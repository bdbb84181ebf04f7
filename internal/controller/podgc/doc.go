// Package podgc is the controller-manager's pod garbage collector ("pod-garbage-collector"):
// it removes the pods no kubelet will ever finish.
//
// Every Config.Period (20 s, as upstream's gcCheckPeriod) it:
//   - deletes, with grace period 0, the pods bound to a node that does not exist (an
//     orphan): the node must still be missing Config.Quarantine (40 s) after the controller
//     first saw it missing, and a read of the node from the API server must confirm it;
//     before the delete, a pod not yet terminal is marked Failed with the condition
//     DisruptionTarget (reason DeletionByPodGC, "PodGC: node no longer exists");
//   - deletes, with grace period 0, terminating pods that were never scheduled;
//   - deletes the oldest terminated pods (Succeeded or Failed) beyond
//     Config.TerminatedPodThreshold (12,500, as upstream's --terminated-pod-gc-threshold).
//
// Decisions are pure (decide.go); the controller reaches the API server only through
// client-go.
package podgc

// Package ipamdapi is the wire between a node's IP address manager (package ipamd) and
// kubelab-cni in VPC mode: JSON over HTTP on a unix socket in the node's dir, as aws-node's
// CNI plugin asks its ipamd over a local socket for each pod's address.
//
// Requests (POST, JSON body) and answers:
//
//	/v1/add     AddRequest  → Assignment (the attachment's address, the same on a retry)
//	/v1/del     Attachment  → Release (Found false when it held none)
//	/v1/lookup  Attachment  → Assignment, or 404 with an Error
//	/v1/gc      GCRequest   → GCReply (what was released)
//
// A failure is an HTTP error status with an Error body: Code "NoAvailableIP" when every
// address of the node's ENIs is in use and no more can be attached.
package ipamdapi

// Package certificates holds the certificate controllers of the controller-manager, which
// act on certificates.k8s.io/v1 CertificateSigningRequests as upstream's do:
//
//   - csrsigning-controller (signing.go) signs, with the cluster CA, the requests that are
//     Approved, not Denied, not Failed and not yet issued, for the signers
//     kubernetes.io/kube-apiserver-client, kubernetes.io/kube-apiserver-client-kubelet,
//     kubernetes.io/kubelet-serving and kubernetes.io/legacy-unknown. Each signer's rules
//     (validateKubeletServing, validateKubeletClient, validateAPIServerClient) are checked
//     first; a request they refuse gets a Failed condition with reason
//     SignerValidationFailure and the rule's message. The certificate carries the
//     request's subject, SANs and key, the usages of spec.usages, no other extension, and
//     a validity of SigningConfig.Duration (a year by default) or spec.expirationSeconds
//     when shorter, at least 10 minutes, starting 5 minutes before signing and never past
//     the CA's end. It is written to status.certificate through /status.
//   - csrapproving-controller (approving.go) approves, through /approval, the
//     kube-apiserver-client-kubelet requests (organization system:nodes, common name
//     system:node:<name>, no SANs, client auth usages) whose requestor a
//     SubjectAccessReview allows to create certificatesigningrequests/selfnodeclient
//     (a node renewing its own certificate) or certificatesigningrequests/nodeclient
//     (a bootstrapper): condition Approved, reason AutoApproved. A recognized request not
//     allowed is retried with back-off, logged at Info.
//   - csrcleaner-controller (cleaner.go) looks at every request each hour and deletes
//     those issued and approved, denied or failed more than an hour ago (by the
//     condition's lastUpdateTime), pending for more than a day, or whose certificate
//     has expired.
//
// Contract: all three watch requests through the shared informer factory they are given;
// the signing and approving controllers queue a request's name on every add and update
// and hand a copy of it to their decision when it has no certificate yet (controller.go).
// Decisions are pure functions: the signers' rules, signingDuration, signingPolicy.apply,
// recognized and cleanReason. Time comes from an injected clock.
package certificates

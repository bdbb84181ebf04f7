// Package podidentitywebhook is the EKS pod identity webhook (IAM Roles for Service
// Accounts): a mutating admission webhook that gives the pods of a ServiceAccount
// annotated eks.amazonaws.com/role-arn what the AWS SDKs' web identity credentials need.
//
// In the request path "kubectl apply → API server → authentication → authorization →
// admission → etcd" it is a step of admission: the API server's MutatingAdmissionWebhook
// sends it, as an AdmissionReview over HTTPS, every pod being created (the
// MutatingWebhookConfiguration pod-identity-webhook, Configuration, failurePolicy
// Ignore). It answers with a JSON Patch (Mutate) that adds the projected volume
// aws-iam-token (a service account token for the audience sts.amazonaws.com, 86400
// seconds unless annotated otherwise, file token), mounted read-only at
// /var/run/secrets/eks.amazonaws.com/serviceaccount in every container and init
// container, and the environment AWS_STS_REGIONAL_ENDPOINTS=regional, AWS_DEFAULT_REGION,
// AWS_REGION, AWS_ROLE_ARN and AWS_WEB_IDENTITY_TOKEN_FILE, except what a container sets
// itself. The kubelet then keeps the token fresh; an SDK trades it with STS's
// AssumeRoleWithWebIdentity for the role's temporary credentials.
//
// The annotations are the EKS webhook's: on the ServiceAccount role-arn, audience,
// sts-regional-endpoints ("true"/"false") and token-expiration (seconds, at least
// 3600); on the pod token-expiration (over the ServiceAccount's) and skip-containers
// (names of containers left alone, comma-separated), all under eks.amazonaws.com/.
// Pods of a ServiceAccount without a role, or one that cannot be read, are allowed as
// they are.
//
// The webhook reads ServiceAccounts through an informer (and the API for one the cache
// has not heard of yet); it needs get, list and watch on serviceaccounts.
package podidentitywebhook

// Package job is the Job controller of the controller-manager ("job-controller"): it runs
// the pods of every batch/v1 Job until the Job has succeeded or failed, as upstream's
// kube-controller-manager does.
//
// Contract:
//   - Pods come from spec.template with a controller ownerReference to the Job
//     (blockOwnerDeletion) and the finalizer batch.kubernetes.io/job-tracking; they are
//     named generateName "<job>-" ("<job>-<index>-" for Indexed Jobs). The API server sets
//     spec.selector and the template's controller-uid and job-name labels.
//   - Orphans matching the selector are adopted (ownerReference and finalizer added);
//     owned pods that stop matching are released. A finished pod is counted once: its UID
//     goes to status.uncountedTerminatedPods, its finalizer is removed, then it moves to
//     status.succeeded or status.failed (for Indexed Jobs, status.completedIndexes and
//     status.failedIndexes, interval strings such as "0-2,5"). Pods of finished or deleted
//     Jobs and orphans lose the finalizer.
//   - completions and parallelism (nil completions: a work queue, done once a pod
//     succeeded and none runs), completionMode NonIndexed and Indexed (the index in the
//     batch.kubernetes.io/job-completion-index annotation and label, hostname
//     "<job>-<index>", env JOB_COMPLETION_INDEX), backoffLimit with the pod re-creation
//     back-off (10s doubled per failure in a row, at most 10 min), backoffLimitPerIndex
//     and maxFailedIndexes, activeDeadlineSeconds, suspend (pods deleted, condition
//     Suspended, startTime reset on resume), podFailurePolicy (FailJob, FailIndex, Ignore,
//     Count on exit codes and pod conditions), successPolicy, podReplacementPolicy.
//   - A Job that fails gets FailureTarget, its active pods are deleted, and once none
//     terminates any more, Failed (reasons BackoffLimitExceeded, DeadlineExceeded,
//     PodFailurePolicy, FailedIndexes, MaxFailedIndexesExceeded); a Job that succeeds gets
//     SuccessCriteriaMet then Complete and completionTime. Status (startTime, active,
//     ready, terminating, succeeded, failed, conditions) is written with update on
//     jobs/status; a conflict is retried on a fresh copy.
//   - Events SuccessfulCreate, FailedCreate, SuccessfulDelete, FailedDelete, Suspended,
//     Resumed, Completed, TooManySucceededPods and the failure reasons, as upstream.
//   - Jobs whose spec.managedBy names another controller are left alone.
//
// Decisions (decide.go, indexes.go, policies.go, backoff.go) are pure functions; sync.go
// applies them. It talks to the API server only through client-go (shared informers on
// Jobs and Pods).
package job

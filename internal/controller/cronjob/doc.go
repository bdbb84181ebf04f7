// Package cronjob is the CronJob controller of the controller-manager
// ("cronjob-controller"): it creates, for every batch/v1 CronJob, a Job at each time of
// its schedule, and keeps the CronJob's status and Job history.
//
// Contract:
//   - spec.schedule is a standard five-field cron schedule or a macro (@hourly, @daily,
//     @every 5m…), read in spec.timeZone when set (an unknown zone: Warning
//     UnknownTimeZone, no Job), else in the controller's local zone (Config.Location).
//   - The Job of a start time t is named "<cronjob>-<t in minutes since the epoch>", is
//     spec.jobTemplate with its labels and annotations plus the annotation
//     batch.kubernetes.io/cronjob-scheduled-timestamp (t in RFC 3339, in spec.timeZone or
//     UTC), and has an ownerReference to the CronJob with controller=true and
//     blockOwnerDeletion=true. The name makes a start time's Job unique: a Job of that
//     name already there (AlreadyExists) and controlled by the CronJob is put back in
//     status.active; one that is not is left to whoever made it.
//   - Only the latest missed start time is started; more than 100 missed gives a Warning
//     TooManyMissedTimes. A start time older than startingDeadlineSeconds is not started
//     (Warning MissSchedule). Nothing is started while spec.suspend is true.
//   - concurrencyPolicy Allow runs Jobs side by side; Forbid skips a start time while a
//     Job is active (JobAlreadyActive); Replace deletes the active Jobs (background
//     propagation) before it creates the new one.
//   - Finished Jobs beyond successfulJobsHistoryLimit / failedJobsHistoryLimit are
//     deleted, those that started first first; a nil limit keeps them all.
//   - status.active (object references to running Jobs), lastScheduleTime and
//     lastSuccessfulTime are written through cronjobs/status.
//   - A CronJob is handed back to the queue at its next start time plus 100ms (on the
//     injected clock), so a Job starts within moments of its time.
//   - Events as upstream: SuccessfulCreate, SuccessfulDelete, SawCompletedJob, MissingJob,
//     UnexpectedJob, JobAlreadyActive, TooManyMissedTimes, MissSchedule, FailedCreate,
//     FailedDelete, FailedGet, UnparseableSchedule, InvalidSchedule, UnknownTimeZone,
//     UnsupportedSchedule, UnParseableCronJobSchedule.
//
// The decisions (schedule.go: start times and the requeue delay; plan.go: which Job to
// create, which Jobs to delete, the status from the Jobs) are pure functions; sync.go
// applies them. It talks to the API server only through client-go (shared informers on
// CronJobs and Jobs, job get/create/delete, cronjobs/status).
package cronjob

package cronjob

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/reference"
)

// sync reconciles the CronJob of key with the Jobs it controls: it deletes finished
// Jobs beyond the history limits, brings status.active, lastScheduleTime and
// lastSuccessfulTime up to date, starts the Job that is due and hands the CronJob back
// to the queue at its next start time.
func (c *Controller) sync(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	cached, err := c.cronLister.CronJobs(ns).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	all, err := c.jobLister.Jobs(ns).List(labels.Everything())
	if err != nil {
		return err
	}
	var jobs []*batchv1.Job
	for _, j := range all {
		if ownedBy(j, name) {
			jobs = append(jobs, j)
		}
	}
	cj := cached.DeepCopy()
	if unknown := runningUnknown(cj, jobs); len(unknown) > 0 {
		// The cache may not have seen the status write that listed them yet: ask.
		fresh, err := c.client.BatchV1().CronJobs(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get cronjob %s: %w", key, err)
		}
		for _, j := range unknown {
			if inActiveList(fresh, j.UID) {
				cj = fresh
				break
			}
		}
	}

	changed := c.deleteOldJobs(ctx, cj, jobs)
	requeue, synced, syncErr := c.syncCronJob(ctx, cj, jobs)
	if changed || synced {
		if _, err := c.client.BatchV1().CronJobs(ns).UpdateStatus(ctx, cj, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update status of cronjob %s: %w", key, err)
		}
	}
	if requeue != nil {
		c.queue.AddAfter(key, *requeue)
		return nil
	}
	return syncErr
}

// deleteOldJobs deletes the finished Jobs of cj beyond its history limits; it reports
// whether cj's status changed.
func (c *Controller) deleteOldJobs(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) bool {
	changed := false
	for _, j := range jobsToDelete(cj, jobs) {
		if c.deleteJobOf(ctx, cj, j) == nil {
			changed = true
		}
	}
	return changed
}

// deleteJobOf deletes job, its pods in the background, and takes it off cj's active
// list.
func (c *Controller) deleteJobOf(ctx context.Context, cj *batchv1.CronJob, job *batchv1.Job) error {
	background := metav1.DeletePropagationBackground
	if err := c.client.BatchV1().Jobs(job.Namespace).Delete(ctx, job.Name, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedDelete", "Deleted job: %v", err)
		c.log.ErrorContext(ctx, "delete job", "cronjob", cj.Namespace+"/"+cj.Name, "job", job.Name, "err", err)
		return err
	}
	deleteFromActiveList(cj, job.UID)
	c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulDelete", "Deleted job %v", job.Name)
	return nil
}

func (c *Controller) record(cj *batchv1.CronJob, evs []event) {
	for _, e := range evs {
		c.recorder.Event(cj, e.Type, e.Reason, e.Message)
	}
}

// syncCronJob updates the status of cj (a copy) from its Jobs and starts the Job that
// is due. It returns when to sync cj again (nil: on its next change) and whether its
// status changed.
func (c *Controller) syncCronJob(ctx context.Context, cj *batchv1.CronJob, jobs []*batchv1.Job) (*time.Duration, bool, error) {
	now := c.cfg.Clock.Now()
	changed, evs := observeJobs(cj, jobs)
	c.record(cj, evs)
	for _, ref := range missingActive(cj, jobs) {
		// The cache may be behind: only the API server says a Job is gone.
		_, err := c.client.BatchV1().Jobs(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			c.recorder.Eventf(cj, corev1.EventTypeNormal, "MissingJob", "Active job went missing: %v", ref.Name)
			deleteFromActiveList(cj, ref.UID)
			changed = true
		case err != nil:
			return nil, changed, fmt.Errorf("get job %s/%s: %w", ref.Namespace, ref.Name, err)
		}
	}

	plan := planStart(cj, now, c.cfg.Location)
	c.record(cj, plan.Events)
	if plan.Start == nil {
		return plan.Requeue, changed, nil
	}
	if plan.Replace {
		for _, ref := range append([]corev1.ObjectReference(nil), cj.Status.Active...) {
			job, err := c.client.BatchV1().Jobs(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedGet", "Get job: %v", err)
				return nil, changed, fmt.Errorf("get job %s/%s: %w", ref.Namespace, ref.Name, err)
			}
			if err := c.deleteJobOf(ctx, cj, job); err != nil {
				return nil, changed, fmt.Errorf("could not replace job %s/%s: %w", job.Namespace, job.Name, err)
			}
			changed = true
		}
	}

	req, err := jobFromTemplate(cj, *plan.Start)
	if err != nil {
		return nil, changed, err
	}
	job, err := c.client.BatchV1().Jobs(cj.Namespace).Create(ctx, req, metav1.CreateOptions{})
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// Every create fails until the namespace is gone.
		return nil, changed, fmt.Errorf("create job %s/%s: %w", req.Namespace, req.Name, err)
	case apierrors.IsAlreadyExists(err):
		// Created earlier by this controller, whose status write then failed, or by
		// someone else, who keeps the status then.
		job, err = c.client.BatchV1().Jobs(req.Namespace).Get(ctx, req.Name, metav1.GetOptions{})
		if err != nil {
			return nil, changed, fmt.Errorf("get job %s/%s: %w", req.Namespace, req.Name, err)
		}
		if !metav1.IsControlledBy(job, cj) || inActiveList(cj, job.UID) {
			return nil, changed, nil
		}
		c.log.InfoContext(ctx, "job already exists", "cronjob", cj.Namespace+"/"+cj.Name, "job", job.Name)
	case err != nil:
		c.recorder.Eventf(cj, corev1.EventTypeWarning, "FailedCreate", "Error creating job: %v", err)
		return nil, changed, fmt.Errorf("create job %s/%s: %w", req.Namespace, req.Name, err)
	default:
		c.recorder.Eventf(cj, corev1.EventTypeNormal, "SuccessfulCreate", "Created job %v", job.Name)
	}

	ref, err := reference.GetReference(scheme.Scheme, job)
	if err != nil {
		return nil, changed, fmt.Errorf("reference to job %s/%s: %w", job.Namespace, job.Name, err)
	}
	cj.Status.Active = append(cj.Status.Active, *ref)
	cj.Status.LastScheduleTime = &metav1.Time{Time: *plan.Start}
	return plan.Requeue, true, nil
}

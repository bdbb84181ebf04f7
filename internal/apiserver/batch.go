package apiserver

import (
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/robfig/cron/v3"
)

// The labels the API server puts on a Job's pod template and selects its pods by, when
// the Job does not choose its own selector (spec.manualSelector).
const (
	jobControllerUIDLabel       = "batch.kubernetes.io/controller-uid"
	jobNameLabel                = "batch.kubernetes.io/job-name"
	legacyJobControllerUIDLabel = "controller-uid"
	legacyJobNameLabel          = "job-name"
)

// batchResources are the rows of batch/v1: Jobs and CronJobs.
func batchResources() []resource {
	batch := func(r resource) resource {
		r.group, r.version, r.namespaced, r.status, r.generation = "batch", "v1", true, true, true
		r.categories = []string{"all"}
		return r
	}
	containersCols := []metav1.TableColumnDefinition{
		wide("Containers", "string", "Names of each container in the template."),
		wide("Images", "string", "Images referenced by each container in the template."),
		wide("Selector", "string", "Label selector of the pods."),
	}
	return []resource{
		batch(resource{
			kind: "Job", plural: "jobs", singular: "job",
			newObj: func() runtime.Object { return &batchv1.Job{} }, newList: func() runtime.Object { return &batchv1.JobList{} },
			columns: append([]metav1.TableColumnDefinition{nameCol(),
				col("Status", "string", "Status of the job."),
				col("Completions", "string", "The completion status of the job"),
				col("Duration", "string", "Time required to complete the job."), ageCol()}, containersCols...),
			row: jobRow,
			hooks: hooks{
				// The selector is made at validation, as upstream does: by then a
				// generated name is set.
				validate: func(o runtime.Object) field.ErrorList {
					j := o.(*batchv1.Job)
					generateJobSelector(j)
					return validateJob(j)
				},
				validateUpdate: func(o, old runtime.Object) field.ErrorList {
					return validateJobUpdate(o.(*batchv1.Job), old.(*batchv1.Job))
				},
			},
		}),
		batch(resource{
			kind: "CronJob", plural: "cronjobs", singular: "cronjob", shortNames: []string{"cj"},
			newObj: func() runtime.Object { return &batchv1.CronJob{} }, newList: func() runtime.Object { return &batchv1.CronJobList{} },
			columns: append([]metav1.TableColumnDefinition{nameCol(),
				col("Schedule", "string", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
				col("Timezone", "string", "The time zone name for the given schedule."),
				col("Suspend", "boolean", "This flag tells the controller to suspend subsequent executions."),
				col("Active", "integer", "A list of pointers to currently running jobs."),
				col("Last Schedule", "string", "Information when was the last time the job was successfully scheduled."),
				ageCol()}, containersCols...),
			row: cronJobRow,
			hooks: hooks{
				name:     cronJobName,
				validate: func(o runtime.Object) field.ErrorList { return validateCronJob(o.(*batchv1.CronJob)) },
			},
		}),
	}
}

func jobRow(o runtime.Object) []interface{} {
	j := o.(*batchv1.Job)
	names, images := containers(j.Spec.Template.Spec.Containers)
	completions := fmt.Sprintf("%d/%d", j.Status.Succeeded, ptr.Deref(j.Spec.Completions, 1))
	if j.Spec.Completions == nil {
		parallelism := ptr.Deref(j.Spec.Parallelism, 1)
		completions = fmt.Sprintf("%d/1", j.Status.Succeeded)
		if parallelism > 1 {
			completions = fmt.Sprintf("%d/1 of %d", j.Status.Succeeded, parallelism)
		}
	}
	duration := ""
	if j.Status.StartTime != nil {
		end := time.Now()
		if j.Status.CompletionTime != nil {
			end = j.Status.CompletionTime.Time
		}
		duration = humanDuration(end.Sub(j.Status.StartTime.Time))
	}
	return []interface{}{j.Name, jobStatus(j), completions, duration, age(j.CreationTimestamp), names, images, selectorString(j.Spec.Selector)}
}

// jobStatus is the STATUS column of kubectl get jobs.
func jobStatus(j *batchv1.Job) string {
	has := func(t batchv1.JobConditionType) bool {
		for _, c := range j.Status.Conditions {
			if c.Type == t && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	}
	switch {
	case has(batchv1.JobFailureTarget):
		return "FailureTarget"
	case has(batchv1.JobComplete):
		return "Complete"
	case has(batchv1.JobFailed):
		return "Failed"
	case j.DeletionTimestamp != nil:
		return "Terminating"
	case has(batchv1.JobSuccessCriteriaMet):
		return "SuccessCriteriaMet"
	case has(batchv1.JobSuspended):
		return "Suspended"
	}
	return "Running"
}

func cronJobRow(o runtime.Object) []interface{} {
	c := o.(*batchv1.CronJob)
	names, images := containers(c.Spec.JobTemplate.Spec.Template.Spec.Containers)
	last := "<none>"
	if c.Status.LastScheduleTime != nil {
		last = age(*c.Status.LastScheduleTime)
	}
	return []interface{}{c.Name, c.Spec.Schedule, orNone(ptr.Deref(c.Spec.TimeZone, "")), ptr.Deref(c.Spec.Suspend, false),
		int64(len(c.Status.Active)), last, age(c.CreationTimestamp), names, images, selectorString(c.Spec.JobTemplate.Spec.Selector)}
}

// humanDuration prints d as kubectl's duration columns do (5s, 3m2s, 4h).
func humanDuration(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 10*time.Minute:
		return fmt.Sprintf("%dm%ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 3*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	}
	return fmt.Sprintf("%dh", int(d.Hours()))
}

// generateJobSelector gives a Job without spec.manualSelector the selector upstream
// generates: its pods are selected by the Job's UID, and the template carries the
// UID and the Job's name in both the current and the legacy labels.
func generateJobSelector(j *batchv1.Job) {
	if ptr.Deref(j.Spec.ManualSelector, false) {
		return
	}
	uid := string(j.UID)
	if j.Spec.Template.Labels == nil {
		j.Spec.Template.Labels = map[string]string{}
	}
	j.Spec.Template.Labels[jobControllerUIDLabel] = uid
	j.Spec.Template.Labels[jobNameLabel] = j.Name
	j.Spec.Template.Labels[legacyJobControllerUIDLabel] = uid
	j.Spec.Template.Labels[legacyJobNameLabel] = j.Name
	// A selector the user gave gets the UID too; validation then rejects it, as it is
	// not the generated one.
	if j.Spec.Selector == nil {
		j.Spec.Selector = &metav1.LabelSelector{}
	}
	if j.Spec.Selector.MatchLabels == nil {
		j.Spec.Selector.MatchLabels = map[string]string{}
	}
	if _, ok := j.Spec.Selector.MatchLabels[jobControllerUIDLabel]; !ok {
		j.Spec.Selector.MatchLabels[jobControllerUIDLabel] = uid
	}
}

func defaultJobSpec(spec *batchv1.JobSpec) {
	defaultPodSpec(&spec.Template.Spec)
	if spec.Completions == nil && spec.Parallelism == nil {
		spec.Completions = ptr.To[int32](1)
		spec.Parallelism = ptr.To[int32](1)
	}
	if spec.Parallelism == nil {
		spec.Parallelism = ptr.To[int32](1)
	}
	if spec.BackoffLimit == nil {
		if spec.BackoffLimitPerIndex != nil {
			spec.BackoffLimit = ptr.To[int32](1<<31 - 1)
		} else {
			spec.BackoffLimit = ptr.To[int32](6)
		}
	}
	if spec.CompletionMode == nil {
		spec.CompletionMode = ptr.To(batchv1.NonIndexedCompletion)
	}
	if spec.Suspend == nil {
		spec.Suspend = ptr.To(false)
	}
	if spec.ManualSelector == nil {
		spec.ManualSelector = ptr.To(false)
	}
	if spec.PodReplacementPolicy == nil {
		policy := batchv1.TerminatingOrFailed
		if spec.PodFailurePolicy != nil {
			policy = batchv1.Failed
		}
		spec.PodReplacementPolicy = &policy
	}
	if spec.PodFailurePolicy != nil {
		for i := range spec.PodFailurePolicy.Rules {
			for j := range spec.PodFailurePolicy.Rules[i].OnPodConditions {
				if c := &spec.PodFailurePolicy.Rules[i].OnPodConditions[j]; c.Status == "" {
					c.Status = corev1.ConditionTrue
				}
			}
		}
	}
}

func defaultCronJob(c *batchv1.CronJob) {
	if c.Spec.ConcurrencyPolicy == "" {
		c.Spec.ConcurrencyPolicy = batchv1.AllowConcurrent
	}
	if c.Spec.Suspend == nil {
		c.Spec.Suspend = ptr.To(false)
	}
	if c.Spec.SuccessfulJobsHistoryLimit == nil {
		c.Spec.SuccessfulJobsHistoryLimit = ptr.To[int32](3)
	}
	if c.Spec.FailedJobsHistoryLimit == nil {
		c.Spec.FailedJobsHistoryLimit = ptr.To[int32](1)
	}
	// A CronJob's job template is defaulted as a Job's spec would be, but for the
	// fields the Job gets when it is created.
	defaultPodSpec(&c.Spec.JobTemplate.Spec.Template.Spec)
}

func validateJob(j *batchv1.Job) field.ErrorList {
	errs := validateJobSpec(&j.Spec, field.NewPath("spec"), true)
	if !ptr.Deref(j.Spec.ManualSelector, false) && j.UID != "" {
		want := &metav1.LabelSelector{MatchLabels: map[string]string{jobControllerUIDLabel: string(j.UID)}}
		if !apiequality.Semantic.DeepEqual(j.Spec.Selector, want) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "selector"), j.Spec.Selector, "`selector` not auto-generated"))
		}
	}
	return errs
}

// validateJobSpec checks a Job's spec; selector is false for a CronJob's template,
// which has no selector yet.
func validateJobSpec(spec *batchv1.JobSpec, p *field.Path, selector bool) field.ErrorList {
	var errs field.ErrorList
	nonNeg := func(v *int32, name string) {
		if v != nil && *v < 0 {
			errs = append(errs, field.Invalid(p.Child(name), *v, "must be greater than or equal to 0"))
		}
	}
	nonNeg(spec.Parallelism, "parallelism")
	nonNeg(spec.Completions, "completions")
	nonNeg(spec.BackoffLimit, "backoffLimit")
	if spec.ActiveDeadlineSeconds != nil && *spec.ActiveDeadlineSeconds < 0 {
		errs = append(errs, field.Invalid(p.Child("activeDeadlineSeconds"), *spec.ActiveDeadlineSeconds, "must be greater than or equal to 0"))
	}
	indexed := spec.CompletionMode != nil && *spec.CompletionMode == batchv1.IndexedCompletion
	if spec.BackoffLimitPerIndex != nil {
		nonNeg(spec.BackoffLimitPerIndex, "backoffLimitPerIndex")
		if !indexed {
			errs = append(errs, field.Invalid(p.Child("backoffLimitPerIndex"), *spec.BackoffLimitPerIndex, "requires indexed completion mode"))
		}
	}
	if spec.MaxFailedIndexes != nil && spec.BackoffLimitPerIndex == nil {
		errs = append(errs, field.Required(p.Child("backoffLimitPerIndex"), "when maxFailedIndexes is specified"))
	}
	if spec.SuccessPolicy != nil && !indexed {
		errs = append(errs, field.Invalid(p.Child("successPolicy"), *spec.SuccessPolicy, "requires indexed completion mode"))
	}
	if rp := spec.PodReplacementPolicy; rp != nil && *rp != batchv1.TerminatingOrFailed && *rp != batchv1.Failed {
		errs = append(errs, field.NotSupported(p.Child("podReplacementPolicy"), *rp, []batchv1.PodReplacementPolicy{batchv1.TerminatingOrFailed, batchv1.Failed}))
	}
	if pfp := spec.PodFailurePolicy; pfp != nil {
		actions := []batchv1.PodFailurePolicyAction{batchv1.PodFailurePolicyActionFailJob, batchv1.PodFailurePolicyActionFailIndex,
			batchv1.PodFailurePolicyActionIgnore, batchv1.PodFailurePolicyActionCount}
		for i, rule := range pfp.Rules {
			rp := p.Child("podFailurePolicy", "rules").Index(i)
			if !slices.Contains(actions, rule.Action) {
				errs = append(errs, field.NotSupported(rp.Child("action"), rule.Action, actions))
			}
			if oc := rule.OnExitCodes; oc != nil && oc.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn {
				for k, v := range oc.Values {
					if v == 0 {
						errs = append(errs, field.Invalid(rp.Child("onExitCodes", "values").Index(k), v, "must not be 0 for the In operator"))
					}
				}
			}
		}
	}
	if spec.TTLSecondsAfterFinished != nil && *spec.TTLSecondsAfterFinished < 0 {
		errs = append(errs, field.Invalid(p.Child("ttlSecondsAfterFinished"), *spec.TTLSecondsAfterFinished, "must be greater than or equal to 0"))
	}
	if spec.CompletionMode != nil && *spec.CompletionMode == batchv1.IndexedCompletion && spec.Completions == nil {
		errs = append(errs, field.Required(p.Child("completions"), fmt.Sprintf("when completion mode is %s", batchv1.IndexedCompletion)))
	}
	if spec.CompletionMode != nil && *spec.CompletionMode != batchv1.IndexedCompletion && *spec.CompletionMode != batchv1.NonIndexedCompletion {
		errs = append(errs, field.NotSupported(p.Child("completionMode"), *spec.CompletionMode,
			[]batchv1.CompletionMode{batchv1.NonIndexedCompletion, batchv1.IndexedCompletion}))
	}
	tmpl := p.Child("template")
	switch rp := spec.Template.Spec.RestartPolicy; rp {
	case corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	default:
		errs = append(errs, field.Required(tmpl.Child("spec", "restartPolicy"),
			fmt.Sprintf("valid values: %q, %q", corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)))
	}
	if spec.PodFailurePolicy != nil && spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
		errs = append(errs, field.Invalid(tmpl.Child("spec", "restartPolicy"), spec.Template.Spec.RestartPolicy,
			"only \"Never\" is supported when podFailurePolicy is specified"))
	}
	if selector {
		errs = append(errs, validateWorkload(nil, spec.Selector, &spec.Template)...)
	} else {
		errs = append(errs, validateTemplateMeta(&spec.Template, tmpl)...)
		errs = append(errs, validatePodSpec(&spec.Template.Spec, tmpl.Child("spec"), nil)...)
	}
	return errs
}

func validateJobUpdate(j, old *batchv1.Job) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if !apiequality.Semantic.DeepEqual(j.Spec.Selector, old.Spec.Selector) {
		errs = append(errs, field.Invalid(spec.Child("selector"), j.Spec.Selector, "field is immutable"))
	}
	if !apiequality.Semantic.DeepEqual(j.Spec.CompletionMode, old.Spec.CompletionMode) {
		errs = append(errs, field.Invalid(spec.Child("completionMode"), j.Spec.CompletionMode, "field is immutable"))
	}
	// The template may change only while the Job is suspended and has never started
	// (to set scheduling directives), as upstream allows.
	suspendedNeverStarted := ptr.Deref(old.Spec.Suspend, false) && old.Status.StartTime == nil
	if !suspendedNeverStarted && !apiequality.Semantic.DeepEqual(j.Spec.Template, old.Spec.Template) {
		errs = append(errs, field.Invalid(spec.Child("template"), j.Spec.Template, "field is immutable"))
	}
	return errs
}

// cronJobName: a CronJob's name is a DNS subdomain of at most 52 characters, so that
// the names of its Jobs (name + "-" + 8 digits... plus their pods' suffixes) stay valid.
func cronJobName(name string, prefix bool) []string {
	errs := apivalidation.NameIsDNSSubdomain(name, prefix)
	if !prefix && len(name) > 52 {
		errs = append(errs, "must be no more than 52 characters")
	}
	return errs
}

// cronParser reads standard five-field schedules and the @-descriptors (@hourly...).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

func validateCronJob(c *batchv1.CronJob) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	switch {
	case c.Spec.Schedule == "":
		errs = append(errs, field.Required(spec.Child("schedule"), ""))
	case strings.Contains(c.Spec.Schedule, "TZ"):
		errs = append(errs, field.Invalid(spec.Child("schedule"), c.Spec.Schedule,
			"cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
	default:
		if _, err := cronParser.Parse(c.Spec.Schedule); err != nil {
			errs = append(errs, field.Invalid(spec.Child("schedule"), c.Spec.Schedule, err.Error()))
		}
	}
	if tz := c.Spec.TimeZone; tz != nil {
		if _, err := time.LoadLocation(*tz); err != nil || *tz == "" || strings.EqualFold(*tz, "local") {
			errs = append(errs, field.Invalid(spec.Child("timeZone"), *tz, "unknown time zone "+*tz))
		}
	}
	switch c.Spec.ConcurrencyPolicy {
	case batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent:
	default:
		errs = append(errs, field.NotSupported(spec.Child("concurrencyPolicy"), c.Spec.ConcurrencyPolicy,
			[]batchv1.ConcurrencyPolicy{batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent}))
	}
	if d := c.Spec.StartingDeadlineSeconds; d != nil && *d < 0 {
		errs = append(errs, field.Invalid(spec.Child("startingDeadlineSeconds"), *d, "must be greater than or equal to 0"))
	}
	for _, h := range []struct {
		name string
		v    *int32
	}{{"successfulJobsHistoryLimit", c.Spec.SuccessfulJobsHistoryLimit}, {"failedJobsHistoryLimit", c.Spec.FailedJobsHistoryLimit}} {
		if h.v != nil && *h.v < 0 {
			errs = append(errs, field.Invalid(spec.Child(h.name), *h.v, "must be greater than or equal to 0"))
		}
	}
	jt := spec.Child("jobTemplate", "spec")
	if c.Spec.JobTemplate.Spec.Selector != nil {
		errs = append(errs, field.Invalid(jt.Child("selector"), c.Spec.JobTemplate.Spec.Selector, "`selector` will be auto-generated"))
	}
	if ms := c.Spec.JobTemplate.Spec.ManualSelector; ms != nil && *ms {
		errs = append(errs, field.NotSupported(jt.Child("manualSelector"), ms, []string{"nil", "false"}))
	}
	return append(errs, validateJobSpec(&c.Spec.JobTemplate.Spec, spec.Child("jobTemplate", "spec"), false)...)
}

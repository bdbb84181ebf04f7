package cronjob

import (
	"errors"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
)

// nextScheduleDelta pads every requeue at a schedule time, so the sync that follows
// finds that time passed even on a clock a little behind the queue's.
const nextScheduleDelta = 100 * time.Millisecond

// maxMissed is the number of missed start times beyond which the controller warns
// (TooManyMissedTimes) and starts only the latest.
const maxMissed = 100

// errScheduleTooDense is the error of a schedule whose two first times are less than a
// second apart: one that never fires ("31 2": February 31st) gives zero times.
var errScheduleTooDense = errors.New("time difference between two schedules is less than 1 second")

// missed says how many start times of a CronJob passed without a Job.
type missed int

const (
	noneMissed missed = iota
	fewMissed
	manyMissed
)

func (m missed) String() string {
	switch m {
	case noneMissed:
		return "none"
	case fewMissed:
		return "few"
	case manyMissed:
		return "many"
	}
	return "unknown"
}

// scheduleHasTZ tells whether spec.schedule carries its own TZ= or CRON_TZ= prefix,
// which the controller honours but warns about (UnsupportedSchedule).
func scheduleHasTZ(cj *batchv1.CronJob) bool { return strings.Contains(cj.Spec.Schedule, "TZ") }

// parseSchedule parses spec.schedule (five fields or an @hourly-style macro) in the
// CronJob's time zone: the TZ= prefix of the schedule, else spec.timeZone when it names
// a known zone, else local (the controller's own zone).
func parseSchedule(cj *batchv1.CronJob, local *time.Location) (cron.Schedule, error) {
	spec, zoned := cj.Spec.Schedule, scheduleHasTZ(cj)
	if !zoned && cj.Spec.TimeZone != nil {
		if _, err := time.LoadLocation(*cj.Spec.TimeZone); err == nil {
			spec, zoned = "TZ="+*cj.Spec.TimeZone+" "+spec, true
		}
	}
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, err
	}
	if s, ok := sched.(*cron.SpecSchedule); ok && !zoned && local != nil {
		s.Location = local
	}
	return sched, nil
}

// mostRecentScheduleTime looks at the start times of sched between the CronJob's last
// schedule time (its creation before the first) and now. It returns where it started
// looking, the latest start time not after now (nil when there is none) and how many
// were missed. With withDeadline it does not look further back than
// now - startingDeadlineSeconds. The count is estimated from the gap between the two
// first start times, as upstream does, so that a controller that was down for years
// does not walk every minute since.
func mostRecentScheduleTime(cj *batchv1.CronJob, now time.Time, sched cron.Schedule, withDeadline bool) (time.Time, *time.Time, missed, error) {
	earliest := cj.CreationTimestamp.Time
	if cj.Status.LastScheduleTime != nil {
		earliest = cj.Status.LastScheduleTime.Time
	}
	if withDeadline && cj.Spec.StartingDeadlineSeconds != nil {
		if deadline := now.Add(-time.Duration(*cj.Spec.StartingDeadlineSeconds) * time.Second); deadline.After(earliest) {
			earliest = deadline
		}
	}
	first := sched.Next(earliest)
	second := sched.Next(first)
	switch {
	case now.Before(first):
		return earliest, nil, noneMissed, nil
	case now.Before(second):
		return earliest, &first, noneMissed, nil
	}
	gap := int64(second.Sub(first).Round(time.Second).Seconds())
	if gap < 1 {
		return earliest, nil, noneMissed, errScheduleTooDense
	}
	n := int64(now.Sub(first).Seconds())/gap + 1
	// Start one gap before the estimated last start time and let the schedule find the
	// real ones: gaps differ in irregular schedules such as "30 6-16/4 * * 1-5".
	var latest time.Time
	from := first.Add(time.Duration((n-2)*gap) * time.Second)
	for t := sched.Next(from); !t.IsZero() && !t.After(now); t = sched.Next(t) {
		latest = t
	}
	m := fewMissed
	if n > maxMissed {
		m = manyMissed
	}
	if latest.IsZero() {
		return earliest, nil, m, nil
	}
	return earliest, &latest, m, nil
}

// nextScheduleTime returns the start time a Job is due for now (nil when none is), and
// how many start times were missed, never looking further back than
// startingDeadlineSeconds.
func nextScheduleTime(cj *batchv1.CronJob, now time.Time, sched cron.Schedule) (*time.Time, missed, error) {
	_, latest, m, err := mostRecentScheduleTime(cj, now, sched, true)
	if latest == nil || latest.After(now) {
		return nil, m, err
	}
	return latest, m, err
}

// nextScheduleDelay is how long from now until the CronJob is next due, plus
// nextScheduleDelta: the queue hands the CronJob back to a worker then.
func nextScheduleDelay(cj *batchv1.CronJob, now time.Time, sched cron.Schedule) time.Duration {
	earliest, latest, m, err := mostRecentScheduleTime(cj, now, sched, false)
	from := now
	switch {
	case err != nil:
	case latest != nil:
		from = *latest
	case m == noneMissed:
		from = earliest
	}
	return sched.Next(from).Add(nextScheduleDelta).Sub(now)
}

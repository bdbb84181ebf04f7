package cronjob

import (
	"errors"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// at is 2026-01-01 (a Thursday) at hh:mm:ss UTC, plus extra.
func at(hh, mm, ss int, extra ...time.Duration) time.Time {
	t := time.Date(2026, 1, 1, hh, mm, ss, 0, time.UTC)
	for _, d := range extra {
		t = t.Add(d)
	}
	return t
}

// cronJob is a CronJob on schedule created at created.
func cronJob(schedule string, created time.Time) *batchv1.CronJob {
	return &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cj", UID: "cj-uid", CreationTimestamp: metav1.NewTime(created)},
		Spec:       batchv1.CronJobSpec{Schedule: schedule},
	}
}

func lastScheduled(cj *batchv1.CronJob, t time.Time) *batchv1.CronJob {
	cj.Status.LastScheduleTime = &metav1.Time{Time: t}
	return cj
}

func TestParseSchedule(t *testing.T) {
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skipf("no time zone database: %v", err)
	}
	for _, tc := range []struct {
		schedule string
		timeZone *string
		local    *time.Location
		from     time.Time
		want     time.Time // zero: parse error
	}{
		{schedule: "* * * * *", local: time.UTC, from: at(10, 0, 30), want: at(10, 1, 0)},
		{schedule: "*/15 * * * *", local: time.UTC, from: at(10, 0, 0), want: at(10, 15, 0)},
		{schedule: "0 0 * * 1", local: time.UTC, from: at(10, 0, 0), want: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)},
		{schedule: "@hourly", local: time.UTC, from: at(10, 0, 0), want: at(11, 0, 0)},
		{schedule: "@daily", local: time.UTC, from: at(10, 0, 0), want: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)},
		{schedule: "@midnight", local: time.UTC, from: at(10, 0, 0), want: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)},
		{schedule: "@weekly", local: time.UTC, from: at(10, 0, 0), want: time.Date(2026, 1, 4, 0, 0, 0, 0, time.UTC)},
		{schedule: "@monthly", local: time.UTC, from: at(10, 0, 0), want: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)},
		{schedule: "@yearly", local: time.UTC, from: at(10, 0, 0), want: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{schedule: "@annually", local: time.UTC, from: at(10, 0, 0), want: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
		{schedule: "@every 90m", local: time.UTC, from: at(10, 0, 0), want: at(11, 30, 0)},
		// 09:00 in New York is 14:00 UTC in January: spec.timeZone, or the local zone.
		{schedule: "0 9 * * *", timeZone: ptr.To("America/New_York"), local: time.UTC, from: at(10, 0, 0), want: at(14, 0, 0)},
		{schedule: "0 9 * * *", local: newYork, from: at(10, 0, 0), want: at(14, 0, 0)},
		{schedule: "0 9 * * *", timeZone: ptr.To("Etc/UTC"), local: newYork, from: at(10, 0, 0), want: time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC)},
		// A TZ= prefix wins over both.
		{schedule: "TZ=America/New_York 0 9 * * *", local: time.UTC, from: at(10, 0, 0), want: at(14, 0, 0)},
		// An unknown spec.timeZone leaves the schedule in the local zone (the sync refuses it).
		{schedule: "0 9 * * *", timeZone: ptr.To("Mars/Olympus"), local: time.UTC, from: at(10, 0, 0), want: time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC)},
		{schedule: "* * * *", local: time.UTC},
		{schedule: "0 * * * * *", local: time.UTC},
		{schedule: "61 * * * *", local: time.UTC},
		{schedule: "@fortnightly", local: time.UTC},
		{schedule: "", local: time.UTC},
	} {
		cj := cronJob(tc.schedule, at(0, 0, 0))
		cj.Spec.TimeZone = tc.timeZone
		sched, err := parseSchedule(cj, tc.local)
		if tc.want.IsZero() {
			if err == nil {
				t.Errorf("parseSchedule(%q) = nil error, want one", tc.schedule)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseSchedule(%q, tz %v): %v", tc.schedule, ptr.Deref(tc.timeZone, "-"), err)
			continue
		}
		if got := sched.Next(tc.from); !got.Equal(tc.want) {
			t.Errorf("schedule %q (tz %v, local %v): next after %v = %v, want %v", tc.schedule, ptr.Deref(tc.timeZone, "-"), tc.local, tc.from, got, tc.want)
		}
	}
}

func TestNextScheduleTime(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cj         *batchv1.CronJob
		now        time.Time
		want       *time.Time
		wantMissed missed
		wantErr    error
	}{
		{name: "not yet due", cj: cronJob("* * * * *", at(10, 0, 30)), now: at(10, 0, 59), wantMissed: noneMissed},
		{name: "due at the minute", cj: cronJob("* * * * *", at(10, 0, 30)), now: at(10, 1, 0), want: ptr.To(at(10, 1, 0)), wantMissed: noneMissed},
		{name: "due just after the minute", cj: cronJob("* * * * *", at(10, 0, 30)), now: at(10, 1, 0, 100*time.Millisecond), want: ptr.To(at(10, 1, 0)), wantMissed: noneMissed},
		{name: "already scheduled", cj: lastScheduled(cronJob("* * * * *", at(10, 0, 30)), at(10, 1, 0)), now: at(10, 1, 30), wantMissed: noneMissed},
		{name: "last schedule time counts, not creation", cj: lastScheduled(cronJob("* * * * *", at(9, 0, 0)), at(10, 1, 0)), now: at(10, 2, 5), want: ptr.To(at(10, 2, 0)), wantMissed: noneMissed},
		{name: "a few missed: the latest", cj: cronJob("*/5 * * * *", at(10, 0, 30)), now: at(10, 17, 0), want: ptr.To(at(10, 15, 0)), wantMissed: fewMissed},
		{name: "hourly macro", cj: cronJob("@hourly", at(9, 30, 0)), now: at(12, 10, 0), want: ptr.To(at(12, 0, 0)), wantMissed: fewMissed},
		{name: "101 missed is many", cj: cronJob("* * * * *", at(8, 0, 0)), now: at(9, 41, 0), want: ptr.To(at(9, 41, 0)), wantMissed: manyMissed},
		{name: "100 missed is few", cj: cronJob("* * * * *", at(8, 0, 0)), now: at(9, 40, 0), want: ptr.To(at(9, 40, 0)), wantMissed: fewMissed},
		{name: "a week of hours missed", cj: cronJob("0 * * * *", time.Date(2025, 12, 25, 0, 0, 0, 0, time.UTC)), now: at(10, 0, 30), want: ptr.To(at(10, 0, 0)), wantMissed: manyMissed},
		{
			name: "starting deadline bounds the look back",
			cj: func() *batchv1.CronJob {
				cj := cronJob("* * * * *", at(8, 0, 0))
				cj.Spec.StartingDeadlineSeconds = ptr.To[int64](120)
				return cj
			}(),
			now: at(10, 0, 30), want: ptr.To(at(10, 0, 0)), wantMissed: fewMissed,
		},
		{
			name: "starting deadline passed for every start time",
			cj: func() *batchv1.CronJob {
				cj := cronJob("0 * * * *", at(8, 0, 0))
				cj.Spec.StartingDeadlineSeconds = ptr.To[int64](60)
				return cj
			}(),
			now: at(10, 5, 0), wantMissed: noneMissed,
		},
		{
			name: "time zone",
			cj: func() *batchv1.CronJob {
				cj := cronJob("0 9 * * *", at(0, 0, 0))
				cj.Spec.TimeZone = ptr.To("America/New_York")
				return cj
			}(),
			now: at(14, 30, 0), want: ptr.To(at(14, 0, 0)), wantMissed: noneMissed,
		},
		// 06:30, 10:30 and 14:30 on weekdays; from Thursday 14:30 to Monday 07:00.
		{name: "irregular schedule over a weekend", cj: lastScheduled(cronJob("30 6-16/4 * * 1-5", at(0, 0, 0)), at(14, 30, 0)),
			now: time.Date(2026, 1, 5, 7, 0, 0, 0, time.UTC), want: ptr.To(time.Date(2026, 1, 5, 6, 30, 0, 0, time.UTC)), wantMissed: fewMissed},
		{name: "never fires", cj: cronJob("59 23 31 2 *", at(0, 0, 0)), now: at(10, 0, 0), wantErr: errScheduleTooDense},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sched, err := parseSchedule(tc.cj, time.UTC)
			if err != nil {
				t.Fatal(err)
			}
			got, m, err := nextScheduleTime(tc.cj, tc.now, sched)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if (got == nil) != (tc.want == nil) || (got != nil && !got.Equal(*tc.want)) {
				t.Errorf("next schedule time = %v, want %v", got, tc.want)
			}
			if m != tc.wantMissed {
				t.Errorf("missed = %v, want %v", m, tc.wantMissed)
			}
		})
	}
}

func TestNextScheduleDelay(t *testing.T) {
	for _, tc := range []struct {
		name string
		cj   *batchv1.CronJob
		now  time.Time
		want time.Duration
	}{
		{name: "new, every minute", cj: cronJob("* * * * *", at(10, 0, 30)), now: at(10, 0, 30), want: 30*time.Second + 100*time.Millisecond},
		{name: "just scheduled", cj: lastScheduled(cronJob("* * * * *", at(10, 0, 30)), at(10, 1, 0)), now: at(10, 1, 0, 100*time.Millisecond), want: 60 * time.Second},
		{name: "due and not scheduled: the next one after it", cj: cronJob("* * * * *", at(10, 0, 30)), now: at(10, 5, 10), want: 50*time.Second + 100*time.Millisecond},
		{name: "hourly", cj: cronJob("@hourly", at(10, 20, 0)), now: at(10, 20, 0), want: 40*time.Minute + 100*time.Millisecond},
		{
			// The starting deadline does not move the next start time.
			name: "deadline ignored",
			cj: func() *batchv1.CronJob {
				cj := lastScheduled(cronJob("*/10 * * * *", at(9, 0, 0)), at(9, 0, 0))
				cj.Spec.StartingDeadlineSeconds = ptr.To[int64](10)
				return cj
			}(),
			now: at(10, 3, 0), want: 7*time.Minute + 100*time.Millisecond,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sched, err := parseSchedule(tc.cj, time.UTC)
			if err != nil {
				t.Fatal(err)
			}
			if got := nextScheduleDelay(tc.cj, tc.now, sched); got != tc.want {
				t.Errorf("delay = %v, want %v", got, tc.want)
			}
		})
	}
}

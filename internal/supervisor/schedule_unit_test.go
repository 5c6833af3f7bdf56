package supervisor

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/backup"
)

// TestPlanSchedule: a scheduled backup under way is taken on whoever began it; a new schedule
// is first recorded (nothing before it is due); a time due waits for a bootstrap, takes a
// running `backup create` on (its laptop may be gone), is served by a backup begun at or after
// it, and otherwise begins one, with the times missed before it counted.
func TestPlanSchedule(t *testing.T) {
	const expr = "0 * * * *"
	s, err := backup.ParseSchedule(expr)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 7, 12, 10, 0, 0, time.UTC)
	at := func(h, m int) *metav1.Time {
		v := metav1.NewTime(time.Date(2026, 12, 7, h, m, 0, 0, time.UTC))
		return &v
	}
	kept := func(last *metav1.Time) *v1.BackupScheduleStatus {
		return &v1.BackupScheduleStatus{Schedule: expr, Since: *at(9, 30), LastScheduleTime: last}
	}
	// 12:00 served by n scheduled backups (next: 13:00, or next when given).
	attempted := func(n int32, next *metav1.Time) *v1.BackupScheduleStatus {
		rec := kept(at(12, 0))
		rec.Attempts, rec.Next = n, at(13, 0)
		if next != nil {
			rec.Next = next
		}
		return rec
	}
	failedNext := func(n int32, finished, next *metav1.Time) *v1.BackupStatus {
		return &v1.BackupStatus{Schedule: attempted(n, next), LastFailure: &v1.BackupRecord{ID: "f", StartedAt: *at(12, 0), FinishedAt: *finished, ScheduledFor: at(12, 0)}}
	}
	failed := func(n int32, finished *metav1.Time, last *v1.BackupRecord) *v1.BackupStatus {
		st := failedNext(n, finished, nil)
		st.Last = last
		return st
	}
	for _, tc := range []struct {
		name   string
		st     *v1.BackupStatus
		noPrim bool
		want   schedulePlan
	}{
		{name: "no status", st: nil, want: schedulePlan{action: schedStart}},
		{name: "another schedule's record", st: &v1.BackupStatus{Schedule: &v1.BackupScheduleStatus{Schedule: "@daily", Since: *at(1, 0)}},
			want: schedulePlan{action: schedStart}},
		{name: "served this hour", st: &v1.BackupStatus{Schedule: kept(at(12, 0))}, want: schedulePlan{action: schedWait, wait: scheduleIdle}},
		{name: "due, two missed since 10:00", st: &v1.BackupStatus{Schedule: kept(nil)},
			want: schedulePlan{action: schedBegin, due: at(12, 0).Time, missed: 2, lastMissed: at(11, 0).Time}},
		{name: "due, none missed", st: &v1.BackupStatus{Schedule: kept(at(11, 0))}, want: schedulePlan{action: schedBegin, due: at(12, 0).Time}},
		{name: "due, not bootstrapped", st: &v1.BackupStatus{Schedule: kept(at(11, 0))}, noPrim: true, want: schedulePlan{action: schedWait, wait: 5 * time.Second}},
		{name: "nothing due, a backup of backup create runs: left to it", st: &v1.BackupStatus{Schedule: kept(at(12, 0)), Running: &v1.BackupRun{ID: "x"}},
			want: schedulePlan{action: schedWait, wait: scheduleIdle}},
		{name: "due, a backup of backup create runs: taken on", st: &v1.BackupStatus{Schedule: kept(at(11, 0)), Running: &v1.BackupRun{ID: "x"}},
			want: schedulePlan{action: schedContinue}},
		{name: "due, served by backup create at 12:05", st: &v1.BackupStatus{Schedule: kept(at(11, 0)), Last: &v1.BackupRecord{StartedAt: *at(12, 5)}},
			want: schedulePlan{action: schedServed, due: at(12, 0).Time}},
		{name: "due, the last backup began before it", st: &v1.BackupStatus{Schedule: kept(at(11, 0)), Last: &v1.BackupRecord{StartedAt: *at(11, 59)}},
			want: schedulePlan{action: schedBegin, due: at(12, 0).Time}},
		{name: "a scheduled backup under way", st: &v1.BackupStatus{Schedule: kept(at(12, 0)), Running: &v1.BackupRun{ID: "x", ScheduledFor: at(12, 0)}},
			want: schedulePlan{action: schedContinue}},
		// Retries of a failed scheduled backup (now 12:10, 12:00 served, next 13:00).
		{name: "12:00's backup failed at 12:05: retried a minute later", st: failed(1, at(12, 5), nil),
			want: schedulePlan{action: schedRetry, due: at(12, 0).Time}},
		{name: "12:00's backup failed at 12:09:30: waits for the minute", st: failed(1, &metav1.Time{Time: now.Add(-30 * time.Second)}, nil),
			want: schedulePlan{action: schedWait, wait: 30 * time.Second}},
		{name: "its retry failed at 12:06:20: the third attempt 4 minutes after", st: failed(2, &metav1.Time{Time: at(12, 6).Add(20 * time.Second)}, nil),
			want: schedulePlan{action: schedWait, wait: 20 * time.Second}},
		{name: "three attempts failed: none more before 13:00", st: failed(3, at(12, 1), nil),
			want: schedulePlan{action: schedWait, wait: scheduleIdle}},
		{name: "a retry would come at the next time: none", st: failedNext(1, at(12, 5), at(12, 6)),
			want: schedulePlan{action: schedWait, wait: scheduleIdle}},
		{name: "a backup completed since the failure: none", st: failed(1, at(12, 5), &v1.BackupRecord{StartedAt: *at(12, 6)}),
			want: schedulePlan{action: schedWait, wait: scheduleIdle}},
		{name: "the failure was of another schedule time: none", st: &v1.BackupStatus{Schedule: attempted(1, nil),
			LastFailure: &v1.BackupRecord{StartedAt: *at(11, 0), FinishedAt: *at(11, 5), ScheduledFor: at(11, 0)}},
			want: schedulePlan{action: schedWait, wait: scheduleIdle}},
		{name: "the failure was of backup create: none", st: &v1.BackupStatus{Schedule: attempted(1, nil),
			LastFailure: &v1.BackupRecord{StartedAt: *at(12, 2), FinishedAt: *at(12, 5)}},
			want: schedulePlan{action: schedWait, wait: scheduleIdle}},
		{name: "a retry was refused (recorded missed): none more", st: func() *v1.BackupStatus {
			st := failed(2, at(12, 1), nil)
			st.Schedule.LastMissed = at(12, 0)
			return st
		}(), want: schedulePlan{action: schedWait, wait: scheduleIdle}},
		{name: "served by backup create, which failed: none", st: &v1.BackupStatus{Schedule: attempted(0, nil),
			LastFailure: &v1.BackupRecord{StartedAt: *at(12, 2), FinishedAt: *at(12, 5), ScheduledFor: at(12, 0)}},
			want: schedulePlan{action: schedWait, wait: scheduleIdle}},
	} {
		c := &v1.MysqlCluster{}
		c.Spec.Backup = &v1.BackupSpec{Schedule: expr}
		c.Status.Backup = tc.st
		if !tc.noPrim {
			c.Status.CurrentPrimary = "demo-0"
		}
		if got := planSchedule(c, s, expr, now); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	// The wait before the next time is the time left, up to scheduleIdle.
	c := &v1.MysqlCluster{}
	c.Status.CurrentPrimary = "demo-0"
	c.Status.Backup = &v1.BackupStatus{Schedule: kept(at(12, 0))}
	if got := planSchedule(c, s, expr, time.Date(2026, 12, 7, 12, 59, 50, 0, time.UTC)); got.wait != 10*time.Second {
		t.Errorf("10 s before the next time: wait %s", got.wait)
	}
}

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

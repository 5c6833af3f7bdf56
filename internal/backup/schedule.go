package backup

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// A Schedule is spec.backup.schedule read: when backups are due.
type Schedule struct{ s cron.Schedule }

// ParseSchedule reads a schedule: five cron fields (minute hour day-of-month month day-of-week)
// or a descriptor (@hourly, @daily, @every 6h). Times are UTC; a time zone prefix is refused (the
// API's pattern refuses it too), so that a schedule means the same on every machine.
func ParseSchedule(expr string) (Schedule, error) {
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return Schedule{}, outcome.Invalid(fmt.Sprintf("backup schedule %q: schedules are in UTC, without a time zone", expr))
	}
	s, err := cron.ParseStandard(expr)
	if err != nil {
		return Schedule{}, outcome.Invalid(fmt.Sprintf("backup schedule %q is not a schedule: %v (five fields, minute hour day-of-month month day-of-week, such as \"0 3 * * *\", or @hourly, @daily, @every 6h)", expr, err))
	}
	if e, ok := s.(cron.ConstantDelaySchedule); ok && e.Delay < time.Minute {
		return Schedule{}, outcome.Invalid(fmt.Sprintf("backup schedule %q: backups are at least a minute apart", expr))
	}
	if s.Next(time.Now().UTC()).IsZero() {
		// Such as 0 0 30 2 *: a day no month has.
		return Schedule{}, outcome.Invalid(fmt.Sprintf("backup schedule %q never comes", expr))
	}
	return Schedule{s: s}, nil
}

// Next is the first schedule time after t.
func (s Schedule) Next(t time.Time) time.Time { return s.s.Next(t.UTC()) }

// maxScan bounds how many schedule times Due counts one by one: beyond it (a minutely schedule
// not kept for over two months), it skips to near now, and missed is a lower bound.
const maxScan = 100_000

// Due is what the schedule asks at now, counting from after (the last schedule time served, or
// when keeping it began): the latest schedule time not after now (zero when none is due), and
// how many earlier times after after passed unserved (missed), the last of them lastMissed.
func (s Schedule) Due(after, now time.Time) (due, lastMissed time.Time, missed int) {
	n := 0
	for t := s.Next(after); !t.IsZero() && !t.After(now); t = s.Next(t) {
		lastMissed, due, n = due, t, n+1
		if n == maxScan {
			// About a thousand of the times counted so far fit between skip and now.
			if skip := now.Add(-due.Sub(after) / maxScan * 1000); skip.After(t) {
				t = skip
			}
		}
	}
	if n <= 1 {
		return due, time.Time{}, 0
	}
	return due, lastMissed, n - 1
}

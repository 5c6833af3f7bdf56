package backup

import (
	"errors"
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

func TestScheduleDue(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, tc := range []struct {
		expr, after, now string
		due              string // "" none due
		missed           int
		lastMissed       string
	}{
		{"0 3 * * *", "2026-12-07T03:00:00Z", "2026-12-07T12:00:00Z", "", 0, ""},                                         // served today
		{"0 3 * * *", "2026-12-07T03:00:00Z", "2026-12-08T03:00:00Z", "2026-12-08T03:00:00Z", 0, ""},                     // due at the second
		{"0 3 * * *", "2026-12-05T03:00:00Z", "2026-12-08T04:00:00Z", "2026-12-08T03:00:00Z", 2, "2026-12-07T03:00:00Z"}, // two days missed
		{"@hourly", "2026-12-07T10:30:00Z", "2026-12-07T10:59:59Z", "", 0, ""},
		{"@hourly", "2026-12-07T10:30:00Z", "2026-12-07T12:10:00Z", "2026-12-07T12:00:00Z", 1, "2026-12-07T11:00:00Z"},
		{"*/15 * * * *", "2026-12-07T10:00:00Z", "2026-12-07T10:44:00Z", "2026-12-07T10:30:00Z", 1, "2026-12-07T10:15:00Z"},
		{"@every 90m", "2026-12-07T10:00:00Z", "2026-12-07T11:30:00Z", "2026-12-07T11:30:00Z", 0, ""},
		{"0 3 * * *", "2026-12-07T05:00:00+02:00", "2026-12-08T02:59:00Z", "", 0, ""}, // UTC whatever the zone given
	} {
		s, err := ParseSchedule(tc.expr)
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		due, lastMissed, missed := s.Due(at(tc.after), at(tc.now))
		want, wantMissed := time.Time{}, time.Time{}
		if tc.due != "" {
			want = at(tc.due)
		}
		if tc.lastMissed != "" {
			wantMissed = at(tc.lastMissed)
		}
		if !due.Equal(want) || missed != tc.missed || !lastMissed.Equal(wantMissed) {
			t.Errorf("%s after %s at %s: due %v, missed %d (last %v); want %v, %d (%v)", tc.expr, tc.after, tc.now, due, missed, lastMissed, want, tc.missed, wantMissed)
		}
	}
	// Far behind: the count skips to near now (a lower bound), and the time due is the latest.
	s, _ := ParseSchedule("* * * * *")
	due, lastMissed, missed := s.Due(at("2020-01-01T00:00:00Z"), at("2026-12-07T12:00:30Z"))
	if missed < maxScan || !due.Equal(at("2026-12-07T12:00:00Z")) || !lastMissed.Equal(at("2026-12-07T11:59:00Z")) {
		t.Errorf("far behind: due %v, missed %d", due, missed)
	}
	for _, bad := range []string{"", "0 3 * *", "61 * * * *", "@every 30s", "CRON_TZ=Europe/Paris 0 3 * * *", "@sometimes", "0 0 30 2 *"} {
		if _, err := ParseSchedule(bad); !errors.Is(err, outcome.ErrInvalid) {
			t.Errorf("schedule %q: %v, want refused as invalid", bad, err)
		}
	}
}

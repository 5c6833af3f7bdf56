package supervisor

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
)

// TestReleaseGuard: the release of lost acknowledgements sends its statement only while the last
// check found the primary writable within an interval and a check's timeout, and never once a
// failed check cancelled it (cancelRelease), even with a recent writable check on record: a
// release that waited past a failed check must not land on a primary being failed over.
func TestReleaseGuard(t *testing.T) {
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	w := &watcher{s: &Supervisor{Runner: orchestrate.Runner{Now: func() time.Time { return now }}}}
	interval := time.Second
	start := func() context.Context {
		rctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		w.releaseCancel.Store(&cancel)
		return rctx
	}
	answered := func(ago time.Duration) {
		at := now.Add(-ago)
		w.answeredAt.Store(&at)
	}

	rctx := start()
	if err := w.releaseGuard(rctx, interval, "release"); err == nil || !strings.Contains(err.Error(), "not found writable") {
		t.Errorf("no writable check on record: %v; want a refusal", err)
	}
	answered(1400 * time.Millisecond) // within an interval and a check's timeout (1.5 s)
	if err := w.releaseGuard(rctx, interval, "release"); err != nil {
		t.Errorf("a writable check 1.4 s ago: %v", err)
	}
	answered(1600 * time.Millisecond)
	if err := w.releaseGuard(rctx, interval, "release"); err == nil {
		t.Error("a writable check 1.6 s ago (a check since has not answered) let the release through")
	}

	// A failed check cancels the release in flight: refused although the last writable
	// check is recent (the guard is read before the failed check's own record can be).
	answered(100 * time.Millisecond)
	w.cancelRelease()
	if err := w.releaseGuard(rctx, interval, "release"); err == nil || !strings.Contains(err.Error(), "cancelled since it began") {
		t.Errorf("a release cancelled by a failed check: %v; want a refusal", err)
	}
	// The next release starts afresh.
	if err := w.releaseGuard(start(), interval, "release"); err != nil {
		t.Errorf("a new release after a writable check: %v", err)
	}
}

// TestReleaseBackoff: a release that failed is not tried again at once: the pause doubles from two
// intervals with each failure in a row, up to five minutes, and no count of failures overflows it.
func TestReleaseBackoff(t *testing.T) {
	for _, c := range []struct {
		interval time.Duration
		fails    int32
		want     time.Duration
	}{
		{time.Second, 0, 2 * time.Second},
		{time.Second, 1, 4 * time.Second},
		{time.Second, 3, 16 * time.Second},
		{time.Second, 7, 256 * time.Second},
		{time.Second, 8, releaseMaxBackoff},
		{time.Second, 1 << 30, releaseMaxBackoff},
		{time.Minute, 40, releaseMaxBackoff},
		{250 * time.Millisecond, 2, 2 * time.Second},
		{time.Second, -1, 2 * time.Second},
	} {
		if got := releaseBackoff(c.interval, c.fails); got != c.want {
			t.Errorf("releaseBackoff(%s, %d) = %s, want %s", c.interval, c.fails, got, c.want)
		}
	}
}

// TestReleaseReportsOncePerReason: why commits are left waiting is reported once per reason, not
// every two intervals it is looked at again; another reason is reported, and after a release
// that succeeded the first reason is news again.
func TestReleaseReportsOncePerReason(t *testing.T) {
	var got []string
	s := &Supervisor{Report: func(tr Transition) { got = append(got, tr.Primary+": "+tr.Reason) }}
	w := &watcher{s: s}
	for _, why := range []string{"a", "a", "a", "b", "b", "a"} {
		w.reportReleaseOnce("p-0", why)
	}
	if want := []string{"p-0: a", "p-0: b", "p-0: a"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("reported %q, want %q", got, want)
	}
	got = nil
	w.releaseWhy = "" // as a release that succeeded leaves it
	w.reportReleaseOnce("p-0", "a")
	if len(got) != 1 {
		t.Errorf("after a release that succeeded the same reason: reported %q, want it once", got)
	}
}

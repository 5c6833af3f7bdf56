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

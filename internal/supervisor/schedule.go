package supervisor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/backup/catalog"
	"github.com/mysqlctl/mysqlctl/internal/objectstore"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// What a turn of the backup schedule does (schedulePlan.action).
const (
	schedWait     = ""         // nothing is due: wait
	schedStart    = "start"    // begin keeping a new schedule: record when
	schedServed   = "served"   // a backup begun at or after the time due serves it: record it
	schedBegin    = "begin"    // take a backup for the time due
	schedContinue = "continue" // a scheduled backup is under way: take it on
	schedRetry    = "retry"    // the backup for the time last due failed: take another for it
)

// scheduleAttempts is how many backups are begun for one schedule time at most: one that fails
// is retried (a store that was briefly unreachable, a Job that could not start), but a fault
// that lasts is not hammered, and never past the next schedule time.
const scheduleAttempts = 3

// scheduleRetryAfter is how long after a failed scheduled backup the next attempt for the same
// schedule time begins: a minute after the first, four after the second.
func scheduleRetryAfter(attempts int32) time.Duration {
	return time.Minute << (2 * min(max(attempts-1, 0), 8))
}

// scheduleIdle is the longest a schedule turn waits: a changed spec is seen within it.
const scheduleIdle = 30 * time.Second

// schedulePlan is what the backup schedule asks of a turn.
type schedulePlan struct {
	action     string
	due        time.Time // the schedule time due (begin, served)
	missed     int       // schedule times before due that passed unserved
	lastMissed time.Time // the last of them
	wait       time.Duration
}

// planSchedule decides a turn of the backup schedule s (spec.backup.schedule expr) from the
// cluster's status at now. A scheduled backup under way is taken on (its actor may be gone). A
// time due waits for a bootstrap; it takes a backup of `backup create` under way on (its laptop
// may be gone: left alone, it would hold the schedule for good) and is served by a backup begun
// at or after it; else a backup is taken for it.
func planSchedule(c *v1.MysqlCluster, s backup.Schedule, expr string, now time.Time) schedulePlan {
	st := c.Status.Backup
	if st == nil {
		st = &v1.BackupStatus{}
	}
	if st.Running != nil && st.Running.ScheduledFor != nil {
		return schedulePlan{action: schedContinue}
	}
	rec := st.Schedule
	if rec == nil || rec.Schedule != expr {
		return schedulePlan{action: schedStart}
	}
	after := rec.Since.Time
	if rec.LastScheduleTime != nil {
		after = rec.LastScheduleTime.Time
	}
	due, lastMissed, missed := s.Due(after, now)
	switch {
	case due.IsZero() && st.Running == nil && c.Status.CurrentPrimary != "":
		if at, ok := retryAt(st, rec); ok {
			if now.Before(at) {
				return schedulePlan{action: schedWait, wait: min(at.Sub(now), scheduleIdle)}
			}
			return schedulePlan{action: schedRetry, due: rec.LastScheduleTime.Time}
		}
		fallthrough
	case due.IsZero():
		return schedulePlan{action: schedWait, wait: min(max(s.Next(after).Sub(now), time.Second), scheduleIdle)}
	case c.Status.CurrentPrimary == "":
		return schedulePlan{action: schedWait, wait: 5 * time.Second}
	case st.Running != nil:
		return schedulePlan{action: schedContinue}
	case st.Last != nil && !st.Last.StartedAt.Time.Before(due):
		return schedulePlan{action: schedServed, due: due, missed: missed, lastMissed: lastMissed}
	}
	return schedulePlan{action: schedBegin, due: due, missed: missed, lastMissed: lastMissed}
}

// retryAt is when another backup is begun for the schedule time last due, and whether one is:
// the last backup begun for it failed (a refused one is recorded missed, and never retried), none has
// completed since, fewer than scheduleAttempts were begun, and the retry comes before the next
// schedule time.
func retryAt(st *v1.BackupStatus, rec *v1.BackupScheduleStatus) (time.Time, bool) {
	f := st.LastFailure
	if f == nil || f.ScheduledFor == nil || rec.LastScheduleTime == nil || !f.ScheduledFor.Equal(rec.LastScheduleTime) ||
		rec.Attempts < 1 || rec.Attempts >= scheduleAttempts || st.Last != nil && !st.Last.StartedAt.Before(&f.StartedAt) ||
		rec.LastMissed != nil && rec.LastMissed.Equal(rec.LastScheduleTime) {
		return time.Time{}, false
	}
	at := f.FinishedAt.Add(scheduleRetryAfter(rec.Attempts))
	if rec.Next != nil && !at.Before(rec.Next.Time) {
		return time.Time{}, false
	}
	return at, true
}

// markServed records the time due as served, and the times before it as missed.
func markServed(rec *v1.BackupScheduleStatus, s backup.Schedule, p schedulePlan) {
	at, next := metav1.NewTime(p.due), metav1.NewTime(s.Next(p.due))
	rec.LastScheduleTime, rec.Next = &at, &next
	rec.Attempts = 0
	if p.action == schedBegin {
		rec.Attempts = 1
	}
	if p.missed > 0 {
		orchestrate.MarkScheduleMissed(rec, p.missed, p.lastMissed, "it passed while a backup ran, while the cluster was paused or not bootstrapped, or while no watch supervised it")
	}
}

// scheduleLoop keeps the cluster's backup schedule while this watch supervises it.
func (w *watcher) scheduleLoop(ctx context.Context) {
	for ctx.Err() == nil {
		if orchestrate.SleepCtx(ctx, w.scheduleTurn(ctx)) != nil {
			return
		}
	}
}

// scheduleTurn carries out one turn of the backup schedule and says how long to wait for the
// next. A backup it takes runs to its end within the turn. A turn that fails waits longer each
// time (up to scheduleBackoffMax), so that nothing repeats in a tight loop.
func (w *watcher) scheduleTurn(ctx context.Context) time.Duration {
	r := w.s.Runner
	c := &v1.MysqlCluster{}
	if err := r.Kube.Get(ctx, w.key, c); err != nil || c.Spec.Paused || c.Spec.Backup == nil {
		return scheduleIdle
	}
	expr := c.Spec.Backup.Schedule
	if expr == "" {
		if st := c.Status.Backup; st != nil && st.Running != nil && st.Running.ScheduledFor != nil {
			// The schedule was removed while its backup ran: that backup still ends.
			return w.takeScheduledBackup(ctx, c)
		}
		return scheduleIdle
	}
	s, err := backup.ParseSchedule(expr)
	if err != nil {
		return w.scheduleRefused(ctx, c, "BackupScheduleInvalid", "not keeping the backup schedule: "+err.Error())
	}
	now := r.Clock()
	p := planSchedule(c, s, expr, now)
	switch p.action {
	case schedWait:
		return p.wait
	case schedContinue:
		return w.takeScheduledBackup(ctx, c)
	}
	if err := w.supGuard("keep the backup schedule"); err != nil {
		return scheduleIdle
	}
	switch p.action {
	case schedStart:
		return w.startSchedule(ctx, c, s, expr, now)
	case schedServed:
		markServed(c.Status.Backup.Schedule, s, p)
		if err := r.Kube.Status().Update(ctx, c); err != nil {
			return w.scheduleFailed("record the schedule time served", err)
		}
		w.reportMissed(ctx, c, p)
		return 0
	}
	mark := func(rec *v1.BackupScheduleStatus) { markServed(rec, s, p) }
	what := "for the schedule time"
	if p.action == schedRetry {
		mark = func(rec *v1.BackupScheduleStatus) { rec.Attempts++ }
		what = fmt.Sprintf("again (attempt %d of %d: %s failed) for the schedule time", c.Status.Backup.Schedule.Attempts+1, scheduleAttempts, c.Status.Backup.LastFailure.ID)
	}
	id, err := r.BeginScheduledBackup(ctx, c, p.due, mark)
	switch {
	case errors.Is(err, outcome.ErrInvalid):
		return w.scheduleRefused(ctx, c, "BackupScheduleRefused", "not keeping the backup schedule: "+err.Error())
	case err != nil:
		return w.scheduleFailed("begin the scheduled backup", err)
	}
	w.reportMissed(ctx, c, p)
	msg := fmt.Sprintf("backup %s begins, %s %s (%s)", id, what, p.due.UTC().Format(time.RFC3339), expr)
	w.report(Transition{Action: "backup", Reason: msg})
	r.Event(ctx, c, false, "BackupScheduled", msg)
	return w.takeScheduledBackup(ctx, c)
}

// scheduleBackoffMax bounds the wait after failed schedule turns.
const scheduleBackoffMax = 5 * time.Minute

// scheduleFailed reports a failed turn (once per message) and returns the growing wait.
func (w *watcher) scheduleFailed(what string, err error) time.Duration {
	if apierrors.IsConflict(err) || errors.Is(err, outcome.ErrHeld) {
		// Another writer came first: read again soon.
		return time.Second
	}
	msg := what + ": " + err.Error()
	if msg != w.scheduleErr {
		w.scheduleErr = msg
		w.report(Transition{Action: "backup", Reason: msg})
	}
	w.scheduleFails++
	return min(time.Duration(1<<min(w.scheduleFails, 9))*time.Second, scheduleBackoffMax)
}

// scheduleRefused reports, once per message, why the schedule cannot be kept at all (an invalid
// schedule, a flavor with no backups yet), also as a warning Event.
func (w *watcher) scheduleRefused(ctx context.Context, c *v1.MysqlCluster, reason, msg string) time.Duration {
	if msg != w.scheduleErr {
		w.scheduleErr = msg
		w.report(Transition{Action: "backup", Reason: msg})
		w.s.Runner.Event(ctx, c, true, reason, msg)
	}
	return scheduleIdle
}

// startSchedule begins keeping a schedule new to the status: times from now on are due.
func (w *watcher) startSchedule(ctx context.Context, c *v1.MysqlCluster, s backup.Schedule, expr string, now time.Time) time.Duration {
	if c.Status.Backup == nil {
		c.Status.Backup = &v1.BackupStatus{}
	}
	next := metav1.NewTime(s.Next(now))
	c.Status.Backup.Schedule = &v1.BackupScheduleStatus{Schedule: expr, Since: metav1.NewTime(now), Next: &next}
	if err := w.s.Runner.Kube.Status().Update(ctx, c); err != nil {
		return w.scheduleFailed("record the backup schedule", err)
	}
	w.scheduleErr, w.scheduleFails = "", 0
	w.report(Transition{Action: "backup", Reason: fmt.Sprintf("keeping the backup schedule %q: the next backup is due at %s", expr, next.UTC().Format(time.RFC3339))})
	return 0
}

// reportMissed says which schedule times passed with no backup taken for them.
func (w *watcher) reportMissed(ctx context.Context, c *v1.MysqlCluster, p schedulePlan) {
	if p.missed == 0 {
		return
	}
	msg := fmt.Sprintf("%d backup schedule time(s) before %s passed with no backup taken for them (a backup still ran, the cluster was paused or not bootstrapped, or no watch supervised it); one backup is taken for the latest", p.missed, p.due.UTC().Format(time.RFC3339))
	w.report(Transition{Action: "backup", Reason: msg})
	w.s.Runner.Event(ctx, c, true, "BackupScheduleMissed", msg)
}

// scheduledStartBound bounds how long a backup the watch takes (a scheduled one, or one of
// `backup create` it took on) may wait before its copy starts (for a replica to copy, the
// backup account, the Job's pod to run): one waiting longer is aborted, a failure that alerts,
// rather than holding the schedule for good. The copy itself is not bounded.
var scheduledStartBound = 15 * time.Minute

// copyWatchEvery is how often a backup the watch takes is checked against scheduledStartBound.
var copyWatchEvery = 10 * time.Second

// takeScheduledBackup takes the backup recorded in status.backup.running to its end (a
// scheduled one begun by an earlier watch, or one of `backup create` holding up a time due) and
// reports how it ended. A refused scheduled backup's time is recorded as missed with the
// refusal by the backup itself; a failed one is in status.backup.lastFailure; one whose copy
// has not started scheduledStartBound after it began is aborted.
func (w *watcher) takeScheduledBackup(ctx context.Context, c *v1.MysqlCluster) time.Duration {
	r := w.s.Runner
	run := *c.Status.Backup.Running
	var mu sync.Mutex
	at := run // the stage it is at, as Backup reports it
	progress := func(now v1.BackupRun) { mu.Lock(); at = now; mu.Unlock() }
	stuck := func() error {
		if r.Clock().Sub(run.StartedAt.Time) < scheduledStartBound {
			return nil
		}
		if started, err := r.BackupCopyStarted(ctx, w.key, run.ID); err != nil || started {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		return fmt.Errorf("its copy had not started %s after it began (stage %s: %s)", scheduledStartBound, at.Stage, at.Message)
	}
	if why := stuck(); why != nil {
		// Found so (a watch that took it on late): aborted before another wait.
		return w.abortStuck(ctx, run, why)
	}
	bctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		t := time.NewTicker(copyWatchEvery)
		defer t.Stop()
		for {
			select {
			case <-bctx.Done():
				return
			case <-t.C:
			}
			if why := stuck(); why != nil {
				cancel(why)
				return
			}
		}
	}()
	rec, err := r.Backup(bctx, w.key, orchestrate.BackupOptions{ID: run.ID, Progress: progress})
	cancel(nil)
	<-watched
	switch cause := context.Cause(bctx); {
	case ctx.Err() != nil:
		// Lost the supervisor Lease or stopping: the next supervisor takes it on.
		return 0
	case err != nil && cause != nil && !errors.Is(cause, context.Canceled):
		return w.abortStuck(ctx, run, cause)
	case err != nil:
		return w.scheduleFailed("backup "+run.ID, err)
	}
	w.scheduleErr, w.scheduleFails = "", 0
	w.report(Transition{Action: "backup", Reason: fmt.Sprintf("backup %s completed: %d bytes stored from %s, at GTID %s", rec.ID, rec.StoredBytes, rec.Source, rec.GTIDPosition)})
	w.applyRetention(ctx)
	return 0
}

// applyRetention deletes the backups spec.backup.retention no longer keeps, after a scheduled
// backup succeeded (as 'backup prune' does), and reports what it deleted; a bucket this process
// cannot reach (a watch outside the cluster, an in-cluster endpoint) is reported, and the backups
// stay until a prune that can reach it.
func (w *watcher) applyRetention(ctx context.Context) {
	r := w.s.Runner
	c := &v1.MysqlCluster{}
	if err := r.Kube.Get(ctx, w.key, c); err != nil {
		return
	}
	rule, ok := catalog.RetentionOf(c)
	if !ok {
		return
	}
	deleted, err := pruneBackups(ctx, r.Kube, c, rule, r.Clock())
	ids := make([]string, 0, len(deleted))
	for _, e := range deleted {
		ids = append(ids, e.Entry.ID)
	}
	if len(ids) > 0 {
		msg := fmt.Sprintf("deleted %d backup(s) spec.backup.retention no longer keeps (%s): %s", len(ids), rule, strings.Join(ids, ", "))
		r.Event(ctx, c, false, "BackupsPruned", msg)
		w.report(Transition{Action: "backup", Reason: msg})
	}
	if err != nil {
		msg := fmt.Sprintf("retention not applied: %v; the backups stay until 'backup prune %s' (with --endpoint where the bucket is reached at another address)", err, c.Name)
		r.Event(ctx, c, true, "BackupPruneFailed", msg)
		w.report(Transition{Action: "backup", Reason: msg})
	}
}

// pruneBackups opens the cluster's bucket and deletes the backups the rule expires.
func pruneBackups(ctx context.Context, kube client.Reader, c *v1.MysqlCluster, rule catalog.Retention, now time.Time) ([]catalog.Expired, error) {
	cfg, err := catalog.StoreConfig(ctx, kube, c)
	if err != nil {
		return nil, err
	}
	st, err := objectstore.New(cfg)
	if err != nil {
		return nil, err
	}
	expired, err := catalog.Expiring(ctx, st, c, rule, now)
	if err != nil {
		return nil, err
	}
	return catalog.DeleteExpired(ctx, st, c, expired, now)
}

// abortStuck aborts a backup whose copy did not start in time (refused by the abort when it
// started meanwhile), once this watch still holds the cluster, and waits for its pods to go.
func (w *watcher) abortStuck(ctx context.Context, run v1.BackupRun, stuck error) time.Duration {
	if err := w.supGuard("abort backup " + run.ID); err != nil {
		return scheduleIdle
	}
	why := "aborted by the watch that took it: " + stuck.Error()
	if err := w.s.Runner.AbortStuckBackup(ctx, w.key, run.ID, why); err != nil {
		return w.scheduleFailed("abort backup "+run.ID, err)
	}
	w.report(Transition{Action: "backup", Reason: "backup " + run.ID + " " + why})
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := w.s.Runner.WaitBackupStopped(wctx, w.key, run.ID); err != nil {
		return w.scheduleFailed("wait for the aborted backup "+run.ID+" to stop", err)
	}
	return 0
}

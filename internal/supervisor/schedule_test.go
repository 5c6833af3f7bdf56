package supervisor

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/testenv/clustertest"
)

// TestScheduleKeptOnceEach attacks the schedule's records against a real API server, with a
// clock the test moves: a new schedule is recorded and nothing is due at once; three hours
// later one backup is begun for the latest hour, the two before counted missed; that backup
// refused (no replica it may copy) is withdrawn and its hour counted missed in the same write,
// with an Event, and never retried before the next hour; of two actors beginning the same hour
// only one begins it (the other's write conflicts); a scheduled backup found waiting past its
// bound before its copy started is aborted, a failure with why, and the schedule goes on.
func TestScheduleKeptOnceEach(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube := clustertest.WrappedClient(t, env, func(*http.Request) {})
	c := clustertest.RunningCluster(t, ctx, kube, "sched", true)
	key := client.ObjectKeyFromObject(c)
	c.Spec.Backup = &v1.BackupSpec{Bucket: "bucket", Endpoint: "http://127.0.0.1:9", CredentialsSecretName: "bucket-creds", Schedule: "@hourly"}
	if err := kube.Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	clock := time.Date(2026, 12, 7, 9, 30, 0, 0, time.UTC)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	move := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	w := &watcher{
		s: &Supervisor{
			Runner: orchestrate.Runner{Kube: kube, Holder: "sched-watch", Now: now},
		},
		key: key, stopping: make(chan struct{}), wake: make(chan struct{}, 1),
	}
	read := func() *v1.MysqlCluster {
		t.Helper()
		cl := &v1.MysqlCluster{}
		if err := kube.Get(ctx, key, cl); err != nil {
			t.Fatal(err)
		}
		return cl
	}
	hour := func(h int) time.Time { return time.Date(2026, 12, 7, h, 0, 0, 0, time.UTC) }

	w.scheduleTurn(ctx)
	rec := read().Status.Backup.Schedule
	if rec == nil || rec.Schedule != "@hourly" || !rec.Since.Time.Equal(clock) || rec.Next == nil || !rec.Next.Time.Equal(hour(10)) {
		t.Fatalf("a new schedule: %+v, want it recorded from now, next at 10:00", rec)
	}
	if wait := w.scheduleTurn(ctx); wait <= 0 || read().Status.Backup.Running != nil {
		t.Fatalf("nothing due yet: wait %s, running %+v", wait, read().Status.Backup.Running)
	}

	// 12:30: 12:00 due, 10:00 and 11:00 missed; the backup is refused (no ready replica).
	move(3 * time.Hour)
	w.scheduleTurn(ctx)
	st := read().Status.Backup
	rec = st.Schedule
	if st.Running != nil || st.Last != nil || st.LastFailure != nil {
		t.Fatalf("after the refused backup: %+v, want nothing running or recorded", st)
	}
	if rec.LastScheduleTime == nil || !rec.LastScheduleTime.Time.Equal(hour(12)) || rec.Missed != 3 ||
		rec.LastMissed == nil || !rec.LastMissed.Time.Equal(hour(12)) || !strings.Contains(rec.LastMissedReason, "refused") {
		t.Fatalf("schedule after 12:00's refused backup: %+v, want 12:00 served and missed with the refusal, 3 missed in all", rec)
	}
	events := &corev1.EventList{}
	if err := kube.List(ctx, events, client.InNamespace("default")); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]int{}
	for _, e := range events.Items {
		if e.InvolvedObject.Name == "sched" {
			reasons[e.Reason]++
		}
	}
	if reasons["BackupScheduled"] != 1 || reasons["BackupScheduleMissed"] != 2 {
		t.Errorf("events %v: want 1 BackupScheduled, 2 BackupScheduleMissed (10:00 and 11:00, then 12:00's refusal)", reasons)
	}
	for range 3 {
		if wait := w.scheduleTurn(ctx); wait <= 0 {
			t.Fatalf("a refused hour is retried: wait %s", wait)
		}
	}
	if got := read().Status.Backup.Schedule; got.Missed != 3 {
		t.Fatalf("turns after the refusal changed the count: %+v", got)
	}

	// 13:05: two actors begin 13:00 from the same read; one wins.
	move(35 * time.Minute)
	s, err := backup.ParseSchedule("@hourly")
	if err != nil {
		t.Fatal(err)
	}
	a, b := read(), read()
	p := planSchedule(a, s, "@hourly", now())
	if p.action != schedBegin || !p.due.Equal(hour(13)) {
		t.Fatalf("plan at 13:05: %+v", p)
	}
	mark := func(rec *v1.BackupScheduleStatus) { markServed(rec, s, p) }
	ra := orchestrate.Runner{Kube: kube, Holder: "actor-a", Now: now}
	rb := orchestrate.Runner{Kube: kube, Holder: "actor-b", Now: now}
	ida, erra := ra.BeginScheduledBackup(ctx, a, p.due, mark)
	_, errb := rb.BeginScheduledBackup(ctx, b, p.due, mark)
	if erra != nil || !apierrors.IsConflict(errb) {
		t.Fatalf("two actors beginning 13:00: %v and %v, want the second to conflict", erra, errb)
	}
	st = read().Status.Backup
	if st.Running == nil || st.Running.ID != ida || st.Running.ScheduledFor == nil || !st.Running.ScheduledFor.Time.Equal(hour(13)) ||
		!st.Schedule.LastScheduleTime.Time.Equal(hour(13)) {
		t.Fatalf("after the begin: running %+v, schedule %+v", st.Running, st.Schedule)
	}

	// That backup recorded as waiting at StartingJob; 20 minutes later a watch takes it on and
	// aborts it at once.
	cl := read()
	cl.Status.Backup.Running.Stage, cl.Status.Backup.Running.Message = orchestrate.StageBackupStartingJob, "the backup account is not on sched-2 yet"
	if err := kube.Status().Update(ctx, cl); err != nil {
		t.Fatal(err)
	}
	move(20 * time.Minute)
	w.scheduleTurn(ctx)
	st = read().Status.Backup
	if st.Running != nil || st.LastFailure == nil || st.LastFailure.ID != ida || !strings.Contains(st.LastFailure.Message, "had not started 15m0s after it began (stage StartingJob") ||
		st.LastFailure.ScheduledFor == nil {
		t.Fatalf("a scheduled backup stuck before its copy: running %+v, last failure %+v; want it aborted with why", st.Running, st.LastFailure)
	}

	// A backup taken on while it waits (the primary it was asked for is not ready): the watch
	// chooses by the source recorded, not by its own default, and aborts it once the bound
	// passes with its copy not started, while Backup waits.
	defer func(every time.Duration) { copyWatchEvery = every }(copyWatchEvery)
	copyWatchEvery = 50 * time.Millisecond
	primary := &corev1.Pod{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: "default", Name: "sched-0"}, primary); err != nil {
		t.Fatal(err)
	}
	primary.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
	if err := kube.Status().Update(ctx, primary); err != nil {
		t.Fatal(err)
	}
	cl = read()
	due := metav1.NewTime(hour(13))
	cl.Status.Backup.Running = &v1.BackupRun{ID: "20261207T133000Z-waits", Stage: orchestrate.StageBackupChoosingSource, Holder: "a-laptop",
		StartedAt: metav1.NewTime(now()), ScheduledFor: &due, SourceRequest: orchestrate.BackupSourcePrimary, Job: "sched-backup-waits"}
	if err := kube.Status().Update(ctx, cl); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); w.scheduleTurn(ctx) }()
	eventually(t, ctx, "the backup waiting for the primary", func() error {
		if run := read().Status.Backup.Running; run == nil || !strings.Contains(run.Message, `the primary "sched-0" is not ready`) {
			return fmt.Errorf("running %+v", run)
		}
		return nil
	})
	move(16 * time.Minute)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting backup was not aborted once its bound passed")
	}
	st = read().Status.Backup
	if st.Running != nil || st.LastFailure == nil || st.LastFailure.ID != "20261207T133000Z-waits" || !strings.Contains(st.LastFailure.Message, "had not started 15m0s after it began (stage ChoosingSource") {
		t.Fatalf("a backup waiting past its bound: running %+v, last failure %+v", st.Running, st.LastFailure)
	}

	// 13:41: 13:00's backup failed; another is begun for it a minute after the failure, not
	// before, and counted.
	if attempts := st.Schedule.Attempts; attempts != 1 {
		t.Fatalf("13:00 recorded with %d attempts, want 1", attempts)
	}
	if wait := w.scheduleTurn(ctx); wait <= 0 || read().Status.Backup.Running != nil {
		t.Fatalf("a retry before its minute: wait %s, running %+v", wait, read().Status.Backup.Running)
	}
	move(time.Minute)
	done = make(chan struct{})
	go func() { defer close(done); w.scheduleTurn(ctx) }()
	eventually(t, ctx, "a second backup for 13:00", func() error {
		if st := read().Status.Backup; st.Schedule.Attempts != 2 || !st.Schedule.LastScheduleTime.Time.Equal(hour(13)) {
			return fmt.Errorf("schedule %+v, running %+v", st.Schedule, st.Running)
		}
		return nil
	})
	if run := read().Status.Backup.Running; run != nil && (run.ScheduledFor == nil || !run.ScheduledFor.Time.Equal(hour(13))) {
		t.Fatalf("the retry is not for 13:00: %+v", run)
	}
	move(16 * time.Minute) // waiting, it is aborted past its bound; refused, it is already over
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the retried backup was neither refused nor aborted once its bound passed")
	}
	// 13:58: failed again (the next attempt would come after 14:00) or refused (missed): no
	// third attempt for 13:00.
	if wait := w.scheduleTurn(ctx); wait <= 0 || read().Status.Backup.Running != nil {
		t.Fatalf("a third backup for 13:00: wait %s, running %+v", wait, read().Status.Backup.Running)
	}
	if got := read().Status.Backup; got.Schedule.Attempts != 2 {
		t.Fatalf("schedule after the retry: %+v, want 2 attempts for 13:00", got.Schedule)
	} else {
		t.Logf("the retry for 13:00: last failure %s (%s); last missed %v (%s)", got.LastFailure.ID, got.LastFailure.Message, got.Schedule.LastMissed, got.Schedule.LastMissedReason)
	}
}

// eventually retries f every 50 ms until it returns nil, failing the test when ctx ends first.
func eventually(t *testing.T, ctx context.Context, what string, f func() error) {
	t.Helper()
	for {
		err := f()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/testenv"
)

// TestWatchTakesScheduledBackups: `watch` keeps spec.backup.schedule (every minute here). It
// records the schedule, then begins a backup for the first time due; killed (SIGKILL) while
// that backup runs, a second watch takes the same backup to its end, for the same schedule
// time, with no second backup for it. A `backup create` run while the next scheduled backup
// runs never copies beside it (the bucket's manifests never overlap in time). `status` shows
// the schedule; every backup the schedule began names a distinct schedule time.
func TestWatchTakesScheduledBackups(t *testing.T) {
	t.Parallel()
	viaPortForward(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	const name = "bksched"
	if res := mysqlctl(t, "create", name, "--image", "mariadb:10.11", "--replicas", "3", "--storage-size", "256Mi", "--wait", "--timeout", "4m"); res.code != 0 {
		t.Fatalf("create: exit %d\n%s", res.code, res.stderr)
	}
	defer deleteCluster(t, name)
	s3 := testenv.StartS3T(t, testenv.S3Options{})
	useBucket(t, ctx, name, s3)
	updateSpec(t, ctx, name, func(s *v1.MysqlClusterSpec) { s.Backup.Schedule = "* * * * *" })

	w := startWatch(t, nil, name)
	w.supervising(t, ctx)
	first := scheduledRunning(t, ctx, name, "")
	// Killed while the backup runs: nothing stops the Job, and the next watch takes it on.
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	<-w.done
	st := getCluster(t, ctx, name).Status.Backup
	killedMid := st != nil && st.Running != nil && st.Running.ID == first.ID
	w2 := startWatch(t, nil, name)
	c := waitBackupDone(t, ctx, name, first.ID)
	if l := c.Status.Backup.Last; l.ScheduledFor == nil || !l.ScheduledFor.Equal(first.ScheduledFor) {
		t.Errorf("the completed backup %+v: want it taken for the schedule time %s", l, first.ScheduledFor)
	}
	if killedMid {
		eventually(t, ctx, "the second watch reports the backup it took on", func() error {
			if w2.actions(t, "backup", first.ID+" completed") == 0 {
				return errors.New("not yet")
			}
			return nil
		})
	} else {
		t.Logf("backup %s ended before the first watch was killed: the take-over is not exercised in this run", first.ID)
	}

	// The next scheduled backup, and a `backup create` meanwhile: it takes that backup on, or
	// (when that one ended first) takes its own after it, never beside it.
	next := scheduledRunning(t, ctx, name, first.ID)
	res := mysqlctl(t, "backup", "create", name, "-o", "json")
	var rec v1.BackupRecord
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &rec) != nil {
		t.Fatalf("backup create during a scheduled backup: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if rec.ID != next.ID {
		t.Logf("backup create took %s, after the scheduled %s had ended", rec.ID, next.ID)
	}
	noOverlap(t, name)

	// A retention rule (the newest complete backup only), applied by watch once the next
	// scheduled backup completes: the first backup is deleted from the bucket.
	updateSpec(t, ctx, name, func(s *v1.MysqlClusterSpec) { s.Backup.Retention = &v1.BackupRetention{KeepLast: 1} })
	eventually(t, ctx, "watch pruning the first backup", func() error {
		pruned, err := r.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=BackupsPruned"})
		if err != nil {
			return err
		}
		for _, e := range pruned.Items {
			if strings.Contains(e.Message, first.ID) {
				return nil
			}
		}
		return fmt.Errorf("%d BackupsPruned events, none naming %s", len(pruned.Items), first.ID)
	})
	if res := mysqlctl(t, "backup", "list", name, "-o", "json"); res.code != 0 || strings.Contains(res.stdout, first.ID) {
		t.Errorf("backup list after the prune: exit %d, want %s gone:\n%s", res.code, first.ID, res.stdout)
	}

	// Every backup the schedule began names its own schedule time.
	events, err := r.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=BackupScheduled"})
	if err != nil {
		t.Fatal(err)
	}
	times := map[string]string{}
	for _, e := range events.Items {
		_, after, _ := strings.Cut(e.Message, "for the schedule time ")
		at, _, _ := strings.Cut(after, " ")
		if other, ok := times[at]; ok && other != e.Message {
			t.Errorf("two backups for the schedule time %s: %q and %q", at, other, e.Message)
		}
		times[at] = e.Message
	}
	if len(times) < 2 {
		t.Errorf("BackupScheduled events for %d schedule times, want at least 2: %v", len(times), times)
	}
	if res := mysqlctl(t, "status", name); res.code != 0 || !strings.Contains(res.stdout, `schedule "* * * * *", `) {
		t.Errorf("status: exit %d, want the schedule and its next time:\n%s", res.code, res.stdout)
	}
	// No password or bucket key in what watch printed, the status or the Events.
	status, err := json.Marshal(getCluster(t, ctx, name).Status)
	if err != nil {
		t.Fatal(err)
	}
	all, err := r.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var evText strings.Builder
	for _, e := range all.Items {
		evText.WriteString(e.Message + "\n")
	}
	texts := []string{w.output(), w.stderr(), w2.output(), w2.stderr(), string(status), evText.String()}
	noPasswords(t, secret(t, ctx, name), texts...)
	for _, txt := range texts {
		if strings.Contains(txt, s3.SecretKey) {
			t.Errorf("the bucket's secret key leaked into %.80q", txt)
		}
	}
	if code, _ := w2.stop(t); code != 0 {
		t.Errorf("watch exited %d", code)
	}
}

// noOverlap checks, from the bucket, that no two of the cluster's backups copied at once.
func noOverlap(t *testing.T, name string) {
	t.Helper()
	res := mysqlctl(t, "backup", "list", name, "-o", "json")
	var list struct {
		Backups []backup.Manifest `json:"backups"`
	}
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &list) != nil {
		t.Fatalf("backup list: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	ms := list.Backups
	sort.Slice(ms, func(i, j int) bool { return ms[i].StartedAt.Before(ms[j].StartedAt) })
	for i := 1; i < len(ms); i++ {
		if ms[i].StartedAt.Before(ms[i-1].FinishedAt) {
			t.Errorf("backups %s (%s to %s) and %s (from %s) copied at once", ms[i-1].ID, ms[i-1].StartedAt, ms[i-1].FinishedAt, ms[i].ID, ms[i].StartedAt)
		}
	}
	if len(ms) < 2 {
		t.Errorf("the bucket lists %d backups, want at least 2", len(ms))
	}
}

// scheduledRunning waits for a scheduled backup other than notID to run, and returns it.
func scheduledRunning(t *testing.T, ctx context.Context, name, notID string) v1.BackupRun {
	t.Helper()
	var run v1.BackupRun
	eventually(t, ctx, "a scheduled backup running", func() error {
		c := getCluster(t, ctx, name)
		if st := c.Status.Backup; st != nil && st.Running != nil && st.Running.ScheduledFor != nil && st.Running.ID != notID {
			run = *st.Running
			return nil
		}
		return fmt.Errorf("status.backup %+v", c.Status.Backup)
	})
	return run
}

// waitBackupDone waits until the backup id is the cluster's last completed one.
func waitBackupDone(t *testing.T, ctx context.Context, name, id string) *v1.MysqlCluster {
	t.Helper()
	var c *v1.MysqlCluster
	eventually(t, ctx, "backup "+id+" completed", func() error {
		c = getCluster(t, ctx, name)
		st := c.Status.Backup
		switch {
		case st != nil && st.Last != nil && st.Last.ID == id:
			return nil
		case st != nil && st.LastFailure != nil && st.LastFailure.ID == id:
			t.Fatalf("backup %s failed: %s", id, st.LastFailure.Message)
		}
		return errors.New("not yet")
	})
	return c
}

// TestWatchRetriesScheduledBackupAfterStoreFailure: the object store is killed (SIGKILL) while a
// scheduled backup runs, and comes back. The backup fails cleanly: recorded as failed for its
// schedule time, an Event, no manifest (`backup list` shows no backup of that ID). A minute after
// the failure `watch` begins another backup for the same schedule time (attempt 2), with no
// command typed, and it completes: listed, recorded as the schedule time's backup.
func TestWatchRetriesScheduledBackupAfterStoreFailure(t *testing.T) {
	t.Parallel()
	viaPortForward(t)
	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	const name = "bkretry"
	// Three instances: a scheduled backup never takes the only replica that acknowledges.
	if res := mysqlctl(t, "create", name, "--image", "mariadb:10.11", "--replicas", "3", "--storage-size", "256Mi", "--wait", "--timeout", "4m"); res.code != 0 {
		t.Fatalf("create: exit %d\n%s", res.code, res.stderr)
	}
	defer deleteCluster(t, name)
	s3 := testenv.StartS3T(t, testenv.S3Options{})
	useBucket(t, ctx, name, s3)
	// Every other minute: the retry, a minute after the failure, comes before the next time.
	updateSpec(t, ctx, name, func(s *v1.MysqlClusterSpec) { s.Backup.Schedule = "*/2 * * * *" })
	w := startWatch(t, nil, name)
	w.supervising(t, ctx)
	first := scheduledRunning(t, ctx, name, "")
	if err := s3.Kill(); err != nil {
		t.Fatal(err)
	}
	var failure v1.BackupRecord
	eventually(t, ctx, "the backup failing with its store gone", func() error {
		st := getCluster(t, ctx, name).Status.Backup
		switch {
		case st.Last != nil && st.Last.ID == first.ID:
			t.Fatalf("backup %s completed before its store was killed: the failure is not exercised", first.ID)
		case st.LastFailure != nil && st.LastFailure.ID == first.ID:
			failure = *st.LastFailure
			return nil
		}
		return fmt.Errorf("status.backup %+v", st)
	})
	t.Logf("backup %s failed %s after it began: %s", first.ID, failure.FinishedAt.Sub(first.StartedAt.Time).Round(time.Second), failure.Message)
	if failure.ScheduledFor == nil || !failure.ScheduledFor.Equal(first.ScheduledFor) {
		t.Errorf("the failure %+v: want it recorded for the schedule time %s", failure, first.ScheduledFor)
	}
	if err := s3.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	retry := scheduledRunning(t, ctx, name, first.ID)
	if retry.ScheduledFor == nil || !retry.ScheduledFor.Equal(first.ScheduledFor) {
		t.Errorf("the next backup %s is for %v: want a retry for the failed schedule time %s", retry.ID, retry.ScheduledFor, first.ScheduledFor)
	}
	if gap := retry.StartedAt.Sub(failure.FinishedAt.Time); gap < 55*time.Second {
		t.Errorf("the retry began %s after the failure: want about a minute (a failing store is not hammered)", gap)
	}
	c := waitBackupDone(t, ctx, name, retry.ID)
	if rec := c.Status.Backup.Schedule; rec == nil || rec.Attempts != 2 || rec.LastScheduleTime == nil || !rec.LastScheduleTime.Equal(first.ScheduledFor) {
		t.Errorf("the schedule's record %+v: want 2 attempts for %s", rec, first.ScheduledFor)
	}
	res := mysqlctl(t, "backup", "list", name, "-o", "json")
	var list struct {
		Backups []backup.Manifest `json:"backups"`
	}
	if res.code != 0 || json.Unmarshal([]byte(res.stdout), &list) != nil {
		t.Fatalf("backup list: exit %d\n%s\n%s", res.code, res.stdout, res.stderr)
	}
	if len(list.Backups) != 1 || list.Backups[0].ID != retry.ID {
		t.Errorf("backup list: %d backups (%s): want only the retry %s, nothing of the failed %s", len(list.Backups), res.stdout, retry.ID, first.ID)
	}
	var reasons []string
	evs, err := r.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		reasons = append(reasons, e.Reason+": "+e.Message)
	}
	all := strings.Join(reasons, "\n")
	for _, want := range []string{"BackupFailed: backup " + first.ID, "attempt 2 of 3: " + first.ID + " failed"} {
		if !strings.Contains(all, want) {
			t.Errorf("no Event says %q:\n%s", want, all)
		}
	}
	noPasswords(t, secret(t, ctx, name), w.output(), w.stderr(), all)
	if strings.Contains(w.output()+w.stderr()+all, s3.SecretKey) {
		t.Error("the bucket's secret key leaked into watch's output or an Event")
	}
	if code, _ := w.stop(t); code != 0 {
		t.Errorf("watch exited %d", code)
	}
}

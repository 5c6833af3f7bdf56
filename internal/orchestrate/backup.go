package orchestrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/backup"
	"github.com/mysqlctl/mysqlctl/internal/backup/catalog"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// A backup (internal/backup/DESIGN.md) is recorded in status.backup.running, a slot of its own:
// it never takes status.operation or the cluster's Lease, so it never holds up a failover, a
// switchover or a repair, and none of them waits for it. Its stages are walked by runBackup; each
// is idempotent, so a backup interrupted anywhere (a killed CLI) continues where it stopped when
// `backup create` runs again.
const (
	StageBackupChoosingSource   = "ChoosingSource"
	StageBackupPreparingAccount = "PreparingAccount"
	StageBackupStartingJob      = "StartingJob"
	StageBackupCopying          = "Copying"
)

// BackupStages are a backup's stages in order.
var BackupStages = []string{StageBackupChoosingSource, StageBackupPreparingAccount, StageBackupStartingJob, StageBackupCopying}

// Sources a backup may be taken from (BackupOptions.Source), besides a pod's name.
const (
	BackupSourceReplica = failover.BackupSourceReplica
	BackupSourcePrimary = failover.BackupSourcePrimary
)

// BackupOptions say how to take a backup.
type BackupOptions struct {
	// Source is "" or BackupSourceReplica (a ready replica that is not needed to acknowledge the
	// primary's commits), BackupSourcePrimary, or an instance's pod name.
	Source string
	// Progress, when set, is told every stage the backup enters and every change of its message.
	Progress func(run v1.BackupRun)
	// ID, when set, is the backup in progress to take to its end: none is begun, and when it
	// is no longer the one running, its record is returned (or why there is none).
	ID string
}

// backupStep is one stage of a backup: it returns the next stage ("" ends the backup) and the
// change that records it. A notYet error is waited out; any other error fails the backup.
type backupStep func(r *Runner, ctx context.Context, c *v1.MysqlCluster, run *v1.BackupRun, opts BackupOptions) (string, func(*v1.BackupStatus), error)

var backupSteps = map[string]backupStep{
	StageBackupChoosingSource:   (*Runner).bkChoosingSource,
	StageBackupPreparingAccount: (*Runner).bkPreparingAccount,
	StageBackupStartingJob:      (*Runner).bkStartingJob,
	StageBackupCopying:          (*Runner).bkCopying,
}

// Backup takes a backup of the cluster, or continues the one recorded in status.backup.running,
// and returns its record once it completed. A failed backup is recorded in
// status.backup.lastFailure and returned as the error.
func (r *Runner) Backup(ctx context.Context, key client.ObjectKey, opts BackupOptions) (*v1.BackupRecord, error) {
	mine := opts.ID
	reported := ""
	for {
		c := &v1.MysqlCluster{}
		if err := r.Kube.Get(ctx, key, c); err != nil {
			return nil, err
		}
		if err := backupRefused(c); err != nil {
			return nil, err
		}
		st := c.Status.Backup
		if st == nil || st.Running == nil {
			if mine != "" {
				return finishedBackup(st, mine)
			}
			id, err := r.beginBackup(ctx, c, opts.Source)
			switch {
			case apierrors.IsConflict(err):
				// Another writer came first (maybe another backup): read again.
			case err != nil:
				return nil, err
			default:
				mine = id
			}
			continue
		}
		run := st.Running
		if opts.ID != "" && run.ID != opts.ID {
			return finishedBackup(st, opts.ID)
		}
		mine = run.ID
		if opts.Progress != nil && run.Stage+run.Message != reported {
			opts.Progress(*run)
			reported = run.Stage + run.Message
		}
		if err := r.backupStep(ctx, c, run, opts); err != nil {
			return nil, err
		}
	}
}

// backupRefused says why no backup of the cluster can be taken at all (nil when one can).
func backupRefused(c *v1.MysqlCluster) error {
	if c.Spec.Backup == nil {
		return catalog.NoBackupSpec(c)
	}
	if specs.Flavor(c) != v1.FlavorMariaDB {
		return fmt.Errorf("%w: cluster %s runs %s: backups take MariaDB's mariadb-backup, and MySQL's (XtraBackup) is not built yet", outcome.ErrInvalid, c.Name, specs.Flavor(c))
	}
	return nil
}

// MarkScheduleMissed records n schedule times missed, the last of them at last, and why.
func MarkScheduleMissed(rec *v1.BackupScheduleStatus, n int, last time.Time, why string) {
	lm := metav1.NewTime(last)
	rec.Missed += int32(n)
	rec.LastMissed, rec.LastMissedReason = &lm, why
}

// beginBackup records a new backup at its first stage.
func (r *Runner) beginBackup(ctx context.Context, c *v1.MysqlCluster, source string) (string, error) {
	run, err := r.newBackupRun(c)
	if err != nil {
		return "", err
	}
	if source != "" {
		run.SourceRequest = source
	}
	c.Status.Backup.Running = run
	return run.ID, r.Kube.Status().Update(ctx, c)
}

// newBackupRun is a new backup at its first stage (status.backup made when absent).
func (r *Runner) newBackupRun(c *v1.MysqlCluster) (*v1.BackupRun, error) {
	now := r.Clock()
	// A random suffix: two actors' clocks may name the same second.
	suffix, err := specs.RandomPassword(6)
	if err != nil {
		return nil, err
	}
	id := backup.NewID(now, strings.ToLower(suffix))
	if c.Status.Backup == nil {
		c.Status.Backup = &v1.BackupStatus{}
	}
	return &v1.BackupRun{ID: id, Stage: StageBackupChoosingSource, Holder: r.Holder, StartedAt: metav1.NewTime(now), Job: specs.BackupJobName(c, id),
		SourceRequest: BackupSourceReplica}, nil
}

// BeginScheduledBackup records a new backup taken for the schedule time due, in the same status
// write as the schedule's record (mark): a run killed after it never takes a second backup for
// that time, and of two actors only one begins it (the other's write conflicts). It returns
// the backup's ID; Backup then takes it.
func (r *Runner) BeginScheduledBackup(ctx context.Context, c *v1.MysqlCluster, due time.Time, mark func(*v1.BackupScheduleStatus)) (string, error) {
	if err := backupRefused(c); err != nil {
		return "", err
	}
	if c.Status.Backup == nil || c.Status.Backup.Schedule == nil {
		return "", fmt.Errorf("%w: no schedule recorded in status.backup.schedule", outcome.ErrHeld)
	}
	if c.Status.Backup.Running != nil {
		return "", fmt.Errorf("%w: backup %s is running", outcome.ErrHeld, c.Status.Backup.Running.ID)
	}
	run, err := r.newBackupRun(c)
	if err != nil {
		return "", err
	}
	at := metav1.NewTime(due)
	run.ScheduledFor = &at
	c.Status.Backup.Running = run
	mark(c.Status.Backup.Schedule)
	return run.ID, r.Kube.Status().Update(ctx, c)
}

// backupStep runs the recorded stage once and records what it did; a conflicting write is
// read again by the caller's loop.
func (r *Runner) backupStep(ctx context.Context, c *v1.MysqlCluster, run *v1.BackupRun, opts BackupOptions) error {
	step, ok := backupSteps[run.Stage]
	if !ok {
		return fmt.Errorf("unknown backup stage %q recorded in status (written by a newer mysqlctl?)", run.Stage)
	}
	if r.BeforeStage != nil {
		r.BeforeStage(ctx, run.Stage)
	}
	next, change, err := step(r, ctx, c, run, opts)
	var ny errNotYet
	switch {
	case errors.As(err, &ny):
		if run.Message != ny.msg {
			run.Message = ny.msg
			if err := r.Kube.Status().Update(ctx, c); err != nil && !apierrors.IsConflict(err) {
				return err
			}
		}
		return r.wait(ctx)
	case err != nil && run.Stage == StageBackupChoosingSource && (errors.Is(err, outcome.ErrInvalid) || errors.Is(err, outcome.ErrUnsafe)):
		// Refused before anything was done: withdrawn, not a failed backup (no lastFailure,
		// no alert). A scheduled one's time is missed, said in the same write.
		c.Status.Backup.Running = nil
		rec := c.Status.Backup.Schedule
		if run.ScheduledFor != nil && rec != nil {
			MarkScheduleMissed(rec, 1, run.ScheduledFor.Time, "the backup for it was refused: "+err.Error())
		}
		if uerr := r.Kube.Status().Update(ctx, c); uerr != nil {
			return errors.Join(err, uerr)
		}
		if run.ScheduledFor != nil && rec != nil {
			r.Event(ctx, c, true, "BackupScheduleMissed", fmt.Sprintf("no backup for the schedule time %s: backup %s was refused: %v", run.ScheduledFor.UTC().Format(time.RFC3339), run.ID, err))
		}
		return fmt.Errorf("backup of %s refused: %w", c.Name, err)
	case err != nil:
		return r.failBackup(ctx, c, run, err)
	}
	if change != nil {
		change(c.Status.Backup)
	}
	if r.BeforeMutation != nil {
		r.BeforeMutation(run.Stage, "recording its outcome")
	}
	if next == "" {
		c.Status.Backup.Running = nil
	} else {
		run.Stage, run.Message = next, ""
	}
	if err := r.Kube.Status().Update(ctx, c); err != nil {
		if !apierrors.IsConflict(err) {
			return err
		}
		return nil
	}
	if last := c.Status.Backup.Last; next == "" && last != nil && last.ID == run.ID {
		r.Event(ctx, c, false, "BackupCompleted", fmt.Sprintf("backup %s completed: %d bytes stored from %s, at GTID %s", last.ID, last.StoredBytes, last.Source, last.GTIDPosition))
	}
	return nil
}

// failBackup records a failed backup and returns why. Nothing of it is listed: only a backup
// whose manifest was written is one.
func (r *Runner) failBackup(ctx context.Context, c *v1.MysqlCluster, run *v1.BackupRun, cause error) error {
	if err := r.recordBackupFailure(ctx, c, run, cause.Error()); err != nil {
		return errors.Join(cause, err)
	}
	r.Event(ctx, c, true, "BackupFailed", fmt.Sprintf("backup %s failed at stage %s: %s", run.ID, run.Stage, cause))
	return fmt.Errorf("backup %s of %s failed at stage %s: %w", run.ID, c.Name, run.Stage, cause)
}

// recordBackupFailure deletes the backup's Job (one left running would copy on beside the next
// backup), then records the backup in status.backup.lastFailure and clears running.
func (r *Runner) recordBackupFailure(ctx context.Context, c *v1.MysqlCluster, run *v1.BackupRun, why string) error {
	if err := r.deleteBackupJob(ctx, c, run); err != nil {
		return err
	}
	c.Status.Backup.LastFailure = &v1.BackupRecord{ID: run.ID, Source: run.Source, StartedAt: run.StartedAt,
		FinishedAt: metav1.NewTime(r.Clock()), Message: why, ScheduledFor: run.ScheduledFor}
	c.Status.Backup.Running = nil
	if err := r.Kube.Status().Update(ctx, c); err != nil {
		return err
	}
	// Again, once nothing records the backup as running: an actor at StartingJob may have
	// created the Job after the first delete (it deletes a Job it finds orphaned as well).
	return r.deleteBackupJob(ctx, c, run)
}

func (r *Runner) deleteBackupJob(ctx context.Context, c *v1.MysqlCluster, run *v1.BackupRun) error {
	if run.Job == "" {
		return nil
	}
	return r.deleteJob(ctx, c, run.Job, "backup", true)
}

// deleteJob deletes a Job (what names it in errors: backup, restore) and its pods at once, not
// when the garbage collector gets to them: a copy left running would go on writing. With force
// they are deleted with no grace (their objects go at once, their containers soon after: a
// backup's copy must stop now); without, with their own grace, so that a pod's object stays until
// the node confirms its containers stopped (a restore waits for that before writing the volume
// again). (One by one: the shipped RBAC grants delete on pods, not deletecollection.)
func (r *Runner) deleteJob(ctx context.Context, c *v1.MysqlCluster, name, what string, force bool) error {
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name}}
	err := r.Kube.Delete(ctx, job, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the %s Job %s: %w", what, name, err)
	}
	pods := &corev1.PodList{}
	if err := r.Kube.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels{batchv1.JobNameLabel: name}); err != nil {
		return fmt.Errorf("list the %s Job %s's pods: %w", what, name, err)
	}
	var opts []client.DeleteOption
	if force {
		opts = append(opts, client.GracePeriodSeconds(0))
	}
	for i := range pods.Items {
		if err := r.Kube.Delete(ctx, &pods.Items[i], opts...); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete the %s Job %s's pod %s: %w", what, name, pods.Items[i].Name, err)
		}
	}
	return nil
}

// WaitBackupStopped waits until no pod of the backup's Job is left (an aborted copy has
// stopped: nothing more is written to the bucket under its ID).
func (r *Runner) WaitBackupStopped(ctx context.Context, key client.ObjectKey, id string) error {
	c := &v1.MysqlCluster{}
	c.Namespace, c.Name = key.Namespace, key.Name
	job := specs.BackupJobName(c, id)
	for {
		list := &corev1.PodList{}
		if err := r.Kube.List(ctx, list, client.InNamespace(key.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job}); err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return nil
		}
		if err := r.wait(ctx); err != nil {
			return fmt.Errorf("the pod %s of the backup Job %s is still there: %w", list.Items[0].Name, job, err)
		}
	}
}

// AbortBackup stops the backup recorded in status.backup.running: its Job is deleted (a copy
// under way is abandoned; without a manifest it is never taken for a backup, but its incomplete
// upload stays in the bucket until the bucket's lifecycle rule or objectstore.AbortIncomplete
// removes it) and the backup recorded as failed, aborted by a person.
func (r *Runner) AbortBackup(ctx context.Context, key client.ObjectKey) (string, error) {
	return r.abortBackup(ctx, key, "", "aborted by "+r.Holder)
}

// AbortStuckBackup aborts the backup id, still running, as AbortBackup does, recording why.
func (r *Runner) AbortStuckBackup(ctx context.Context, key client.ObjectKey, id, why string) error {
	_, err := r.abortBackup(ctx, key, id, why)
	return err
}

// abortBackup aborts the running backup (only when it is id, if given) and records why.
func (r *Runner) abortBackup(ctx context.Context, key client.ObjectKey, id, why string) (string, error) {
	c := &v1.MysqlCluster{}
	if err := r.Kube.Get(ctx, key, c); err != nil {
		return "", err
	}
	if c.Status.Backup == nil || c.Status.Backup.Running == nil || id != "" && c.Status.Backup.Running.ID != id {
		return "", fmt.Errorf("%w: cluster %s has no backup in progress", outcome.ErrInvalid, c.Name)
	}
	run := c.Status.Backup.Running
	done, err := r.copyFinished(ctx, c, run)
	if err != nil {
		return "", err
	}
	if id != "" {
		// A stuck backup's abort: one whose copy started meanwhile is not stuck.
		started, err := r.copyStarted(ctx, c, run)
		if err != nil {
			return "", err
		}
		if started {
			return "", fmt.Errorf("%w: the copy of backup %s has started", outcome.ErrHeld, run.ID)
		}
	}
	if done {
		// Its manifest is in the bucket: a backup, whatever the status says. Discarding it
		// here would leave a complete backup recorded as aborted.
		return "", fmt.Errorf("%w: backup %s of %s has finished copying (its Job %s completed): 'backup create %s' records it", outcome.ErrInvalid, run.ID, c.Name, run.Job, c.Name)
	}
	if err := r.recordBackupFailure(ctx, c, run, why); err != nil {
		return "", err
	}
	r.Event(ctx, c, true, "BackupAborted", fmt.Sprintf("backup %s aborted at stage %s: %s", run.ID, run.Stage, why))
	return run.ID, nil
}

// BackupCopyStarted reports whether the running backup id's copy has started (its Job's pod
// runs or ran the copying container); false once id is no longer running.
func (r *Runner) BackupCopyStarted(ctx context.Context, key client.ObjectKey, id string) (bool, error) {
	c := &v1.MysqlCluster{}
	if err := r.Kube.Get(ctx, key, c); err != nil {
		return false, err
	}
	if c.Status.Backup == nil || c.Status.Backup.Running == nil || c.Status.Backup.Running.ID != id {
		return false, nil
	}
	return r.copyStarted(ctx, c, c.Status.Backup.Running)
}

// copyStarted reports whether the backup's copying container has started (or ran).
func (r *Runner) copyStarted(ctx context.Context, c *v1.MysqlCluster, run *v1.BackupRun) (bool, error) {
	return r.copyState(ctx, c, run, func(job *batchv1.Job, st corev1.ContainerState) bool {
		return jobCondition(job, batchv1.JobComplete) || st.Running != nil || st.Terminated != nil
	})
}

// copyFinished reports whether the backup's Job finished its copy: the Job complete, or its
// copying container exited 0 (before the Job controller says so). At any stage: an actor killed
// after creating the Job, before recording it, leaves it running at StartingJob.
func (r *Runner) copyFinished(ctx context.Context, c *v1.MysqlCluster, run *v1.BackupRun) (bool, error) {
	return r.copyState(ctx, c, run, func(job *batchv1.Job, st corev1.ContainerState) bool {
		return jobCondition(job, batchv1.JobComplete) || st.Terminated != nil && st.Terminated.ExitCode == 0
	})
}

// copyState reads the backup's Job and its copying container's state (zero without a pod) and
// says what is asks of them; false without a Job.
func (r *Runner) copyState(ctx context.Context, c *v1.MysqlCluster, run *v1.BackupRun, is func(*batchv1.Job, corev1.ContainerState) bool) (bool, error) {
	if run.Job == "" {
		return false, nil
	}
	job := &batchv1.Job{}
	err := r.Kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: run.Job}, job)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	var st corev1.ContainerState
	if !jobCondition(job, batchv1.JobComplete) {
		pod, err := r.jobPod(ctx, c, job)
		if err != nil {
			return false, err
		}
		if pod != nil {
			for _, cs := range pod.Status.ContainerStatuses {
				if cs.Name == specs.BackupComponent {
					st = cs.State
				}
			}
		}
	}
	return is(job, st), nil
}

// finishedBackup is the outcome of backup id, once it is no longer running.
func finishedBackup(st *v1.BackupStatus, id string) (*v1.BackupRecord, error) {
	switch {
	case st != nil && st.Last != nil && st.Last.ID == id:
		return st.Last, nil
	case st != nil && st.LastFailure != nil && st.LastFailure.ID == id:
		return nil, fmt.Errorf("backup %s failed: %s", id, st.LastFailure.Message)
	}
	return nil, fmt.Errorf("backup %s is no longer recorded (replaced by a later one)", id)
}

// bkChoosingSource picks the instance to copy and records why.
func (r *Runner) bkChoosingSource(ctx context.Context, c *v1.MysqlCluster, run *v1.BackupRun, opts BackupOptions) (string, func(*v1.BackupStatus), error) {
	pods, err := r.Pods(ctx, c)
	if err != nil {
		return "", nil, err
	}
	asked := run.SourceRequest
	if asked == "" {
		asked = opts.Source // recorded by an earlier version
	}
	name, reason, err := chooseBackupSource(c, pods, asked)
	if err != nil {
		return "", nil, err
	}
	return StageBackupPreparingAccount, func(s *v1.BackupStatus) { s.Running.Source, s.Running.SourceReason = name, reason }, nil
}

// chooseBackupSource decides the source from the pods and the recorded status
// (failover.ChooseBackupSource); a refusal is an error of its kind. A named instance is any of
// the cluster's ordinals with its pod as listed, a member or not.
func chooseBackupSource(c *v1.MysqlCluster, pods map[int32]*corev1.Pod, source string) (string, string, error) {
	candidate := func(name string, p *corev1.Pod) failover.BackupCandidate {
		return failover.BackupCandidate{Name: name, Ready: p != nil && PodReady(p),
			Replica: p != nil && p.Labels[specs.LabelRole] == string(v1.RoleReplica), Quarantined: quarantined(c, name)}
	}
	find := func(name string) (failover.BackupCandidate, bool) {
		ord, ok := ordinalOf(c, name)
		if !ok || ScalePod(c, ord) != name {
			return failover.BackupCandidate{}, false
		}
		return candidate(name, pods[ord]), true
	}
	var members []failover.BackupCandidate
	for ord := range MemberCount(c) {
		members = append(members, candidate(ScalePod(c, ord), pods[ord]))
	}
	ch := failover.ChooseBackupSource(c.Status.CurrentPrimary, members, find, source, int(semiSyncWanted(c)))
	switch ch.Verdict {
	case failover.BackupWait:
		return "", "", notYet("%s", ch.Why)
	case failover.BackupInvalid:
		return "", "", fmt.Errorf("%w: %s is not an instance of cluster %s", outcome.ErrInvalid, source, c.Name)
	case failover.BackupUnsafe:
		return "", "", fmt.Errorf("%w: %s", outcome.ErrUnsafe, ch.Why)
	}
	return ch.Source, ch.Why, nil
}

// bkPreparingAccount makes sure the backup account exists with the password of the cluster's
// Secret (adding one when the Secret has none), created on the writable primary so that every
// replica receives it. It never writes on a read-only server.
func (r *Runner) bkPreparingAccount(ctx context.Context, c *v1.MysqlCluster, run *v1.BackupRun, _ BackupOptions) (string, func(*v1.BackupStatus), error) {
	// The primary may be changing hands: its account is written once no operation is under way
	// (and only where read_only is off, see below).
	if op := c.Status.Operation; op != nil {
		return "", nil, notYet("the %s under way (stage %s) to finish before the backup account is written", op.Type, op.Stage)
	}
	pwd, err := r.backupPassword(ctx, c)
	if err != nil {
		return "", nil, err
	}
	creds, err := r.readCredentials(ctx, c)
	if err != nil {
		return "", nil, err
	}
	primary := &corev1.Pod{}
	if err := r.Kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.Status.CurrentPrimary}, primary); err != nil {
		return "", nil, notYet("the primary %q: %v", c.Status.CurrentPrimary, err)
	}
	in, err := r.Connect(ctx, primary, topology.Credentials{User: RootUser, Password: creds.Root})
	if err != nil {
		return "", nil, notYet("the primary %s: %v", primary.Name, err)
	}
	defer func() { _ = in.Close() }()
	spec := topology.UserSpec{User: specs.BackupUser, Password: topology.Secret(pwd), Role: topology.RoleBackup}
	if err := in.EnsureUser(ctx, spec, topology.EnsureUserOptions{RequireWritable: true}); err != nil {
		return "", nil, notYet("the backup account on the primary %s: %v", primary.Name, err)
	}
	return StageBackupStartingJob, nil, nil
}

// backupPassword reads the backup account's password from the cluster's Secret, adding a
// random one when the key is missing (no other key is ever written).
func (r *Runner) backupPassword(ctx context.Context, c *v1.MysqlCluster) (string, error) {
	s := &corev1.Secret{}
	if err := r.Kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: specs.SecretName(c)}, s); err != nil {
		return "", err
	}
	if v := s.Data[specs.SecretBackupPassword]; len(v) > 0 {
		return string(v), nil
	}
	pwd, err := specs.RandomPassword(32)
	if err != nil {
		return "", err
	}
	// A merge patch conditional on the read: a concurrent writer's password is never replaced.
	base := client.MergeFromWithOptions(s.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[specs.SecretBackupPassword] = []byte(pwd)
	if err := r.Kube.Patch(ctx, s, base); err != nil {
		// The reason only: the request carried the password.
		return "", notYet("add %s to Secret %s: %s", specs.SecretBackupPassword, s.Name, apierrors.ReasonForError(err))
	}
	return pwd, nil
}

// bkCopying runs the backup Job and waits for it; its termination message is the manifest it
// wrote to the bucket.
func (r *Runner) bkCopying(ctx context.Context, c *v1.MysqlCluster, run *v1.BackupRun, _ BackupOptions) (string, func(*v1.BackupStatus), error) {
	job := &batchv1.Job{}
	err := r.Kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: run.Job}, job)
	if apierrors.IsNotFound(err) {
		// Never started again: a second copy under the same ID could replace a manifest the
		// first one wrote.
		return "", nil, fmt.Errorf("the backup Job %s is gone (deleted, or expired a day after it finished) and its result with it: take a new backup", run.Job)
	}
	if err != nil {
		return "", nil, notYet("read the backup Job %s: %v", run.Job, err)
	}
	pod, err := r.jobPod(ctx, c, job)
	if err != nil {
		return "", nil, notYet("read the backup Job %s's pod: %v", run.Job, err)
	}
	switch {
	case jobCondition(job, batchv1.JobComplete):
		m, raw, err := backupResult(pod)
		if err != nil {
			return "", nil, err
		}
		if m.ID != run.ID || m.Source != run.Source || m.Cluster != c.Name || m.ClusterUID != string(c.UID) {
			return "", nil, fmt.Errorf("the Job %s reported backup %s of %s/%s (cluster UID %s), not backup %s of %s: another backup's Job", job.Name, m.ID, m.Cluster, m.Source, m.ClusterUID, run.ID, run.Source)
		}
		if quarantined(c, run.Source) {
			return "", nil, fmt.Errorf("%w: %s was quarantined while it was copied: its data is not the cluster's, and the copy is not recorded as a backup (its manifest is in the bucket: 'backup delete %s %s' removes it)", outcome.ErrUnsafe, run.Source, c.Name, m.ID)
		}
		rec := &v1.BackupRecord{ID: run.ID, Source: run.Source, GTIDPosition: m.GTIDPosition, StartedAt: run.StartedAt,
			FinishedAt: metav1.NewTime(r.Clock()), RawBytes: raw, ScheduledFor: run.ScheduledFor}
		for _, o := range m.Objects {
			rec.StoredBytes += o.Size
		}
		return "", func(s *v1.BackupStatus) { s.Last = rec }, nil
	case jobCondition(job, batchv1.JobFailed):
		return "", nil, fmt.Errorf("the backup Job %s failed: %s", job.Name, jobFailure(job, pod, specs.BackupComponent))
	case pod == nil:
		return "", nil, notYet("the backup Job %s has no pod yet", job.Name)
	}
	return "", nil, notYet("the backup Job %s copies %s (pod %s %s)", job.Name, run.Source, pod.Name, pod.Status.Phase)
}

// bkStartingJob creates the backup Job (once: an existing one is this backup's).
func (r *Runner) bkStartingJob(ctx context.Context, c *v1.MysqlCluster, run *v1.BackupRun, _ BackupOptions) (string, func(*v1.BackupStatus), error) {
	if quarantined(c, run.Source) {
		return "", nil, fmt.Errorf("%w: %s was quarantined since it was chosen: its data is not the cluster's", outcome.ErrUnsafe, run.Source)
	}
	src := &corev1.Pod{}
	if err := r.Kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: run.Source}, src); err != nil {
		return "", nil, notYet("the source %s: %v", run.Source, err)
	}
	if err := r.backupAccountOn(ctx, c, src, run); err != nil {
		return "", nil, err
	}
	b := c.Spec.Backup
	job, err := specs.BuildBackupJob(c, specs.BackupJobOptions{ID: run.ID, Source: src, AgentImage: b.AgentImage, Bucket: specs.Bucket{
		Endpoint: b.Endpoint, Region: b.Region, Bucket: b.Bucket, Prefix: b.Prefix, PathStyle: b.PathStyle, SecretName: b.CredentialsSecretName,
	}})
	if err != nil {
		return "", nil, err
	}
	if err := r.Kube.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", nil, err
	}
	// An abort may have ended the run between this stage's read and the create: a Job it no
	// longer records would copy on beside the next backup.
	live := &v1.MysqlCluster{}
	if err := r.Kube.Get(ctx, client.ObjectKeyFromObject(c), live); err != nil {
		return "", nil, notYet("read the cluster after creating the Job %s: %v", job.Name, err)
	}
	if st := live.Status.Backup; st == nil || st.Running == nil || st.Running.ID != run.ID {
		if err := r.deleteBackupJob(ctx, c, run); err != nil {
			return "", nil, err
		}
		return "", nil, fmt.Errorf("backup %s was ended (aborted) while its Job was created: the Job is deleted", run.ID)
	}
	return StageBackupCopying, nil, nil
}

// backupAccountOn waits until the backup account, written on the primary, works on the source:
// a replica that has not applied it yet would refuse the tool's login (1045) and fail the Job.
// A Job already created (a run that stopped after creating it) is not held back.
func (r *Runner) backupAccountOn(ctx context.Context, c *v1.MysqlCluster, src *corev1.Pod, run *v1.BackupRun) error {
	switch err := r.Kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: run.Job}, &batchv1.Job{}); {
	case err == nil:
		return nil // created by an earlier run
	case !apierrors.IsNotFound(err):
		return notYet("read the backup Job %s: %v", run.Job, err)
	}
	pwd, err := r.backupPassword(ctx, c)
	if err != nil {
		return err
	}
	in, err := r.Connect(ctx, src, topology.Credentials{User: specs.BackupUser, Password: topology.Secret(pwd)})
	if err == nil {
		defer func() { _ = in.Close() }()
		_, err = in.Dialect(ctx)
	}
	switch {
	case topology.KindOf(err) == topology.ErrorAuth:
		return notYet("the backup account to reach %s (it replicates from the primary; a replica whose applier is stopped or behind gets it later)", src.Name)
	case err != nil:
		return notYet("%s as the backup account: %v", src.Name, err)
	}
	return r.sourceCurrent(ctx, c, src)
}

// sourceCurrent waits until a replica source receives from the primary and applies what it
// receives within failover.maxCandidateLag: a copy of a stopped or lagging replica would be older
// than its time says (and silence the alert for a missing backup).
func (r *Runner) sourceCurrent(ctx context.Context, c *v1.MysqlCluster, src *corev1.Pod) error {
	if src.Name == c.Status.CurrentPrimary {
		return nil
	}
	primary := c.Status.CurrentPrimary
	creds, err := r.readCredentials(ctx, c)
	if err != nil {
		return err
	}
	in, err := r.Connect(ctx, src, topology.Credentials{User: RootUser, Password: creds.Root})
	if err != nil {
		return notYet("%s: %v", src.Name, err)
	}
	defer func() { _ = in.Close() }()
	s := in.Observe(ctx, topology.ObserveOptions{Now: r.Clock, Secrets: []string{string(creds.Root)}})
	switch bound := maxCandidateLag(c); {
	case !s.Complete():
		return notYet("observe %s: %v", src.Name, s.Err)
	case !replicatesFrom(s, specs.PodHost(c, primary)):
		return notYet("%s to replicate from the primary %s (a copy of it now would be older than it says)", src.Name, primary)
	case s.Replica.SecondsBehind == nil:
		return notYet("%s to report its lag", src.Name)
	case time.Duration(*s.Replica.SecondsBehind)*time.Second > bound:
		return notYet("%s to catch up with the primary (%ds behind, at most %s: failover.maxCandidateLag)", src.Name, *s.Replica.SecondsBehind, bound)
	}
	return nil
}

// jobPod is the Job's newest pod, or nil.
func (r *Runner) jobPod(ctx context.Context, c *v1.MysqlCluster, job *batchv1.Job) (*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := r.Kube.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	slices.SortFunc(list.Items, func(a, b corev1.Pod) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return &list.Items[len(list.Items)-1], nil
}

func jobCondition(job *batchv1.Job, t batchv1.JobConditionType) bool {
	return slices.ContainsFunc(job.Status.Conditions, func(c batchv1.JobCondition) bool { return c.Type == t && c.Status == corev1.ConditionTrue })
}

// terminationMessage is the message the pod's container exited with.
func terminationMessage(pod *corev1.Pod, container string) string {
	if pod == nil {
		return ""
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == container && cs.State.Terminated != nil {
			return cs.State.Terminated.Message
		}
	}
	return ""
}

// backupResult reads the manifest the agent reported.
func backupResult(pod *corev1.Pod) (backup.Manifest, int64, error) {
	var res struct {
		Result struct {
			Manifest backup.Manifest `json:"manifest"`
			RawBytes int64           `json:"rawBytes"`
		} `json:"result"`
	}
	msg := terminationMessage(pod, specs.BackupComponent)
	if err := json.Unmarshal([]byte(msg), &res); err != nil {
		return backup.Manifest{}, 0, fmt.Errorf("the backup Job completed but its result cannot be read (%v): %q", err, msg)
	}
	if err := res.Result.Manifest.Validate(); err != nil {
		return backup.Manifest{}, 0, fmt.Errorf("the backup Job reported a manifest that is not valid: %w", err)
	}
	return res.Result.Manifest, res.Result.RawBytes, nil
}

// jobFailure says why a Job failed: its pod's message (the agent's last words), or the Job's
// condition.
func jobFailure(job *batchv1.Job, pod *corev1.Pod, container string) string {
	if msg := strings.TrimSpace(terminationMessage(pod, container)); msg != "" {
		return msg
	}
	if pod != nil {
		// The container that failed: the agent's installer, or one that never ran.
		for _, cs := range append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
			if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
				return fmt.Sprintf("container %s of pod %s exited %d (%s) %s", cs.Name, pod.Name, t.ExitCode, t.Reason, strings.TrimSpace(t.Message))
			}
			if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "PodInitializing" {
				return fmt.Sprintf("container %s of pod %s is waiting: %s %s", cs.Name, pod.Name, w.Reason, w.Message)
			}
		}
	}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed {
			return c.Reason + ": " + c.Message
		}
	}
	return "no reason recorded"
}

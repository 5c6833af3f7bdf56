package orchestrate

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/topology"
	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
)

// A restored cluster (spec.restore) is bootstrapped with three stages before the usual ones:
// RestoringData runs the restore Job on the first instance's volume, StartingInstance then gives
// the StatefulSet its first instance, and ContinuingHistory (after WaitingForPods) starts the
// primary's binary log again at the backup's position before anything is written to it. The
// cluster is created with one instance; its others are added by a scale, seeded from it.
const (
	StageRestoringData     = "RestoringData"
	StageStartingInstance  = "StartingInstance"
	StageContinuingHistory = "ContinuingHistory"
)

// RestoreStages are the stages a restored cluster's bootstrap adds, in order (WaitingForPods
// comes between StartingInstance and ContinuingHistory).
var RestoreStages = []string{StageRestoringData, StageStartingInstance, StageContinuingHistory}

// historyPending reports whether the restored primary's GTID history is not continued yet.
func historyPending(c *v1.MysqlCluster) bool {
	// A bootstrapped cluster (a primary recorded) is past it, whatever its status says of it.
	return c.Spec.Restore != nil && c.Status.CurrentPrimary == "" && (c.Status.Restore == nil || c.Status.Restore.HistoryContinuedAt == nil)
}

// firstBootstrapStage is where a new cluster's bootstrap begins.
func firstBootstrapStage(c *v1.MysqlCluster) string {
	if specs.RestorePending(c) {
		return StageRestoringData
	}
	return StageWaitingForPods
}

// bsWaitingForPods follows the kind's prepare, which proved every pod ready.
func (r *Runner) bsWaitingForPods(_ context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	if historyPending(x.c) {
		return StageContinuingHistory, nil, nil
	}
	return StageRecordingProvenance, nil, nil
}

// bsRestoringData claims the first instance's volume, runs the restore Job on it and waits for
// it. A failed Job is deleted, so that 'resume' runs a new one (the agent starts over in a
// volume its own interrupted restore left, and refuses any other content).
func (r *Runner) bsRestoringData(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c := x.c
	if !specs.RestorePending(c) {
		return StageStartingInstance, nil, nil
	}
	name := specs.RestoreJobName(c)
	job := &batchv1.Job{}
	err := r.Kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, job)
	if apierrors.IsNotFound(err) {
		return "", nil, r.startRestoreJob(ctx, c)
	}
	if err != nil {
		return "", nil, notYet("read the restore Job %s: %v", name, err)
	}
	if !metav1.IsControlledBy(job, c) {
		l := job.Labels
		if l[specs.LabelManagedBy] != specs.FieldOwner || l[specs.LabelComponent] != specs.RestoreComponent || l[specs.LabelInstance] != c.Name {
			return "", nil, fmt.Errorf("%w: a Job named %s exists and is not a restore Job of mysqlctl: delete or rename it, or restore under another name", outcome.ErrUnsafe, name)
		}
		// An earlier cluster's of the same name, not collected yet: never this restore's.
		if err := r.deleteJob(ctx, c, name, "restore", false); err != nil {
			return "", nil, err
		}
		return "", nil, notYet("the restore Job %s of an earlier cluster named %s is deleted", name, c.Name)
	}
	pod, err := r.jobPod(ctx, c, job)
	if err != nil {
		return "", nil, notYet("read the restore Job %s's pod: %v", name, err)
	}
	switch {
	case jobCondition(job, batchv1.JobComplete):
		res, err := restoreResult(pod)
		if err != nil {
			return "", nil, err
		}
		if want := c.Spec.Restore.GTIDPosition; want != "" && res.GTIDPosition != want {
			return "", nil, fmt.Errorf("%w: the restored data is at GTID position %q, and the backup's manifest records %q: the object is not the backup it names", outcome.ErrUnsafe, res.GTIDPosition, want)
		}
		if err := r.deleteJob(ctx, c, name, "restore", false); err != nil {
			return "", nil, err
		}
		now := metav1.NewTime(r.Clock())
		return StageStartingInstance, func(s *v1.MysqlClusterStatus) {
			s.Restore = &v1.RestoreStatus{BackupID: c.Spec.Restore.BackupID, GTIDPosition: res.GTIDPosition, Job: name, RestoredAt: &now}
			s.Operation.Message = ""
		}, nil
	case jobCondition(job, batchv1.JobFailed):
		why := jobFailure(job, pod, specs.RestoreComponent)
		if err := r.deleteJob(ctx, c, name, "restore", false); err != nil {
			return "", nil, err
		}
		r.Event(ctx, c, true, "RestoreFailed", fmt.Sprintf("the restore Job %s failed: %s", name, why))
		return "", nil, fmt.Errorf("the restore Job %s failed: %s; it is deleted, and 'resume %s' runs it again once the cause is fixed", name, why, c.Name)
	case pod == nil:
		return "", nil, notYet("the restore Job %s has no pod yet", name)
	}
	// A pod whose private key is gone would wait for it until the Job's deadline.
	if err := r.restoreIdentityThere(ctx, c); err != nil {
		return "", nil, err
	}
	return "", nil, notYet("the restore Job %s restores backup %s (pod %s %s)", name, c.Spec.Restore.BackupID, pod.Name, pod.Status.Phase)
}

// startRestoreJob claims the first instance's volume (unless it exists: the StatefulSet adopts
// it by its name) and creates the restore Job.
func (r *Runner) startRestoreJob(ctx context.Context, c *v1.MysqlCluster) error {
	if err := r.claimRestoreVolume(ctx, c); err != nil {
		return err
	}
	// A Job deleted (failed, or an earlier cluster's) may still have a pod writing the volume.
	pods := &corev1.PodList{}
	if err := r.Kube.List(ctx, pods, client.InNamespace(c.Namespace), client.MatchingLabels{batchv1.JobNameLabel: specs.RestoreJobName(c)}); err != nil {
		return notYet("list the restore Job's pods: %v", err)
	}
	if len(pods.Items) > 0 {
		return notYet("the pod %s of a deleted restore Job has not stopped yet", pods.Items[0].Name)
	}
	if err := r.restoreIdentityThere(ctx, c); err != nil {
		return err
	}
	job, err := specs.BuildRestoreJob(c, c.Spec.Backup.AgentImage)
	if err != nil {
		return err
	}
	if _, err := r.guard("create the restore Job " + job.Name); err != nil {
		return err
	}
	if err := r.Kube.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create the restore Job %s: %w", job.Name, err)
	}
	r.Event(ctx, c, false, "RestoreStarted", fmt.Sprintf("the restore Job %s restores backup %s of %s/%s into %s", job.Name, c.Spec.Restore.BackupID, c.Spec.Restore.SourceNamespace, c.Spec.Restore.SourceCluster, specs.DataClaimName(c, 0)))
	return notYet("the restore Job %s starts", job.Name)
}

// claimRestoreVolume creates the first instance's volume claim, marked with the cluster's UID. An
// existing claim of that name is restored into only when this cluster made it: one kept from an
// earlier cluster of the same name holds that cluster's data (perhaps an earlier restore of the
// same backup, written to since), which the agent would take for a finished restore.
func (r *Runner) claimRestoreVolume(ctx context.Context, c *v1.MysqlCluster) error {
	pvc, err := specs.BuildDataClaim(c, 0)
	if err != nil {
		return err
	}
	have := &corev1.PersistentVolumeClaim{}
	switch err := r.Kube.Get(ctx, client.ObjectKeyFromObject(pvc), have); {
	case err == nil && have.DeletionTimestamp != nil:
		return notYet("the volume claim %s of an earlier cluster named %s is being deleted", pvc.Name, c.Name)
	case err == nil:
		if have.Annotations[specs.AnnotationRestoreOf] != string(c.UID) {
			return fmt.Errorf("%w: the volume claim %s exists and was not made by this restore (kept from an earlier cluster named %s?): a restore goes into a new, empty volume only; delete the claim ('delete %s --delete-data' deletes a cluster with its volumes) or restore under another name",
				outcome.ErrUnsafe, pvc.Name, c.Name, c.Name)
		}
		return nil
	case !apierrors.IsNotFound(err):
		return notYet("read the volume claim %s: %v", pvc.Name, err)
	}
	if _, err := r.guard("claim the volume " + pvc.Name); err != nil {
		return err
	}
	if err := r.Kube.Create(ctx, pvc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("claim the volume %s: %w", pvc.Name, err)
	}
	return nil
}

// restored is what the restore agent reports (physical.Restored).
type restored struct {
	GTIDPosition string `json:"gtidPosition"`
	BinlogFile   string `json:"binlogFile,omitempty"`
	Again        bool   `json:"again,omitempty"`
}

// restoreResult reads what the restore Job's agent reported.
func restoreResult(pod *corev1.Pod) (restored, error) {
	var res struct {
		Result restored `json:"result"`
	}
	msg := terminationMessage(pod, specs.RestoreComponent)
	if err := json.Unmarshal([]byte(msg), &res); err != nil {
		return restored{}, fmt.Errorf("the restore Job completed but its result cannot be read (%v): %q", err, msg)
	}
	return res.Result, nil
}

// bsStartingInstance gives the StatefulSet its first instance, on the restored volume.
func (r *Runner) bsStartingInstance(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	if specs.RestorePending(x.c) {
		return "", nil, fmt.Errorf("%w: no restore of backup %s is recorded as finished", outcome.ErrUnsafe, x.c.Spec.Restore.BackupID)
	}
	if _, err := applyDerived(ctx, r.Kube, x.c, specs.Convergence{}, func() error { _, err := r.guard("apply the derived objects"); return err }); err != nil {
		return "", nil, err
	}
	return StageWaitingForPods, nil, nil
}

// bsContinuingHistory starts the restored primary's binary log at the backup's position: the
// restored data holds that history and its binary log none, so its first transaction would
// otherwise begin a history of its own, and no replica or later restore could follow it. Only
// a server whose binary log holds nothing yet is reset; one that already holds the position (an
// earlier run did it and stopped before recording it) is left as it is; anything else is
// refused. The fencing token that came with the backup (another cluster's) is forgotten first,
// and so is the replication configuration of the instance the backup was copied from.
func (r *Runner) bsContinuingHistory(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, name := x.c, x.primaryName
	if c.Status.Restore == nil || c.Status.Restore.RestoredAt == nil {
		return "", nil, fmt.Errorf("%w: no restore is recorded as finished", outcome.ErrUnsafe)
	}
	pos := c.Status.Restore.GTIDPosition
	want, err := gtid.ParseMariaDBPos(pos)
	if err != nil || want.IsEmpty() {
		return "", nil, fmt.Errorf("%w: the restored GTID position %q cannot be continued: %v", outcome.ErrUnsafe, pos, err)
	}
	snap, err := x.ss.Observe(name)
	if err != nil {
		return "", nil, notYet("observe %s: %v", name, err)
	}
	have := snap.GTID.BinlogState
	now := metav1.NewTime(r.Clock())
	done := func(s *v1.MysqlClusterStatus) {
		s.Restore.HistoryContinuedAt = &now
		s.Operation.Evidence = &v1.OperationEvidence{Candidate: name, CandidateReason: fmt.Sprintf("restored from backup %s of %s/%s at GTID position %s", c.Spec.Restore.BackupID, c.Spec.Restore.SourceNamespace, c.Spec.Restore.SourceCluster, pos)}
	}
	switch {
	case binlogHolds(have, want):
		return StageRecordingProvenance, done, nil
	case len(have) > 0:
		return "", nil, fmt.Errorf("%w: %s wrote transactions of its own (%s) before its GTID history was continued from the backup's %s: delete the cluster with its data and restore again", outcome.ErrUnsafe, name, gtidList(have), pos)
	}
	if err := r.forgetRestoredFence(ctx, x, name); err != nil {
		return "", nil, err
	}
	in, err := x.ss.Connect(name)
	if err != nil {
		return "", nil, err
	}
	// A copy of a replica may hold its replication configuration (it never starts: the
	// configuration sets skip_slave_start); the new primary forgets it.
	if err := in.ResetReplication(ctx); err != nil {
		return "", nil, err
	}
	if err := in.ContinueHistory(ctx, pos); err != nil {
		return "", nil, err
	}
	return StageRecordingProvenance, done, nil
}

// forgetRestoredFence removes the fencing token the backup brought along, through a session of
// its own with no epoch (the fenced ones would be refused by it), still guarded by the Lease.
func (r *Runner) forgetRestoredFence(ctx context.Context, x *stageEnv, name string) error {
	var pod *corev1.Pod
	for _, m := range x.members {
		if m.Pod.Name == name {
			pod = m.Pod
		}
	}
	if pod == nil {
		return notYet("%s has no ready pod", name)
	}
	in, err := r.Connect(ctx, pod, topology.Credentials{User: RootUser, Password: x.creds.Root})
	if err != nil {
		return notYet("connect to %s: %v", name, err)
	}
	defer func() { _ = in.Close() }()
	in.Guard = r.guard
	return in.ForgetFence(ctx)
}

// binlogHolds reports whether a binary log whose gtid_binlog_state is state holds the backup's
// position want: for each of its GTIDs, the state's last GTID of the same domain and originating
// server is at least as far (ContinueHistory put it there; the servers of the backup's history
// write no more in this cluster). A history of the server's own that merely counts further does
// not hold it.
func binlogHolds(state []gtid.MariaDBGTID, want gtid.MariaDBPos) bool {
	for _, w := range want.GTIDs() {
		if w.Seq == 0 {
			continue
		}
		if !slices.ContainsFunc(state, func(g gtid.MariaDBGTID) bool {
			return g.Domain == w.Domain && g.ServerID == w.ServerID && g.Seq >= w.Seq
		}) {
			return false
		}
	}
	return len(state) > 0
}

// restoreIdentityThere checks, for an encrypted backup, that the Secret with the private key the
// restore Job decrypts it with exists (a Job whose Secret is missing would only wait): the restore
// command makes it from the identity file it is given, and it is deleted once the data is in place.
// Its absence is for a person to fix (a configuration refusal: not retried in a tight loop).
func (r *Runner) restoreIdentityThere(ctx context.Context, c *v1.MysqlCluster) error {
	if len(c.Spec.Restore.EncryptedTo) == 0 {
		return nil
	}
	name := specs.RestoreIdentitySecretName(c)
	err := r.Kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, &corev1.Secret{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: backup %s is encrypted, and the Secret %s/%s with a private key that opens it is not there: run the restore command again with --identity FILE (an age identity file of one of %s), or create it ('kubectl create secret generic %s -n %s --from-file=%s=FILE') and run 'resume %s'",
			outcome.ErrConfig, c.Spec.Restore.BackupID, c.Namespace, name, strings.Join(c.Spec.Restore.EncryptedTo, ", "), name, c.Namespace, specs.RestoreIdentityKey, c.Name)
	case err != nil:
		return notYet("read the Secret %s: %v", name, err)
	}
	return nil
}

// dropRestoreIdentity deletes the Secret with the private key once the data is in place (it is
// idempotent, and runs before every later stage of the bootstrap, so that one made again by a late
// restore command is deleted too): nothing needs it any more, and the cluster keeps only public
// keys.
func (r *Runner) dropRestoreIdentity(ctx context.Context, c *v1.MysqlCluster) error {
	if c.Spec.Restore == nil || len(c.Spec.Restore.EncryptedTo) == 0 || specs.RestorePending(c) {
		return nil
	}
	name := specs.RestoreIdentitySecretName(c)
	if _, err := r.guard("delete the Secret " + name); err != nil {
		return err
	}
	err := r.Kube.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: name}})
	if err != nil && !apierrors.IsNotFound(err) {
		return notYet("delete the Secret %s with the restore's private key: %v", name, err)
	}
	return nil
}

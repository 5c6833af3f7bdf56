package orchestrate

// The scale stages, one function each, walked by the stage engine (stage.go).

import (
	"context"
	"fmt"
	"slices"
	"strings"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// Scale actions (status.scale.action).
const (
	scaleAdd    = "add"
	scaleRemove = "remove"
	// ScaleRebuild re-seeds the instance of ordinal in place (rebuild).
	ScaleRebuild = "rebuild"
)

// ScalePod is the name of the cluster's pod of ordinal ord.
func ScalePod(c *v1.MysqlCluster, ord int32) string { return fmt.Sprintf("%s-%d", c.Name, ord) }

// scPlanning proves the primary answers, records the count in spec.replicas, and decides the
// first step: the instance in flight when the scale was interrupted or stopped, else the next.
func (r *Runner) scPlanning(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, sc := x.c, x.c.Status.Scale
	ps, err := x.ss.Observe(x.primaryName)
	if err != nil {
		return r.scWait(ctx, x, fmt.Errorf("the primary %s does not answer: %w", x.primaryName, err))
	}
	if sc.To > sc.Replicas && ps.Flavor.IsMySQL() {
		// Refused before any pod is made: a MySQL instance that cannot replay must be cloned.
		empty := topology.Snapshot{Flavor: ps.Flavor}
		if method, reason := failover.ChooseSeed(ps, empty); method == failover.SeedCopy {
			return r.stopScale(ctx, x, fmt.Sprintf("a new instance would need a copy of its data (%s), and copying a MySQL instance (the CLONE plugin) is not implemented by this version of mysqlctl", reason), nil)
		}
	}
	if ord, ok := ordinalOf(c, x.primaryName); ok && ord >= sc.To {
		return r.stopScale(ctx, x, fmt.Sprintf("the primary %s would be removed by a scale to %d (a failover moved it there); run 'scale %s --replicas %d' again, which switches over first", x.primaryName, sc.To, c.Name, sc.To), nil)
	}
	if sc.To < sc.Replicas {
		// Only replicas that acknowledge now count: a quarantined or stopped one does not, and a
		// scale that removes the last acknowledgers would be refused at DetachingInstance after
		// spec.replicas and the budget had changed.
		var going []string
		for ord := sc.To; ord < sc.Replicas; ord++ {
			going = append(going, ScalePod(c, ord))
		}
		if why, err := r.acksWithout(x, going...); err != nil || why != "" {
			if err != nil {
				return "", nil, err
			}
			return r.withdrawScale(ctx, x, why)
		}
	}
	if c.Spec.Replicas != sc.To {
		if err := r.setSpecReplicas(ctx, c, sc.To); err != nil {
			return "", nil, err
		}
	}
	inFlight := ScalePod(c, sc.Ordinal)
	if sc.Action != "" && !slices.Contains(sc.Done, "+"+inFlight) && !slices.Contains(sc.Done, "-"+inFlight) {
		switch {
		case sc.Action == scaleAdd && sc.Ordinal >= sc.To:
			// A new count below the instance being added: it is backed out, never joined.
			if err := r.deleteSeedJob(ctx, c, sc.Ordinal); err != nil {
				return "", nil, err
			}
			return StageDetachingInstance, func(s *v1.MysqlClusterStatus) {
				s.Scale.Action, s.Scale.SeedMethod, s.Scale.SeedReason, s.Scale.Donor, s.Scale.SeedJob, s.Scale.Seeded = scaleRemove, "", "", "", "", false
			}, nil
		case sc.Action == scaleAdd && sc.Seeded:
			return StageJoiningInstance, nil, nil
		case sc.Action == scaleAdd:
			return StageAddingInstance, nil, nil
		case sc.Replicas > sc.Ordinal:
			return StageDetachingInstance, nil, nil
		default:
			return StageRemovingInstance, nil, nil
		}
	}
	return r.scNext(ctx, x, sc.Replicas, nil)
}

// setSpecReplicas records the scale's count in spec.replicas, so that the spec says what the
// cluster is moving to (an apply -f of a new count wrote it already).
func (r *Runner) setSpecReplicas(ctx context.Context, c *v1.MysqlCluster, n int32) error {
	ctx, cancel, err := r.guardCtx(ctx, fmt.Sprintf("set spec.replicas of %s to %d", c.Name, n))
	if err != nil {
		return err
	}
	defer cancel()
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	obj := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name}}
	if err := r.Kube.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("set spec.replicas of %s to %d: %w", c.Name, n, err)
	}
	return nil
}

// scNext moves to the next instance, with done (the status change of the step just finished),
// or finishes the scale once the StatefulSet holds replicas = status.scale.to.
func (r *Runner) scNext(ctx context.Context, x *stageEnv, replicas int32, done func(*v1.MysqlClusterStatus)) (string, func(*v1.MysqlClusterStatus), error) {
	sc := x.c.Status.Scale
	then := func(f func(*v1.MysqlClusterStatus)) func(*v1.MysqlClusterStatus) {
		return func(s *v1.MysqlClusterStatus) {
			if done != nil {
				done(s)
			}
			s.Scale.SeedMethod, s.Scale.SeedReason, s.Scale.Donor, s.Scale.SeedJob, s.Scale.Seeded = "", "", "", "", false
			f(s)
		}
	}
	switch {
	case replicas < sc.To:
		ord := replicas
		r.Event(ctx, x.c, false, "ScaleAddingInstance", fmt.Sprintf("scale %s: adding %s", x.op.ID, ScalePod(x.c, ord)))
		return StageAddingInstance, then(func(s *v1.MysqlClusterStatus) {
			s.Scale.Action, s.Scale.Ordinal, s.Scale.Replicas = scaleAdd, ord, ord+1
		}), nil
	case replicas > sc.To:
		ord := replicas - 1
		r.Event(ctx, x.c, false, "ScaleRemovingInstance", fmt.Sprintf("scale %s: removing %s", x.op.ID, ScalePod(x.c, ord)))
		return StageDetachingInstance, then(func(s *v1.MysqlClusterStatus) {
			s.Scale.Action, s.Scale.Ordinal, s.Scale.Replicas = scaleRemove, ord, replicas
		}), nil
	}
	return r.scFinish(ctx, x, done)
}

// scFinish ends the scale: the primary waits for as many semi-sync acknowledgements as the spec
// asks once enough replicas replicate, and the cluster is recorded at its new count.
func (r *Runner) scFinish(ctx context.Context, x *stageEnv, done func(*v1.MysqlClusterStatus)) (string, func(*v1.MysqlClusterStatus), error) {
	c, sc := x.c, x.c.Status.Scale
	replicas := replicasIn(x, sc.To)
	semi, err := r.semiSyncAfter(ctx, x, replicas)
	if err != nil {
		return "", nil, err
	}
	msg := fmt.Sprintf("scaled from %d to %d instances", sc.From, sc.To)
	if done := sc.Done; len(done) > 0 {
		msg += " (" + strings.Join(done, ", ") + ")"
	}
	now, gen := x.now, c.Generation
	r.Event(ctx, c, false, "ScaleFinished", msg)
	return stageDone, func(s *v1.MysqlClusterStatus) {
		if done != nil {
			done(s)
		}
		if len(s.Scale.Done) > len(sc.Done) {
			msg = fmt.Sprintf("scaled from %d to %d instances (%s)", sc.From, sc.To, strings.Join(s.Scale.Done, ", "))
		}
		finish(s, now, "Succeeded", msg, 0)
		s.Scale = nil
		s.ReadyInstances = int32(replicas + 1)
		s.Ready = fmt.Sprintf("%d/%d", replicas+1, sc.To)
		s.ObservedGeneration = gen
		if len(s.ErrantInstances) > 0 {
			s.Phase = v1.PhaseDegraded
		}
		semi(s)
	}, nil
}

// replicasIn counts the ready members below ordinal n other than the primary and quarantined ones.
func replicasIn(x *stageEnv, n int32) int {
	replicas := 0
	for _, m := range x.members {
		if m.Pod.Name != x.primaryName && m.ordinal < n && !quarantined(x.c, m.Pod.Name) {
			replicas++
		}
	}
	return replicas
}

// semiSyncAfter makes the primary wait for the acknowledgements the spec asks for once enough
// replicas replicate (a primary that ran asynchronously before), or records why it cannot.
func (r *Runner) semiSyncAfter(ctx context.Context, x *stageEnv, replicas int) (func(*v1.MysqlClusterStatus), error) {
	c := x.c
	ps, err := x.ss.Observe(x.primaryName)
	if err != nil {
		return nil, err
	}
	if want := semiSyncAcks(c); want > 0 && !ps.SemiSync.SourceEnabled && int64(replicas) >= want {
		in, err := x.ss.Connect(x.primaryName)
		if err != nil {
			return nil, err
		}
		if err := r.enableSemiSyncSource(ctx, c, in); err != nil {
			return nil, err
		}
		return nil, notYet("semi-sync enabled on %s: waiting for its acknowledgers", x.primaryName)
	}
	return r.settleSemiSync(ctx, x, x.primaryName, ps, replicas)
}

// stopScale ends the scale's run with the reason, the scale kept in status.scale so that
// 'resume' continues it from Planning (the instance in flight first).
func (r *Runner) stopScale(ctx context.Context, x *stageEnv, reason string, change func(*v1.MysqlClusterStatus)) (string, func(*v1.MysqlClusterStatus), error) {
	msg := fmt.Sprintf("%s; the scale stopped (run 'resume %s' once fixed)", reason, x.c.Name)
	r.Event(ctx, x.c, true, "ScaleStopped", msg)
	now := x.now
	return "", func(s *v1.MysqlClusterStatus) {
		if change != nil {
			change(s)
		}
		finish(s, now, "Failed", msg, 0)
		// The cluster serves as before (the instance in flight is in no Service); only a
		// quarantine leaves it Degraded. status.scale keeps the PodDisruptionBudget closed.
		if len(s.ErrantInstances) > 0 {
			s.Phase = v1.PhaseDegraded
		}
	}, nil
}

// withdrawScale ends a scale or rebuild refused before it changed anything (no instance added,
// detached, quarantined or copied into): its record goes with the refusal, so that it blocks no
// later operation, leaves nothing to resume or abort, and the budget opens again. One that had
// changed something stops as stopScale says.
func (r *Runner) withdrawScale(ctx context.Context, x *stageEnv, reason string) (string, func(*v1.MysqlClusterStatus), error) {
	sc := x.c.Status.Scale
	if sc.Action != "" && sc.Action != ScaleRebuild || len(sc.Done) > 0 || sc.SeedMethod != "" || sc.Seeded || sc.SeedJob != "" {
		return r.stopScale(ctx, x, reason, nil)
	}
	what := fmt.Sprintf("the scale to %d", sc.To)
	if sc.Action == ScaleRebuild {
		what = "the rebuild of " + ScalePod(x.c, sc.Ordinal)
	}
	msg := fmt.Sprintf("%s; %s was refused and changed nothing", reason, what)
	r.Event(ctx, x.c, true, "ScaleRefused", msg)
	now := x.now
	return "", func(s *v1.MysqlClusterStatus) {
		finish(s, now, "Failed", msg, 0)
		s.Scale = nil
		if len(s.ErrantInstances) > 0 {
			s.Phase = v1.PhaseDegraded
		}
	}, nil
}

// scWait waits for what err says is missing (an instance that does not answer, a pod that is
// not ready), up to the stage's bound; past it the scale stops with the reason.
func (r *Runner) scWait(ctx context.Context, x *stageEnv, err error) (string, func(*v1.MysqlClusterStatus), error) {
	if x.overdue {
		return r.stopScale(ctx, x, fmt.Sprintf("stage %s waited %s: %v", x.op.Stage, x.bound, err), nil)
	}
	return "", nil, notYet("%v", err)
}

// guardCtx proves the lease before a mutation and bounds the mutation by the lease's deadline,
// so that a write still in flight when the lease runs out is cut off.
func (r *Runner) guardCtx(ctx context.Context, what string) (context.Context, context.CancelFunc, error) {
	deadline, err := r.guard(what)
	if err != nil {
		return ctx, func() {}, err
	}
	if deadline.IsZero() {
		return ctx, func() {}, nil
	}
	dctx, cancel := context.WithDeadline(ctx, deadline)
	return dctx, cancel, nil
}

// observePair observes the primary, then the instance name.
func (x *stageEnv) observePair(name string) (primary, instance topology.Snapshot, err error) {
	if primary, err = x.ss.Observe(x.primaryName); err != nil {
		return primary, instance, err
	}
	instance, err = x.ss.Observe(name)
	return primary, instance, err
}

// acksWithout says why the instances may not stop replicating: without them the primary would
// have fewer semi-sync replicas connected than it waits for, and every commit would stall (""
// when they may).
func (r *Runner) acksWithout(x *stageEnv, names ...string) (string, error) {
	want := semiSyncAcks(x.c)
	if want == 0 {
		return "", nil
	}
	ps, err := x.ss.Observe(x.primaryName)
	if err != nil {
		return "", err
	}
	acks := ps.SemiSync.SourceClients
	for _, name := range names {
		if js, err := x.ss.Observe(name); err == nil && js.SemiSync.ReplicaEnabled && replicatesFrom(js, specs.PodHost(x.c, x.primaryName)) {
			acks--
		}
	}
	if ps.SemiSync.SourceEnabled && acks < want {
		return fmt.Sprintf("without %s the primary %s would have %d semi-sync replica(s) connected and waits for %d: every commit would stall; repair the other replicas first", strings.Join(names, ", "), x.primaryName, acks, want), nil
	}
	return "", nil
}

// scGuard stops the scale once the primary has been silent for the supervisor's detection time,
// so that a failover (which supersedes the stopped scale) can run; resume continues it after.
func (r *Runner) scGuard(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	if why, err := r.primaryGone(x); err != nil || why != "" {
		if err != nil {
			return "", nil, err
		}
		return r.stopScale(ctx, x, why+": the scale stops so that a failover can run", nil)
	}
	return "", nil, nil
}

// scAdding makes the StatefulSet create the instance's pod and waits until it is Ready. The
// new server starts read-only, with replication not started (skip_slave_start).
func (r *Runner) scAdding(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	name := ScalePod(x.c, x.c.Status.Scale.Ordinal)
	if _, err := r.applyTemplate(ctx, x.c); err != nil {
		return "", nil, err
	}
	if _, ok := x.byName[name]; !ok {
		return r.scWait(ctx, x, fmt.Errorf("%s is not created and Ready yet ('kubectl describe pod %s' tells why)", name, name))
	}
	return StageSeeding, nil, nil
}

// scSeeding gives the new instance mysqlctl's accounts and its data: it decides, once, between
// replaying the primary's binary logs and a copy from a donor (failover.ChooseSeed), and runs
// and watches the copy's Job.
func (r *Runner) scSeeding(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, sc := x.c, x.c.Status.Scale
	name := ScalePod(c, sc.Ordinal)
	in, err := x.ss.Connect(name)
	if err != nil {
		return r.scWait(ctx, x, fmt.Errorf("%s does not answer: %w", name, err))
	}
	if sc.SeedMethod == "" {
		// Once, before the seed is chosen: making the accounts ends the account's other
		// sessions (a stripped privilege must not survive in them), which would cut the copy's.
		if err := r.ensureAccounts(ctx, c, in); err != nil {
			return "", nil, err
		}
		return r.chooseSeed(ctx, x, name)
	}
	if sc.SeedMethod == failover.SeedReplay {
		return StageJoiningInstance, func(s *v1.MysqlClusterStatus) { s.Scale.Seeded = true }, nil
	}
	js, err := x.ss.Observe(name)
	if err != nil {
		return r.scWait(ctx, x, err)
	}
	if js.Flavor.IsMySQL() {
		return r.stopScale(ctx, x, fmt.Sprintf("%s needs a copy of its data (%s), and copying a MySQL instance (the CLONE plugin) is not implemented by this version of mysqlctl", name, sc.SeedReason), nil)
	}
	return r.runSeedJob(ctx, x)
}

// chooseSeed records how the new instance gets its data, with the evidence, and the donor of a
// copy: the lowest-ordinal replica that replicates and is not quarantined, else the primary.
func (r *Runner) chooseSeed(ctx context.Context, x *stageEnv, name string) (string, func(*v1.MysqlClusterStatus), error) {
	ps, js, err := x.observePair(name)
	if err != nil {
		return r.scWait(ctx, x, err)
	}
	method, reason := failover.ChooseSeed(ps, js)
	donor := ""
	if method == failover.SeedCopy {
		donor = r.pickDonor(x, ps, name)
		reason += "; donor " + donor
	}
	r.Event(ctx, x.c, false, "ScaleSeeding", fmt.Sprintf("scale %s: %s is seeded by %s: %s", x.op.ID, name, method, reason))
	return StageSeeding, func(s *v1.MysqlClusterStatus) {
		s.Scale.SeedMethod, s.Scale.SeedReason, s.Scale.Donor, s.Scale.SeedJob = method, reason, donor, ""
		s.Operation.Message = reason
	}, nil
}

// runSeedJob runs the copy's Job and waits for it. A Job left by a copy that failed is deleted
// and made again (status.scale.seedJob is empty until this run's Job exists).
func (r *Runner) runSeedJob(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, sc := x.c, x.c.Status.Scale
	key := client.ObjectKey{Namespace: c.Namespace, Name: SeedJobName(c, sc.Ordinal)}
	job := &batchv1.Job{}
	err := r.Kube.Get(ctx, key, job)
	switch {
	case err != nil && !apierrors.IsNotFound(err):
		return "", nil, err
	case err == nil && sc.SeedJob == "":
		if err := r.deleteSeedJob(ctx, c, sc.Ordinal); err != nil {
			return "", nil, err
		}
		return "", nil, notYet("removing the Job %s of an earlier copy", key.Name)
	case err != nil && sc.SeedJob != "":
		// Deleted by someone else: made again.
		return StageSeeding, func(s *v1.MysqlClusterStatus) { s.Scale.SeedJob = "" }, nil
	case err != nil:
		owned, err := r.ownedAccounts(ctx, c)
		if err != nil {
			return "", nil, err
		}
		gctx, cancel, err := r.guardCtx(ctx, "create the seed Job "+key.Name)
		if err != nil {
			return "", nil, err
		}
		err = r.Kube.Create(gctx, BuildSeedJob(c, sc.Ordinal, sc.Donor, owned, sc.Action == ScaleRebuild), client.FieldOwner(specs.FieldOwner))
		cancel()
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return "", nil, fmt.Errorf("create the seed Job %s: %w", key.Name, err)
		}
		return StageSeeding, func(s *v1.MysqlClusterStatus) {
			s.Scale.SeedJob = key.Name
			s.Operation.Message = fmt.Sprintf("copying %s into %s (Job %s)", sc.Donor, ScalePod(c, sc.Ordinal), key.Name)
		}, nil
	}
	for _, cond := range job.Status.Conditions {
		if cond.Status != corev1.ConditionTrue {
			continue
		}
		switch cond.Type {
		case batchv1.JobComplete:
			return StageJoiningInstance, func(s *v1.MysqlClusterStatus) { s.Scale.Seeded = true }, nil
		case batchv1.JobFailed:
			return r.stopScale(ctx, x, fmt.Sprintf("the copy from %s into %s failed (%s: %s); 'kubectl logs job/%s' shows why, and resume makes the Job again", sc.Donor, ScalePod(c, sc.Ordinal), cond.Reason, cond.Message, key.Name),
				func(s *v1.MysqlClusterStatus) { s.Scale.SeedJob = "" })
		}
	}
	if x.overdue {
		return r.stopScale(ctx, x, fmt.Sprintf("the copy from %s (Job %s) did not finish within %s", sc.Donor, key.Name, x.bound), nil)
	}
	return "", nil, notYet("copying %s into %s (Job %s: %d active)", sc.Donor, ScalePod(c, sc.Ordinal), key.Name, job.Status.Active)
}

// ownedAccounts names the accounts and roles mysqlctl makes on every instance itself (and the
// server's own): a copy leaves their rows alone on the target.
func (r *Runner) ownedAccounts(ctx context.Context, c *v1.MysqlCluster) ([]string, error) {
	secret, err := CheckSecret(ctx, r.Kube, c)
	if err != nil {
		return nil, err
	}
	accounts, err := AccountCredentialsFromSecret(secret)
	if err != nil {
		return nil, err
	}
	specs, err := BootstrapAccounts(accounts)
	if err != nil {
		return nil, err
	}
	owned := []string{RootUser, "mariadb.sys", "", "PUBLIC", topology.ReadOnlyAdminRole}
	for _, u := range specs {
		owned = append(owned, u.User)
	}
	return owned, nil
}

// deleteSeedJob deletes the copy's Job and its pod, if there is one.
func (r *Runner) deleteSeedJob(ctx context.Context, c *v1.MysqlCluster, ord int32) error {
	job := &batchv1.Job{}
	if err := r.Kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: SeedJobName(c, ord)}, job); apierrors.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	if job.DeletionTimestamp == nil {
		gctx, cancel, err := r.guardCtx(ctx, "delete the seed Job "+job.Name)
		if err != nil {
			return err
		}
		// Foreground: the Job is gone only once its pod is, so that no old copy still loads
		// into the instance while a new one starts.
		err = r.Kube.Delete(gctx, job, client.PropagationPolicy(metav1.DeletePropagationForeground))
		cancel()
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete the seed Job %s: %w", job.Name, err)
		}
	}
	return notYet("waiting for the seed Job %s and its pod to be deleted", job.Name)
}

// scJoining proves the new instance's history an ancestor of the primary's (else it is
// quarantined) and records its provenance before it replicates: its data volume, identity, GTID
// set and how it was seeded.
func (r *Runner) scJoining(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, sc := x.c, x.c.Status.Scale
	name := ScalePod(c, sc.Ordinal)
	if sc.SeedMethod == failover.SeedCopy {
		if err := r.deleteSeedJob(ctx, c, sc.Ordinal); err != nil {
			return "", nil, err
		}
	}
	ps, js, err := x.observePair(name)
	if err != nil {
		return r.scWait(ctx, x, err)
	}
	if err := flavorMatches(c, name, js); err != nil {
		return "", nil, err
	}
	if method, reason := failover.ChooseSeed(ps, js); method == failover.SeedCopy {
		if sc.SeedMethod == failover.SeedCopy {
			// The copy did not bring the instance to a position the primary's binary logs
			// cover: it cannot have all the data, whatever the Job reported.
			return r.stopScale(ctx, x, fmt.Sprintf("after the copy from %s, %s still cannot replay the rest: %s", sc.Donor, name, reason), func(s *v1.MysqlClusterStatus) { s.Scale.Seeded, s.Scale.SeedJob = false, "" })
		}
		// The primary purged what the instance needs since replay was chosen.
		return StageSeeding, func(s *v1.MysqlClusterStatus) {
			s.Scale.SeedMethod, s.Scale.SeedReason, s.Scale.Seeded = "", reason, false
		}, nil
	}
	e, ok, err := x.ss.ancestor(x.primaryName, ps, js)
	if err != nil {
		return "", nil, err
	}
	if !ok {
		e.Name = name
		if err := r.quarantine(ctx, c, x.ss, []v1.ErrantInstance{e}); err != nil {
			return "", nil, err
		}
		return r.stopScale(ctx, x, fmt.Sprintf("%s was quarantined: %s", name, e.Reason), func(s *v1.MysqlClusterStatus) { addErrant(s, e, x.now) })
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.Kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: "data-" + name}, pvc); err != nil {
		return "", nil, fmt.Errorf("read the data volume claim of %s: %w", name, err)
	}
	rec := v1.GTIDBootstrapRecord{
		Ordinal: sc.Ordinal, PVCUID: string(pvc.UID), ServerUUID: identity(js), BootstrapGTIDSet: executed(js),
		RecordedAt: metav1.NewTime(x.now), Method: sc.SeedMethod, Donor: sc.Donor,
	}
	return StageVerifyingInstance, func(s *v1.MysqlClusterStatus) { appendProvenance(s, rec) }, nil
}

// appendProvenance appends the record unless the ordinal's newest record already says the same
// (a join run again after its status write); records are never rewritten.
func appendProvenance(s *v1.MysqlClusterStatus, rec v1.GTIDBootstrapRecord) {
	for i := len(s.GTIDBootstrap) - 1; i >= 0; i-- {
		if e := s.GTIDBootstrap[i]; e.Ordinal == rec.Ordinal {
			if e.PVCUID == rec.PVCUID && e.Method == rec.Method && e.BootstrapGTIDSet == rec.BootstrapGTIDSet {
				return
			}
			break
		}
	}
	s.GTIDBootstrap = append(s.GTIDBootstrap, rec)
	slices.SortStableFunc(s.GTIDBootstrap, func(a, b v1.GTIDBootstrapRecord) int { return int(a.Ordinal - b.Ordinal) })
}

// scVerifying makes the new instance replicate from the primary and proves it caught up; only
// then does it join the replica Service.
func (r *Runner) scVerifying(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, sc := x.c, x.c.Status.Scale
	name := ScalePod(c, sc.Ordinal)
	host := specs.PodHost(c, x.primaryName)
	ps, js, err := x.observePair(name)
	if err != nil {
		return r.scWait(ctx, x, err)
	}
	if js.Replica == nil || js.Replica.SourceHost != host || js.Replica.IOThread == topology.ThreadStopped && !js.Replica.SQLRunning {
		in, err := x.ss.Connect(name)
		if err != nil {
			return "", nil, err
		}
		if err := r.joinReplica(ctx, c, in, js, host, x.ss.port(x.primaryName), x.creds); err != nil {
			return "", nil, err
		}
		return "", nil, notYet("%s joined replication from %s", name, x.primaryName)
	}
	why, err := x.ss.caughtUp(name, js, x.primaryName, host, ps)
	if err != nil {
		return "", nil, err
	}
	if why != "" {
		if x.overdue {
			return r.stopScale(ctx, x, fmt.Sprintf("%s did not catch up within %s (%s)", name, x.bound, why), nil)
		}
		return "", nil, notYet("%s", why)
	}
	if sc.Action == ScaleRebuild {
		return r.rbRelease(x, name, js)
	}
	if err := r.labelRole(ctx, c, name, v1.RoleReplica); err != nil {
		return "", nil, err
	}
	st := r.instanceStatuses(c, []Instance{x.byName[name]}, map[string]topology.Snapshot{name: js}, x.primaryName)
	joined := func(s *v1.MysqlClusterStatus) {
		s.Instances = mergeInstances(s.Instances, st, "")
		s.Scale.Done = append(s.Scale.Done, "+"+name)
	}
	r.Event(ctx, c, false, "ScaleInstanceAdded", fmt.Sprintf("scale %s: %s replicates from %s, caught up (seeded by %s)", x.op.ID, name, x.primaryName, sc.SeedMethod))
	return r.scNext(ctx, x, sc.Ordinal+1, joined)
}

// scDetaching takes the instance out of the replica Service and stops its replication, once the
// primary is proven to keep enough semi-sync acknowledgements without it.
func (r *Runner) scDetaching(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, sc := x.c, x.c.Status.Scale
	name := ScalePod(c, sc.Ordinal)
	if name == x.primaryName {
		return r.stopScale(ctx, x, fmt.Sprintf("%s is the primary; run 'scale %s --replicas %d' again, which switches over first", name, c.Name, sc.To), nil)
	}
	js, jerr := x.ss.Observe(name)
	if why, err := r.acksWithout(x, name); err != nil || why != "" {
		if err != nil {
			return "", nil, err
		}
		return r.stopScale(ctx, x, why, nil)
	}
	if err := r.labelRole(ctx, c, name, v1.RoleUnknown); err != nil {
		return "", nil, err
	}
	if jerr == nil && js.Replica != nil {
		in, err := x.ss.Connect(name)
		if err != nil {
			return "", nil, err
		}
		if err := in.StopReplica(ctx); err != nil {
			return "", nil, err
		}
		if err := in.ResetReplication(ctx); err != nil {
			return "", nil, err
		}
	}
	ord := sc.Ordinal
	return StageRemovingInstance, func(s *v1.MysqlClusterStatus) { s.Scale.Replicas = ord }, nil
}

// scRemoving makes the StatefulSet delete the instance's pod and waits until it is gone; its
// data volume is kept unless the scale deletes data.
func (r *Runner) scRemoving(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, sc := x.c, x.c.Status.Scale
	name := ScalePod(c, sc.Ordinal)
	if _, err := r.applyTemplate(ctx, c); err != nil {
		return "", nil, err
	}
	pods, err := r.Pods(ctx, c)
	if err != nil {
		return "", nil, err
	}
	if _, ok := pods[sc.Ordinal]; ok {
		return r.scWait(ctx, x, fmt.Errorf("%s is not deleted yet", name))
	}
	if sc.DeleteData {
		gctx, cancel, err := r.guardCtx(ctx, "delete the data volume claim of "+name)
		if err != nil {
			return "", nil, err
		}
		pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: "data-" + name}}
		err = r.Kube.Delete(gctx, pvc)
		cancel()
		if err != nil && !apierrors.IsNotFound(err) {
			return "", nil, fmt.Errorf("delete the data volume claim of %s: %w", name, err)
		}
	}
	r.Event(ctx, c, false, "ScaleInstanceRemoved", fmt.Sprintf("scale %s: %s removed (data volume %s)", x.op.ID, name, map[bool]string{true: "deleted", false: "kept"}[sc.DeleteData]))
	return r.scNext(ctx, x, sc.Ordinal, func(s *v1.MysqlClusterStatus) {
		s.Instances = slices.DeleteFunc(s.Instances, func(i v1.InstanceStatus) bool { return i.Name == name })
		s.Scale.Done = append(s.Scale.Done, "-"+name)
	})
}

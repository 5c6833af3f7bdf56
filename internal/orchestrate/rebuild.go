package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// OperationRebuild is the type of a rebuild: a quarantined or broken replica re-seeded in place
// by a copy from a donor, its old data set aside until the copy has joined.
const OperationRebuild = "rebuild"

// Rebuild stages. RebuildPreparing quarantines the instance (out of both Services, never
// elected) and proves the donor; RebuildDetaching stops its replication; then the scale's
// Seeding (a copy, the old tables set aside), JoiningInstance and VerifyingInstance, after which
// the old data is dropped and the quarantine released.
const (
	StageRebuildPreparing = "RebuildPreparing"
	StageRebuildDetaching = "RebuildDetaching"
	StageRebuildReleasing = "RebuildReleasing"
)

// RebuildOptions say what to rebuild.
type RebuildOptions struct {
	// Instance is the pod to rebuild (never the primary).
	Instance string
	// Donor is the pod to copy from ("": the lowest-ordinal replica that replicates and holds
	// nothing the primary lacks, else the primary).
	Donor string
	// ResumeOnly continues the recorded rebuild and never starts one.
	ResumeOnly bool
	// Discard is set when watch starts the rebuild by itself: the instance's transactions it
	// proved never acknowledged (a crashed former primary's tail), recorded in status.scale and
	// in the rebuild's history record.
	Discard *failover.TailProof
}

// rebuildKind re-seeds one instance in place.
var rebuildKind = &operationKind{
	stages: []namedStage{
		{StageRebuildPreparing, (*Runner).rbPreparing},
		{StageRebuildDetaching, (*Runner).rbDetaching},
		{StageSeeding, (*Runner).scSeeding},
		{StageJoiningInstance, (*Runner).scJoining},
		{StageVerifyingInstance, (*Runner).scVerifying},
		{StageRebuildReleasing, (*Runner).rbReleasing},
	},
	guard: (*Runner).scGuard,
	bounds: map[string]time.Duration{
		StageRebuildPreparing: scaleBound, StageRebuildDetaching: scaleBound, StageSeeding: scaleBound,
		StageJoiningInstance: scaleBound, StageVerifyingInstance: scaleBound, StageRebuildReleasing: scaleBound,
	},
	prepare: prepareScale,
}

// Rebuild re-seeds a quarantined or broken replica from a donor, or resumes the rebuild
// recorded in status. The primary is refused. `watch` starts one by itself only for a crashed
// former primary whose extra transactions it proved never acknowledged (opts.Discard).
func (r *Runner) Rebuild(ctx context.Context, key client.ObjectKey, opts RebuildOptions) error {
	started := false
	lastReported := ""
	for {
		c := &v1.MysqlCluster{}
		if err := r.Kube.Get(ctx, key, c); err != nil {
			return err
		}
		op, sc := c.Status.Operation, c.Status.Scale
		switch {
		case op == nil && (started || opts.ResumeOnly && sc == nil):
			_ = SyncPDB(ctx, r.Kube, c)
			return r.lastResult(c, OperationRebuild)
		case op == nil && sc != nil && sc.Action != ScaleRebuild:
			return fmt.Errorf("%w: a scale of %s to %d instances is recorded (stopped): run 'resume %s' to finish it before a rebuild", outcome.ErrUnsafe, c.Name, sc.To, c.Name)
		case op == nil && sc != nil && !opts.ResumeOnly && opts.Instance != "" && opts.Instance != ScalePod(c, sc.Ordinal):
			return fmt.Errorf("%w: the rebuild of %s is recorded (stopped): run 'resume %s' to finish it first", outcome.ErrUnsafe, ScalePod(c, sc.Ordinal), c.Name)
		case op == nil:
			if err := r.beginRebuild(ctx, c, opts); err != nil {
				return err
			}
			started = true
			continue
		case op.Type != OperationRebuild:
			return r.otherOperation(c, op)
		}
		started = true
		if _, _, err := r.step(ctx, key, c, op, &lastReported, func() (string, func(*v1.MysqlClusterStatus), error) {
			return r.runStage(ctx, rebuildKind, c, op, stageEnv{})
		}); err != nil {
			return err
		}
	}
}

// beginRebuild checks what can be checked from the recorded status, then records the rebuild
// (status.scale, action rebuild, at the instance's ordinal) and its operation at once.
func (r *Runner) beginRebuild(ctx context.Context, c *v1.MysqlCluster, opts RebuildOptions) error {
	stage := StageRebuildPreparing
	if sc := c.Status.Scale; sc != nil {
		// A stopped rebuild goes on where it stopped: a copy already made is never made again.
		opts.Instance = ScalePod(c, sc.Ordinal)
		if opts.Donor == "" {
			opts.Donor = sc.Donor
		} else if opts.Donor != sc.Donor && !sc.Seeded {
			sc.Donor, sc.SeedJob = opts.Donor, "" // --from replaces the donor of a copy not made yet
		}
		switch {
		case sc.Seeded:
			stage = StageJoiningInstance
		case sc.SeedJob != "" && opts.Donor == sc.Donor:
			stage = StageSeeding
		}
	}
	n, err := r.liveReplicas(ctx, c)
	if err != nil {
		return err
	}
	ord, ok := ordinalOf(c, opts.Instance)
	switch {
	case c.Status.CurrentPrimary == "":
		return fmt.Errorf("%w: cluster %s has no primary yet: nothing to copy from", outcome.ErrUnsafe, c.Name)
	case !ok || ord >= n:
		return fmt.Errorf("%w: %s is not an instance of cluster %s (0 to %d)", outcome.ErrInvalid, opts.Instance, c.Name, n-1)
	case opts.Instance == c.Status.CurrentPrimary:
		return fmt.Errorf("%w: %s is the primary of %s: a primary is never rebuilt; switch over first ('switchover %s'), then rebuild it", outcome.ErrUnsafe, opts.Instance, c.Name, c.Name)
	case opts.Donor == opts.Instance:
		return fmt.Errorf("%w: %s cannot be its own donor", outcome.ErrInvalid, opts.Instance)
	}
	if opts.Donor != "" {
		if d, ok := ordinalOf(c, opts.Donor); !ok || d >= n || quarantined(c, opts.Donor) {
			return fmt.Errorf("%w: the donor %s is not a member of %s, or is quarantined", outcome.ErrInvalid, opts.Donor, c.Name)
		}
	}
	now := metav1.NewTime(r.Clock())
	id := fmt.Sprintf("rebuild-%d", now.Unix())
	if sc := c.Status.Scale; sc != nil {
		id = sc.ID
	}
	op := v1.OperationStatus{ID: id, Type: OperationRebuild, Stage: stage, StartedAt: now, StartedAtMicro: microOf(now), UpdatedAt: &now, Target: opts.Instance}
	fresh := c.Status.Scale == nil
	err = r.begin(ctx, c, op, func(s *v1.MysqlClusterStatus) {
		if s.Scale == nil {
			s.Scale = &v1.ScaleStatus{ID: id, From: n, To: n, Replicas: n, Action: ScaleRebuild, Ordinal: ord, Donor: opts.Donor}
			if d := opts.Discard; d != nil {
				s.Scale.Discard, s.Scale.DiscardEvidence = d.Discard, d.Evidence
				for i := range s.ErrantInstances {
					if s.ErrantInstances[i].Name == opts.Instance {
						s.ErrantInstances[i].ReseedStartedAt = &now
					}
				}
			}
		} else if !s.Scale.Seeded {
			s.Scale.Donor, s.Scale.SeedJob = opts.Donor, c.Status.Scale.SeedJob
		}
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: "Rebuilding",
			Message: fmt.Sprintf("rebuilding %s from a donor's copy", opts.Instance)})
	})
	if d := opts.Discard; err == nil && d != nil && fresh {
		r.Event(ctx, c, true, "ReseedingUnacknowledged", fmt.Sprintf("rebuilding %s by itself: it discards %d transaction(s) (%s) proven never acknowledged to a client: %s",
			opts.Instance, d.Count, d.Discard, strings.Join(d.Evidence, "; ")))
	}
	return err
}

// rbPreparing quarantines the instance, so that no other operation uses it while its data is
// replaced (out of both Services, never elected), and proves the donor: it replicates from the
// primary and holds nothing the primary lacks (the primary itself when none does).
func (r *Runner) rbPreparing(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, sc := x.c, x.c.Status.Scale
	name := ScalePod(c, sc.Ordinal)
	if name == x.primaryName {
		return r.withdrawScale(ctx, x, fmt.Sprintf("%s is the primary now; a primary is never rebuilt", name))
	}
	ps, err := x.ss.Observe(x.primaryName)
	if err != nil {
		return r.scWait(ctx, x, fmt.Errorf("the primary %s does not answer: %w", x.primaryName, err))
	}
	if ps.Flavor.IsMySQL() {
		return r.withdrawScale(ctx, x, "rebuilding a MySQL instance needs the CLONE plugin, which this version of mysqlctl does not implement")
	}
	donor, why := sc.Donor, ""
	if donor == "" {
		donor = r.pickDonor(x, ps, name)
	}
	if donor != x.primaryName {
		ds, err := x.ss.Observe(donor)
		if err != nil {
			return r.scWait(ctx, x, fmt.Errorf("the donor %s does not answer: %w", donor, err))
		}
		if !replicatesFrom(ds, specs.PodHost(c, x.primaryName)) {
			why = "it does not replicate from the primary"
		} else if e, ok, err := x.ss.ancestor(x.primaryName, ps, ds); err != nil {
			return "", nil, err
		} else if !ok {
			why = e.Reason
		}
	}
	if why != "" {
		return r.withdrawScale(ctx, x, fmt.Sprintf("the donor %s cannot be copied: %s; name another with --from", donor, why))
	}
	if why, err := r.acksWithout(x, name); err != nil || why != "" {
		if err != nil {
			return "", nil, err
		}
		return r.withdrawScale(ctx, x, why)
	}
	if err := r.labelRole(ctx, c, name, v1.RoleQuarantined); err != nil {
		return "", nil, err
	}
	reason := fmt.Sprintf("being rebuilt from a copy of %s (rebuild %s)", donor, x.op.ID)
	r.Event(ctx, c, false, "RebuildStarted", fmt.Sprintf("%s: %s", name, reason))
	return StageRebuildDetaching, func(s *v1.MysqlClusterStatus) {
		s.Scale.Donor, s.Scale.SeedMethod, s.Scale.SeedReason = donor, failover.SeedCopy, "rebuild: "+reason
		addErrant(s, v1.ErrantInstance{Name: name, Reason: reason}, x.now)
		s.Operation.Message = reason
	}, nil
}

// pickDonor is the lowest-ordinal replica other than name that replicates from the primary and
// holds nothing it lacks, else the primary.
func (r *Runner) pickDonor(x *stageEnv, ps topology.Snapshot, name string) string {
	for _, m := range x.members {
		if m.Pod.Name == name || m.Pod.Name == x.primaryName || quarantined(x.c, m.Pod.Name) {
			continue
		}
		if s, err := x.ss.Observe(m.Pod.Name); err == nil && replicatesFrom(s, specs.PodHost(x.c, x.primaryName)) {
			if _, ok, err := x.ss.ancestor(x.primaryName, ps, s); err == nil && ok {
				return m.Pod.Name
			}
		}
	}
	return x.primaryName
}

// rbDetaching stops the instance's replication (it must answer: its data is replaced over SQL).
func (r *Runner) rbDetaching(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	name := ScalePod(x.c, x.c.Status.Scale.Ordinal)
	js, err := x.ss.Observe(name)
	if err != nil {
		return r.scWait(ctx, x, err)
	}
	if why, err := r.acksWithout(x, name); err != nil || why != "" {
		if err != nil {
			return "", nil, err
		}
		return r.stopScale(ctx, x, why, nil)
	}
	in, err := x.ss.Connect(name)
	if err != nil {
		return "", nil, err
	}
	// Read-only, and every client session ended: clients that connected before it left the
	// Services would otherwise read (or write) while its data is replaced.
	if err := in.Fence(ctx); err != nil {
		return "", nil, err
	}
	if js.Replica != nil {
		if err := in.StopReplica(ctx); err != nil {
			return "", nil, err
		}
		if err := in.ResetReplication(ctx); err != nil {
			return "", nil, err
		}
	}
	return StageSeeding, nil, nil
}

// rbRelease ends the rebuild's verification (VerifyingInstance proved the instance replicates
// and has caught up): the quarantine is released in status first, so that the instance is never
// in a Service while recorded as quarantined; RebuildReleasing then labels it a replica.
func (r *Runner) rbRelease(x *stageEnv, name string, js topology.Snapshot) (string, func(*v1.MysqlClusterStatus), error) {
	released := x.c.DeepCopy()
	released.Status.ErrantInstances = deleteErrant(released.Status.ErrantInstances, name)
	st := r.instanceStatuses(released, []Instance{x.byName[name]}, map[string]topology.Snapshot{name: js}, x.primaryName)
	return StageRebuildReleasing, func(s *v1.MysqlClusterStatus) {
		s.ErrantInstances = deleteErrant(s.ErrantInstances, name)
		s.Instances = mergeInstances(s.Instances, st, "")
	}, nil
}

// rbReleasing puts the rebuilt instance in the replica Service, drops the old data set aside,
// makes the primary wait for acknowledgements again if it ran without, and ends the rebuild.
func (r *Runner) rbReleasing(ctx context.Context, x *stageEnv) (string, func(*v1.MysqlClusterStatus), error) {
	c, sc := x.c, x.c.Status.Scale
	name := ScalePod(c, sc.Ordinal)
	in, err := x.ss.Connect(name)
	if err != nil {
		return r.scWait(ctx, x, err)
	}
	if err := r.labelRole(ctx, c, name, v1.RoleReplica); err != nil {
		return "", nil, err
	}
	dropped, err := in.DropAsideSchemas(ctx)
	if err != nil {
		return "", nil, err
	}
	semi, err := r.semiSyncAfter(ctx, x, replicasIn(x, sc.Replicas))
	if err != nil {
		return "", nil, err
	}
	msg := fmt.Sprintf("%s rebuilt from a copy of %s: it replicates from %s and has caught up; its old data was dropped (%d schema(s) set aside)", name, sc.Donor, x.primaryName, len(dropped))
	if sc.Discard != "" {
		msg += fmt.Sprintf("; started by watch, it discarded %s, proven never acknowledged: %s", sc.Discard, strings.Join(sc.DiscardEvidence, "; "))
	}
	r.Event(ctx, c, false, "RebuildFinished", msg)
	now := x.now
	spec := c.Spec.Replicas
	return stageDone, func(s *v1.MysqlClusterStatus) {
		finish(s, now, "Succeeded", msg, 0)
		s.History[0].DiscardedGTIDs = sc.Discard
		s.Scale = nil
		// The instance counts again among those proven in their role.
		ready := 0
		for _, in := range s.Instances {
			if in.Role == v1.RolePrimary || in.Role == v1.RoleReplica {
				ready++
			}
		}
		s.ReadyInstances, s.Ready = int32(ready), fmt.Sprintf("%d/%d", ready, spec)
		if int32(ready) == spec {
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionReady, Status: metav1.ConditionTrue, Reason: "ReplicationProven", Message: msg})
		}
		if len(s.ErrantInstances) > 0 {
			s.Phase = v1.PhaseDegraded
		} else if d := meta.FindStatusCondition(s.Conditions, v1.ConditionDegraded); d != nil && d.Reason == "Quarantined" {
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: "Rebuilt", Message: msg})
		}
		semi(s)
	}, nil
}

// abortRebuild ends a rebuild, recorded or stopped, where it is: its copy Job (and pod) is
// deleted and status.scale cleared; the instance stays quarantined (its data may be half
// replaced), and a new 'rebuild' starts over.
func (r *Runner) abortRebuild(ctx context.Context, c *v1.MysqlCluster) (string, error) {
	sc := c.Status.Scale
	name := ScalePod(c, sc.Ordinal)
	for {
		err := r.deleteSeedJob(ctx, c, sc.Ordinal)
		var ny errNotYet
		if !errors.As(err, &ny) {
			if err != nil {
				return "", err
			}
			break
		}
		if err := r.wait(ctx); err != nil {
			return "", err
		}
	}
	if _, err := r.guard("abort the rebuild of " + name); err != nil {
		return "", err
	}
	msg := fmt.Sprintf("rebuild of %s aborted by %s; %s stays quarantined: run 'rebuild %s %s' again to replace its data", name, r.Holder, name, c.Name, name)
	now := r.Clock()
	err := UpdateStatus(ctx, r.Kube, c, func(s *v1.MysqlClusterStatus) error {
		if s.Scale == nil || s.Scale.ID != sc.ID {
			return ErrLostRace
		}
		if s.Operation != nil {
			finish(s, now, "Aborted", msg, 0)
		}
		s.Scale = nil
		if len(s.ErrantInstances) > 0 {
			s.Phase = v1.PhaseDegraded
		}
		return nil
	})
	if errors.Is(err, ErrLostRace) {
		return "", fmt.Errorf("%w: the rebuild changed while it was being aborted; look again with 'status %s'", outcome.ErrHeld, c.Name)
	}
	if err != nil {
		return "", err
	}
	r.Event(ctx, c, true, "RebuildAborted", msg)
	_ = SyncPDB(ctx, r.Kube, c)
	return msg, nil
}

// deleteErrant removes the instance's quarantine record.
func deleteErrant(es []v1.ErrantInstance, name string) []v1.ErrantInstance {
	out := es[:0:0]
	for _, e := range es {
		if e.Name != name {
			out = append(out, e)
		}
	}
	return out
}

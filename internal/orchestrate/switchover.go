package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/topology"
	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
)

// OperationSwitchover is the type of a planned primary change.
const OperationSwitchover = "switchover"

// Switchover stages, in order (Bloodraven's planned failover and MOCO's switchover, with every
// stage persisted with its evidence).
const (
	StageValidating          = "Validating"
	StageFencing             = "Fencing"
	StageWaitingForCandidate = "WaitingForCandidate"
	StagePromoting           = "Promoting"
	StageMovingPrimary       = "MovingPrimary"
	StageRepointing          = "Repointing"
	StageVerifying           = "Verifying"
	// StageRollingBack undoes a switchover or failover that has not promoted anyone: reached on
	// a timeout or by abort, persisted before any undoing so that a crash resumes the rollback.
	StageRollingBack = "RollingBack"
)

// SwitchoverStages lists the stages in order.
var SwitchoverStages = []string{StageValidating, StageFencing, StageWaitingForCandidate, StagePromoting, StageMovingPrimary, StageRepointing, StageVerifying}

// SwitchoverOptions tune a switchover.
type SwitchoverOptions struct {
	// To is the requested new primary; empty chooses the best candidate.
	To string
	// CatchUpTimeout bounds how long the fenced primary waits for the candidate to apply
	// everything; past it the fence is undone and the switchover fails (default 30s).
	CatchUpTimeout time.Duration
	// MaxLag is the largest lag a candidate may have when validated (default 10s).
	MaxLag time.Duration
	// ResumeOnly continues the recorded switchover and never starts one.
	ResumeOnly bool
}

func (o *SwitchoverOptions) defaults() {
	if o.CatchUpTimeout == 0 {
		o.CatchUpTimeout = 30 * time.Second
	}
	if o.MaxLag == 0 {
		o.MaxLag = 10 * time.Second
	}
}

// ErrRolledBack means the switchover was undone: the old primary is writable again.
var ErrRolledBack = errors.New("switchover rolled back")

// Switchover moves the primary role to another replica with zero data loss, or resumes the
// switchover recorded in the cluster's status at its recorded stage.
func (r *Runner) Switchover(ctx context.Context, key client.ObjectKey, opts SwitchoverOptions) error {
	opts.defaults()
	defer r.withSidework()()
	started := false
	lastReported := ""
	var held *v1.MysqlCluster // as the last recorded stage returned it
	for {
		cluster, err := r.load(ctx, key, held)
		if err != nil {
			return err
		}
		held = nil
		op := cluster.Status.Operation
		if op == nil {
			if started || opts.ResumeOnly {
				r.syncPDB(ctx, cluster)
				return r.finishedResult(cluster)
			}
			if cluster.Status.Phase != v1.PhaseRunning || cluster.Status.CurrentPrimary == "" {
				return fmt.Errorf("%w: cluster %s is %s, not Running: a switchover needs a healthy primary and replicas", outcome.ErrUnsafe, key.Name, cluster.Status.Phase)
			}
			now := metav1.NewTime(r.Clock())
			id := fmt.Sprintf("switchover-%d", now.Unix())
			op := v1.OperationStatus{ID: id, Type: OperationSwitchover, Stage: StageValidating, StartedAt: now, StartedAtMicro: microOf(now), UpdatedAt: &now, Target: opts.To}
			if err := r.begin(ctx, cluster, op, func(s *v1.MysqlClusterStatus) {
				s.Phase = v1.PhaseSwitchingOver
				meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: "SwitchingOver", Message: "switchover started"})
			}); err != nil {
				return err
			}
			started = true
			continue
		}
		if op.Type != OperationSwitchover {
			return r.otherOperation(cluster, op)
		}
		started = true
		_, advanced, err := r.step(ctx, key, cluster, op, &lastReported, func() (string, func(*v1.MysqlClusterStatus), error) {
			return r.runStage(ctx, switchoverKind, cluster, op, stageEnv{swOpts: opts})
		})
		if err != nil {
			return err
		}
		if advanced {
			held = cluster
		}
	}
}

// finishedResult reports the last switchover's result from history.
func (r *Runner) finishedResult(c *v1.MysqlCluster) error {
	for _, h := range c.Status.History {
		if h.Type == OperationSwitchover {
			switch h.Result {
			case "Succeeded":
				return nil
			case "Aborted":
				return fmt.Errorf("%w: %s", ErrAborted, h.Message)
			}
			return fmt.Errorf("%w: %w: %s", outcome.ErrUnsafe, ErrRolledBack, h.Message)
		}
	}
	return nil
}

// finish ends the operation with a history record.
func finish(s *v1.MysqlClusterStatus, now time.Time, result, msg string, lost int64) {
	op := s.Operation
	t := metav1.NewTime(now)
	s.History = append([]v1.OperationRecord{{
		ID: op.ID, RequestID: op.RequestID, Type: op.Type, Result: result, StartedAt: op.StartedAt, FinishedAt: t, Message: msg, TransactionsLost: lost,
		DurationMilliseconds: now.Sub(opStart(op)).Milliseconds(),
	}}, s.History...)
	if len(s.History) > 20 {
		s.History = s.History[:20]
	}
	s.Operation = nil
	s.Phase = v1.PhaseRunning
	meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionProgressing, Status: metav1.ConditionFalse, Reason: "Idle", Message: msg})
	// A stall the operation itself reported ends with it.
	if d := meta.FindStatusCondition(s.Conditions, v1.ConditionDegraded); d != nil && d.Status == metav1.ConditionTrue && d.Reason == reasonCandidateUnreachable && result == "Succeeded" {
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionDegraded, Status: metav1.ConditionFalse, Reason: "CandidateReturned", Message: msg})
	}
}

// switchoverCandidate validates the replicas and chooses the new primary. It returns the
// evidence to record, or the reason no replica is a safe target.
func switchoverCandidate(c *v1.MysqlCluster, members []Instance, byName map[string]Instance, observe func(string) (topology.Snapshot, error), old string, opts SwitchoverOptions) (*v1.OperationEvidence, string, error) {
	type cand struct {
		name string
		snap topology.Snapshot
	}
	var ok, healthy []cand
	var rejected []string
	// A replica the configuration keeps mysqlctl from is rejected like one that is down; when
	// that leaves no candidate, the refusal is the answer (no safe candidate is a misreading).
	refused := map[string]error{}
	var firstRefused error
	for _, m := range members {
		name := m.Pod.Name
		if name == old {
			continue
		}
		if quarantined(c, name) {
			rejected = append(rejected, name+": quarantined")
			continue
		}
		s, err := observe(name)
		if ce := topology.AsConfigError(err); ce != nil {
			refused[name] = ce
			if firstRefused == nil {
				firstRefused = ce
			}
		}
		switch {
		case err != nil:
			rejected = append(rejected, name+": "+err.Error())
		case s.Replica == nil || s.Replica.SourceHost != specs.PodHost(c, old):
			rejected = append(rejected, name+": does not replicate from the primary")
		case s.Replica.IOThread != topology.ThreadRunning || !s.Replica.SQLRunning:
			rejected = append(rejected, name+": replication threads not running")
		case s.Replica.SecondsBehind == nil:
			rejected = append(rejected, name+": lag unknown")
		case time.Duration(*s.Replica.SecondsBehind)*time.Second > opts.MaxLag:
			rejected = append(rejected, fmt.Sprintf("%s: %ds behind (bound %s)", name, *s.Replica.SecondsBehind, opts.MaxLag))
		default:
			healthy = append(healthy, cand{name, s})
		}
	}
	// The primary is observed after the replicas: under writes a replica observed later
	// could be ahead of an earlier primary snapshot and look errant when it is not.
	ps, err := observe(old)
	if err != nil {
		return nil, "", err
	}
	for _, x := range healthy {
		if e, contained := Divergence(ps, x.snap); !contained {
			rejected = append(rejected, fmt.Sprintf("%s: errant: %s %s", x.name, e.Reason, e.ErrantGTIDs))
			continue
		}
		ok = append(ok, x)
	}
	var chosen cand
	reason := ""
	if opts.To != "" {
		for _, x := range ok {
			if x.name == opts.To {
				chosen, reason = x, "requested with --to; healthy, replicating from the primary, within the lag bound"
			}
		}
		if chosen.name == "" {
			if ce := refused[opts.To]; ce != nil {
				return nil, "", ce
			}
			return nil, fmt.Sprintf("requested target %s is not a safe candidate: %s", opts.To, strings.Join(rejected, "; ")), nil
		}
	} else {
		if len(ok) == 0 && firstRefused != nil {
			return nil, "", firstRefused
		}
		if len(ok) == 0 {
			return nil, "no safe candidate: " + strings.Join(rejected, "; "), nil
		}
		// The most advanced candidate needs the shortest catch-up; ties go to the lowest ordinal.
		sort.SliceStable(ok, func(i, j int) bool { return gtidCount(ok[i].snap) > gtidCount(ok[j].snap) })
		chosen, reason = ok[0], "most advanced healthy replica within the lag bound"
		for _, x := range ok[1:] {
			rejected = append(rejected, x.name+": less advanced or later in order")
		}
	}
	return &v1.OperationEvidence{
		FencedPrimary: old, FenceState: v1.FencePending, Candidate: chosen.name,
		CandidateGTIDSet: executed(chosen.snap), CandidateReason: reason, Rejected: rejected,
	}, "", nil
}

// failSwitchover ends the operation as Failed with the reason, and returns the error to report.
func (r *Runner) failSwitchover(ctx context.Context, c *v1.MysqlCluster, op *v1.OperationStatus, reason string) error {
	now := r.Clock()
	err := r.persist(ctx, c, op, op.Stage, func(s *v1.MysqlClusterStatus) { finish(s, now, "Failed", reason, 0) })
	if err != nil {
		return err
	}
	r.Event(ctx, c, true, "SwitchoverFailed", reason)
	return fmt.Errorf("%w: %s", outcome.ErrUnsafe, reason)
}

// missing counts the transactions of the fenced history that s has not executed.
func missing(s topology.Snapshot, fenced string) int64 {
	if s.Flavor.IsMariaDB() {
		p, err := gtid.ParseMariaDBPos(fenced)
		if err != nil {
			return -1
		}
		// Per domain, the sequence numbers between what s has and the fenced position (a
		// divergence at an equal number counts one).
		var n int64
		for _, g := range p.Subtract(s.GTID.CurrentPos).GTIDs() {
			have, _ := s.GTID.CurrentPos.Domain(g.Domain)
			if have.Seq < g.Seq {
				n += int64(g.Seq - have.Seq)
			} else {
				n++
			}
		}
		return n
	}
	set, err := gtid.ParseMySQLSet(fenced)
	if err != nil {
		return -1
	}
	return int64(set.Subtract(s.GTID.Executed).Count())
}

func gtidCount(s topology.Snapshot) uint64 {
	if s.Flavor.IsMariaDB() {
		return s.GTID.CurrentPos.Count()
	}
	return s.GTID.Executed.Count()
}

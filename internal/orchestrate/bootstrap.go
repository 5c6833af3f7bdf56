package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// Operation types that run the bootstrap stages: "bootstrap" for a new cluster, "converge" to
// bring a running cluster's replicas back to replicating from the recorded primary (after a
// replica pod was recreated, for example). Both keep the recorded primary.
const (
	OperationBootstrap = "bootstrap"
	OperationConverge  = "converge"
)

// Bootstrap stages, in order. Each is re-observed, checked and acted on idempotently, and the
// next stage is persisted with the evidence only after the action succeeded.
const (
	StageWaitingForPods       = "WaitingForPods"
	StageRecordingProvenance  = "RecordingProvenance"
	StageCreatingUsers        = "CreatingUsers"
	StageConfiguringPrimary   = "ConfiguringPrimary"
	StageJoiningReplicas      = "JoiningReplicas"
	StageOpeningPrimary       = "OpeningPrimary"
	StageVerifyingConvergence = "VerifyingConvergence"
	stageDone                 = ""
)

// BootstrapStages lists the stages in order (for tests that interrupt each one).
var BootstrapStages = []string{
	StageWaitingForPods, StageRecordingProvenance, StageCreatingUsers, StageConfiguringPrimary,
	StageJoiningReplicas, StageOpeningPrimary, StageVerifyingConvergence,
}

// MySQL accounts mysqlctl creates.
const (
	ReplicationUser   = "mysqlctl_repl"
	OrchestrationUser = "mysqlctl"
)

// errNotYet means a stage's precondition does not hold yet: observe again after a pause.
// cause is a configuration refusal among the errors it was made from (see notYet): then
// waiting is pointless, and the stage engine stops (see stopForConfig).
type errNotYet struct {
	msg   string
	cause error
}

func (e errNotYet) Error() string { return e.msg }

// Unwrap returns the configuration refusal the wait is about, if any.
func (e errNotYet) Unwrap() error { return e.cause }

// notYet is a wait for what the formatted message says. An error among args that is (or wraps)
// a *topology.ConfigError is kept as its cause, so that a member that "does not answer yet"
// because the path to it is refused is told apart from one that is down.
func notYet(format string, args ...any) error {
	e := errNotYet{msg: fmt.Sprintf(format, args...)}
	for _, a := range args {
		if err, ok := a.(error); ok {
			if ce := topology.AsConfigError(err); ce != nil {
				e.cause = ce
				break
			}
		}
	}
	return e
}

// ErrLostRace means the persisted operation moved on (or was replaced) since it was read.
var ErrLostRace = errors.New("the operation recorded in status changed under us")

// Connector opens an instance for a pod with the given credentials.
type Connector func(ctx context.Context, pod *corev1.Pod, creds topology.Credentials) (*topology.Instance, error)

// Runner runs persisted operations against one cluster.
type Runner struct {
	// Kube is the Kubernetes client.
	Kube client.Client
	// SupervisorGuard, when set, proves a supervisor's own Lease before each of its writes
	// (see the supervisor's supGuard, internal/supervisor); the supervisor's observation refreshes run with it.
	SupervisorGuard func(what string) error
	// Connect reaches a pod's server (direct, port-forward or static dialer).
	Connect Connector
	// Now is the clock.
	Now func() time.Time
	// Wait pauses between observations; it returns early with ctx's error.
	Wait func(ctx context.Context, d time.Duration) error
	// Poll is the pause between observations while a stage waits (default 500ms).
	Poll time.Duration
	// Holder names this actor in status.operation.holder.
	Holder string
	// Epoch is the Lease transition count this actor holds the cluster under.
	Epoch int32
	// Progress, when set, is told every stage the operation enters and every change of its message.
	Progress func(op v1.OperationStatus)
	// StopAfterStage, when set, makes Bootstrap return right after persisting the given stage's
	// successor (tests use it to interrupt at every stage).
	StopAfterStage string
	// BeforeStage, when set, is called with each stage before it runs (end-to-end tests use it to
	// hold the CLI at a stage and kill it there).
	BeforeStage func(ctx context.Context, stage string)
	// Lease proves this actor still holds the cluster. When set, every mutating SQL statement,
	// label move and operation status write asks it first and is refused once it is no longer
	// valid. Only planners (which change nothing) and tests of single steps run without one.
	Lease LeaseChecker
	// BeforeMutation, when set, is called with the stage and a description of each mutation
	// just before the lease is checked for it (end-to-end tests freeze the CLI there).
	BeforeMutation func(stage, what string)

	// Stop, when closed, ends the run before its next stage with ErrStopped: the stage in hand
	// finishes and records its successor first (a supervisor told to stop). No operation is
	// begun once it is closed.
	Stop <-chan struct{}
	// RequestID is recorded in an operation this Runner begins: the request it carries out.
	RequestID string

	// stage is the stage being run, for BeforeMutation.
	stage string
	// attempts is when this Runner first ran each stage of an operation (bounds count from it
	// when the stage was recorded earlier, by a run that ended).
	attempts map[string]time.Time
	// silent is when refence last found an old primary (pod UID and address) not answering.
	silent map[string]time.Time
	// lostSince is when this run first found an operation's new primary silent (newPrimaryLost).
	lostSince map[string]time.Time
	// background, when set, makes Events and the disruption budget's update asynchronous (off
	// the operation's critical path); the operation waits for them before it returns.
	background *Sidework
	// haSeen follows the supervisor's record of failed checks across this run's readings (a
	// converge gives way only to a supervisor seen rewriting it).
	haSeen failover.RecordLiveness
	// creds, when set, keeps the credentials read during one operation run, so that its stages
	// do not read the Secret again each.
	creds map[string]Credentials
	// began is what the last operation this Runner began changed in status, so that one
	// stopped before its first change can be withdrawn without a trace (see withdrawal).
	began *begun
}

// LeaseChecker proves that an actor still holds the cluster (see Lease.Check).
type LeaseChecker interface {
	Check() error
	ValidUntil() time.Time
}

var _ LeaseChecker = (*Lease)(nil)

// guard proves, right before a mutation, that this actor still holds the cluster's lease, and
// returns the deadline by which the mutation must be done (zero: none).
func (r *Runner) guard(what string) (time.Time, error) {
	if r.BeforeMutation != nil {
		r.BeforeMutation(r.stage, what)
	}
	if r.SupervisorGuard != nil {
		if err := r.SupervisorGuard(what); err != nil {
			return time.Time{}, err
		}
	}
	if r.Lease == nil {
		return time.Time{}, nil
	}
	if err := r.Lease.Check(); err != nil {
		return time.Time{}, fmt.Errorf("refusing to %s: %w", what, err)
	}
	return r.Lease.ValidUntil(), nil
}

// ConnectGuarded opens a pod's server with every mutating statement guarded by the lease and, under a
// real Lease, fenced on the server by its epoch (topology.Instance.Epoch): a server another
// actor touched under a newer epoch refuses, and that refusal ends this actor's lease.
func (r *Runner) ConnectGuarded(ctx context.Context, pod *corev1.Pod, creds topology.Credentials) (*topology.Instance, error) {
	in, err := r.Connect(ctx, pod, creds)
	if err != nil {
		return nil, err
	}
	in.Guard = r.guard
	if l, ok := r.Lease.(*Lease); ok && l != nil {
		token := l.FenceToken()
		in.Epoch = func() int64 { return token }
		in.Superseded = l.Supersede
		in.Confirm = func(ctx context.Context) error {
			if now := l.FenceToken(); now != token {
				return fmt.Errorf("%w: this connection's epoch %d is not the lease's (%d)", ErrLeaseLost, token, now)
			}
			return l.Confirm(ctx)
		}
		in.FenceAccounts = []string{RootUser, OrchestrationUser}
	}
	return in, nil
}

// ErrStopped is returned when StopAfterStage ended the run.
var ErrStopped = errors.New("stopped after stage as requested")

// Clock is the time now by the Runner's clock (Now, default time.Now).
func (r *Runner) Clock() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Runner) wait(ctx context.Context) error {
	d := r.Poll
	if d == 0 {
		d = 500 * time.Millisecond
	}
	return r.sleep(ctx, d)
}

// sleep pauses for d through the Wait hook, returning early with ctx's error.
func (r *Runner) sleep(ctx context.Context, d time.Duration) error {
	if r.Wait != nil {
		return r.Wait(ctx, d)
	}
	return SleepCtx(ctx, d)
}

// Credentials are the passwords bootstrap needs, read from the Secret.
type Credentials struct {
	Root, replication, orchestration topology.Secret
}

// Credentials are the cluster's accounts' passwords from its Secret, read once per operation run.
func (r *Runner) Credentials(ctx context.Context, c *v1.MysqlCluster) (Credentials, error) {
	key := c.Namespace + "/" + c.Name
	if cr, ok := r.creds[key]; ok {
		return cr, nil // read once per operation run (see withSidework)
	}
	cr, err := r.readCredentials(ctx, c)
	if err == nil && r.creds != nil {
		r.creds[key] = cr
	}
	return cr, err
}

func (r *Runner) readCredentials(ctx context.Context, c *v1.MysqlCluster) (Credentials, error) {
	s, err := CheckSecret(ctx, r.Kube, c)
	if err != nil {
		return Credentials{}, err
	}
	if s == nil {
		return Credentials{}, fmt.Errorf("credentials Secret %s/%s does not exist", c.Namespace, specs.SecretName(c))
	}
	return Credentials{
		Root:          topology.Secret(s.Data[specs.SecretRootPassword]),
		replication:   topology.Secret(s.Data[specs.SecretReplicationPassword]),
		orchestration: topology.Secret(s.Data[specs.SecretOrchestrationPassword]),
	}, nil
}

// Bootstrap brings a new cluster to Running, or resumes the bootstrap recorded in its status
// exactly at the recorded stage. It returns nil once the cluster is Running, ctx's error when
// the caller's deadline passes (the operation stays recorded for a later resume), and an
// outcome.ErrHeld error when another operation holds the cluster.
func (r *Runner) Bootstrap(ctx context.Context, key client.ObjectKey) error {
	return r.run(ctx, key, false)
}

// Converge does what Bootstrap does and, on a Running cluster, first checks every replica: when
// one does not replicate from the recorded primary it runs the bootstrap stages again as a
// "converge" operation (every stage is idempotent and the primary is never changed). A
// converged cluster costs one observation and no write, unless the record needs refreshing
// (refreshObserved): the primary's observation every lastSeenRefresh, and the HA state when no
// watch stands behind it and it is no longer current.
func (r *Runner) Converge(ctx context.Context, key client.ObjectKey) error {
	return r.run(ctx, key, true)
}

func (r *Runner) run(ctx context.Context, key client.ObjectKey, converge bool) error {
	lastReported := ""
	for {
		cluster := &v1.MysqlCluster{}
		if err := r.Kube.Get(ctx, key, cluster); err != nil {
			return err
		}
		op := cluster.Status.Operation
		if op == nil && converge || op != nil && op.Type == OperationConverge {
			if err := r.giveWayToFailover(cluster); err != nil {
				return err
			}
		}
		if op == nil {
			typ := OperationBootstrap
			if cluster.Status.Phase == v1.PhaseRunning || cluster.Status.Phase == v1.PhaseDegraded && cluster.Status.CurrentPrimary != "" {
				if !converge {
					return nil
				}
				// Converged replicas need no converge, unless the spec changed since one
				// recorded the generation it verified: then one runs, so the status (and the
				// disruption budget derived from it) describes the spec in force.
				if sc := cluster.Status.Scale; sc != nil && sc.Action == ScaleRebuild {
					return fmt.Errorf("%w: the rebuild of %s is recorded and stopped (see 'status %s'): run 'resume %s' to finish it or 'abort %s' to end it",
						outcome.ErrUnsafe, ScalePod(cluster, sc.Ordinal), cluster.Name, cluster.Name, cluster.Name)
				}
				if sc := cluster.Status.Scale; sc != nil {
					// A scale stopped (or superseded by a failover) with an instance in
					// flight: the cluster is not at either count, and only the scale knows
					// how to finish that instance.
					return fmt.Errorf("%w: a scale of %s to %d instances is recorded and stopped (see 'status %s'): run 'resume %s' to continue it",
						outcome.ErrUnsafe, cluster.Name, sc.To, cluster.Name, cluster.Name)
				}
				if pending, err := ScalePending(ctx, r.Kube, cluster); err != nil || pending {
					if err != nil {
						return err
					}
					// spec.replicas asks for another count than the StatefulSet holds: a scale
					// adds (seeded, joined) or removes (detached) the instances one at a time.
					return r.Scale(ctx, key, ScaleOptions{})
				}
				ok, err := r.ReplicasConverged(ctx, cluster, true)
				if err != nil || ok && cluster.Status.ObservedGeneration == cluster.Generation {
					return err
				}
				typ, converge = OperationConverge, false
			}
			if err := r.startOperation(ctx, cluster, typ); err != nil {
				return err
			}
			continue
		}
		if op.Type != OperationBootstrap && op.Type != OperationConverge {
			return r.otherOperation(cluster, op)
		}
		next, advanced, err := r.step(ctx, key, cluster, op, &lastReported, func() (string, func(*v1.MysqlClusterStatus), error) {
			return r.runStage(ctx, bootstrapKind, cluster, op, stageEnv{})
		})
		if err != nil || !advanced {
			if err != nil {
				return err
			}
			continue
		}
		if next == stageDone {
			if r.Progress != nil {
				r.Progress(v1.OperationStatus{ID: op.ID, Type: op.Type, Stage: "Done", Message: "cluster is Running"})
			}
			return SyncLivePDB(ctx, r.Kube, key) // from the now-recorded convergence
		}
		if r.StopAfterStage == op.Stage {
			return ErrStopped
		}
	}
}

// giveWayToFailover ends a converge, its stage kept, when a live supervisor found the primary
// dead and its automatic failover waits for the cluster's Lease (failover.ConvergeGivesWay): a
// converge needs that primary, so going on would only hold the Lease, and with it the
// failover, until the converge timed out. The failover supersedes the recorded converge.
// Whether the supervisor is live is judged from this run's own readings of its record.
func (r *Runner) giveWayToFailover(c *v1.MysqlCluster) error {
	ha := c.Status.HA
	if ha == nil || ha.LastFailedCheck == nil || c.Status.CurrentPrimary == "" {
		return nil
	}
	now, p := r.Clock(), PolicyOf(c)
	if p.Paused || !p.Auto {
		// Nobody fails over: a supervisor seen rewriting before must be seen again after.
		r.haSeen = failover.RecordLiveness{}
		return nil
	}
	r.haSeen.See(ha.FailedChecks, ha.LastFailedCheck.Time, now)
	ok, why := failover.ConvergeGivesWay(string(ha.State), ha.WaitingForLease != nil, &r.haSeen, p, now)
	if !ok {
		return nil
	}
	what := "the converge of " + c.Name
	if op := c.Status.Operation; op != nil {
		what += " (" + op.ID + ", stage " + op.Stage + ")"
	}
	return fmt.Errorf("%w: %s gave way to a failover of its primary %s: %s; the failover supersedes the converge and re-points the replicas: see 'status %s', and run 'reconcile %s' again if replicas are left to converge once it shows a Healthy primary",
		outcome.ErrHeld, what, c.Status.CurrentPrimary, why, c.Name, c.Name)
}

// step runs the recorded stage of op once: it reports progress, runs the stage, and persists
// the successor stage with the stage's status change as a compare-and-swap. It reports whether
// the operation advanced; a stage whose precondition does not hold yet records why, waits one
// poll and does not advance, and so does a persist that lost a race (the caller re-reads).
func (r *Runner) step(ctx context.Context, key client.ObjectKey, cluster *v1.MysqlCluster, op *v1.OperationStatus, lastReported *string,
	run func() (string, func(*v1.MysqlClusterStatus), error),
) (string, bool, error) {
	if r.Progress != nil && op.Stage+op.Message != *lastReported {
		r.Progress(*op)
		*lastReported = op.Stage + op.Message
	}
	if op.Holder != r.Holder || op.Epoch != r.Epoch {
		// Recorded by another actor (one that died, or whose lease this actor took over):
		// take it over first, so that no write of that actor can land any more.
		return "", false, r.adopt(ctx, cluster, op)
	}
	select {
	case <-r.Stop:
		return "", false, fmt.Errorf("%s of %s stopped before stage %s: %w", op.Type, key, op.Stage, ErrStopped)
	default:
	}
	if r.BeforeStage != nil {
		r.BeforeStage(ctx, op.Stage)
	}
	r.stage = op.Stage
	// The cluster as read: a stage may change its copy in memory, and the stage's record is
	// written from what was read (see persistWith below), never from those changes.
	read := cluster.DeepCopy()
	next, change, err := run()
	if errors.Is(err, topology.ErrSuperseded) && !errors.Is(err, ErrLeaseLost) {
		// A server keeps a newer epoch: another actor took over (the Lease was lost too, see
		// Lease.Supersede); never a wait, a configuration stop or a mark on the cluster.
		err = fmt.Errorf("%w: %w", ErrLeaseLost, err)
	}
	var ny errNotYet
	if ce := topology.AsConfigError(err); ce != nil {
		if stopsAtRefusal(op) {
			// No wait helps a path refused by configuration: stop now (see stopForConfig).
			return "", false, r.stopForConfig(ctx, key, read, op, ce)
		}
		// Past a switchover's or failover's point of no return the stage must end by its own
		// bound (a replica that cannot be reached is left for later repair, a candidate that
		// cannot be reached is taken out of every Service): a refused member is waited for as
		// a silent one, never a stop that only resume could continue and that would stop again.
		if !errors.As(err, &ny) {
			err = errNotYet{msg: err.Error(), cause: ce}
		}
	}
	switch {
	case errors.As(err, &ny):
		// A stage that waits reads the credentials again at its next try: a Secret put right
		// meanwhile is seen.
		clear(r.creds)
		if op.Message != ny.msg {
			_ = r.persist(ctx, cluster, op, op.Stage, func(s *v1.MysqlClusterStatus) { s.Operation.Message = ny.msg })
		}
		if err := r.wait(ctx); err != nil {
			return "", false, fmt.Errorf("%s of %s waiting at stage %s (%s): %w", op.Type, key, op.Stage, ny.msg, err)
		}
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("%s of %s at stage %s: %w", op.Type, key, op.Stage, err)
	}
	// Written from the copy read at the top of the loop, with no read first: the write is
	// conditional on that copy's resourceVersion (a conflict reads and re-checks).
	if err := r.persistWith(ctx, UpdateStatusFrom, read, op, next, change); err != nil {
		if errors.Is(err, ErrLostRace) {
			return "", false, nil
		}
		return "", false, err
	}
	read.DeepCopyInto(cluster)
	return next, true, nil
}

// load reads the cluster, unless the caller holds it as the write it just made returned it:
// the loop reads it right after that write, so it is as fresh as a read and saves one request
// per stage. Anything written since still makes the next stage's write conflict (it is
// conditional on that copy's resourceVersion) and re-read. An actor whose lease is no longer
// valid (it may have been paused since that write) reads afresh.
func (r *Runner) load(ctx context.Context, key client.ObjectKey, held *v1.MysqlCluster) (*v1.MysqlCluster, error) {
	if held != nil && held.Namespace == key.Namespace && held.Name == key.Name && (r.Lease == nil || r.Lease.Check() == nil) {
		return held, nil
	}
	c := &v1.MysqlCluster{}
	if err := r.Kube.Get(ctx, key, c); err != nil {
		return nil, err
	}
	return c, nil
}

// otherOperation is the error for a command that finds an operation of another type recorded.
// The caller holds the cluster's lease, so the recorded holder is no longer acting: say so, and
// how to finish or undo what it left.
func (r *Runner) otherOperation(c *v1.MysqlCluster, op *v1.OperationStatus) error {
	if r.Lease == nil {
		return fmt.Errorf("%w: operation %s (%s, stage %s, holder %s) is in progress", outcome.ErrHeld, op.ID, op.Type, op.Stage, op.Holder)
	}
	return fmt.Errorf("%w: the %s %s stopped at stage %s: its holder %s no longer holds the cluster (the process ended or lost its lease); run 'resume %s' to continue it, or 'abort %s' to roll it back where that is possible",
		outcome.ErrUnsafe, op.Type, op.ID, op.Stage, op.Holder, c.Name, c.Name)
}

// adopt writes this actor's holder and epoch into the recorded operation, as a compare-and-swap
// on the holder and epoch it was read with. An actor whose epoch is not newer than the recorded
// one does not own the cluster and is refused.
func (r *Runner) adopt(ctx context.Context, cluster *v1.MysqlCluster, op *v1.OperationStatus) error {
	if r.Epoch < op.Epoch || r.Epoch == op.Epoch && r.Holder != op.Holder {
		return fmt.Errorf("%w: operation %s is recorded by %s under lease epoch %d, not older than this actor's epoch %d", outcome.ErrHeld, op.ID, op.Holder, op.Epoch, r.Epoch)
	}
	if _, err := r.guard("take over operation " + op.ID); err != nil {
		return err
	}
	err := UpdateStatus(ctx, r.Kube, cluster, func(s *v1.MysqlClusterStatus) error {
		o := s.Operation
		if o == nil || o.ID != op.ID || o.Holder != op.Holder || o.Epoch != op.Epoch {
			return ErrLostRace
		}
		o.Holder, o.Epoch = r.Holder, r.Epoch
		return nil
	})
	if errors.Is(err, ErrLostRace) {
		return nil // re-read
	}
	if err == nil {
		r.Event(ctx, cluster, false, "OperationTakenOver", fmt.Sprintf("%s of %s at stage %s taken over from %s (epoch %d) by %s (epoch %d)", op.Type, cluster.Name, op.Stage, op.Holder, op.Epoch, r.Holder, r.Epoch))
	}
	return err
}

// begin records a new operation of this actor (holder and epoch) when none is recorded;
// init fills in the rest. The caller re-reads what was recorded.
func (r *Runner) begin(ctx context.Context, cluster *v1.MysqlCluster, op v1.OperationStatus, init func(*v1.MysqlClusterStatus)) error {
	return r.beginWith(ctx, UpdateStatus, cluster, op, init)
}

// beginWith is begin through the given status writer.
func (r *Runner) beginWith(ctx context.Context, write func(context.Context, StatusClient, *v1.MysqlCluster, StatusChange) error, cluster *v1.MysqlCluster, op v1.OperationStatus, init func(*v1.MysqlClusterStatus)) error {
	if _, err := r.guard("start a " + op.Type); err != nil {
		return err
	}
	select {
	case <-r.Stop:
		return fmt.Errorf("a %s of %s was not started: %w", op.Type, cluster.Name, ErrStopped)
	default:
	}
	op.RequestID = r.RequestID
	var b *begun
	if err := write(ctx, r.Kube, cluster, func(s *v1.MysqlClusterStatus) error {
		b = nil
		if s.Operation != nil {
			return nil // someone started one; the loop re-reads it
		}
		before := beginFields(s)
		o := op
		o.Holder, o.Epoch = r.Holder, r.Epoch
		o.StageStartedAt = o.UpdatedAt
		s.Operation = &o
		init(s)
		b = &begun{id: op.ID, before: before, after: beginFields(s)}
		return nil
	}); err != nil {
		return err
	}
	r.began = b // what a withdrawal restores (see withdrawal)
	// No voluntary eviction while the operation runs. The budget is a courtesy to drains,
	// not a safety mechanism: an operation is not held up by a failure to write it. It is
	// closed here, before any stage, never later: a process killed right after this write
	// leaves it closed for whoever resumes.
	_ = SyncPDB(ctx, r.Kube, cluster)
	return nil
}

func (r *Runner) startOperation(ctx context.Context, cluster *v1.MysqlCluster, typ string) error {
	now := metav1.NewTime(r.Clock())
	id := fmt.Sprintf("%s-%d", typ, now.Unix())
	stage := StageWaitingForPods
	if typ == OperationBootstrap {
		stage = firstBootstrapStage(cluster)
	}
	op := v1.OperationStatus{ID: id, Type: typ, Stage: stage, StartedAt: now, StartedAtMicro: microOf(now), UpdatedAt: &now}
	return r.begin(ctx, cluster, op, func(s *v1.MysqlClusterStatus) {
		if typ == OperationConverge {
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: "Converging", Message: "re-joining replicas"})
			return
		}
		s.Phase = v1.PhaseBootstrapping
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: "Bootstrapping", Message: "bootstrap started"})
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Bootstrapping", Message: "replication not proven yet"})
	})
}

// persist moves the operation from stage to next as a compare-and-swap on the recorded
// operation, its stage and its holder and epoch (the fencing token), after proving the lease is
// still valid: if another actor changed or took the operation meanwhile, nothing is written.
func (r *Runner) persist(ctx context.Context, cluster *v1.MysqlCluster, op *v1.OperationStatus, next string, change func(*v1.MysqlClusterStatus)) error {
	return r.persistWith(ctx, UpdateStatus, cluster, op, next, change)
}

// persistWith is persist through the given status writer.
func (r *Runner) persistWith(ctx context.Context, write func(context.Context, StatusClient, *v1.MysqlCluster, StatusChange) error, cluster *v1.MysqlCluster, op *v1.OperationStatus, next string, change func(*v1.MysqlClusterStatus)) error {
	if _, err := r.guard("record stage " + next + " of " + op.ID); err != nil {
		return err
	}
	now := metav1.NewTime(r.Clock())
	return write(ctx, r.Kube, cluster, func(s *v1.MysqlClusterStatus) error {
		o := s.Operation
		if o == nil || o.ID != op.ID || o.Stage != op.Stage || o.Holder != r.Holder || o.Epoch != r.Epoch {
			return ErrLostRace
		}
		if change != nil {
			change(s)
		}
		if s.Operation == nil {
			return nil // the change finished the operation
		}
		if next != s.Operation.Stage {
			s.Operation.Stage = next
			s.Operation.Message = ""
			s.Operation.StageStartedAt = &now
		}
		s.Operation.UpdatedAt = &now
		return nil
	})
}

// Instance is one pod with its ordinal.
type Instance struct {
	ordinal int32
	Pod     *corev1.Pod
}

// Pods lists the cluster's pods by ordinal; missing ordinals are absent.
func (r *Runner) Pods(ctx context.Context, c *v1.MysqlCluster) (map[int32]*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := r.Kube.List(ctx, list, client.InNamespace(c.Namespace), client.MatchingLabels(specs.SelectorLabels(c))); err != nil {
		return nil, err
	}
	out := map[int32]*corev1.Pod{}
	for i := range list.Items {
		p := &list.Items[i]
		ord, ok := ordinalOf(c, p.Name)
		if ok && p.DeletionTimestamp == nil {
			out[ord] = p
		}
	}
	return out, nil
}

// podsByName reads the pods of ordinals 0 to n-1 by name, in parallel, as pods() lists them:
// missing, deleted and foreign pods (not matching the cluster's selector) are absent. A read of
// one object is answered at once, where a consistent list waits for the API server's cache to
// catch up with the latest write (tens of milliseconds, on every stage of a failover).
func (r *Runner) podsByName(ctx context.Context, c *v1.MysqlCluster, n int32) (map[int32]*corev1.Pod, error) {
	got := make([]*corev1.Pod, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for ord := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := &corev1.Pod{}
			err := r.Kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: ScalePod(c, ord)}, p)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				errs[ord] = err
			default:
				got[ord] = p
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sel := labels.SelectorFromSet(specs.SelectorLabels(c))
	out := map[int32]*corev1.Pod{}
	for ord, p := range got {
		if p != nil && p.DeletionTimestamp == nil && sel.Matches(labels.Set(p.Labels)) {
			out[int32(ord)] = p
		}
	}
	return out, nil
}

func ordinalOf(c *v1.MysqlCluster, pod string) (int32, bool) {
	rest, ok := strings.CutPrefix(pod, c.Name+"-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 32)
	return int32(n), err == nil
}

// PodReady reports whether the pod's Ready condition is true.
func PodReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// members returns every ordinal's pod, requiring all of them to be ready.
func (r *Runner) members(ctx context.Context, c *v1.MysqlCluster) ([]Instance, error) {
	pods, err := r.Pods(ctx, c)
	if err != nil {
		return nil, err
	}
	var out []Instance
	ready := 0
	n := MemberCount(c)
	for ord := int32(0); ord < n; ord++ {
		p, ok := pods[ord]
		if ok && PodReady(p) {
			ready++
			out = append(out, Instance{ordinal: ord, Pod: p})
		}
	}
	if ready < int(n) {
		return nil, notYet("%d/%d pods ready", ready, n)
	}
	return out, nil
}

func quarantined(c *v1.MysqlCluster, name string) bool {
	for _, e := range c.Status.ErrantInstances {
		if e.Name == name {
			return true
		}
	}
	return false
}

// ReplicasConverged observes every non-quarantined replica and reports whether each replicates
// from the recorded primary with both threads running. With act, labels are made to follow the
// observed roles and the primary's observation is refreshed (under the caller's lease); without,
// it only looks, and a wrong label counts as not converged.
func (r *Runner) ReplicasConverged(ctx context.Context, c *v1.MysqlCluster, act bool) (bool, error) {
	pods, err := r.Pods(ctx, c)
	if err != nil {
		return false, err
	}
	// Replicas follow the primary by its stable name, never by its (changing) address.
	primaryIP := ""
	var primaryPod *corev1.Pod
	for _, p := range pods {
		if p.Name == c.Status.CurrentPrimary && PodReady(p) {
			primaryIP, primaryPod = specs.PodHost(c, p.Name), p
		}
	}
	if primaryIP == "" {
		// A converge re-joins replicas to the primary and would wait for it: refuse instead of
		// leaving an operation that blocks the failover the cluster needs.
		return false, fmt.Errorf("%w: the primary %s has no ready pod, so its replicas cannot be re-joined to it; if it is dead, run 'failover %s'", outcome.ErrUnsafe, c.Status.CurrentPrimary, c.Name)
	}
	creds, err := r.Credentials(ctx, c)
	if err != nil {
		return false, err
	}
	// The primary itself, for a converge about to act (reconcile): one that restarted comes
	// back read-only (rendered so) with its replicas reconnected to it, and is converged only
	// once reopened. The supervisor's repairer only looks (act false): it reopens a primary
	// only when its detector judged it restarted (a primary a person made read-only is theirs).
	if act {
		if writable, err := r.primaryWritable(ctx, primaryPod, creds); err != nil || !writable {
			return false, err
		}
	}
	for ord := int32(0); ord < MemberCount(c); ord++ {
		p, ok := pods[ord]
		if !ok {
			return false, nil
		}
		if p.Name == c.Status.CurrentPrimary || quarantined(c, p.Name) {
			continue
		}
		if !PodReady(p) {
			return false, nil
		}
		in, err := r.ConnectGuarded(ctx, p, topology.Credentials{User: "root", Password: creds.Root})
		if err != nil {
			if ce := topology.AsConfigError(err); ce != nil {
				return false, ce
			}
			if RecordedAbsent(c, p.Name) {
				continue // recorded absent and still silent: a converge would leave it out too
			}
			// Silent: a converge leaves it out and records it absent.
			return false, nil
		}
		s := in.Observe(ctx, topology.ObserveOptions{Now: r.Clock, Secrets: []string{string(creds.Root)}})
		_ = in.Close()
		if s.Err != nil && s.Err.Config != nil {
			// Not "not converged": a converge would be refused the same path, so none is begun.
			return false, s.Err.Config
		}
		if !s.Complete() && RecordedAbsent(c, p.Name) {
			continue
		}
		if !s.Complete() || !replicatesFrom(s, primaryIP) {
			return false, nil
		}
		// Labels follow the observed role: a replica that replicates is in the replica Service.
		if p.Labels[specs.LabelRole] != string(v1.RoleReplica) {
			if !act {
				return false, nil
			}
			if err := r.labelRole(ctx, c, p.Name, v1.RoleReplica); err != nil {
				return false, err
			}
		}
	}
	if !act {
		return true, nil
	}
	return true, r.refreshObserved(ctx, c, primaryPod, creds)
}

// primaryWritable reports whether the primary's server answers writable.
func (r *Runner) primaryWritable(ctx context.Context, pod *corev1.Pod, creds Credentials) (bool, error) {
	in, err := r.ConnectGuarded(ctx, pod, topology.Credentials{User: "root", Password: creds.Root})
	if err != nil {
		return false, err
	}
	defer func() { _ = in.Close() }()
	return in.Writable(ctx)
}

// lastSeenRefresh is how old the primary's recorded observation may grow before a converged
// reconcile records a fresh one. The receiver fence's deadline counts from it (see
// receiverFenceDeadline), so it must stay well inside the semi-sync timeout; refreshing it
// at most this often keeps a converged reconcile (almost always) free of writes.
const lastSeenRefresh = time.Hour

// RefreshPrimarySeen records a fresh observation of a healthy primary (see observedChange)
// when the recorded one is at least every old.
func (r *Runner) RefreshPrimarySeen(ctx context.Context, c *v1.MysqlCluster, pod *corev1.Pod, creds Credentials, every time.Duration) error {
	return r.recordObservation(ctx, c, pod, creds, primarySeenBefore(c, pod.Name, r.Clock(), every), false)
}

// refreshObserved records what a converge that found every replica replicating from the
// primary proved, where the record needs it: a fresh observation of the primary (at most every
// lastSeenRefresh), and a Healthy judgement when the recorded HA state is no longer current
// (JudgeHA: no watch stands behind it and it is older than HAStaleAfter), so that `status`
// after a reconcile shows the state now rather than a stopped watch's last word. When neither
// is needed it writes nothing, and reads the supervisor Lease only for a record that is old.
func (r *Runner) refreshObserved(ctx context.Context, c *v1.MysqlCluster, pod *corev1.Pod, creds Credentials) error {
	now := r.Clock()
	judge := false
	if !JudgeHA(c, Supervision{}, now).Current {
		sup, err := SupervisorOf(ctx, r.Kube, c)
		if err != nil {
			return err
		}
		judge = !JudgeHA(c, sup, now).Current
	}
	return r.recordObservation(ctx, c, pod, creds, primarySeenBefore(c, pod.Name, now, lastSeenRefresh), judge)
}

// primarySeenBefore reports whether the recorded observation of the primary pod is missing or
// at least every old at now.
func primarySeenBefore(c *v1.MysqlCluster, primary string, now time.Time, every time.Duration) bool {
	for _, i := range c.Status.Instances {
		if i.Name == primary && i.LastSeen != nil && now.Sub(i.LastSeen.Time) < every {
			return false
		}
	}
	return true
}

// recordObservation observes the primary pod once, when seen or judge asks for it, and writes
// what observedChange makes of the observation.
func (r *Runner) recordObservation(ctx context.Context, c *v1.MysqlCluster, pod *corev1.Pod, creds Credentials, seen, judge bool) error {
	if !seen && !judge {
		return nil
	}
	in, err := r.ConnectGuarded(ctx, pod, topology.Credentials{User: "root", Password: creds.Root})
	if err != nil {
		return err
	}
	s := in.Observe(ctx, topology.ObserveOptions{Now: r.Clock, Secrets: []string{string(creds.Root)}})
	_ = in.Close()
	change := joinChanges(observedChange(c, pod.Name, s, seen, judge), weakenedProtection(c, pod.Name, s))
	if change == nil {
		return nil
	}
	if _, err := r.guard("record an observation of " + pod.Name); err != nil {
		return err
	}
	return UpdateStatus(ctx, r.Kube, c, change)
}

// weakenedProtection is what an observation s of the primary changes in the recorded proof that
// its commits wait for acknowledgements, when the server now protects less than recorded (a
// person lowered rpl_semi_sync_master_timeout, turned semi-sync off, or the source fell back to
// asynchronous): the record is weakened at once, so that a later failover's receiver-fence
// deadline (lastSeen plus the timeout) is never longer than what the server does. A stronger
// observation is observedChange's business (it needs every replica proven). nil when nothing.
func weakenedProtection(c *v1.MysqlCluster, primary string, s topology.Snapshot) func(*v1.MysqlClusterStatus) error {
	if !s.Complete() || s.ReadOnly || semiSyncUnread(s) {
		return nil // nothing learnt
	}
	var rec *v1.InstanceStatus
	for i := range c.Status.Instances {
		if c.Status.Instances[i].Name == primary {
			rec = &c.Status.Instances[i]
		}
	}
	if rec == nil || !rec.SemiSyncSource {
		return nil
	}
	protects := FencesByReceivers(s)
	timeout := s.SemiSync.TimeoutMillis / 1000
	if protects && (rec.SemiSyncTimeoutSeconds == 0 || timeout >= rec.SemiSyncTimeoutSeconds) {
		return nil
	}
	return func(st *v1.MysqlClusterStatus) error {
		for i := range st.Instances {
			if st.Instances[i].Name != primary {
				continue
			}
			if !protects {
				st.Instances[i].SemiSyncSource = false
			}
			if cur := st.Instances[i].SemiSyncTimeoutSeconds; cur == 0 || timeout < cur {
				st.Instances[i].SemiSyncTimeoutSeconds = max(timeout, 1)
			}
		}
		return nil
	}
}

// semiSyncUnread reports whether the snapshot could not read the semi-sync state.
func semiSyncUnread(s topology.Snapshot) bool {
	for _, w := range s.Warnings {
		if strings.HasPrefix(w, "semi-sync state un") {
			return true
		}
	}
	return false
}

// RecordWeakened writes weakenedProtection's change for an observation of the primary, if any.
func (r *Runner) RecordWeakened(ctx context.Context, c *v1.MysqlCluster, primary string, s topology.Snapshot) error {
	change := weakenedProtection(c, primary, s)
	if change == nil {
		return nil
	}
	if _, err := r.guard("record the weakened semi-sync protection of " + primary); err != nil {
		return err
	}
	return UpdateStatus(ctx, r.Kube, c, change)
}

// joinChanges applies each non-nil change in turn; nil when there is none.
func joinChanges(changes ...func(*v1.MysqlClusterStatus) error) func(*v1.MysqlClusterStatus) error {
	var fs []func(*v1.MysqlClusterStatus) error
	for _, f := range changes {
		if f != nil {
			fs = append(fs, f)
		}
	}
	if len(fs) == 0 {
		return nil
	}
	return func(st *v1.MysqlClusterStatus) error {
		for _, f := range fs {
			if err := f(st); err != nil {
				return err
			}
		}
		return nil
	}
}

// observedChange is what an observation s of the primary, made by an actor that found every
// replica replicating from it, lets it record; nil when nothing. With seen, the primary's
// lastSeen, for a primary that waits for acknowledgements (see fencesByReceivers) from enough
// connected replicas with no commit waiting now (a commit already waiting could time out right
// after). With judge, a Healthy HA state judged by a converge, for a primary that answered
// writable: what a watch's check would have found, and what a converge's last stage records.
func observedChange(c *v1.MysqlCluster, primary string, s topology.Snapshot, seen, judge bool) func(*v1.MysqlClusterStatus) error {
	if !s.Complete() || s.ReadOnly {
		return nil
	}
	ss := s.SemiSync
	seen = seen && FencesByReceivers(s) && ss.SourceClients >= semiSyncWanted(c) && ss.WaitSessions == 0
	if !seen && !judge {
		return nil
	}
	at := metav1.NewTime(s.ObservedAt)
	return func(st *v1.MysqlClusterStatus) error {
		if seen {
			for i := range st.Instances {
				if st.Instances[i].Name == primary {
					st.Instances[i].LastSeen, st.Instances[i].SemiSyncSource = &at, true
					st.Instances[i].SemiSyncTimeoutSeconds = ss.TimeoutMillis / 1000
				}
			}
		}
		// Judged only while nothing changed meanwhile: the same primary, no operation (it
		// would own status.ha), and no newer judgement (a watch that started since).
		h := st.HA
		if !judge || st.CurrentPrimary != primary || st.Operation != nil || h != nil && h.JudgedAt != nil && !h.JudgedAt.Before(&at) {
			return nil
		}
		msg := fmt.Sprintf("primary %s answered writable and every replica replicates from it, as a converge observed", primary)
		st.HA = NextHAStatus(h, v1.HAHealthy, at, []string{msg}, OperationConverge)
		// A fresh count of failed checks: the checks that counted were a stopped watch's.
		st.HA.FailedChecks, st.HA.SuspectedPodUID, st.HA.LastFailedCheck, st.HA.WaitingForLease = 0, "", nil, nil
		ClearWithheld(st, msg)
		return nil
	}
}

// Sessions holds one connection per instance for the length of a stage: every stage connects
// afresh (the pods may have moved since the last one) and closes what it opened.
type Sessions struct {
	r     *Runner
	ctx   context.Context
	creds Credentials
	pods  map[string]*corev1.Pod
	// mu guards conns: observeAll connects to several instances at once.
	mu    sync.Mutex
	conns map[string]*topology.Instance
	// catchUp is how long caughtUp waits for a replica to apply the primary's set (default 2s).
	catchUp time.Duration
}

func (ss *Sessions) catchUpWait() time.Duration {
	if ss.catchUp > 0 {
		return ss.catchUp
	}
	return 2 * time.Second
}

// OpenSessions opens the sessions of a stage with the members (each connected on first use).
func (r *Runner) OpenSessions(ctx context.Context, members []Instance, creds Credentials) *Sessions {
	ss := &Sessions{r: r, ctx: ctx, creds: creds, pods: map[string]*corev1.Pod{}, conns: map[string]*topology.Instance{}}
	for _, m := range members {
		ss.pods[m.Pod.Name] = m.Pod
	}
	return ss
}

// Connect returns the instance's connection as root, opening it on first use.
func (ss *Sessions) Connect(name string) (*topology.Instance, error) {
	ss.mu.Lock()
	in, ok := ss.conns[name]
	ss.mu.Unlock()
	if ok {
		return in, nil
	}
	pod, ok := ss.pods[name]
	if !ok {
		return nil, fmt.Errorf("instance %s has no ready pod", name)
	}
	in, err := ss.r.ConnectGuarded(ss.ctx, pod, topology.Credentials{User: "root", Password: ss.creds.Root})
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if prev, ok := ss.conns[name]; ok {
		// Opened meanwhile by another caller: one connection per instance.
		_ = in.Close()
		return prev, nil
	}
	ss.conns[name] = in
	return in, nil
}

// port is the port replication reaches the instance on (PodPort of its pod).
func (ss *Sessions) port(name string) int { return specs.PodPort(ss.pods[name]) }

// Observe takes a complete snapshot of the instance; an incomplete one means "not yet".
func (ss *Sessions) Observe(name string) (topology.Snapshot, error) {
	in, err := ss.Connect(name)
	if err != nil {
		return topology.Snapshot{}, err
	}
	s := in.Observe(ss.ctx, topology.ObserveOptions{Now: ss.r.Clock, Secrets: []string{string(ss.creds.Root)}})
	if !s.Complete() {
		return s, notYet("%s does not answer yet: %v", name, s.Err)
	}
	return s, nil
}

// caughtUp reports why the replica s is not yet proven converged on the primary (named, at
// address ip, last observed as p), or "" once it replicates from it with both threads running and
// has applied everything p had.
func (ss *Sessions) caughtUp(name string, s topology.Snapshot, primary, ip string, p topology.Snapshot) (string, error) {
	switch {
	case s.Replica == nil:
		return name + ": no replication configured", nil
	case s.Replica.SourceHost != ip:
		return fmt.Sprintf("%s: replicates from %s, not from %s", name, s.Replica.SourceHost, primary), nil
	case !replicatesFrom(s, ip):
		return fmt.Sprintf("%s: IO thread %s, SQL thread running %v %s %s", name, s.Replica.IOThread, s.Replica.SQLRunning, s.Replica.LastIOError, s.Replica.LastSQLError), nil
	}
	in, err := ss.Connect(name)
	if err != nil {
		return "", err
	}
	if err := in.WaitForGTID(ss.ctx, executed(p), ss.catchUpWait()); err != nil {
		return fmt.Sprintf("%s: has not applied %s's %s yet", name, primary, executed(p)), nil
	}
	return "", nil
}

// replicatesFrom reports whether s replicates from the address with both threads running.
func replicatesFrom(s topology.Snapshot, ip string) bool {
	return s.Replica != nil && s.Replica.SourceHost == ip && s.Replica.IOThread == topology.ThreadRunning && s.Replica.SQLRunning
}

// observeAll observes the named instances at once (a failover's view of its members costs one
// round of queries, not one per member); the results are in the order of names. It starts one
// goroutine per name, for a cluster's own members (a handful), each bounded by Observe's
// timeout and ss's context.
func (ss *Sessions) observeAll(names []string) ([]topology.Snapshot, []error) {
	snaps, errs := make([]topology.Snapshot, len(names)), make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { snaps[i], errs[i] = ss.Observe(name) })
	}
	wg.Wait()
	return snaps, errs
}

// Close closes every connection the sessions opened.
func (ss *Sessions) Close() {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for _, in := range ss.conns {
		_ = in.Close()
	}
}

func addErrant(s *v1.MysqlClusterStatus, e v1.ErrantInstance, now time.Time) {
	for _, x := range s.ErrantInstances {
		if x.Name == e.Name {
			return
		}
	}
	t := metav1.NewTime(now)
	e.Since = &t
	s.ErrantInstances = append(s.ErrantInstances, e)
}

// labelRole sets the role label the Services select on.
func (r *Runner) labelRole(ctx context.Context, c *v1.MysqlCluster, pod string, role v1.Role) error {
	deadline, err := r.guard(fmt.Sprintf("label %s %s", pod, role))
	if err != nil {
		return err
	}
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, specs.LabelRole, role)
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: pod}}
	if err := r.Kube.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("label %s %s: %w", pod, role, err)
	}
	return nil
}

// SyncPDB derives the PodDisruptionBudget from the status as recorded in c: it allows one
// eviction only while the cluster is converged, Healthy and no operation runs. Nothing is sent
// when it already matches.
func SyncPDB(ctx context.Context, kube client.Client, c *v1.MysqlCluster) error {
	cv := specs.ConvergenceFromStatus(c, true)
	if _, err := Apply(ctx, kube, specs.BuildPDB(c, cv)); err != nil || !cv.Converged() {
		return err
	}
	// Opened from a status read a moment ago: an operation that began since has closed it,
	// and this write may have opened it again. Look once more and close it if so (anyone may
	// close the budget; opening it is the only write that needs a second look).
	live := &v1.MysqlCluster{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(c), live); err != nil {
		return err
	}
	if cv := specs.ConvergenceFromStatus(live, true); !cv.Converged() {
		_, err := Apply(ctx, kube, specs.BuildPDB(live, cv))
		return err
	}
	return nil
}

// syncPDB brings the cluster's disruption budget in line with its status, through r's
// sidework (best effort: a budget that cannot be written never stops an operation).
func (r *Runner) syncPDB(ctx context.Context, c *v1.MysqlCluster) {
	kube, key := r.Kube, client.ObjectKeyFromObject(c)
	r.background.Do(ctx, func(ctx context.Context) { _ = SyncLivePDB(ctx, kube, key) })
}

// SyncLivePDB is syncPDB from the status as it is read now: side work runs later than it was
// asked for, and budget updates asked for by different actors (a check, an operation) may run
// in any order; each derives the budget from the status when it runs.
func SyncLivePDB(ctx context.Context, kube client.Client, key client.ObjectKey) error {
	live := &v1.MysqlCluster{}
	if err := kube.Get(ctx, key, live); err != nil {
		return err
	}
	return SyncPDB(ctx, kube, live)
}

// identity is the server identity recorded in provenance: MySQL's server_uuid, or MariaDB's
// server_id (MariaDB has no server UUID).
func identity(s topology.Snapshot) string {
	if s.Flavor.IsMariaDB() {
		return "server_id:" + strconv.FormatUint(uint64(s.ServerID), 10)
	}
	return s.ServerUUID
}

// executed is the instance's executed GTID history as text: gtid_executed on MySQL,
// gtid_current_pos on MariaDB.
func executed(s topology.Snapshot) string {
	if s.Flavor.IsMariaDB() {
		return s.GTID.CurrentPos.String()
	}
	return s.GTID.Executed.String()
}

func (r *Runner) instanceStatuses(c *v1.MysqlCluster, members []Instance, snaps map[string]topology.Snapshot, primary string) []v1.InstanceStatus {
	var out []v1.InstanceStatus
	for _, m := range members {
		st := v1.InstanceStatus{Name: m.Pod.Name, Ordinal: m.ordinal, PodUID: string(m.Pod.UID), PodIP: m.Pod.Status.PodIP, Role: v1.RoleReplica}
		for _, cs := range m.Pod.Status.ContainerStatuses {
			if cs.Name == specs.ContainerName {
				st.Restarts = cs.RestartCount
			}
		}
		switch {
		case m.Pod.Name == primary:
			st.Role = v1.RolePrimary
			st.Classification = string(topology.ClassPrimary)
		case quarantined(c, m.Pod.Name):
			st.Role = v1.RoleQuarantined
			st.Classification = string(topology.ClassErrant)
		default:
			st.Classification = string(topology.ClassReplicating)
		}
		if s, ok := snaps[m.Pod.Name]; ok {
			st.ServerID = int64(s.ServerID)
			st.ServerUUID = s.ServerUUID
			st.Version = s.Flavor.VersionString
			st.GTIDExecuted = executed(s)
			st.SemiSyncSource = FencesByReceivers(s)
			if s.SemiSync.SourceEnabled {
				st.SemiSyncTimeoutSeconds = s.SemiSync.TimeoutMillis / 1000
			}
			t := metav1.NewTime(s.ObservedAt)
			st.LastSeen = &t
			if s.Replica != nil {
				st.LagSeconds = s.Replica.SecondsBehind
				st.IOThread = string(s.Replica.IOThread)
				st.SQLThread = map[bool]string{true: "Yes", false: "No"}[s.Replica.SQLRunning]
				st.LastError = strings.TrimSpace(s.Replica.LastIOError + " " + s.Replica.LastSQLError)
			}
		}
		out = append(out, st)
	}
	return out
}

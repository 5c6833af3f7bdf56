package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/internal/topology"
	"github.com/mysqlctl/mysqlctl/internal/topology/gtid"
)

// OperationFailover is the type of an unplanned primary replacement.
const OperationFailover = "failover"

// Failover stages, in order (Fencing, Promoting, MovingPrimary, Repointing and Verifying are
// shared with switchover by name).
const (
	StageConfirming         = "Confirming"
	StageElecting           = "Electing"
	StageWaitingForRelayLog = "WaitingForRelayLog"
)

// FailoverStages lists the stages in order.
var FailoverStages = []string{StageConfirming, StageFencing, StageElecting, StageWaitingForRelayLog, StagePromoting, StageMovingPrimary, StageRepointing, StageVerifying}

// Fence methods recorded in the evidence.
const (
	fenceBySQL       = "read_only=ON verified and client connections killed"
	fenceByReceivers = "every replica's IO thread stopped (a semi-synchronous primary cannot commit without an acknowledgement) and the primary taken out of the primary Service"
)

// MinFenceSemiSyncTimeout is the shortest semi-sync timeout under which stopping the replicas'
// receivers counts as a fence: a starved primary commits without acknowledgement once the
// timeout passes, so the fence holds only that long. An hour leaves the failover, and the fencing
// of a returning old primary by reconcile, well inside it.
const MinFenceSemiSyncTimeout = time.Hour

// FailoverOptions tune a failover.
type FailoverOptions struct {
	// To is the requested new primary; empty lets the election choose.
	To string
	// Force, with a Reason, overrides a Blocked fence, an unconfirmed death and the lack of a
	// provably safe candidate. The reason is recorded in the status, in the history and in an Event.
	Force  bool
	Reason string
	// CatchUpTimeout bounds the wait for the candidate's relay log (and, when the old primary is
	// reachable, for its fenced GTID set) (default 30s).
	CatchUpTimeout time.Duration
	// CheckTimeout bounds one check of the primary (default 1s).
	CheckTimeout time.Duration
	// ResumeOnly continues the recorded failover and never starts one.
	ResumeOnly bool
	// Detected are the supervisor's consecutive failed checks of the primary, oldest first:
	// Confirming continues from them instead of starting over. DetectedAt is when the last of
	// them ended: within one detection interval of it no fresh check is needed (the members'
	// view is always observed afresh).
	// DetectedPrimary is the primary they checked: they are evidence about it only.
	Detected        []failover.Check
	DetectedAt      time.Time
	DetectedPrimary string
	// Automatic marks a failover the supervisor (watch) started by itself.
	Automatic bool
	// PrimaryCheckedAt is when the supervisor's last check found the primary writable and
	// protected by semi-sync (zero: unknown), and PrimaryStartedAt when the server process that
	// answered it had started; recorded as evidence for the tail proof.
	PrimaryCheckedAt, PrimaryStartedAt time.Time
	// PrimaryCheckedGTID is the primary's written GTID position at that check.
	PrimaryCheckedGTID string

	// Read is the cluster as the caller read it under the Lease just before: the first step
	// starts from it instead of reading it again (see load).
	Read *v1.MysqlCluster
}

// timeOrNil is t as a recorded time, nil when zero.
func timeOrNil(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	m := metav1.NewTime(t)
	return &m
}

func (o *FailoverOptions) defaults() {
	if o.CatchUpTimeout == 0 {
		o.CatchUpTimeout = 30 * time.Second
	}
	if o.CheckTimeout == 0 {
		o.CheckTimeout = time.Second
	}
}

// Failover replaces a dead primary, or resumes the failover recorded in the cluster's status at
// its recorded stage. It refuses (outcome.ErrUnsafe) when the primary is alive, when its death
// is not confirmed by the replicas, when the fence cannot be proven, and when no replica is
// provably safe to promote; the last two leave the cluster Degraded with the reason.
func (r *Runner) Failover(ctx context.Context, key client.ObjectKey, opts FailoverOptions) error {
	opts.defaults()
	if opts.Force && strings.TrimSpace(opts.Reason) == "" {
		return errors.New("--force needs --reason: the reason is recorded with the forced decision")
	}
	defer r.withSidework()()
	started := false
	lastReported := ""
	held := opts.Read // as the last write returned it, or as the caller read it under the Lease
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
				return r.lastResult(cluster, OperationFailover)
			}
			if cluster.Status.CurrentPrimary == "" {
				return fmt.Errorf("%w: cluster %s has no recorded primary (phase %s): there is nothing to fail over from", outcome.ErrUnsafe, key.Name, cluster.Status.Phase)
			}
			if err := r.startFailover(ctx, cluster, opts); err != nil {
				return err
			}
			started, held = true, cluster
			continue
		}
		if (op.Type == OperationSwitchover || op.Type == OperationConverge || op.Type == OperationScale || op.Type == OperationRebuild) && !opts.ResumeOnly && !started {
			if err := r.supersede(ctx, cluster, op, opts); err != nil {
				return err
			}
			continue
		}
		if op.Type != OperationFailover {
			return r.otherOperation(cluster, op)
		}
		started = true
		_, advanced, err := r.step(ctx, key, cluster, op, &lastReported, func() (string, func(*v1.MysqlClusterStatus), error) {
			return r.runStage(ctx, failoverKind, cluster, op, stageEnv{foOpts: opts})
		})
		if err != nil {
			return err
		}
		if advanced {
			held = cluster
		}
	}
}

// supersede ends a switchover whose primary died before anything was promoted, so that a
// failover can replace that primary: a switchover cannot finish (or roll back) without it. The
// switchover is recorded in the history as superseded. A switchover past promotion, or one
// whose primary still answers, is not superseded: resume (or abort) finishes it.
func (r *Runner) supersede(ctx context.Context, c *v1.MysqlCluster, op *v1.OperationStatus, opts FailoverOptions) error {
	if op.Type == OperationSwitchover && (!slices.Contains(abortable[OperationSwitchover], op.Stage) || op.Evidence != nil && op.Evidence.PromotedAt != nil) {
		return r.otherOperation(c, op)
	}
	if r.Epoch < op.Epoch || r.Epoch == op.Epoch && r.Holder != op.Holder {
		return fmt.Errorf("%w: operation %s is recorded by %s under lease epoch %d, not older than this actor's epoch %d", outcome.ErrHeld, op.ID, op.Holder, op.Epoch, r.Epoch)
	}
	old := c.Status.CurrentPrimary
	v, err := r.FailoverView(ctx, c, old)
	if err != nil {
		return err
	}
	creds, err := r.Credentials(ctx, c)
	if err != nil {
		return err
	}
	// The same judgement as Confirming: only a primary proven dead ends the operation.
	ss := r.OpenSessions(ctx, v.Ready, creds)
	defer ss.Close()
	j, refused := r.confirm(ctx, c, v, ss, creds, opts)
	if refused != nil && !opts.Force {
		// Nothing was written: the operation it would supersede stays as it is.
		return fmt.Errorf("the %s %s stopped at stage %s and its primary %s cannot be checked from here: %w", op.Type, op.ID, op.Stage, old, refused)
	}
	// A converge gives way to a primary that restarted read-only too: the failover fences it
	// over SQL as it would without the converge, which cannot finish on a read-only primary.
	// A switchover makes its primary read-only itself, so only death ends one.
	if j.Verdict != failover.Dead && (j.Verdict != failover.ReadOnly || op.Type != OperationConverge) {
		return fmt.Errorf("%w: the %s %s stopped at stage %s and its primary %s is not proven dead (%s: %s): run 'resume %s' to finish it or 'abort %s' to roll it back",
			outcome.ErrUnsafe, op.Type, op.ID, op.Stage, old, j.Verdict, j.Reason, c.Name, c.Name)
	}
	if _, err := r.guard("supersede " + op.ID); err != nil {
		return err
	}
	select {
	case <-r.Stop:
		return fmt.Errorf("the failover superseding %s was not started: %w", op.ID, ErrStopped)
	default:
	}
	now := metav1.NewTime(r.Clock())
	msg := fmt.Sprintf("superseded at stage %s by a failover: the primary %s is dead", op.Stage, old)
	if j.Verdict == failover.ReadOnly {
		msg = fmt.Sprintf("superseded at stage %s by a failover: the primary %s restarted read-only", op.Stage, old)
	}
	// One write: the superseded operation goes to the history and the failover takes its place
	// already confirmed (the judgement above is Confirming's), so nothing can be left between.
	fo := v1.OperationStatus{
		ID: fmt.Sprintf("failover-%d", now.Unix()), Type: OperationFailover, Stage: StageFencing, Holder: r.Holder, Epoch: r.Epoch,
		StartedAt: now, StartedAtMicro: microOf(now), UpdatedAt: &now, StageStartedAt: &now, Target: opts.To, RequestID: r.RequestID,
		Evidence: &v1.OperationEvidence{
			FencedPrimary: old, FenceState: v1.FencePending, PrimaryVerdict: string(j.Verdict), Detection: j.Evidence,
			SemiSyncProven: semiSyncProvenNow(c, old, now.Time), PrimaryCheckedAt: timeOrNil(opts.PrimaryCheckedAt),
			PrimaryStartedAt: timeOrNil(opts.PrimaryStartedAt), PrimaryCheckedGTID: opts.PrimaryCheckedGTID,
		},
	}
	if opts.Force {
		fo.Evidence.Forced = opts.Reason
	}
	err = UpdateStatus(ctx, r.Kube, c, func(s *v1.MysqlClusterStatus) error {
		o := s.Operation
		if o == nil || o.ID != op.ID || o.Stage != op.Stage || o.Holder != op.Holder || o.Epoch != op.Epoch {
			return ErrLostRace
		}
		finish(s, now.Time, "Superseded", msg, 0)
		next := fo
		s.Operation = &next
		s.Phase = v1.PhaseFailingOver
		s.HA = NextHAStatus(s.HA, v1.HAFailoverInProgress, now, j.Evidence, OperationFailover)
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: "FailingOver", Message: "failover of " + old + " started: " + msg})
		return nil
	})
	if errors.Is(err, ErrLostRace) {
		return nil
	}
	if err == nil {
		// The judgement above is Confirming's: it is recorded as Confirming records it.
		r.Event(ctx, c, false, "PrimaryConfirmedDown", fmt.Sprintf("%s: %s", j.Verdict, j.Reason))
		r.Event(ctx, c, true, "SwitchoverSuperseded", msg)
	}
	return err
}

func (r *Runner) startFailover(ctx context.Context, c *v1.MysqlCluster, opts FailoverOptions) error {
	now := metav1.NewTime(r.Clock())
	id := fmt.Sprintf("failover-%d", now.Unix())
	op := v1.OperationStatus{
		ID: id, Type: OperationFailover, Stage: StageConfirming, StartedAt: now, StartedAtMicro: microOf(now), UpdatedAt: &now, Target: opts.To,
	}
	// Phase, HA state and conditions change only once Confirming accepts the primary's death:
	// a refused failover leaves them as it found them.
	// Written from the cluster as just read, with no read first (see updateStatusFrom).
	err := r.beginWith(ctx, UpdateStatusFrom, c, op, func(s *v1.MysqlClusterStatus) {
		s.Operation.Evidence = &v1.OperationEvidence{FencedPrimary: s.CurrentPrimary, FenceState: v1.FencePending}
		if opts.Force {
			s.Operation.Evidence.Forced = opts.Reason
		}
	})
	if err == nil {
		msg := "failover of primary " + c.Status.CurrentPrimary + " started"
		if opts.Force {
			msg += "; FORCED by a person: " + opts.Reason
		}
		r.Event(ctx, c, opts.Force, "FailoverStarted", msg)
	}
	return err
}

// NextHAStatus is h moved to state at now with its evidence, judged by by (an operation type or
// JudgeWatch).
func NextHAStatus(h *v1.HAStatus, state v1.HAState, now metav1.Time, evidence []string, by string) *v1.HAStatus {
	out := &v1.HAStatus{}
	if h != nil {
		out = h.DeepCopy()
	}
	if out.State != state {
		out.Since = &now
		out.WaitingForLease = nil // a wait of FailoverRequired only
	}
	out.State = state
	out.JudgedAt, out.JudgedBy = &now, by
	if evidence != nil {
		out.Evidence = evidence
	}
	return out
}

// lastResult reports the newest finished operation of the type from history.
func (r *Runner) lastResult(c *v1.MysqlCluster, typ string) error {
	for _, h := range c.Status.History {
		if h.Type == typ {
			return RecordResult(h)
		}
	}
	return nil
}

// RecordResult is the error a finished operation's history record stands for.
func RecordResult(h v1.OperationRecord) error {
	switch h.Result {
	case "Succeeded":
		return nil
	case "Aborted":
		return fmt.Errorf("%w: %s", ErrAborted, h.Message)
	}
	return fmt.Errorf("%w: %s", outcome.ErrUnsafe, h.Message)
}

// ErrAborted means a person aborted the operation.
var ErrAborted = errors.New("operation aborted")

// FailoverView is what a failover stage sees: the pods, which members answer, and the old
// primary's address as replicas know it.
type FailoverView struct {
	Pods      map[string]*corev1.Pod
	ordinals  map[string]int32
	Ready     []Instance // every pod whose readiness the API reports, old primary included
	missing   []string   // members other than the old primary without a ready pod
	old       string
	OldSource failover.Source
	oldPodUID string
}

// FailoverView reads what a failover stage sees of the cluster whose primary was old.
func (r *Runner) FailoverView(ctx context.Context, c *v1.MysqlCluster, old string) (FailoverView, error) {
	pods, err := r.podsByName(ctx, c, MemberCount(c))
	if err != nil {
		return FailoverView{}, err
	}
	v := FailoverView{Pods: map[string]*corev1.Pod{}, ordinals: map[string]int32{}, old: old}
	for ord := int32(0); ord < MemberCount(c); ord++ {
		name := fmt.Sprintf("%s-%d", c.Name, ord)
		v.ordinals[name] = ord
		p, ok := pods[ord]
		if ok {
			v.Pods[name] = p
		}
		if name == old {
			if ok {
				v.oldPodUID = string(p.UID)
				v.Ready = append(v.Ready, Instance{ordinal: ord, Pod: p})
			}
			continue
		}
		if ok && PodReady(p) {
			v.Ready = append(v.Ready, Instance{ordinal: ord, Pod: p})
		} else {
			v.missing = append(v.missing, name)
		}
	}
	// Replicas know the old primary by its stable name and, once connected, by its server_id.
	v.OldSource.Host = specs.PodHost(c, old)
	for _, i := range c.Status.Instances {
		if i.Name == old {
			v.OldSource.ServerID = uint32(i.ServerID) // server_id is 32 bits (MySQL and MariaDB)
			if v.oldPodUID == "" {
				v.oldPodUID = i.PodUID // the pod is gone: the last observed incarnation
			}
		}
	}
	return v, nil
}

// Members observes every reachable instance other than the old primary. Members that do not
// answer are reported as missing.
func (v *FailoverView) Members(c *v1.MysqlCluster, ss *Sessions) ([]failover.Member, []string) {
	var out []failover.Member
	missing := slices.Clone(v.missing)
	var names []string
	var ordinals []int32
	for _, m := range v.Ready {
		if m.Pod.Name != v.old {
			names, ordinals = append(names, m.Pod.Name), append(ordinals, m.ordinal)
		}
	}
	snaps, errs := ss.observeAll(names)
	for k, name := range names {
		if errs[k] != nil {
			missing = append(missing, name)
			continue
		}
		fm := failover.Member{Name: name, Ordinal: ordinals[k], Snapshot: snaps[k], Quarantined: quarantined(c, name)}
		for _, i := range c.Status.Instances {
			if i.Name == name {
				fm.LastKnownLag = i.LagSeconds
			}
		}
		out = append(out, fm)
	}
	return out, missing
}

// checkPrimary checks the old primary once, with a fresh connection bounded by timeout. A check
// the configuration refused (the path to the primary, not the primary: see topology.ConfigError)
// is returned with the refusal: it proves nothing about the primary, and callers count it as no
// check at all.
func (r *Runner) checkPrimary(ctx context.Context, v FailoverView, creds Credentials, timeout time.Duration) (ch failover.Check, refused *topology.ConfigError) {
	ch, _, refused = r.CheckPrimarySnapshot(ctx, v, creds, timeout)
	return ch, refused
}

// CheckPrimarySnapshot is checkPrimary that also returns what the check observed (complete only
// for a check that reached the primary).
func (r *Runner) CheckPrimarySnapshot(ctx context.Context, v FailoverView, creds Credentials, timeout time.Duration) (ch failover.Check, s topology.Snapshot, refused *topology.ConfigError) {
	ch = failover.Check{PodUID: v.oldPodUID}
	defer func() { ch.At = r.Clock() }()
	p, ok := v.Pods[v.old]
	switch {
	case !ok:
		ch.PodState = "absent"
	case p.DeletionTimestamp != nil:
		ch.PodState = "terminating"
	case p.Status.Phase != corev1.PodRunning:
		ch.PodState = "phase " + string(p.Status.Phase)
	}
	if !ok || p.Status.PodIP == "" {
		ch.Detail = "no pod address"
		return ch, s, nil
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	in, err := r.ConnectGuarded(cctx, p, topology.Credentials{User: "root", Password: creds.Root})
	if err != nil {
		ch.Detail = err.Error()
		ch.Refused = topology.KindOf(err) == topology.ErrorRefused
		return ch, s, topology.AsConfigError(err)
	}
	defer func() { _ = in.Close() }()
	s = in.Observe(cctx, topology.ObserveOptions{Now: r.Clock, Timeout: timeout, Secrets: []string{string(creds.Root)}})
	if !s.Complete() {
		// An answer that could not be read whole proves nothing about writability: the check
		// fails, and the replicas' view decides.
		if s.Err != nil {
			ch.Detail = s.Err.Error()
			ch.Refused = s.Err.Kind == topology.ErrorRefused
			refused = s.Err.Config
		}
		return ch, s, refused
	}
	ch.Reachable = true
	ch.Writable = !s.ReadOnly && (s.SuperReadOnly == nil || !*s.SuperReadOnly)
	if !ch.Writable || FencesByReceivers(s) {
		asked := r.Clock()
		if up, err := in.Uptime(cctx); err == nil {
			ch.Uptime, ch.UptimeKnown, ch.UptimeAt = up, true, asked
		}
	}
	return ch, s, nil
}

// knownHistory is the errant check's reference: every instance that has been primary, and the
// provenance recorded at bootstrap for instances that were never quarantined.
func knownHistory(c *v1.MysqlCluster) topology.History {
	var h topology.History
	ids := slices.Clone(c.Status.KnownPrimaries)
	for _, i := range c.Status.Instances {
		if i.Name == c.Status.CurrentPrimary || i.Role == v1.RolePrimary {
			if i.ServerUUID != "" {
				ids = append(ids, i.ServerUUID)
			} else if i.ServerID != 0 {
				ids = append(ids, "server_id:"+strconv.FormatInt(i.ServerID, 10))
			}
		}
	}
	for _, id := range ids {
		if n, ok := strings.CutPrefix(id, "server_id:"); ok {
			if v, err := strconv.ParseUint(n, 10, 32); err == nil && !slices.Contains(h.PrimaryServerIDs, uint32(v)) {
				h.PrimaryServerIDs = append(h.PrimaryServerIDs, uint32(v))
			}
		} else if id != "" && !slices.Contains(h.PrimaryUUIDs, id) {
			h.PrimaryUUIDs = append(h.PrimaryUUIDs, id)
		}
	}
	mariadb := c.Spec.Flavor == v1.FlavorMariaDB || c.Spec.Flavor == "" && v1.FlavorFromImage(c.Spec.Image) == v1.FlavorMariaDB
	for _, b := range c.Status.GTIDBootstrap {
		if b.BootstrapGTIDSet == "" || quarantined(c, fmt.Sprintf("%s-%d", c.Name, b.Ordinal)) {
			continue
		}
		if !mariadb {
			if set, err := gtid.ParseMySQLSet(b.BootstrapGTIDSet); err == nil {
				h.MySQL = h.MySQL.Union(set)
			}
			continue
		}
		if pos, err := gtid.ParseMariaDBPos(b.BootstrapGTIDSet); err == nil {
			if u, err := h.MariaDB.Union(pos); err == nil {
				h.MariaDB = u
			}
		}
	}
	return h
}

// quarantine takes instances out of service: replication stopped (a quarantined replica must
// never acknowledge a commit) and the quarantined role label, so no Service selects them.
func (r *Runner) quarantine(ctx context.Context, c *v1.MysqlCluster, ss *Sessions, errant []v1.ErrantInstance) error {
	for _, e := range errant {
		in, err := ss.Connect(e.Name)
		if err != nil {
			return err
		}
		if snap, err := ss.Observe(e.Name); err != nil {
			return err
		} else if snap.Replica != nil {
			if err := in.StopReplica(ctx); err != nil {
				return err
			}
		}
		if err := r.labelRole(ctx, c, e.Name, v1.RoleQuarantined); err != nil {
			return err
		}
		r.Event(ctx, c, true, "Quarantined", fmt.Sprintf("%s: %s (%d divergent transaction(s): %s); 'rebuild %s %s' replaces its data with a healthy replica's copy", e.Name, e.Reason, e.Count, e.ErrantGTIDs, c.Name, e.Name))
	}
	return nil
}

// evidenceOf returns the operation's evidence, creating it if an older writer left none.
func evidenceOf(s *v1.MysqlClusterStatus) *v1.OperationEvidence {
	if s.Operation.Evidence == nil {
		s.Operation.Evidence = &v1.OperationEvidence{}
	}
	return s.Operation.Evidence
}

// recordedSemiSyncSource reports whether the instance was last observed as a semi-sync source
// whose timeout makes the receiver fence hold.
func recordedSemiSyncSource(c *v1.MysqlCluster, name string) bool {
	for _, i := range c.Status.Instances {
		if i.Name == name {
			return i.SemiSyncSource
		}
	}
	return false
}

// FencesByReceivers reports, from what the server itself says, whether it is a semi-sync source
// that stops committing while no replica acknowledges: the source side enabled and active, the
// wait point AFTER_SYNC (the transaction is not committed, hence invisible, until acknowledged),
// waiting even with no semi-sync replica connected, for at least MinFenceSemiSyncTimeout.
func FencesByReceivers(s topology.Snapshot) bool {
	ss := s.SemiSync
	return ss.SourceEnabled && ss.SourceActive && ss.WaitPoint == "AFTER_SYNC" && ss.WaitNoReplica &&
		ss.TimeoutMillis >= MinFenceSemiSyncTimeout.Milliseconds()
}

// markPrimary records the instance as the primary in status.instances, with its observed
// semi-sync source state, and the old primary as what it now is.
func markPrimary(s *v1.MysqlClusterStatus, primary string, snap topology.Snapshot, old string, oldRole v1.Role) {
	for i := range s.Instances {
		switch s.Instances[i].Name {
		case primary:
			s.Instances[i].Role, s.Instances[i].Classification = v1.RolePrimary, string(topology.ClassPrimary)
			s.Instances[i].SemiSyncSource = FencesByReceivers(snap)
			s.Instances[i].SemiSyncTimeoutSeconds = snap.SemiSync.TimeoutMillis / 1000
			if !snap.ObservedAt.IsZero() {
				seen := metav1.NewTime(snap.ObservedAt)
				s.Instances[i].LastSeen = &seen
			}
		case old:
			s.Instances[i].Role, s.Instances[i].SemiSyncSource = oldRole, false
		}
	}
}

// semiSyncProven reports, from what was observed rather than what the spec asks, whether every
// commit the primary acknowledged had reached a replica: it was last observed as a semi-sync
// source that waits (see fencesByReceivers), and the cluster's SemiSynchronous condition does
// not say it ran asynchronously since.
// semiSyncProvenNow is semiSyncProven while the proof is still fresh: a semi-sync source waits
// for an acknowledgement only for its timeout, so an observation older than the receiver-fence
// deadline proves nothing about commits since.
func semiSyncProvenNow(c *v1.MysqlCluster, primary string, now time.Time) bool {
	d, _ := receiverFenceDeadline(c, primary)
	return semiSyncProven(c, primary) && d != nil && now.Before(d.Time)
}

func semiSyncProven(c *v1.MysqlCluster, primary string) bool {
	if cond := meta.FindStatusCondition(c.Status.Conditions, v1.ConditionSemiSynchronous); cond != nil && cond.Status == metav1.ConditionFalse {
		return false
	}
	return recordedSemiSyncSource(c, primary)
}

func maxCandidateLag(c *v1.MysqlCluster) time.Duration {
	if d := c.Spec.Failover.MaxCandidateLag; d != nil {
		return d.Duration
	}
	return 30 * time.Second
}

// addKnownPrimary records an identity in status.knownPrimaries once.
func addKnownPrimary(s *v1.MysqlClusterStatus, id string) {
	if id != "" && !slices.Contains(s.KnownPrimaries, id) {
		s.KnownPrimaries = append(s.KnownPrimaries, id)
	}
}

// degrade ends the operation as Failed with the cluster Degraded and the reason persisted, and
// returns the refusal to report. Nothing was promoted.
func (r *Runner) degrade(ctx context.Context, c *v1.MysqlCluster, op *v1.OperationStatus, reason string, change func(*v1.MysqlClusterStatus)) error {
	now := r.Clock()
	t := metav1.NewTime(now)
	err := r.persist(ctx, c, op, op.Stage, func(s *v1.MysqlClusterStatus) {
		if change != nil {
			change(s)
		}
		finish(s, now, "Failed", reason, 0)
		s.Phase = v1.PhaseDegraded
		s.HA = NextHAStatus(s.HA, v1.HADegraded, t, nil, op.Type)
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: "FailoverRefused", Message: reason})
	})
	if err != nil {
		return err
	}
	r.Event(ctx, c, true, "FailoverRefused", reason)
	return fmt.Errorf("%w: %s", outcome.ErrUnsafe, reason)
}

// refuse withdraws a failover that Confirming refused (the primary is alive, or its death is
// not confirmed) and returns the refusal. Nothing was done, so nothing is recorded but an
// Event with the reason and evidence: the phase, HA state, conditions, labels and history stay
// as the failover found them.
func (r *Runner) refuse(ctx context.Context, c *v1.MysqlCluster, op *v1.OperationStatus, reason string, evidence []string) error {
	err := r.persist(ctx, c, op, op.Stage, func(s *v1.MysqlClusterStatus) { s.Operation = nil })
	if err != nil {
		return err
	}
	r.Event(ctx, c, true, "FailoverRefused", reason+"; evidence: "+strings.Join(evidence, "; "))
	return fmt.Errorf("%w: %s", outcome.ErrUnsafe, reason)
}

// confirm checks the primary up to the failure threshold and judges it with the members' view.
//
// A check the configuration refused ends the confirmation at once with the refusal: more checks
// would be refused the same way, and the replicas' view cannot stand in for the primary's own
// check. The judgement is then Unreachable, which only a forced failover goes past.
func (r *Runner) confirm(ctx context.Context, c *v1.MysqlCluster, v FailoverView, ss *Sessions, creds Credentials, opts FailoverOptions) (failover.Judgement, *topology.ConfigError) {
	threshold := int(c.Spec.Failover.FailureThreshold)
	if threshold <= 0 {
		threshold = 3
	}
	interval := time.Second
	if d := c.Spec.Failover.DetectionInterval; d != nil {
		interval = d.Duration
	}
	// Past the threshold, an unreachable primary that some replica still receives from is
	// checked on for as long as a replica needs to notice a silent source (twice its net
	// timeout): a frozen or partitioned primary keeps a replica's receiver "running" until then.
	deadline := r.Clock().Add(time.Duration(threshold)*interval + 2*specs.ReplicaNetTimeout)
	var checks []failover.Check
	if n := len(opts.Detected); n > 0 && opts.DetectedPrimary == v.old && opts.Detected[n-1].PodUID == v.oldPodUID {
		// The supervisor's checks are evidence about this primary incarnation only.
		checks = slices.Clone(opts.Detected)
	}
	var last time.Time
	fresh := len(checks) >= threshold && !opts.DetectedAt.IsZero() && r.Clock().Sub(opts.DetectedAt) < interval
	for {
		if fresh {
			// Checked silent or refused within the last interval: the members are observed
			// afresh, the primary is not waited on again. A read-only answer is always
			// checked again (it may be writable by now).
			fresh = false
			members, _ := v.Members(c, ss)
			if j := failover.Judge(v.old, v.OldSource, checks, threshold, members); j.Verdict == failover.Dead {
				if lc := checks[len(checks)-1]; !lc.Refused {
					r.markSilent(v.Pods[v.old], opts.DetectedAt)
				}
				return j, nil
			}
		}
		// Checks start detectionInterval apart; a check that ran into its timeout has already
		// used (part of) the interval.
		if len(checks) > 0 {
			if wait := interval - r.Clock().Sub(last); wait > 0 {
				_ = r.sleep(ctx, wait)
			}
		}
		last = r.Clock()
		ch, refused := r.checkPrimary(ctx, v, creds, opts.CheckTimeout)
		if refused != nil {
			return failover.Judgement{
				Verdict:  failover.Unreachable,
				Reason:   fmt.Sprintf("the primary %s cannot be checked from here, so its death cannot be confirmed: %v", v.old, refused),
				Evidence: []string{v.old + " could not be checked: " + refused.Error()},
			}, refused
		}
		checks = append(checks, ch)
		if !ch.Reachable && !ch.Refused {
			r.markSilent(v.Pods[v.old], ch.At)
		}
		if !ch.Reachable && ctx.Err() == nil && len(checks) < threshold {
			continue
		}
		members, _ := v.Members(c, ss)
		j := failover.Judge(v.old, v.OldSource, checks, threshold, members)
		if j.Verdict != failover.Unreachable || ctx.Err() != nil || !r.Clock().Before(deadline) {
			return j, nil
		}
	}
}

// fenceOverSQL fences a reachable primary and returns its GTID set at the verified fence.
func fenceOverSQL(ctx context.Context, in *topology.Instance, ss *Sessions, name string) (string, string, error) {
	killed, err := fence(ctx, in)
	if err != nil {
		return "", "", err
	}
	fs, err := in.VerifyFence(ctx, ReplicationUser)
	if err != nil {
		return "", "", err
	}
	if !fs.Verified {
		return "", "", notYet("fence of %s not verified yet: %s", name, strings.Join(fs.Evidence, "; "))
	}
	ps, err := ss.Observe(name)
	if err != nil {
		return "", "", err
	}
	method := fenceBySQL
	if ps.Flavor.IsMySQL() {
		method = "super_read_only=ON verified and client connections killed"
	}
	return executed(ps), fmt.Sprintf("%s (%d killed)", method, killed), nil
}

// fence makes a server read-only and ends its client sessions. Sessions are killed first as
// well as after: a primary starved of semi-sync acknowledgements has sessions waiting in commit,
// and setting read_only waits for them (forever, with a long semi-sync timeout). Killing them
// first never acknowledges their commits to the clients.
func fence(ctx context.Context, in *topology.Instance) (int, error) {
	first, err := in.KillClientConnections(ctx, ReplicationUser)
	if err != nil {
		return 0, err
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = in.Fence(fctx)
	cancel()
	if err != nil {
		return 0, err
	}
	then, err := in.KillClientConnections(ctx, ReplicationUser)
	if err != nil {
		return 0, err
	}
	return len(first) + len(then), nil
}

// promote makes in a writable primary: replication stopped and reset, the semi-sync source side
// on when enough replicas will acknowledge, read-only off.
func (r *Runner) promote(ctx context.Context, c *v1.MysqlCluster, in *topology.Instance, replicas int) error {
	if err := in.StopReplica(ctx); err != nil {
		return err
	}
	if err := in.ResetReplication(ctx); err != nil {
		return err
	}
	wait := int(c.Spec.SemiSync.WaitForReplicas)
	if wait == 0 {
		wait = 1
	}
	// Without enough replicas to acknowledge, a semi-sync source would block every commit;
	// reconcile switches it on once the replicas are back.
	if c.Spec.SemiSync.SemiSyncEnabled() && c.Spec.Replicas > 1 && replicas >= wait {
		spec := topology.SemiSyncSourceSpec{Timeout: 24 * time.Hour, WaitForReplicas: wait}
		if c.Spec.SemiSync.Timeout != nil {
			spec.Timeout = c.Spec.SemiSync.Timeout.Duration
		}
		if err := in.EnableSemiSyncSource(ctx, spec); err != nil {
			return err
		}
	}
	return in.MakeWritable(ctx)
}

// promoteCandidate promotes the candidate (see promote) and returns the status change that
// records it: a known primary now, observed as a semi-sync source or not, and the old primary's
// new role.
func (r *Runner) promoteCandidate(ctx context.Context, c *v1.MysqlCluster, ss *Sessions, in *topology.Instance, candidate string, acks int, old string, oldRole v1.Role) (func(*v1.MysqlClusterStatus), error) {
	if err := r.promote(ctx, c, in, acks); err != nil {
		return nil, err
	}
	s, err := ss.Observe(candidate)
	if err != nil {
		return nil, err
	}
	id := identity(s)
	r.Event(ctx, c, false, "Promoted", fmt.Sprintf("%s promoted: replication reset, writable, semi-sync source %v", candidate, s.SemiSync.SourceEnabled))
	now := metav1.NewTime(r.Clock())
	return func(st *v1.MysqlClusterStatus) {
		addKnownPrimary(st, id)
		markPrimary(st, candidate, s, old, oldRole)
		if e := evidenceOf(st); e.PromotedAt == nil {
			e.PromotedAt = &now
		}
	}, nil
}

// movePrimary moves the role labels, so that the primary Service follows the new primary, and
// returns the status change that records it as the current primary.
func (r *Runner) movePrimary(ctx context.Context, c *v1.MysqlCluster, old string, oldRole v1.Role, candidate string) (func(*v1.MysqlClusterStatus), error) {
	if err := r.labelRole(ctx, c, old, oldRole); err != nil {
		return nil, err
	}
	if err := r.labelRole(ctx, c, candidate, v1.RolePrimary); err != nil {
		return nil, err
	}
	return func(s *v1.MysqlClusterStatus) { s.CurrentPrimary = candidate }, nil
}

// openPrimary makes the instance writable and puts it in the primary Service.
func (r *Runner) openPrimary(ctx context.Context, c *v1.MysqlCluster, in *topology.Instance, name string) error {
	if err := in.MakeWritable(ctx); err != nil {
		return err
	}
	return r.labelRole(ctx, c, name, v1.RolePrimary)
}

// joinReplica points in at the new primary, resuming from its own binlog when it has written
// transactions of its own (a former primary), with the semi-sync replica side on.
func (r *Runner) joinReplica(ctx context.Context, c *v1.MysqlCluster, in *topology.Instance, s topology.Snapshot, host string, port int, creds Credentials) error {
	if s.SemiSync.SourceEnabled {
		if err := in.DisableSemiSyncSource(ctx); err != nil {
			return err
		}
	}
	// The acknowledging side is on before the receiver first connects (see SourceSpec.SemiSync).
	return in.Repoint(ctx, topology.SourceSpec{
		Host: host, Port: port, User: ReplicationUser, Password: creds.replication,
		ConnectRetry: time.Second, HeartbeatPeriod: specs.ReplicaHeartbeat, ResumeFromBinlog: resumesFromBinlog(s),
		SemiSync: c.Spec.SemiSync.SemiSyncEnabled(),
	})
}

// resumesFromBinlog reports whether a MariaDB instance's binlog holds transactions its
// gtid_slave_pos does not (it wrote them as a primary): it must resume from gtid_binlog_pos.
func resumesFromBinlog(s topology.Snapshot) bool {
	return s.Flavor.IsMariaDB() && !s.GTID.BinlogPos.IsEmpty() && !s.GTID.SlavePos.Contains(s.GTID.BinlogPos)
}

// Divergence checks that the replica's history is an ancestor of the primary's and that the
// primary's binlogs still hold what the replica lacks; otherwise it describes the quarantine.
func Divergence(primary, replica topology.Snapshot) (v1.ErrantInstance, bool) {
	if replica.Flavor.IsMariaDB() {
		// Positions alone cannot tell a legitimate history from a divergent one when another
		// server wrote later (see gtid.Relation). gtid_binlog_state can: it keeps the last
		// sequence number of every (domain, server_id) that reached the binlog, so any server
		// whose transactions the replica holds beyond the primary's record of that server marks
		// transactions the primary never had.
		var extra []string
		var count int64
		for _, run := range failover.BeyondPrimary(primary.GTID.BinlogState, replica.GTID.BinlogState) {
			extra = append(extra, run.Last.String())
			if run.Known {
				// The primary stopped receiving this server at Have; in strict mode every
				// later sequence number up to Last was written by it.
				count += int64(run.Last.Seq - run.Have)
			} else {
				// A server the primary never heard of: at least one transaction (sequence
				// numbers are shared by every server of a domain, so no more can be told).
				count++
			}
		}
		if len(extra) > 0 {
			return v1.ErrantInstance{
				Reason: fmt.Sprintf("holds transactions the primary does not have: its binlog holds %s, beyond the primary's binlog state %s",
					strings.Join(extra, ","), gtidList(primary.GTID.BinlogState)),
				ErrantGTIDs: strings.Join(extra, ","), Count: count,
			}, false
		}
		if !primary.GTID.CurrentPos.Contains(replica.GTID.CurrentPos) {
			extra := replica.GTID.CurrentPos.Subtract(primary.GTID.CurrentPos)
			return v1.ErrantInstance{
				Reason: fmt.Sprintf("holds transactions the primary does not have (its history is not an ancestor of the primary's): at %s, the primary at %s", replica.GTID.CurrentPos, primary.GTID.CurrentPos),
				// Positions tell only that each domain listed holds at least one such transaction.
				ErrantGTIDs: extra.String(), Count: int64(len(extra.GTIDs())),
			}, false
		}
		if primary.GTID.PurgedKnown && !replica.GTID.CurrentPos.Contains(primary.GTID.PurgedPos) {
			return v1.ErrantInstance{Reason: fmt.Sprintf("the primary's binlogs start at %s, after this instance's %s: it cannot catch up", primary.GTID.PurgedPos, replica.GTID.CurrentPos)}, false
		}
		return v1.ErrantInstance{}, true
	}
	if extra := replica.GTID.Executed.Subtract(primary.GTID.Executed); !extra.IsEmpty() {
		return v1.ErrantInstance{Reason: "holds transactions the primary does not have", ErrantGTIDs: extra.String(), Count: int64(extra.Count())}, false
	}
	need := primary.GTID.Executed.Subtract(replica.GTID.Executed)
	if gone := need.Intersect(primary.GTID.Purged); !gone.IsEmpty() {
		return v1.ErrantInstance{Reason: "the primary purged binlogs this instance still needs: " + gone.String()}, false
	}
	return v1.ErrantInstance{}, true
}

func gtidList(gs []gtid.MariaDBGTID) string {
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.String()
	}
	return "[" + strings.Join(out, ",") + "]"
}

func unique(ss []string) []string {
	slices.Sort(ss)
	return slices.Compact(ss)
}

// mergeInstances replaces the observed instances' records and keeps the others' last
// observation, marking the old primary's role unknown.
func mergeInstances(prev, observed []v1.InstanceStatus, old string) []v1.InstanceStatus {
	out := slices.Clone(observed)
	for _, p := range prev {
		if slices.ContainsFunc(out, func(i v1.InstanceStatus) bool { return i.Name == p.Name }) {
			continue
		}
		if p.Name == old {
			p.Role, p.Classification = v1.RoleUnknown, "Down"
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b v1.InstanceStatus) int { return int(a.Ordinal - b.Ordinal) })
	return out
}

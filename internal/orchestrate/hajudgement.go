package orchestrate

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
)

// JudgeWatch names the supervisor as the judge of the HA state in status.ha.judgedBy; the
// operations that write it are named by their type (bootstrap, converge, switchover, failover).
const JudgeWatch = "watch"

// HAFresh is how long a judgement of the primary's health stays current with no supervising
// watch behind it (at least three detection intervals; see HAStaleAfter). A watch renews its
// Lease every RenewInterval while it checks, so its judgement is never older than that while it
// runs; after it stops, or after a converge proved the primary once, a minute is long enough for
// a person who just ran `reconcile` to read `status` as the state now, and short enough that a
// primary which died since, with nothing checking, is not shown as healthy for long.
const HAFresh = time.Minute

// HAJudgement is how current the HA state recorded on a cluster is, decided at read time from
// the record and the supervisor Lease (JudgeHA). `mysqlctl status -o json` prints it.
type HAJudgement struct {
	// State is the recorded state ("" when none is recorded yet).
	State v1.HAState `json:"state,omitempty"`
	// JudgedAt is when the state was last judged: the record's judgedAt, or the last renewal of
	// the supervisor Lease of a watch that stood behind the record, whichever is newer. Absent
	// when nothing is known (no record, or one written by an older mysqlctl with no times).
	JudgedAt *metav1.Time `json:"judgedAt,omitempty"`
	// JudgedBy is who judged last: watch, bootstrap, converge, switchover or failover ("" when
	// the record does not say).
	JudgedBy string `json:"judgedBy,omitempty"`
	// Current is true when the judgement describes the cluster now: it is at most StaleAfter
	// old. A watch that supervises the cluster keeps it current.
	Current bool `json:"current"`
	// Supervisor is the watch that supervises the cluster now: the holder of its supervisor
	// Lease, renewed within LeaseDuration ("" when none).
	Supervisor string `json:"supervisor,omitempty"`
	// StaleAfter is the age past which the judgement is no longer current.
	StaleAfter metav1.Duration `json:"staleAfter"`
}

// HAStaleAfter is the age past which a judgement of c's primary is stale: HAFresh, or three
// detection intervals when those are longer (a watch that checks once a minute).
func HAStaleAfter(c *v1.MysqlCluster) time.Duration {
	return max(HAFresh, 3*DetectionInterval(c))
}

// JudgeHA decides how current the HA state recorded on c is at now, given its supervisor
// Lease as read (SupervisorOf). It does no I/O.
//
// A watch that holds the supervisor Lease checks the primary every detection interval and
// rewrites the record whenever its judgement changes, so each renewal of the Lease confirms the
// record as it stands; a released or expired Lease keeps its last renewal time, which is when a
// watch last looked. That confirmation does not hold while an operation other than a converge is
// recorded: the operation owns status.ha then, and the watch does not check the primary.
func JudgeHA(c *v1.MysqlCluster, sup Supervision, now time.Time) HAJudgement {
	stale := HAStaleAfter(c)
	j := HAJudgement{StaleAfter: metav1.Duration{Duration: stale}}
	if sup.Holder != "" && !sup.RenewedAt.IsZero() && now.Sub(sup.RenewedAt) < LeaseDuration {
		j.Supervisor = sup.Holder
	}
	h := c.Status.HA
	if h == nil {
		return j
	}
	j.State = h.State
	at, by := recordJudgedAt(h), h.JudgedBy
	op := c.Status.Operation
	if watchOwnsHA := op == nil || op.Type == OperationConverge; watchOwnsHA && sup.RenewedAt.After(at) {
		at, by = sup.RenewedAt, JudgeWatch
	}
	j.JudgedBy = by
	if !at.IsZero() {
		t := metav1.NewTime(at)
		j.JudgedAt = &t
		// A clock ahead of this one (a judge's in the future) counts as judged now.
		j.Current = now.Sub(at) <= stale
	}
	return j
}

// recordJudgedAt is when the record was last written from an observation: its judgedAt, or for
// a record written before that field existed, the newest time it holds.
func recordJudgedAt(h *v1.HAStatus) time.Time {
	if h.JudgedAt != nil {
		return h.JudgedAt.Time
	}
	var at time.Time
	for _, t := range []*metav1.Time{h.Since, h.LastFailedCheck, h.WaitingForLease} {
		if t != nil && t.After(at) {
			at = t.Time
		}
	}
	return at
}

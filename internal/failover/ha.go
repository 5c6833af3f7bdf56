package failover

import (
	"fmt"
	"time"
)

// HA states, as the supervisor records them in status.ha (the API's HAState values).
const (
	HAHealthy          = "Healthy"
	HASuspected        = "Suspected"
	HAFailoverRequired = "FailoverRequired"
	HADegraded         = "Degraded"
)

// Policy is what the cluster's spec allows the supervisor to do.
type Policy struct {
	// Threshold is failover.failureThreshold: consecutive failed checks that declare death.
	Threshold int
	// Interval is failover.detectionInterval.
	Interval time.Duration
	// Auto is failover.auto; Paused is spec.paused. Either stops automatic failover.
	Auto, Paused bool
	// Cooldown is failover.cooldown, counted from LastFailover.
	Cooldown time.Duration
	// LastFailover is when the last failover finished (zero: never).
	LastFailover time.Time
	// LastWritable is when the supervisor last found this primary writable (zero: it has not).
	LastWritable time.Time
}

// CheckTimeout is how long one check of the primary waits for an answer at a detection
// interval: half of it, at least 100 ms.
func CheckTimeout(interval time.Duration) time.Duration {
	return max(interval/2, 100*time.Millisecond)
}

// StrongRecheck is how soon a check that found a strong signal (a refused connection, a pod
// gone, a read-only answer after a restart) is followed by the next one while the threshold is
// not reached: a sixteenth of the interval, at least 25 ms (62.5 ms at the default 1 s).
func StrongRecheck(interval time.Duration) time.Duration {
	return max(interval/16, 25*time.Millisecond)
}

// MinSilence is the shortest silence of the primary that can fail it over: the failed checks
// must end at least this far apart, (threshold-1) intervals less one check's timeout (1.5 s at
// the defaults). A failed check that timed out began after the silence did, and the last one
// began before it ended, so a primary silent for less than this (a stalled disk, a paused VM, a
// network blip) is never failed over, however fast the re-checks that a corroborated silence
// brings run. A refused connection, a pod gone or a restart proven is not a silence: it confirms
// at the pace of its checks.
func (p Policy) MinSilence() time.Duration {
	return time.Duration(p.Threshold-1)*p.Interval - CheckTimeout(p.Interval)
}

// Assessment is the supervisor's decision after one check.
type Assessment struct {
	// State is the HA state to record.
	State string
	// Reason explains the state in one sentence.
	Reason string
	// Failover is true when an automatic failover must start now.
	Failover bool
	// Reopen is true when the primary restarted and answers read-only inside failover.cooldown:
	// the same primary is reopened in place (a converge: its replicas re-joined, semi-sync and
	// writes turned on), which is no failover, so the cooldown does not hold it.
	Reopen bool
	// Next is when to check again: a fraction of the interval while a strong signal (a refused
	// connection, a pod gone, a read-only answer, or a silence every replica corroborates) is
	// being confirmed, the interval otherwise.
	Next time.Duration
}

// FailedChecks counts the consecutive checks at the end of checks in which the primary was not
// alive (unreachable or read-only), for one pod incarnation.
func FailedChecks(checks []Check) int {
	n := 0
	for i := len(checks) - 1; i >= 0; i-- {
		c := checks[i]
		if c.Reachable && c.Writable || c.PodUID != checks[len(checks)-1].PodUID {
			break
		}
		n++
	}
	return n
}

// strong reports whether a failed check is a signal that confirms fast: nothing listens, the pod
// is gone, or the server itself says it is read-only. A silent primary (a timeout) alone is not:
// the path from this supervisor may be what failed, so it is confirmed at the full interval
// unless the replicas corroborate it (Judgement.Corroborated: every one of them has gone a net
// timeout without hearing from it, heartbeats included).
func (c Check) strong() bool {
	return c.Refused || c.PodState != "" || c.Reachable && !c.Writable && c.UptimeKnown
}

// restartedSince reports whether the server checked in c provably started after t: its uptime,
// plus the second the server's whole-second count may leave out, is at most the time from t to
// when the uptime was asked for.
func (c Check) restartedSince(t time.Time) bool {
	at := c.UptimeAt
	if at.IsZero() {
		at = c.At
	}
	return !t.IsZero() && c.UptimeKnown && !at.IsZero() && c.Uptime+time.Second <= at.Sub(t)
}

// restarted reports whether the last of the failed checks answers from a server process that
// started after the primary was last seen writable at t: its uptime says so, or an earlier
// failed check of the same pod found nothing listening (a connection refused) after t, so the
// process that answers now is another one. The second proof needs no whole second of uptime to
// pass, so a primary that restarts at once is failed over as fast as one that stays down.
func restarted(checks []Check, failed int, t time.Time) bool {
	last := checks[len(checks)-1]
	if last.restartedSince(t) {
		return true
	}
	if t.IsZero() {
		return false
	}
	for _, c := range checks[len(checks)-failed : len(checks)-1] {
		if c.Refused && c.At.After(t) {
			return true
		}
	}
	return false
}

// silenceOnly reports whether the failed checks at the end of checks are silences alone: none of
// them is a strong signal (strong), so MinSilence holds.
func silenceOnly(checks []Check, failed int) bool {
	for _, c := range checks[len(checks)-failed:] {
		if c.strong() {
			return false
		}
	}
	return true
}

// Assess decides the HA state from the consecutive checks of the primary (oldest first) and the
// judgement over them (Judge's, with the members' view), under the cluster's policy, at now.
// It never fails over a primary that answers writable, one that any replica still receives
// from, or one no replica can vouch for; a death inside the cooldown, or with automatic
// failover off, is reported with the command a person would run.
func Assess(name string, checks []Check, j Judgement, p Policy, now time.Time) Assessment {
	if p.Threshold <= 0 {
		p.Threshold = 3
	}
	if p.Interval <= 0 {
		p.Interval = time.Second
	}
	failed := FailedChecks(checks)
	if failed == 0 {
		return Assessment{State: HAHealthy, Reason: "the primary answers and is writable", Next: p.Interval}
	}
	last := checks[len(checks)-1]
	next := p.Interval
	fast := max(p.Interval/8, 50*time.Millisecond)
	switch {
	case failed >= p.Threshold:
	case last.strong():
		// Nothing listens, the pod is gone or the server says it is read-only: no stall
		// ends that sooner, and each re-check costs one refused connection.
		next = StrongRecheck(p.Interval)
	case j.Corroborated:
		next = fast
	}
	if j.Verdict == Dead && failed >= p.Threshold && silenceOnly(checks, failed) {
		if silent := last.At.Sub(checks[len(checks)-failed].At); silent < p.MinSilence() {
			// Dead by count, but the failed checks came fast (a corroborated silence): not
			// long enough yet to tell a death from a stall. The next check ends about when it is.
			return Assessment{State: HASuspected, Reason: fmt.Sprintf("%s; silent for %s of the %s that fail it over", j.Reason, silent.Round(time.Millisecond), p.MinSilence()),
				Next: max(fast, p.MinSilence()-silent-CheckTimeout(p.Interval))}
		}
	}
	if j.Verdict == ReadOnly && !restarted(checks, failed, p.LastWritable) {
		// Read-only without a restart since it was last seen writable (or never seen writable
		// by this supervisor): someone made it read-only, or it was so before; a person decides.
		return Assessment{State: HASuspected, Reason: fmt.Sprintf("the primary %s answers read-only but has not restarted since it was last seen writable (uptime %s): it was made read-only on purpose, or this supervisor never saw it writable; no automatic failover: run 'mysqlctl failover %s' if it must be replaced",
			name, last.Uptime.Round(time.Second), name), Next: p.Interval}
	}
	down := j.Verdict == Dead || j.Verdict == ReadOnly
	if failed < p.Threshold || !down {
		reason := j.Reason
		if failed < p.Threshold {
			reason = fmt.Sprintf("the primary failed %d of the %d consecutive checks required", failed, p.Threshold)
			if j.Verdict == ReadOnly {
				reason += ": " + j.Reason
			}
		}
		return Assessment{State: HASuspected, Reason: reason, Next: next}
	}
	cmd := fmt.Sprintf("mysqlctl failover %s", name)
	switch {
	case p.Paused:
		return Assessment{State: HAFailoverRequired, Reason: j.Reason + "; spec.paused is set, so nothing is done automatically: run '" + cmd + "'", Next: p.Interval}
	case !p.Auto:
		return Assessment{State: HAFailoverRequired, Reason: j.Reason + "; failover.auto is false: run '" + cmd + "'", Next: p.Interval}
	case !p.LastFailover.IsZero() && now.Sub(p.LastFailover) < p.Cooldown && j.Verdict == ReadOnly:
		// It restarted (a primary made read-only on purpose was answered above): nothing was
		// promoted since, and it holds everything it acknowledged.
		return Assessment{State: HASuspected, Reason: fmt.Sprintf("%s; inside failover.cooldown (the last failover finished %s ago) the same primary is reopened in place, which is not a failover",
			j.Reason, now.Sub(p.LastFailover).Round(time.Second)), Reopen: true, Next: p.Interval}
	case !p.LastFailover.IsZero() && now.Sub(p.LastFailover) < p.Cooldown:
		return Assessment{State: HADegraded, Reason: fmt.Sprintf("%s; the last failover finished %s ago, inside failover.cooldown (%s), so no automatic failover (anti-flapping): run '%s' if a person judges it safe",
			j.Reason, now.Sub(p.LastFailover).Round(time.Second), p.Cooldown, cmd), Next: p.Interval}
	}
	return Assessment{State: HAFailoverRequired, Reason: j.Reason, Failover: true, Next: p.Interval}
}

// GiveWaySlack is how much longer than three detection intervals a supervisor refused the
// cluster's Lease may take to rewrite its record: it records its next check only after the
// refusal (up to a renewal and a poll, a few seconds).
const GiveWaySlack = 10 * time.Second

// RecordLiveness follows, on its reader's own clock, whether a supervisor keeps rewriting its
// record of the primary's failed checks: a live supervisor whose primary stays dead rewrites
// it at every check, a dead one never again. Times written by the supervisor are compared only
// with each other, never with the reader's clock, so clocks that differ change nothing.
type RecordLiveness struct {
	failed    int32
	at        time.Time
	seen      bool
	changedAt time.Time
}

// See records one reading of the record (its failed-check count and the time of the last
// failed check, as written) at now, the reader's clock.
func (l *RecordLiveness) See(failed int32, at time.Time, now time.Time) {
	if l.seen && (failed != l.failed || !at.Equal(l.at)) {
		l.changedAt = now
	}
	l.failed, l.at, l.seen = failed, at, true
}

// Live reports whether the record changed between two readings within window of now.
func (l *RecordLiveness) Live(now time.Time, window time.Duration) bool {
	return !l.changedAt.IsZero() && now.Sub(l.changedAt) <= window
}

// ConvergeGivesWay decides whether a converge (re-joining replicas to the recorded primary, which
// it needs alive) stops, its stage kept, so that a supervisor's automatic failover can take the
// cluster: the supervisor recorded the primary dead (FailoverRequired), recorded that its
// failover was refused the cluster's Lease (waiting), is still rewriting that record (live: it
// changed between two of the converge's own readings within three intervals and GiveWaySlack),
// and the policy lets it fail over. A supervisor that is gone, that backs off, or that holds
// the Lease and was refused by the failover's own checks (a primary that restarted read-only)
// stops nothing, so the rule never keeps a converge from running for good. Stopping changes no
// server: every converge stage is idempotent and runs again from its record.
func ConvergeGivesWay(state string, waiting bool, l *RecordLiveness, p Policy, now time.Time) (bool, string) {
	if state != HAFailoverRequired || !waiting || p.Paused || !p.Auto {
		return false, ""
	}
	if p.Interval <= 0 {
		p.Interval = time.Second
	}
	if !l.Live(now, 3*p.Interval+GiveWaySlack) {
		return false, ""
	}
	return true, "the supervisor found it dead, fails over automatically and waits for the cluster's Lease"
}

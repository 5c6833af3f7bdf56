package supervisor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// Supervisor is `watch`: it checks a cluster's primary every failover.detectionInterval, records
// the HA state with its evidence in status.ha, fails over by itself when the primary is proven
// dead (through the same persisted operation as the failover command), and resumes operations
// whose holder died. It acts only under the cluster's Lease; between actions it holds nothing,
// so commands run from another terminal are not locked out.
type Supervisor struct {
	// Runner is the template of every action: Kube, Connect, Holder, Progress and test hooks.
	// Each action runs on a copy that holds the Lease.
	Runner orchestrate.Runner
	// Report, when set, is told every HA state change and every action.
	Report func(Transition)
	// Grace is how long a stopping supervisor lets the stage in hand finish (default 10s).
	Grace time.Duration
	// Progress, when set, is told every stage an action of the supervisor enters, with the
	// cluster it acts on (Runner.Progress does not say which: one process watches many).
	Progress func(key client.ObjectKey, op v1.OperationStatus)
	// Checked, when set, is told every check of a cluster's primary (a live view shows them).
	Checked func(key client.ObjectKey, ch failover.Check)
	// Observer, when set, is told what the supervisor sees and decides (metrics), and every
	// instance is observed for it every observeEvery.
	Observer Observer
	// Cache, when set, serves the clusters and pods the supervisor's checks read (an informer
	// cache): one process can check many clusters every second without a request per check.
	// Actions read afresh from the API server regardless.
	Cache client.Reader
	// ObserveConnect, when set, is how the supervisor's checks and observations reach the
	// servers (a pooled connector: a check every second costs one round trip, not a new
	// login). Actions and the sentinel session use Runner.Connect regardless.
	ObserveConnect orchestrate.Connector

	secrets secretMemo

	mu         sync.Mutex
	watchers   map[client.ObjectKey]*watcher
	prewatches map[client.ObjectKey]prewatch
}

// prewatch is the observation of a cluster's supervisor and operation Leases made while this
// process stood by (not leading): Watch continues it, so that leases a dead leader stopped
// renewing are taken once they have been seen unchanged for LeaseDuration, counted from when
// the standby first saw them, not from when it began to lead.
type prewatch struct{ sup, op *orchestrate.LeaseObserver }

// prewatchEvery is how often a standby reads each Lease it prewatches: two reads per cluster
// per period, and a takeover at most this much later than a lease duration.
const prewatchEvery = 3 * time.Second

// Prewatch starts observing the cluster's Leases until Watch takes the observation over or ctx
// ends (a standby calls it for every cluster it would supervise). It is idempotent.
func (s *Supervisor) Prewatch(ctx context.Context, key client.ObjectKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.prewatches[key]; ok {
		return
	}
	if s.prewatches == nil {
		s.prewatches = map[client.ObjectKey]prewatch{}
	}
	c := &v1.MysqlCluster{}
	c.Namespace, c.Name = key.Namespace, key.Name
	s.prewatches[key] = prewatch{
		sup: orchestrate.ObserveLeaseEvery(ctx, s.Runner.Kube, client.ObjectKey{Namespace: key.Namespace, Name: orchestrate.SupervisorLeaseName(c)}, prewatchEvery),
		op:  orchestrate.ObserveLeaseEvery(ctx, s.Runner.Kube, client.ObjectKey{Namespace: key.Namespace, Name: orchestrate.LeaseName(c)}, prewatchEvery),
	}
}

// takePrewatch hands the cluster's prewatch (if any) to its Watch.
func (s *Supervisor) takePrewatch(key client.ObjectKey) (prewatch, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.prewatches[key]
	delete(s.prewatches, key)
	return p, ok
}

// Wake makes the supervisor of the cluster check it at once (an informer saw its pods, its
// endpoints or its spec change, or a request arrive). Checks woken so stay at least an eighth
// of the detection interval apart.
func (s *Supervisor) Wake(key client.ObjectKey) {
	s.mu.Lock()
	w := s.watchers[key]
	s.mu.Unlock()
	if w != nil {
		w.poke()
	}
}

func (s *Supervisor) observeSupervising(key client.ObjectKey, on bool) {
	if s.Observer != nil {
		s.Observer.Supervising(key, on)
	}
}

func (s *Supervisor) register(key client.ObjectKey, w *watcher) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watchers == nil {
		s.watchers = map[client.ObjectKey]*watcher{}
	}
	if w == nil {
		delete(s.watchers, key)
		return
	}
	s.watchers[key] = w
}

// Transition is one change the supervisor saw or made.
type Transition struct {
	Time      time.Time `json:"time"`
	Namespace string    `json:"namespace"`
	Cluster   string    `json:"cluster"`
	// From and To are HA states; Action names what the supervisor did ("failover", "resume").
	From    string `json:"from,omitempty"`
	To      string `json:"to,omitempty"`
	Action  string `json:"action,omitempty"`
	Primary string `json:"primary,omitempty"`
	Reason  string `json:"reason"`
}

// watcher is the supervisor's memory of one cluster between checks.
type watcher struct {
	s      *Supervisor
	key    client.ObjectKey
	checks []failover.Check
	// checkedAt is when the last check ended.
	checkedAt time.Time
	seeded    bool
	// phase: the next check moves to a random point of what is left of the interval (set once,
	// by the first healthy check); phased: that was done (see phaseNext).
	phase, phased bool
	held          string // the operation last found held by a live actor, reported once
	blocked       bool   // the last automatic failover was not started (the cluster held), reported once
	// wake makes the next check start at once (the sentinel session on the primary ended, or
	// an informer saw a change); minGap keeps woken checks apart, unless the
	// next check was due sooner anyway (see wakeDelay).
	wake   chan struct{}
	minGap time.Duration
	// repairWake makes the repairer look at once too (a replica that restarted is re-joined
	// as soon as its pod is Ready, not at the next round); looks stay repairMinGap apart.
	repairWake chan struct{}
	// sentinel is the sentinel session's run on the primary (see watchSentinel); a run that
	// ended by itself on the same primary delays the next until sentinelRetry, sentinelFails
	// runs in a row.
	sentinel      *sentinelRun
	sentinelFails int
	sentinelRetry time.Time
	// act is held by whichever of the detector and the repairer acts under the Lease; failing
	// tells the repairer to stand aside, repairCancel lets the detector end a repair.
	act          sync.Mutex
	failing      atomic.Bool
	repairCancel atomic.Pointer[context.CancelFunc]
	// stopping is closed when the supervisor is told to stop: actions finish the stage in hand.
	stopping <-chan struct{}
	// lastWritable is when the primary last answered writable (a read-only answer counts as
	// down only from a server that restarted since).
	lastWritable time.Time
	// protected is this supervisor's last check that found the primary writable and protected
	// by semi-sync (orchestrate.FencesByReceivers), with the server process it reached: the automatic
	// failover records it as evidence, and only this supervisor proves a tail with it (its
	// times are on this process's monotonic clock; see reseedTail).
	protected atomic.Pointer[protectedCheck]
	// failedOver is protected as it was when this supervisor last began a failover: the tail
	// proof of the primary it replaced uses it.
	failedOver atomic.Pointer[protectedCheck]
	// answeredAt is lastWritable as this process's own checks saw it, for the repairer (which
	// runs beside the checks); convergeRetry, the repairer's own, is when it may next continue a
	// recorded converge after continuing one failed.
	answeredAt atomic.Pointer[time.Time]
	// reopenAt is when the detector last judged the primary to be reopened in place (it
	// restarted read-only inside the cooldown: failover.Assessment.Reopen), for the repairer.
	reopenAt      atomic.Pointer[time.Time]
	convergeRetry time.Time
	// backoff is until when no automatic failover is started after one ended without a new
	// primary (refused or failed); resumeFailed
	// is when resuming an operation (by ID and stage) last ended refused.
	backoff      time.Time
	resumeFailed map[string]time.Time
	// lastErr is the last error reported, so that a persistent error is printed once.
	lastErr string
	// scheduleErr is what the backup schedule last reported failing (reported once), and
	// scheduleFails how many of its turns failed in a row (its backoff).
	scheduleErr   string
	scheduleFails int
	// acks follows a wait for acknowledgements on the primary (of ackPrimary) that get none;
	// releasing is set while a release of lost acknowledgements runs, and releaseNext is
	// when one may run again (see releaseLostAcks).
	acks          failover.AckStall
	ackPrimary    string
	releasing     atomic.Bool
	releaseCancel atomic.Pointer[context.CancelFunc]
	releaseFails  atomic.Int32
	releaseNext   time.Time
	releaseWhy    string
	// repairRefused is the configuration refusal the repairer last reported (see repairOnce).
	repairRefused string
	// reseedRefused is why the repairer last found a quarantined former primary's tail not
	// proven unacknowledged (see reseedTail), reported once per reason.
	reseedRefused string
	// reseedRetry is when the repairer may next try to continue a stopped re-seed.
	reseedRetry time.Time
	// opSeen is the operation Lease as observed while the supervisor Lease was awaited: the
	// first wait for it continues from there.
	opSeen *orchestrate.Observed
	// sup is the supervisor Lease this watcher supervises under, supEpoch its transition
	// count: request records are written only while it is valid.
	sup      *orchestrate.Lease
	supEpoch int32
	// unwritten are outcomes of requests carried out whose record could not be written yet.
	unwritten map[string]answerOf
	// absence is every member's tracking by the observation pass (see trackAbsence).
	absence map[string]failover.Tracked
	// serverIDs are the members' server_ids as the observation passes last saw them answer.
	serverIDs map[string]uint32
	// side writes the checks' Events and disruption budget updates off their path.
	side *orchestrate.Sidework
}

// Watch supervises one cluster until ctx ends (then it lets the stage in hand finish, within
// Grace, and returns nil) or the cluster is deleted. It supervises only while it holds the
// cluster's supervisor Lease: a second watch of the same cluster stands by and takes over
// when the first stops (at once when it releases, within LeaseDuration when it dies).
func (s *Supervisor) Watch(ctx context.Context, key client.ObjectKey) error {
	standby := ""
	for ctx.Err() == nil {
		c := &v1.MysqlCluster{}
		err := s.Runner.Kube.Get(ctx, key, c)
		if err == nil {
			var lctx context.Context
			var lease *orchestrate.Lease
			// While the supervisor Lease of a dead watch expires, the operation Lease (which
			// that watch may have held too) is observed, so that its wait overlaps this one;
			// both observations started already when this process stood by (Prewatch).
			opts := orchestrate.LeaseOptions{Wait: true, Supervisor: true}
			pre, prewatched := s.takePrewatch(key)
			opLease := pre.op
			if prewatched {
				opts.Seen = pre.sup.Stop()
			} else {
				opLease = orchestrate.ObserveLease(ctx, s.Runner.Kube, client.ObjectKey{Namespace: c.Namespace, Name: orchestrate.LeaseName(c)})
			}
			lctx, lease, err = orchestrate.AcquireLease(ctx, s.Runner.Kube, c, s.Runner.Holder, opts)
			opSeen := opLease.Stop()
			if err == nil {
				standby = ""
				w := &watcher{s: s, key: key, stopping: lctx.Done(), wake: make(chan struct{}, 1), repairWake: make(chan struct{}, 1), opSeen: opSeen,
					sup: lease, supEpoch: lease.Epoch, unwritten: map[string]answerOf{}}
				w.report(Transition{Action: "watch", Reason: "supervising (holding Lease " + orchestrate.SupervisorLeaseName(c) + ")"})
				s.register(key, w)
				s.observeSupervising(key, true)
				deleted := w.supervise(lctx)
				s.observeSupervising(key, false)
				s.register(key, nil)
				lease.Release(context.WithoutCancel(ctx))
				if deleted {
					return nil
				}
				if ctx.Err() == nil {
					w.report(Transition{Action: "watch", Reason: "lost the supervisor Lease: standing by"})
				}
				continue
			}
		}
		switch {
		case apierrors.IsNotFound(err):
			s.report(key, Transition{Action: "stop", Reason: "the cluster was deleted"})
			return nil
		case ctx.Err() != nil:
		case err.Error() != standby:
			standby = err.Error()
			action := "error"
			if errors.Is(err, outcome.ErrHeld) {
				action = "standby"
			}
			s.report(key, Transition{Action: action, Reason: err.Error()})
		}
		_ = orchestrate.SleepCtx(ctx, time.Second)
	}
	return nil
}

// supervise checks and acts on the cluster until ctx ends (the supervisor stops, or lost its
// Lease); it reports whether the cluster was deleted.
func (w *watcher) supervise(ctx context.Context) bool {
	s := w.s
	defer func() {
		if w.sentinel != nil {
			w.sentinel.stop()
			<-w.sentinel.done
		}
	}()
	// Actions outlive ctx by the grace period, so that a stage's action and its status write
	// are not cut apart by a signal.
	grace := s.Grace
	if grace <= 0 {
		grace = 10 * time.Second
	}
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	go func() {
		<-ctx.Done()
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-actx.Done():
		}
	}()
	// The repairer stops looking when ctx ends; a repair in hand gets the grace period, and
	// Watch returns only after it has released what it holds.
	w.side = orchestrate.StartSidework()
	defer w.side.Stop()
	// The budget as the status says now: a supervisor killed between an HA write and its
	// budget update (side work) left it behind, and nothing else re-derives it until the
	// state changes again.
	w.side.Do(ctx, func(ctx context.Context) {
		_ = orchestrate.SyncLivePDB(ctx, s.Runner.Kube, w.key)
	})
	var repairs sync.WaitGroup
	repairs.Add(1)
	turned := make(chan struct{}) // closed once the detector has had its first turn
	go func() { defer repairs.Done(); w.repairLoop(ctx, actx, turned) }()
	// The observation pass feeds the metrics (when served) and bounds every member, recording
	// those that stop answering (see trackAbsence): it always runs.
	repairs.Add(1)
	go func() { defer repairs.Done(); w.observeLoop(ctx) }()
	// The backup schedule (spec.backup.schedule), kept by the supervisor of the cluster.
	repairs.Add(1)
	go func() { defer repairs.Done(); w.scheduleLoop(ctx) }()
	defer repairs.Wait()
	for ctx.Err() == nil {
		began := w.s.Runner.Clock()
		next, err := w.tick(actx)
		w.opSeen = nil // only the first tick continues the observation made while waiting
		if turned != nil {
			close(turned)
			turned = nil
		}
		// Checks start an interval apart: a check that ran into its timeout used part of it.
		next = max(next-w.s.Runner.Clock().Sub(began), 0)
		if w.phase {
			w.phase, next = false, upTo(next) // see phaseNext
		}
		switch {
		case apierrors.IsNotFound(err):
			w.report(Transition{Action: "stop", Reason: "the cluster was deleted"})
			return true
		case err != nil && ctx.Err() == nil && err.Error() != w.lastErr:
			w.lastErr = err.Error()
			w.report(Transition{Action: "error", Reason: err.Error()})
		case err == nil:
			w.lastErr = ""
		}
		due := w.s.Runner.Clock().Add(next)
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-w.wake:
			if gap := wakeDelay(w.s.Runner.Clock(), began, due, w.minGap); gap > 0 {
				_ = orchestrate.SleepCtx(ctx, gap)
			}
		}
		t.Stop()
	}
	return false
}

func (w *watcher) report(t Transition) { w.s.report(w.key, t) }

// wakeDelay is how long a check woken at now (by a poke) still waits: checks started by pokes
// begin at least minGap apart, but a wake only ever brings the next check forward, never past
// when it was due (a strong signal's quick re-check keeps its own, shorter, pace).
func wakeDelay(now, began, due time.Time, minGap time.Duration) time.Duration {
	return max(min(minGap-now.Sub(began), due.Sub(now)), 0)
}

// supGuard proves, right before a status write of the supervisor's own (the HA record, the
// observations it refreshes), that this watcher still holds its supervisor Lease: a supervisor
// paused past its Lease, which another took over, writes nothing when it wakes.
func (w *watcher) supGuard(what string) error {
	if w.sup == nil {
		return nil
	}
	if err := w.sup.Check(); err != nil {
		return fmt.Errorf("refusing to %s: %w", what, err)
	}
	return nil
}

// poke makes the next check start at once.
func (w *watcher) poke() {
	for _, ch := range []chan struct{}{w.wake, w.repairWake} {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (s *Supervisor) report(key client.ObjectKey, t Transition) {
	if s.Report == nil {
		return
	}
	if t.Time.IsZero() {
		t.Time = s.Runner.Clock()
	}
	t.Namespace, t.Cluster = key.Namespace, key.Name
	s.Report(t)
}

// phaseNext decides whether the next check moves to a random point of what is left of the
// interval (phase), and whether that was done (phased). Clusters found together would be
// checked together, every interval ever after: a burst of checks each second that every one of
// them waits in. The first healthy check moves the next one (earlier, never later), so one
// supervisor's checks of many clusters spread over the interval. Only a healthy check: the
// re-checks that confirm a failure keep their cadence.
func phaseNext(state string, phased bool) (phase, done bool) {
	if state == failover.HAHealthy && !phased {
		return true, true
	}
	return false, phased
}

// upTo is a random duration in [0, d): where in a period a periodic task of one cluster runs, so
// that the tasks of clusters supervised together do not all run at the same instant.
func upTo(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

// failoverBackoff is how long the supervisor waits after an automatic failover that ended
// without a new primary before it may start another: the floor under failover.cooldown.
func failoverBackoff(c *v1.MysqlCluster) time.Duration {
	return max(30*time.Second, 10*orchestrate.DetectionInterval(c))
}

// observeOnly is the Lease of the supervisor's observations: they must never change a server.
type observeOnly struct{}

func (observeOnly) Check() error {
	return errors.New("the supervisor only observes outside an action under the Lease")
}
func (observeOnly) ValidUntil() time.Time { return time.Time{} }

// tick checks the cluster once and acts on what it finds; it returns when to check again.
func (w *watcher) tick(ctx context.Context) (time.Duration, error) {
	obs := w.observer()
	c := &v1.MysqlCluster{}
	if err := obs.Kube.Get(ctx, w.key, c); err != nil {
		return time.Second, err
	}
	interval := orchestrate.DetectionInterval(c)
	w.minGap = interval / 8
	// A refused failover's streak (see failover) lasts only while the ticks keep checking.
	blocked := w.blocked
	w.blocked = false
	if req, err := orchestrate.RequestOf(c); req != nil || err != nil {
		// A command run elsewhere handed its request to this supervisor. Failed checks of the
		// primary are forgotten only when the request may have changed it.
		if req != nil && (req.Type == orchestrate.RequestSwitchover || req.Type == orchestrate.RequestFailover) {
			w.checks = nil
		}
		return interval, w.serveRequest(ctx, c, req, err)
	}
	if op := c.Status.Operation; op != nil && (op.Type != orchestrate.OperationConverge || c.Spec.Paused) {
		// A recorded converge never stops detection: the repairer continues it (cancellably)
		// only while the primary answers, and a primary that dies meanwhile is failed over,
		// superseding it. Resumed here, a converge that needs a dead primary would be retried
		// forever with no check of the primary in between.
		w.checks = nil
		return interval, w.resume(ctx, c, op)
	}
	if orchestrate.HandoffPending(c) {
		// An upgrade between its own stages, its handoff switchover not begun: the actor that
		// recorded it may have died there.
		up := c.Status.Upgrade
		w.checks = nil
		return interval, w.resume(ctx, c, &v1.OperationStatus{ID: up.ID, Type: orchestrate.OperationUpgrade, Stage: "handoff", Holder: "the upgrade's actor"})
	}
	w.held, w.blocked = "", blocked
	primary := c.Status.CurrentPrimary
	if primary == "" {
		return interval, nil // not bootstrapped: nothing to supervise yet
	}
	if !w.seeded {
		w.seed(c)
	}
	v, err := obs.FailoverView(ctx, c, primary)
	if err != nil {
		return interval, err
	}
	creds, err := obs.Credentials(ctx, c)
	if err != nil {
		return interval, err
	}
	// A check's timeout is shorter than the interval, so checks never pile up.
	gap := 3 * interval
	if w.blocked {
		gap = max(gap, orchestrate.LeaseDuration) // each refused attempt waited for the Lease's holder
	}
	if n := len(w.checks); n > 0 && !w.checks[n-1].At.IsZero() && obs.Clock().Sub(w.checks[n-1].At) > gap {
		// Checks that old (this process was paused, or an operation ran meanwhile) no
		// longer count as consecutive.
		w.checks = nil
	}
	checkStart := time.Now()
	ch, snap, refused := obs.CheckPrimarySnapshot(ctx, v, creds, failover.CheckTimeout(interval))
	if refused != nil {
		return interval, w.cannotCheck(ctx, c, ch, refused)
	}
	if w.s.Checked != nil {
		w.s.Checked(w.key, ch)
	}
	if w.s.Observer != nil {
		w.s.Observer.Checked(w.key, ch, time.Since(checkStart))
	}
	w.checks, w.checkedAt = append(w.checks, ch), ch.At
	if !ch.Reachable || !ch.Writable {
		w.cancelRelease()
	}
	if ch.Reachable && ch.Writable {
		w.lastWritable = ch.At
		at := ch.At
		w.answeredAt.Store(&at)
		if orchestrate.FencesByReceivers(snap) && ch.UptimeKnown {
			w.protected.Store(w.protected.Load().next(primary, ch.At, ch.At.Add(-ch.Uptime), orchestrate.BoundOf(snap)))
		} else {
			// The last check is what the tail proof rests on: an older protected one must not
			// stand in for a primary now found unprotected.
			w.protected.Store(nil)
		}
	}
	if len(w.checks) > 100 {
		w.checks = w.checks[len(w.checks)-100:]
	}
	j := failover.Judgement{Verdict: failover.Alive}
	if !ch.Reachable || !ch.Writable {
		ss := obs.OpenSessions(ctx, v.Ready, creds)
		members, _ := v.Members(c, ss)
		ss.Close()
		j = failover.Judge(primary, v.OldSource, w.checks, int(c.Spec.Failover.FailureThreshold), members)
	} else if p := v.Pods[primary]; p != nil {
		w.watchSentinel(ctx, w.s.Runner, p, creds, interval)
		// The receiver fence's deadline counts from the last observation of the primary.
		// Its writes prove this supervisor's Lease, as the HA writes do (supGuard).
		refresh := w.s.Runner
		refresh.Lease, refresh.SupervisorGuard = nil, w.supGuard
		// A primary that now protects less than recorded (a person lowered the semi-sync
		// timeout or turned it off) is recorded so at once: a failover's receiver-fence
		// deadline must never outlast what the server does.
		if err := refresh.RecordWeakened(ctx, c, primary, snap); err != nil {
			w.report(Transition{Action: "record", Primary: primary, Reason: "recording the weakened semi-sync protection: " + err.Error()})
		}
		// Every minute: a supervisor started later (or this one, after it re-took its Lease)
		// learns from it when the primary was last writable.
		_ = refresh.RefreshPrimarySeen(ctx, c, p, creds, time.Minute)
		w.releaseLostAcks(ctx, c, v, snap, creds, ch.At)
	}
	p := orchestrate.PolicyOf(c)
	p.LastWritable = w.lastWritable
	a := failover.Assess(c.Name, w.checks, j, p, obs.Clock())
	if a.Failover && obs.Clock().Before(w.backoff) {
		a.Failover = false
		a.Reason += fmt.Sprintf("; an automatic failover ended without a new primary moments ago: next attempt after %s", w.backoff.UTC().Format(time.RFC3339))
	}
	if err := w.record(ctx, c, a, j, ch); err != nil {
		return interval, err
	}
	if a.Reopen {
		at := obs.Clock()
		w.reopenAt.Store(&at)
		w.poke() // the repairer reopens it now
	}
	if !a.Failover {
		w.blocked = false
		w.phase, w.phased = phaseNext(a.State, w.phased)
		return a.Next, nil
	}
	if o := w.s.Observer; o != nil && !w.blocked { // decided once, not at every refused attempt
		if n := failover.FailedChecks(w.checks); n > 0 && n <= len(w.checks) {
			o.Decided(w.key, obs.Clock().Sub(w.checks[len(w.checks)-n].At))
		}
	}
	started, err := w.failover(ctx, c, j.Verdict == failover.Dead)
	if started {
		w.checks = nil
	}
	// Not started (another actor holds the cluster): the checks go on counting, so the
	// recorded FailoverRequired stays fresh, and a converge holding the cluster sees it and
	// gives way (giveWayToFailover); the next check tries again.
	return interval, err
}

// seed continues the debounce a previous supervisor recorded: its consecutive failed checks of
// the same pod incarnation count.
func (w *watcher) seed(c *v1.MysqlCluster) {
	w.seeded = true
	// When the primary was last recorded writable (an earlier supervisor's observation, or
	// this process's before it lost and re-took its Lease): a primary that answers read-only
	// counts as down if it restarted since, even before this supervisor saw it writable.
	for _, in := range c.Status.Instances {
		if in.Name == c.Status.CurrentPrimary && in.Role == v1.RolePrimary && in.LastSeen != nil && in.LastSeen.Time.After(w.lastWritable) {
			w.lastWritable = in.LastSeen.Time
		}
	}
	h := c.Status.HA
	if h == nil || h.FailedChecks <= 0 || h.SuspectedPodUID == "" || h.LastFailedCheck == nil {
		return
	}
	// Only a count that is still current: an earlier supervisor's checks of minutes ago say
	// nothing about the primary now.
	at := h.LastFailedCheck.Time
	if w.s.Runner.Clock().Sub(at) > 3*orchestrate.DetectionInterval(c) {
		return
	}
	for range min(int(h.FailedChecks), 100) {
		w.checks = append(w.checks, failover.Check{PodUID: h.SuspectedPodUID, At: at, Detail: "failed check recorded by an earlier supervisor"})
	}
}

// record writes the HA state when it or the count of failed checks changed, and reports a
// changed state as an Event and a Transition. It never writes while an operation is recorded:
// the operation owns status.ha then.
func (w *watcher) record(ctx context.Context, c *v1.MysqlCluster, a failover.Assessment, j failover.Judgement, ch failover.Check) error {
	failed := int32(failover.FailedChecks(w.checks))
	uid := ""
	if failed > 0 {
		uid = ch.PodUID
	}
	// waiting: the failover of a dead primary is called for and was refused the cluster's
	// Lease at the last attempt (failover sets the mark); anything else clears it.
	waiting := w.blocked && a.Failover && j.Verdict == failover.Dead
	prev := ""
	if h := c.Status.HA; h != nil {
		prev = string(h.State)
		// A record unchanged is not written again, unless it still names a wait that ended, or
		// the failover waits for the Lease and its last failed check is an interval old: then
		// the record is kept fresh (a converge elsewhere gives way only to a supervisor seen
		// rewriting it), also once the count stops growing at the 100 checks kept.
		stale := waiting && failed > 0 && h.LastFailedCheck != nil && ch.At.Sub(h.LastFailedCheck.Time) >= max(orchestrate.DetectionInterval(c), time.Second)
		if prev == a.State && h.FailedChecks == failed && h.SuspectedPodUID == uid && (waiting || h.WaitingForLease == nil) && !stale {
			return nil
		}
		if countOnly(h, a, failed, uid, waiting, ch.At, orchestrate.DetectionInterval(c)) {
			return nil
		}
	}
	now := metav1.NewTime(w.s.Runner.Clock())
	evidence := append([]string{a.Reason}, j.Evidence...)
	// Written from the cluster as this check read it, with no read first (orchestrate.UpdateStatusFrom).
	err := orchestrate.UpdateStatusFrom(ctx, w.s.Runner.Kube, c, func(s *v1.MysqlClusterStatus) error {
		if err := w.supGuard("record the HA state " + a.State); err != nil {
			return err
		}
		// An operation owns status.ha, except a converge: it never touches the primary's
		// health, and the checks go on beside it (a person must see a primary that dies then).
		if s.Operation != nil && s.Operation.Type != orchestrate.OperationConverge {
			return orchestrate.ErrLostRace
		}
		s.HA = orchestrate.NextHAStatus(s.HA, v1.HAState(a.State), now, evidence, orchestrate.JudgeWatch)
		s.HA.FailedChecks, s.HA.SuspectedPodUID = failed, uid
		if !waiting {
			s.HA.WaitingForLease = nil
		}
		s.HA.LastFailedCheck = nil
		if failed > 0 {
			at := metav1.NewTime(ch.At)
			s.HA.LastFailedCheck = &at
		}
		d := meta.FindStatusCondition(s.Conditions, v1.ConditionDegraded)
		switch {
		case a.State == failover.HADegraded && d != nil && d.Status == metav1.ConditionTrue && d.Reason != orchestrate.ReasonFailoverWithheld:
			s.Phase = v1.PhaseDegraded // already Degraded for another reason: that reason stays
		case a.State == failover.HADegraded:
			s.Phase = v1.PhaseDegraded
			meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: orchestrate.ReasonFailoverWithheld, Message: a.Reason})
		case a.State == failover.HAHealthy:
			orchestrate.ClearWithheld(s, a.Reason)
		}
		return nil
	})
	if errors.Is(err, orchestrate.ErrLostRace) {
		return nil // an operation began meanwhile: it owns status.ha now
	}
	if err != nil || prev == a.State {
		return err
	}
	// The disruption budget follows health: one eviction allowed only while Healthy. It and
	// the Event are written off the checks' path, in order.
	written := c.DeepCopy()
	w.side.Do(ctx, func(ctx context.Context) {
		if perr := orchestrate.SyncLivePDB(ctx, w.s.Runner.Kube, w.key); perr != nil {
			w.report(Transition{Action: "error", Reason: "updating the PodDisruptionBudget: " + perr.Error()})
		}
		w.s.Runner.Event(ctx, written, a.State != failover.HAHealthy, "HA"+a.State, a.Reason)
	})
	w.report(Transition{From: prev, To: a.State, Primary: c.Status.CurrentPrimary, Reason: a.Reason})
	return nil
}

// countOnly reports whether a record would only raise the count of failed checks of the same
// pod, in the same state, with a strong signal's quick re-check (failover.StrongRecheck) next,
// less than an interval after the check last recorded: it is not written then. The re-checks go
// on writing what they find (the failover called for, or the primary back), and a write between
// two checks 62 ms apart would only delay the second; a record is still written at least once an
// interval (checks that each take long, a high failureThreshold). A supervisor that dies
// meanwhile leaves the lower count recorded: its successor counts again, never further. (Assess
// gives a Next this short only to a strong signal.)
func countOnly(h *v1.HAStatus, a failover.Assessment, failed int32, uid string, waiting bool, at time.Time, interval time.Duration) bool {
	return h != nil && string(h.State) == a.State && h.SuspectedPodUID == uid && h.FailedChecks > 0 && failed > h.FailedChecks &&
		!waiting && h.WaitingForLease == nil && a.Next > 0 && a.Next <= failover.StrongRecheck(interval) &&
		h.LastFailedCheck != nil && at.Sub(h.LastFailedCheck.Time) < interval
}

// withLease runs fn on a copy of the template Runner that holds the cluster's Lease. wait says
// whether to wait for a holder that stopped renewing (to continue its operation) or to give up
// at once when the cluster is held.
func (w *watcher) withLease(ctx context.Context, c *v1.MysqlCluster, wait bool, fn func(context.Context, *orchestrate.Runner) error) error {
	opts := orchestrate.LeaseOptions{Wait: wait}
	if wait {
		opts.Seen, w.opSeen = w.opSeen, nil // the tick's own observation (see opSeen)
	}
	return w.withLeaseOpts(ctx, c, opts, fn)
}

// withLeaseOpts is withLease with the Lease options given: the repairer waits for a dead
// holder without the tick's observation in hand.
func (w *watcher) withLeaseOpts(ctx context.Context, c *v1.MysqlCluster, opts orchestrate.LeaseOptions, fn func(context.Context, *orchestrate.Runner) error) error {
	r := w.s.Runner
	lctx, lease, err := orchestrate.AcquireLease(ctx, r.Kube, c, r.Holder, opts)
	if err != nil {
		return errNotAcquired{err}
	}
	defer lease.Release(context.WithoutCancel(ctx))
	r.Epoch, r.Lease, r.Stop = lease.Epoch, lease, w.stopping
	if p := w.s.Progress; p != nil {
		key := w.key
		r.Progress = func(op v1.OperationStatus) { p(key, op) }
	}
	return fn(lctx, &r)
}

// failover starts an automatic failover from the supervisor's checks. One that ends without a
// new primary is not retried automatically inside the cooldown: the cluster is Degraded with
// what a person can do.
func (w *watcher) failover(ctx context.Context, c *v1.MysqlCluster, dead bool) (bool, error) {
	started := w.s.Runner.Clock()
	w.failing.Store(true)
	defer w.failing.Store(false)
	w.stopRepair()
	defer w.act.Unlock()
	if !w.blocked {
		w.report(Transition{Action: "failover", Primary: c.Status.CurrentPrimary, Reason: "the primary is dead: failing over automatically"})
	}
	// A converge left recorded (the checks go on beside it) may be held by a dead actor: its
	// Lease is awaited as resume awaits it (a live holder is refused within a renewal), never
	// judged by that actor's clock.
	// A holder that releases the Lease meanwhile (a converge giving way) hands it over: the
	// failover judges the primary again once it holds it.
	// Only for a dead primary: one that answers read-only is reopened by the converge.
	opts := orchestrate.LeaseOptions{Wait: c.Status.Operation != nil, TakeReleased: dead}
	if opts.Wait {
		opts.Seen, w.opSeen = w.opSeen, nil // the tick's own observation (see opSeen)
	}
	err := w.withLeaseOpts(ctx, c, opts, func(ctx context.Context, r *orchestrate.Runner) error {
		// Judged again under the Lease: whoever held it meanwhile (an apply, a person's
		// failover) may have paused the cluster, turned automatic failover off or moved the
		// primary.
		cur := &v1.MysqlCluster{}
		if err := r.Kube.Get(ctx, w.key, cur); err != nil {
			return err
		}
		if p := orchestrate.PolicyOf(cur); p.Paused || !p.Auto || cur.Status.CurrentPrimary != c.Status.CurrentPrimary {
			return errNoLongerCalledFor
		}
		pc := w.checkedProtected(c.Status.CurrentPrimary)
		w.failedOver.Store(&pc)
		return r.Failover(ctx, w.key, orchestrate.FailoverOptions{Detected: w.checks, DetectedAt: w.checkedAt, DetectedPrimary: c.Status.CurrentPrimary, Automatic: true, PrimaryCheckedAt: pc.at, PrimaryStartedAt: pc.started, PrimaryCheckedGTID: pc.pos(), Read: cur})
	})
	if errors.Is(err, errNoLongerCalledFor) {
		w.report(Transition{Action: "failover", Reason: "not started: " + err.Error()})
		return true, nil // the next check judges the cluster as it is now
	}
	var na errNotAcquired
	if errors.As(err, &na) {
		if !errors.Is(na.err, outcome.ErrHeld) || ctx.Err() != nil {
			// Not refused by a holder (the API failed, or this supervisor stops): the next
			// check tries again.
			w.report(Transition{Action: "failover", Reason: "not started: " + na.err.Error()})
			return false, nil
		}
		if !w.blocked {
			w.blocked = true // reported once while the cluster stays held
			w.report(Transition{Action: "failover", Reason: "not started: " + na.err.Error()})
		}
		if !dead {
			// A primary that answers read-only after a restart: a recorded converge is
			// superseded only over a dead primary, and the converge is what reopens this one,
			// so it is not asked to give way.
			return false, nil
		}
		return false, w.markWaiting(ctx, c)
	}
	w.blocked = false
	after := &v1.MysqlCluster{}
	if gerr := w.s.Runner.Kube.Get(ctx, w.key, after); gerr != nil {
		return true, errors.Join(err, gerr)
	}
	if err == nil {
		w.report(Transition{Action: "failover", Primary: after.Status.CurrentPrimary, Reason: "failover succeeded: " + orchestrate.LastMessage(after, orchestrate.OperationFailover)})
		return true, nil
	}
	w.report(Transition{Action: "failover", Reason: "failover did not complete: " + err.Error()})
	if op := after.Status.Operation; op != nil {
		if op.Type == orchestrate.OperationConverge && errors.Is(err, outcome.ErrUnsafe) {
			// The converge could not be superseded (the primary is not proven dead): the
			// checks go on, and the next attempt waits as after a refusal.
			w.backoff = w.s.Runner.Clock().Add(failoverBackoff(c))
		}
		return true, nil // interrupted: the next tick resumes it
	}
	// An attempt that ended without a new primary is not followed by another for a while,
	// whatever the cooldown (0 included): a flapping view, or a fence that stays Blocked, must
	// not churn status, labels and Events every interval. (An attempt that never began, an API
	// error, is retried at the next tick.)
	backoff := w.s.Runner.Clock().Add(failoverBackoff(c))
	if (errors.Is(err, outcome.ErrUnsafe) || errors.Is(err, outcome.ErrConfig)) && (len(after.Status.History) == 0 || after.Status.History[0].FinishedAt.Time.Before(started.Truncate(time.Second))) {
		// Refused at Confirming (the primary answered, or the replicas disagreed, or the path
		// to the primary is refused by configuration): nothing was done.
		if o := w.s.Observer; o != nil {
			o.Refused(w.key)
		}
		w.backoff = backoff
		return true, nil
	}
	if d := meta.FindStatusCondition(after.Status.Conditions, v1.ConditionDegraded); d != nil && d.Status == metav1.ConditionTrue &&
		d.Reason == orchestrate.ReasonNewPrimaryLost && after.Status.CurrentPrimary != c.Status.CurrentPrimary && lostNewPrimaries(after, w.s.Runner.Clock()) < 2 {
		// The failover made a new primary, which then died before it was verified: a new
		// failure of another instance, not the same one flapping. No floor and no cooldown: the
		// next checks judge the new primary, and fail over again once they declare it dead.
		// Once per cooldown: a second such loss (whatever kills each new primary) is withheld.
		return true, nil
	}
	// Failed (Degraded): the attempt also starts the cooldown, so a person decides what comes
	// next.
	for _, h := range after.Status.History {
		if h.Type == orchestrate.OperationFailover && !h.FinishedAt.Time.Before(started.Truncate(time.Second)) && h.Result != "Succeeded" {
			w.backoff = backoff
			return true, w.withhold(ctx, after, h.FinishedAt, "the automatic failover failed: "+h.Message)
		}
	}
	return true, nil
}

// lostNewPrimaries counts the operations inside failover.cooldown that ended with their new
// primary lost before it was verified.
func lostNewPrimaries(c *v1.MysqlCluster, now time.Time) int {
	n := 0
	since := now.Add(-orchestrate.FailoverCooldown(c))
	for _, h := range c.Status.History {
		if h.Result != "Succeeded" && h.FinishedAt.After(since) && strings.Contains(h.Message, orchestrate.NewPrimaryLostMark) {
			n++
		}
	}
	return n
}

// errNoLongerCalledFor: the cluster changed while the failover waited for its Lease.
var errNoLongerCalledFor = errors.New("the cluster changed while the failover waited for its Lease (paused, automatic failover turned off, or another primary)")

// protectedCheck is a check that found primary writable and protected by semi-sync at at,
// answered by the server process that started at started.
// written holds what the primary had written at the recent protected checks of the same
// primary (oldest first, this one last).
type protectedCheck struct {
	primary     string
	at, started time.Time
	written     []failover.WrittenAt
}

// pos is the primary's written GTID position at this check.
func (pc protectedCheck) pos() string {
	if len(pc.written) == 0 {
		return ""
	}
	return pc.written[len(pc.written)-1].GTID
}

// protectedKept is how many recent protected checks a supervisor keeps (two minutes at the
// default interval): the tail proof needs one from before the run it discards was written.
const protectedKept = 120

// next is the record after a new protected check of primary.
func (pc *protectedCheck) next(primary string, at, started time.Time, pos string) *protectedCheck {
	var written []failover.WrittenAt
	if pc != nil && pc.primary == primary {
		written = pc.written[max(0, len(pc.written)-protectedKept+1):]
	}
	written = append(slices.Clone(written), failover.WrittenAt{At: at, GTID: pos})
	return &protectedCheck{primary: primary, at: at, started: started, written: written}
}

// checkedProtected is this supervisor's last check that found primary writable and protected by
// semi-sync; zero when none did.
func (w *watcher) checkedProtected(primary string) protectedCheck {
	if pc := w.protected.Load(); pc != nil && pc.primary == primary {
		return *pc
	}
	return protectedCheck{}
}

// markWaiting records that the automatic failover called for waits for the cluster's Lease: a
// converge holding it gives way once it sees the mark (and this supervisor still rewriting its
// record). Written only while the record says FailoverRequired, beside no operation but a
// converge, as record writes.
func (w *watcher) markWaiting(ctx context.Context, c *v1.MysqlCluster) error {
	if h := c.Status.HA; h != nil && h.WaitingForLease != nil {
		return nil
	}
	now := metav1.NewTime(w.s.Runner.Clock())
	err := orchestrate.UpdateStatus(ctx, w.s.Runner.Kube, c, func(s *v1.MysqlClusterStatus) error {
		if err := w.supGuard("record the wait for the Lease"); err != nil {
			return err
		}
		if s.Operation != nil && s.Operation.Type != orchestrate.OperationConverge || s.HA == nil || s.HA.State != v1.HAFailoverRequired {
			return orchestrate.ErrLostRace
		}
		if s.HA.WaitingForLease == nil {
			s.HA.WaitingForLease = &now
		}
		return nil
	})
	if errors.Is(err, orchestrate.ErrLostRace) {
		return nil
	}
	return err
}

// withhold records that automatic failover is withheld after a failed attempt.
func (w *watcher) withhold(ctx context.Context, c *v1.MysqlCluster, at metav1.Time, why string) error {
	hold := fmt.Sprintf("failover.cooldown (%s)", orchestrate.FailoverCooldown(c))
	if orchestrate.FailoverCooldown(c) < failoverBackoff(c) {
		hold = fmt.Sprintf("%s, the floor under failover.cooldown (%s)", failoverBackoff(c), orchestrate.FailoverCooldown(c))
	}
	msg := fmt.Sprintf("%s; no automatic failover for %s: run 'mysqlctl failover %s' once a person has looked", why, hold, c.Name)
	err := orchestrate.UpdateStatus(ctx, w.s.Runner.Kube, c, func(s *v1.MysqlClusterStatus) error {
		if err := w.supGuard("withhold automatic failover"); err != nil {
			return err
		}
		if s.Operation != nil {
			return orchestrate.ErrLostRace
		}
		s.HA = orchestrate.NextHAStatus(s.HA, v1.HADegraded, at, []string{msg}, orchestrate.JudgeWatch)
		s.HA.LastFailover = &at
		s.Phase = v1.PhaseDegraded
		meta.SetStatusCondition(&s.Conditions, metav1.Condition{Type: v1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: orchestrate.ReasonFailoverWithheld, Message: msg})
		return nil
	})
	if errors.Is(err, orchestrate.ErrLostRace) {
		return nil
	}
	w.s.Runner.Event(ctx, c, true, "HA"+string(v1.HADegraded), msg)
	w.report(Transition{To: string(v1.HADegraded), Reason: msg})
	return err
}

// resume continues an operation whose holder died. A live holder is left alone (reported once).
func (w *watcher) resume(ctx context.Context, c *v1.MysqlCluster, op *v1.OperationStatus) error {
	key := op.ID + "/" + op.Stage
	switch {
	case c.Spec.Paused:
		if w.held != key {
			w.held = key
			w.report(Transition{Action: "observe", Reason: fmt.Sprintf("spec.paused: the %s %s at stage %s is left for a person ('resume %s')", op.Type, op.ID, op.Stage, c.Name)})
		}
		return nil
	case w.s.Runner.Clock().Sub(w.resumeFailed[key]) < time.Minute:
		return nil // refused moments ago at this very stage: not again every interval
	}
	w.act.Lock()
	defer w.act.Unlock()
	err := w.withLease(ctx, c, true, func(ctx context.Context, r *orchestrate.Runner) error {
		cur := &v1.MysqlCluster{}
		if err := r.Kube.Get(ctx, w.key, cur); err != nil {
			return err
		}
		op := cur.Status.Operation
		if op == nil && orchestrate.HandoffPending(cur) {
			up := cur.Status.Upgrade
			w.report(Transition{Action: "resume", Reason: fmt.Sprintf("continuing the upgrade %s: handing the primary over from %s to %s", up.ID, up.HandoffFrom, up.HandoffTo)})
			return r.Upgrade(ctx, w.key, orchestrate.UpgradeOptions{ResumeOnly: true})
		}
		if op == nil {
			return nil // finished while the lease was awaited
		}
		w.report(Transition{Action: "resume", Reason: fmt.Sprintf("continuing the %s %s from stage %s (its holder %s stopped)", op.Type, op.ID, op.Stage, op.Holder)})
		return continueRecorded(ctx, r, w.key, op)
	})
	var na errNotAcquired
	if errors.As(err, &na) {
		if w.held != op.ID {
			w.held = op.ID
			w.report(Transition{Action: "observe", Reason: fmt.Sprintf("the %s %s is in progress at stage %s, held by %s", op.Type, op.ID, op.Stage, op.Holder)})
		}
		return nil
	}
	if err == nil || errors.Is(err, orchestrate.ErrStopped) {
		return nil
	}
	if errors.Is(err, outcome.ErrUnsafe) || errors.Is(err, outcome.ErrConfig) {
		// Refused, or stopped by a path the configuration refuses: the same again next
		// interval; a minute later it is tried again (the configuration may be fixed).
		if w.resumeFailed == nil {
			w.resumeFailed = map[string]time.Time{}
		}
		w.resumeFailed[key] = w.s.Runner.Clock()
	}
	return fmt.Errorf("resuming the %s %s: %w", op.Type, op.ID, err)
}

// continueRecorded continues the recorded operation from its stage.
func continueRecorded(ctx context.Context, r *orchestrate.Runner, key client.ObjectKey, op *v1.OperationStatus) error {
	switch op.Type {
	case orchestrate.OperationBootstrap:
		return r.Bootstrap(ctx, key)
	case orchestrate.OperationConverge:
		return r.Converge(ctx, key)
	case orchestrate.OperationSwitchover:
		c := &v1.MysqlCluster{}
		if err := r.Kube.Get(ctx, key, c); err != nil {
			return err
		}
		if orchestrate.IsHandoff(c, op) {
			return r.Upgrade(ctx, key, orchestrate.UpgradeOptions{ResumeOnly: true}) // the switchover, then the rest
		}
		return r.Switchover(ctx, key, orchestrate.SwitchoverOptions{To: op.Target, ResumeOnly: true})
	case orchestrate.OperationFailover:
		return r.Failover(ctx, key, orchestrate.FailoverOptions{To: op.Target, ResumeOnly: true})
	case orchestrate.OperationUpgrade:
		return r.Upgrade(ctx, key, orchestrate.UpgradeOptions{ResumeOnly: true})
	case orchestrate.OperationScale:
		return r.Scale(ctx, key, orchestrate.ScaleOptions{ResumeOnly: true})
	case orchestrate.OperationRebuild:
		return r.Rebuild(ctx, key, orchestrate.RebuildOptions{ResumeOnly: true})
	}
	return fmt.Errorf("cannot resume a %q operation (recorded by a newer mysqlctl?)", op.Type)
}

// errNotAcquired is a Lease that could not be taken: another actor holds the cluster.
type errNotAcquired struct{ err error }

func (e errNotAcquired) Error() string { return e.err.Error() }
func (e errNotAcquired) Unwrap() error { return e.err }

package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// Lease timing. Another actor may take the lease over only after it watched the record stay
// unchanged for LeaseDuration on its own clock; the holder renews every RenewInterval and stops
// acting (every mutation is refused) once its last successful renewal is LeaseDuration-LeaseMargin
// old, so a holder that is paused, partitioned or slowed stops before anyone can take over.
const (
	LeaseDuration = 15 * time.Second
	RenewInterval = 2 * time.Second
	LeaseMargin   = 5 * time.Second
	// renewTimeout bounds one renewal: a renewal that hangs counts as failed, and the lease's
	// validity runs out on its own while it hangs.
	renewTimeout = 3 * time.Second
)

// ErrLeaseLost means this actor can no longer prove it holds the cluster: it must not act.
var ErrLeaseLost = fmt.Errorf("lease lost: %w", outcome.ErrHeld)

// LeaseName is the name of a cluster's Lease.
func LeaseName(c *v1.MysqlCluster) string { return c.Name + "-mysqlctl" }

// SupervisorLeaseName is the name of the Lease a watch holds while it supervises a cluster:
// one watch supervises a cluster at a time, and commands hand their requests to it.
func SupervisorLeaseName(c *v1.MysqlCluster) string { return c.Name + "-watch" }

// LeaseOptions tune AcquireLease.
type LeaseOptions struct {
	// Wait, when another actor holds the lease, watches the record until it has stayed
	// unchanged for LeaseDuration (its holder is dead) and then takes it over; a holder that
	// renews meanwhile is alive and refused. Without Wait, a lease renewed recently by the
	// holder's own clock is refused at once: a new operation never queues behind a running one.
	// resume and abort wait (they continue a dead actor's operation); the others do not.
	Wait bool
	// TakeReleased, with Wait, takes a lease its holder released while it was watched (a
	// compare-and-swap on the released record) instead of refusing: the caller judges the
	// cluster afresh once it holds it. The supervisor's failover uses it, so that an actor
	// giving way to it cannot be replaced by another before it acquires.
	TakeReleased bool
	// Now is the wall clock written into the record (default time.Now). It is never used to
	// judge expiry: clocks of different machines disagree.
	Now func() time.Time
	// Supervisor takes the supervisor's Lease (SupervisorLeaseName) instead of the
	// operation Lease; it fences no operation, so no epoch is carried over from status.
	Supervisor bool
	// Seen continues an observation of the record made by a LeaseObserver, so that a wait
	// for a dead holder's lease counts from when the record was first seen unchanged.
	Seen *Observed
}

// Lease is a held cluster lock and the fencing token that goes with it.
//
// Why not k8s.io/client-go/tools/leaderelection: its LeaderElector is built for a long-running
// candidate that blocks until it leads. An operation needs three things it does not offer: the
// epoch (the record's transition count) returned together with the acquisition so it can be
// written into status as a fencing token; a "refuse at once" mode so a second command fails
// fast instead of queueing; and a validity check with a safety margin on the local clock that
// every mutation consults (IsLeader only compares identities in the last observed record). The
// rule for expiry is the same as client-go's: from the local time this process last saw the
// record change, never from the remote renewTime.
type Lease struct {
	Holder string
	// Epoch is the record's transition count after this actor took it: every operation status
	// write is a compare-and-swap on (Holder, Epoch).
	Epoch int32

	kube client.Client
	key  client.ObjectKey
	now  func() time.Time

	cancel context.CancelFunc
	done   chan struct{}
	lost   chan struct{}

	mu        sync.Mutex
	LastRenew time.Time // local time (with its monotonic reading) a successful renewal was sent
	// written is the record as this actor last wrote it: a renewal conditional on its
	// resourceVersion proves, without a read, that nobody wrote the record since.
	written *coordinationv1.Lease
	lostErr error
}

// HeldLease is a Lease as an actor holds it when it last renewed at lastRenew and has no renewer
// running: for tests of an actor that must check its Lease before it writes (one paused past its
// Lease, one renewed just now).
func HeldLease(epoch int32, lastRenew time.Time) *Lease {
	return &Lease{Epoch: epoch, LastRenew: lastRenew, lost: make(chan struct{})}
}

// Observed is a record as this process saw it, and when (local clock).
type Observed struct {
	holder, rv string
	at         time.Time
}

// AcquireLease takes the cluster's Lease for holder. When another actor holds it, see
// LeaseOptions.Wait. The returned context is cancelled when the lease is lost (a renewal found
// it taken over, or renewals failed until its validity ran out); Release ends it.
func AcquireLease(ctx context.Context, kube client.Client, c *v1.MysqlCluster, holder string, opts LeaseOptions) (context.Context, *Lease, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	name, op := LeaseName(c), c.Status.Operation
	if opts.Supervisor {
		name, op = SupervisorLeaseName(c), nil
	}
	l := &Lease{
		Holder: holder, kube: kube, key: client.ObjectKey{Namespace: c.Namespace, Name: name}, now: opts.Now,
		done: make(chan struct{}), lost: make(chan struct{}),
	}
	minEpoch := int32(0)
	if op != nil {
		// A Lease deleted and re-created starts counting again; the epoch must still grow.
		minEpoch = op.Epoch + 1
	}
	seen := opts.Seen
	for {
		sent := time.Now()
		lease := &coordinationv1.Lease{}
		err := kube.Get(ctx, l.key, lease)
		switch {
		case apierrors.IsNotFound(err) && op != nil && (seen == nil || seen.holder != "" || seen.rv != ""):
			// An operation is recorded but its Lease is gone (deleted by hand?): its holder may
			// still be acting until it notices. Watch the absence for a full lease duration, as
			// for an expiring lease, before creating a new one.
			seen = &Observed{at: time.Now()}
			continue
		case apierrors.IsNotFound(err) && op != nil && seen != nil && seen.holder == "" && seen.rv == "" && time.Since(seen.at) < LeaseDuration:
			if err := SleepCtx(ctx, min(LeaseDuration-time.Since(seen.at), time.Second)); err != nil {
				return nil, nil, fmt.Errorf("%w: the Lease of cluster %s is missing while operation %s is recorded (%w)", outcome.ErrHeld, c.Name, op.ID, err)
			}
			continue
		case apierrors.IsNotFound(err):
			err = l.create(ctx, minEpoch)
			if apierrors.IsAlreadyExists(err) {
				continue
			}
		case err != nil:
			return nil, nil, fmt.Errorf("read Lease %s: %w", l.key, err)
		default:
			cur := holderOf(lease)
			if seen != nil && (seen.holder != cur || seen.rv != lease.ResourceVersion) && !(opts.TakeReleased && cur == "") {
				// The holder renewed, released or handed over while we watched: it was alive,
				// and whatever it did, this actor must look at the cluster again.
				return nil, nil, fmt.Errorf("%w: %s holds cluster %s and is renewing its lease", outcome.ErrHeld, seen.holder, c.Name)
			}
			if cur != "" && cur != holder {
				if seen == nil {
					seen = &Observed{holder: cur, rv: lease.ResourceVersion, at: time.Now()}
					if !opts.Wait && recentlyRenewed(lease, opts.Now()) {
						return nil, nil, fmt.Errorf("%w: %s holds cluster %s (it renewed its lease %s ago by its clock); if that process is gone, its lease expires within %s",
							outcome.ErrHeld, cur, c.Name, opts.Now().Sub(lease.Spec.RenewTime.Time).Round(time.Second), LeaseDuration)
					}
				}
				if wait := LeaseDuration - time.Since(seen.at); wait > 0 {
					if err := SleepCtx(ctx, min(wait, time.Second)); err != nil {
						return nil, nil, fmt.Errorf("%w: %s holds cluster %s (%w)", outcome.ErrHeld, cur, c.Name, err)
					}
					continue
				}
			}
			err = l.takeOver(ctx, lease, minEpoch)
			if apierrors.IsConflict(err) {
				continue // the record changed: look again (a live holder is then refused)
			}
		}
		if err != nil {
			return nil, nil, err
		}
		l.LastRenew = sent
		break
	}
	lctx, cancel := context.WithCancel(ctx)
	l.cancel = cancel
	go l.renewLoop(lctx)
	return lctx, l, nil
}

// holderOf returns the record's holder ("" when released).
func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// recentlyRenewed judges, by the holder's own timestamp, whether the lease looks alive. It is
// only ever used to refuse sooner, never to take a lease: a skewed clock can make a live lease
// look stale, and then the caller watches the record for a full LeaseDuration instead.
func recentlyRenewed(l *coordinationv1.Lease, now time.Time) bool {
	if l.Spec.RenewTime == nil {
		return false
	}
	return now.Sub(l.Spec.RenewTime.Time) < LeaseDuration
}

func (l *Lease) create(ctx context.Context, minEpoch int32) error {
	t := metav1.NewMicroTime(l.now())
	dur := int32(LeaseDuration / time.Second)
	epoch := minEpoch
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: l.key.Namespace, Name: l.key.Name},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: &l.Holder, LeaseDurationSeconds: &dur, AcquireTime: &t, RenewTime: &t, LeaseTransitions: &epoch,
		},
	}
	if err := l.kube.Create(ctx, lease); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return err
		}
		return fmt.Errorf("create Lease %s: %w", l.key, err)
	}
	l.Epoch = epoch
	l.remember(lease)
	return nil
}

// takeOver writes this actor into the record read (compare-and-swap on its resourceVersion),
// counting a transition unless the record already names this actor.
func (l *Lease) takeOver(ctx context.Context, lease *coordinationv1.Lease, minEpoch int32) error {
	t := metav1.NewMicroTime(l.now())
	dur := int32(LeaseDuration / time.Second)
	sp := &lease.Spec
	epoch := int32(0)
	if sp.LeaseTransitions != nil {
		epoch = *sp.LeaseTransitions
	}
	if holderOf(lease) != l.Holder {
		epoch = max(epoch+1, minEpoch)
		sp.HolderIdentity = &l.Holder
		sp.AcquireTime = &t
	}
	sp.LeaseTransitions = &epoch
	sp.RenewTime = &t
	sp.LeaseDurationSeconds = &dur
	if err := l.kube.Update(ctx, lease); err != nil {
		if apierrors.IsConflict(err) {
			return err
		}
		return fmt.Errorf("take Lease %s: %w", l.key, err)
	}
	l.Epoch = epoch
	l.remember(lease)
	return nil
}

// errTakenOver means a renewal found another holder in the record.
var errTakenOver = errors.New("taken over")

// renew writes a new renewTime if the record still names this actor, and records when the
// successful renewal was sent.
func (l *Lease) renew(ctx context.Context) error {
	sent := time.Now()
	// A write conditional on the record this actor last wrote succeeds only if nobody wrote
	// it since, so it still names this actor: no read is needed.
	l.mu.Lock()
	written := l.written
	l.mu.Unlock()
	var err error = apierrors.NewConflict(coordinationv1.Resource("leases"), l.key.Name, errors.New("no record written by this actor"))
	if written != nil && holderOf(written) == l.Holder {
		wctx, cancel := context.WithTimeout(ctx, renewTimeout)
		err = l.writeRenewal(wctx, written.DeepCopy(), sent)
		cancel()
	}
	if apierrors.IsConflict(err) {
		// Written since (or never written by this actor): read who holds it. Its own bound:
		// the validity still counts from sent, before the first attempt.
		ctx, cancel := context.WithTimeout(ctx, renewTimeout)
		defer cancel()
		lease := &coordinationv1.Lease{}
		if err = l.kube.Get(ctx, l.key, lease); err == nil {
			if h := holderOf(lease); h != l.Holder {
				return fmt.Errorf("%w by %q", errTakenOver, h)
			}
			err = l.writeRenewal(ctx, lease, sent)
		}
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: the Lease was deleted", errTakenOver)
	}
	return err
}

// writeRenewal writes a new renewTime into the record read or last written (conditional on its
// resourceVersion) and records when the successful renewal was sent.
func (l *Lease) writeRenewal(ctx context.Context, lease *coordinationv1.Lease, sent time.Time) error {
	t := metav1.NewMicroTime(l.now())
	lease.Spec.RenewTime = &t
	if err := l.kube.Update(ctx, lease); err != nil {
		return err
	}
	l.mu.Lock()
	l.LastRenew = sent
	l.mu.Unlock()
	l.remember(lease)
	return nil
}

// remember keeps a copy of the record as this actor wrote it.
func (l *Lease) remember(lease *coordinationv1.Lease) {
	l.mu.Lock()
	l.written = lease.DeepCopy()
	l.mu.Unlock()
}

func (l *Lease) renewLoop(ctx context.Context) {
	defer close(l.done)
	t := time.NewTicker(RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := l.renew(ctx)
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errTakenOver) {
			l.markLost(fmt.Errorf("%w: the Lease %s was %w", ErrLeaseLost, l.key, err))
			return
		}
		// A failed or hung renewal is retried at the next tick while the lease is still
		// valid; once it is not, the actor has lost it.
		if cerr := l.Check(); cerr != nil {
			l.markLost(cerr)
			return
		}
	}
}

// markLost records why the lease was lost, cancels the lease's context and only then closes
// Lost, so whoever wakes on Lost finds the context already cancelled.
func (l *Lease) markLost(err error) {
	l.mu.Lock()
	first := l.lostErr == nil
	if first {
		l.lostErr = err
	}
	l.mu.Unlock()
	l.cancel()
	if first {
		close(l.lost)
	}
}

// Check proves the lease is still this actor's: nil when the last successful renewal was sent
// less than LeaseDuration-LeaseMargin ago. Elapsed time is measured on the monotonic clock and
// on the wall clock and the larger counts: Go's monotonic clock stops while a laptop sleeps,
// the wall clock does not, so a process woken from sleep cannot believe it still holds a lease
// that others took over meanwhile. Every mutating SQL statement, label move and operation
// status write asks first.
func (l *Lease) Check() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lostErr != nil {
		return l.lostErr
	}
	if age := since(l.LastRenew); age >= LeaseDuration-LeaseMargin {
		return fmt.Errorf("%w: its last renewal of %s succeeded %s ago (valid for %s)", ErrLeaseLost, l.key, age.Round(time.Millisecond), LeaseDuration-LeaseMargin)
	}
	return nil
}

// Confirm proves, with a round trip to the API server, that this actor still holds the Lease
// and that no takeover issued a newer epoch: a renewal conditional on the record this actor
// last wrote (topology.Instance.Confirm).
func (l *Lease) Confirm(ctx context.Context) error {
	if err := l.Check(); err != nil {
		return err
	}
	if err := l.renew(ctx); err != nil {
		return fmt.Errorf("%w: confirming %s: %v", ErrLeaseLost, l.key, err)
	}
	return nil
}

// FenceToken is the epoch servers keep as their fencing token (topology.Instance.Epoch): the
// transition count plus one, so that a Lease's first holder (count 0) is fenced too and 0 keeps
// meaning "unfenced". It grows at every takeover, and with the transition count across a Lease
// deleted while an operation is recorded (see AcquireLease's minEpoch).
func (l *Lease) FenceToken() int64 { return int64(l.Epoch) + 1 }

// Supersede marks the lease lost because a server refused a statement of this actor as older
// than the epoch it keeps (topology.ErrSuperseded): another actor took the cluster over and
// touched that server, whatever this actor's renewals say. Every later mutation and status write
// is refused, so the operation ends as a lost lease, never with a mark such as Degraded.
func (l *Lease) Supersede(err error) {
	l.markLost(fmt.Errorf("%w: %w", ErrLeaseLost, err))
}

// ValidUntil is the local time after which the lease is no longer valid unless renewed: a
// mutation in flight is cut off there.
func (l *Lease) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Now().Add(LeaseDuration - LeaseMargin - since(l.LastRenew))
}

// since returns the larger of the monotonic and the wall-clock time elapsed since t.
func since(t time.Time) time.Duration {
	return max(time.Since(t), time.Now().Round(0).Sub(t.Round(0)))
}

// LostErr is why the lease was lost, nil while it was not. It is set before the lease's context
// is cancelled, so an action cut short by that cancellation always finds it (Lost may still be
// closing).
func (l *Lease) LostErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lostErr
}

// Lost is closed when the lease was lost.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Release stops renewing and gives the lease up (when the record still names this actor), so
// the next actor need not wait for it to expire.
func (l *Lease) Release(ctx context.Context) {
	l.cancel()
	<-l.done
	ctx, cancel := context.WithTimeout(ctx, renewTimeout)
	defer cancel()
	lease := &coordinationv1.Lease{}
	if err := l.kube.Get(ctx, l.key, lease); err != nil {
		return
	}
	if holderOf(lease) == l.Holder {
		empty := ""
		lease.Spec.HolderIdentity = &empty
		_ = l.kube.Update(ctx, lease)
	}
}

// LeaseObserver watches a Lease record while something else is awaited: what AcquireLease
// would have observed during that time, handed to it through LeaseOptions.
type LeaseObserver struct {
	cancel context.CancelFunc
	done   chan struct{}
	seen   *Observed
}

// ObserveLease polls the record every second until Stop.
func ObserveLease(ctx context.Context, kube client.Client, key client.ObjectKey) *LeaseObserver {
	return ObserveLeaseEvery(ctx, kube, key, time.Second)
}

// ObserveLeaseEvery is ObserveLease reading the record every period. A longer period only
// makes the observation conservative: a record seen unchanged is dated from the read that first
// saw it, up to a period after it last changed.
func ObserveLeaseEvery(ctx context.Context, kube client.Client, key client.ObjectKey, period time.Duration) *LeaseObserver {
	ctx, cancel := context.WithCancel(ctx)
	o := &LeaseObserver{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(o.done)
		for ctx.Err() == nil {
			lease := &coordinationv1.Lease{}
			gctx, cancel := context.WithTimeout(ctx, renewTimeout)
			err := kube.Get(gctx, key, lease)
			cancel()
			// Stamped when the answer arrived: the record may show a renewal sent while the
			// read was on its way, so the wait for expiry counts from the later time.
			now := time.Now()
			var cur *Observed
			switch {
			case apierrors.IsNotFound(err):
				cur = &Observed{at: now}
			case err == nil:
				cur = &Observed{holder: holderOf(lease), rv: lease.ResourceVersion, at: now}
			}
			if cur != nil && (o.seen == nil || o.seen.holder != cur.holder || o.seen.rv != cur.rv) {
				o.seen = cur
			}
			_ = SleepCtx(ctx, period)
		}
	}()
	return o
}

// Stop ends the observation and returns it (nil when nothing was seen).
func (o *LeaseObserver) Stop() *Observed {
	o.cancel()
	<-o.done
	return o.seen
}

// SleepCtx pauses for d or until ctx ends.
func SleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

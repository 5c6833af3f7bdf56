package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// LeaseDuration is how long a holder keeps the cluster without renewing. A crashed actor's
// lease expires after this, and the next actor takes over (and resumes the recorded operation).
const LeaseDuration = 15 * time.Second

// LeaseName is the name of a cluster's Lease.
func LeaseName(c *v1.MysqlCluster) string { return c.Name + "-mysqlctl" }

// Lease is a held cluster lock. Epoch is the Lease's transition count when it was taken: it is
// recorded in status.operation, so an actor that lost the lease can be told apart.
type Lease struct {
	Holder string
	Epoch  int32

	kube   client.Client
	key    client.ObjectKey
	cancel context.CancelFunc
	done   chan struct{}
	lost   chan struct{}
}

// AcquireLease takes the cluster's Lease for holder. When another actor holds it, AcquireLease
// watches the lease until it expires: a holder that renews meanwhile is alive, and the result is
// an outcome.ErrHeld error naming it; a holder that stops renewing (a killed CLI) loses the lease
// at expiry and this actor takes over, so a resume right after a crash just waits a few seconds.
// The returned context is cancelled when the lease is lost (renewal failed or someone else took
// it); Release ends it.
func AcquireLease(ctx context.Context, kube client.Client, c *v1.MysqlCluster, holder string, now func() time.Time) (context.Context, *Lease, error) {
	key := client.ObjectKey{Namespace: c.Namespace, Name: LeaseName(c)}
	l := &Lease{Holder: holder, kube: kube, key: key, done: make(chan struct{}), lost: make(chan struct{})}
	var firstSeen *heldError
	for {
		err := l.take(ctx, now, true)
		var held *heldError
		if !errors.As(err, &held) {
			if err != nil {
				return nil, nil, err
			}
			break
		}
		if firstSeen == nil {
			firstSeen = held
		} else if !held.renew.Equal(firstSeen.renew) || held.holder != firstSeen.holder {
			return nil, nil, fmt.Errorf("%w: %s holds cluster %s and is renewing its lease", outcome.ErrHeld, held.holder, c.Name)
		}
		wait := time.Until(held.expiry) + 100*time.Millisecond
		select {
		case <-ctx.Done():
			return nil, nil, fmt.Errorf("%w: %s holds cluster %s (%w)", outcome.ErrHeld, held.holder, c.Name, ctx.Err())
		case <-time.After(min(max(wait, 100*time.Millisecond), LeaseDuration/3)):
		}
	}
	lctx, cancel := context.WithCancel(ctx)
	l.cancel = cancel
	go func() {
		defer close(l.done)
		t := time.NewTicker(LeaseDuration / 3)
		defer t.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-t.C:
				if err := l.take(lctx, now, false); err != nil && lctx.Err() == nil {
					close(l.lost)
					cancel()
					return
				}
			}
		}
	}()
	return lctx, l, nil
}

// take creates, takes over or renews the Lease with a compare-and-swap on its resourceVersion.
func (l *Lease) take(ctx context.Context, now func() time.Time, first bool) error {
	t := metav1.NewMicroTime(now())
	dur := int32(LeaseDuration / time.Second)
	lease := &coordinationv1.Lease{}
	err := l.kube.Get(ctx, l.key, lease)
	if apierrors.IsNotFound(err) && first {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: l.key.Namespace, Name: l.key.Name},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: &l.Holder, LeaseDurationSeconds: &dur, AcquireTime: &t, RenewTime: &t,
				LeaseTransitions: new(int32),
			},
		}
		if err := l.kube.Create(ctx, lease); err != nil {
			if apierrors.IsAlreadyExists(err) {
				return l.take(ctx, now, first)
			}
			return fmt.Errorf("create Lease %s: %w", l.key, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read Lease %s: %w", l.key, err)
	}
	sp := &lease.Spec
	holder := ""
	if sp.HolderIdentity != nil {
		holder = *sp.HolderIdentity
	}
	if holder != l.Holder {
		if !first {
			return fmt.Errorf("lease %s taken over by %s", l.key, holder)
		}
		if holder != "" && sp.RenewTime != nil && sp.LeaseDurationSeconds != nil &&
			sp.RenewTime.Add(time.Duration(*sp.LeaseDurationSeconds)*time.Second).After(now()) {
			return &heldError{holder: holder, renew: sp.RenewTime.Time, expiry: sp.RenewTime.Add(time.Duration(*sp.LeaseDurationSeconds) * time.Second)}
		}
		transitions := int32(0)
		if sp.LeaseTransitions != nil {
			transitions = *sp.LeaseTransitions
		}
		transitions++
		sp.LeaseTransitions = &transitions
		sp.HolderIdentity = &l.Holder
		sp.AcquireTime = &t
	}
	sp.RenewTime = &t
	sp.LeaseDurationSeconds = &dur
	if err := l.kube.Update(ctx, lease); err != nil {
		if apierrors.IsConflict(err) && first {
			return l.take(ctx, now, first)
		}
		return fmt.Errorf("renew Lease %s: %w", l.key, err)
	}
	// Only the acquisition sets the epoch: renewals run concurrently with readers of Epoch and
	// never change the transition count (the holder stays the same).
	if first && sp.LeaseTransitions != nil {
		l.Epoch = *sp.LeaseTransitions
	}
	return nil
}

// heldError says another actor holds an unexpired lease.
type heldError struct {
	holder        string
	renew, expiry time.Time
}

func (e *heldError) Error() string { return e.holder + " holds the lease" }

// Lost is closed when the lease was lost.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Release stops renewing and gives the lease up, so the next actor need not wait for expiry.
func (l *Lease) Release(ctx context.Context) {
	l.cancel()
	<-l.done
	lease := &coordinationv1.Lease{}
	if err := l.kube.Get(ctx, l.key, lease); err != nil {
		return
	}
	if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == l.Holder {
		empty := ""
		lease.Spec.HolderIdentity = &empty
		_ = l.kube.Update(ctx, lease)
	}
}

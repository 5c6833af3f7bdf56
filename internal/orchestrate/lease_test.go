package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/testenv/clustertest"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// TestLeaseOneActor: a second actor starting a new operation is refused at once while a live
// holder has the lease, naming it; one that waits (resume) is refused as soon as it sees the
// holder renew; after Release the second actor takes the lease with a higher epoch.
func TestLeaseOneActor(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _ := clustertest.CountingClient(t, env)
	cluster := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "lease", Namespace: "default"}}
	_, a, err := AcquireLease(ctx, c, cluster, "actor-a", LeaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, _, err = AcquireLease(ctx, c, cluster, "actor-b", LeaseOptions{})
	if !errors.Is(err, outcome.ErrHeld) || !strings.Contains(err.Error(), "actor-a holds cluster lease") {
		t.Fatalf("second actor: %v", err)
	}
	if waited := time.Since(start); waited > RenewInterval {
		t.Errorf("a new operation waited %s for a live holder instead of being refused at once", waited)
	}
	_, _, err = AcquireLease(ctx, c, cluster, "actor-b", LeaseOptions{Wait: true})
	if !errors.Is(err, outcome.ErrHeld) || !strings.Contains(err.Error(), "actor-a holds cluster lease and is renewing") {
		t.Fatalf("second actor waiting: %v", err)
	}
	if err := a.Check(); err != nil {
		t.Fatalf("the holder's lease is no longer valid after refusals: %v", err)
	}
	epochA := a.Epoch
	a.Release(ctx)
	_, b, err := AcquireLease(ctx, c, cluster, "actor-b", LeaseOptions{})
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	defer b.Release(ctx)
	if b.Epoch <= epochA {
		t.Errorf("epoch %d after takeover, want more than %d", b.Epoch, epochA)
	}
}

// TestLeaseClockAheadCannotTakeLiveLease: an actor whose wall clock runs 30 s ahead sees the
// holder's renewTime as long expired; it must still not take the lease while the holder renews,
// because expiry is judged from when this process saw the record change.
func TestLeaseClockAheadCannotTakeLiveLease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _ := clustertest.CountingClient(t, env)
	cluster := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "skew", Namespace: "default"}}
	_, a, err := AcquireLease(ctx, c, cluster, "actor-a", LeaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(ctx)
	ahead := func() time.Time { return time.Now().Add(30 * time.Second) }
	for _, wait := range []bool{false, true} {
		_, b, err := AcquireLease(ctx, c, cluster, "actor-b", LeaseOptions{Now: ahead, Wait: wait})
		if err == nil {
			b.Release(ctx)
			t.Fatalf("wait=%v: an actor with a clock 30s ahead took a live lease", wait)
		}
		if !errors.Is(err, outcome.ErrHeld) || !strings.Contains(err.Error(), "actor-a") {
			t.Fatalf("wait=%v: %v", wait, err)
		}
	}
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: LeaseName(cluster)}, lease); err != nil {
		t.Fatal(err)
	}
	if holderOf(lease) != "actor-a" || a.Check() != nil {
		t.Errorf("holder %q, A's check %v", holderOf(lease), a.Check())
	}
}

// TestLeaseDeadHolderTakenOverAfterLocalExpiry: a holder that stops renewing (killed) is taken
// over by a waiting actor only after the record stayed unchanged for LeaseDuration as this
// process measured it, even when the dead holder's clock ran ahead (its renewTime in the future).
func TestLeaseDeadHolderTakenOverAfterLocalExpiry(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _ := clustertest.CountingClient(t, env)
	cluster := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "dead", Namespace: "default"}}
	future := func() time.Time { return time.Now().Add(time.Hour) }
	_, a, err := AcquireLease(ctx, c, cluster, "actor-a", LeaseOptions{Now: future})
	if err != nil {
		t.Fatal(err)
	}
	a.cancel() // "killed": renewals stop, nothing is released
	<-a.done
	start := time.Now()
	_, b, err := AcquireLease(ctx, c, cluster, "actor-b", LeaseOptions{Wait: true})
	if err != nil {
		t.Fatalf("waiting actor: %v", err)
	}
	defer b.Release(ctx)
	if waited := time.Since(start); waited < LeaseDuration {
		t.Errorf("took a dead holder's lease after %s, before a full lease duration of local observation", waited)
	}
	if b.Epoch <= a.Epoch {
		t.Errorf("epoch %d after takeover, want more than %d", b.Epoch, a.Epoch)
	}
}

// TestLeaseHungRenewalLosesValidity: when renewals hang (the API server stops answering
// writes), the holder's lease stops being valid LeaseDuration-LeaseMargin after its last
// successful renewal, before anyone else could take it; its context is cancelled.
func TestLeaseHungRenewalLosesValidity(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var hang atomic.Bool
	c := clustertest.WrappedClient(t, env, func(r *http.Request) {
		if hang.Load() && r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/leases/") {
			<-r.Context().Done() // a renewal that never gets an answer
		}
	})
	cluster := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "hung", Namespace: "default"}}
	lctx, a, err := AcquireLease(ctx, c, cluster, "actor-a", LeaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(ctx)
	if err := a.Check(); err != nil {
		t.Fatalf("fresh lease: %v", err)
	}
	hang.Store(true)
	select {
	case <-a.Lost():
	case <-time.After(LeaseDuration):
		t.Fatal("renewals hang and the lease was not lost within the lease duration")
	}
	if err := a.Check(); !errors.Is(err, ErrLeaseLost) {
		t.Errorf("check after hung renewals: %v", err)
	}
	if lctx.Err() == nil {
		t.Error("the lease's context was not cancelled")
	}
}

// TestLeaseEpochGrowsAfterLeaseRecreated: a Lease deleted and created again starts counting
// transitions afresh; the epoch must still exceed the one recorded in the operation.
func TestLeaseEpochGrowsAfterLeaseRecreated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _ := clustertest.CountingClient(t, env)
	cluster := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "recreated", Namespace: "default"}}
	cluster.Status.Operation = &v1.OperationStatus{ID: "switchover-1", Epoch: 7, Holder: "gone"}
	_, l, err := AcquireLease(ctx, c, cluster, "actor-a", LeaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	if l.Epoch <= 7 {
		t.Errorf("epoch %d, want more than the recorded 7", l.Epoch)
	}
}

// TestLeaseRenewalWithoutReadSeesTakeover: renewals are writes conditional on the record the
// holder last wrote, with no read before them. A record another actor wrote meanwhile (here it
// names actor-b, as a takeover would) must make the next renewal fail and the lease be lost,
// never be overwritten back to actor-a; and while nobody else writes, a renewal reads nothing.
func TestLeaseRenewalWithoutReadSeesTakeover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var leaseGets atomic.Int64
	c := clustertest.WrappedClient(t, env, func(r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/leases/") {
			leaseGets.Add(1)
		}
	})
	cluster := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "cas", Namespace: "default"}}
	lctx, a, err := AcquireLease(ctx, c, cluster, "actor-a", LeaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Release(ctx)
	key := client.ObjectKey{Namespace: "default", Name: LeaseName(cluster)}
	renewed := func() time.Time {
		l := &coordinationv1.Lease{}
		if err := c.Get(ctx, key, l); err != nil {
			t.Fatal(err)
		}
		return l.Spec.RenewTime.Time
	}
	before := renewed()
	gets := leaseGets.Load()
	time.Sleep(2*RenewInterval + RenewInterval/2)
	if after := renewed(); !after.After(before) {
		t.Fatalf("no renewal in %s: renewTime stayed %s", 2*RenewInterval+RenewInterval/2, before)
	}
	if n := leaseGets.Load() - gets - 1; n != 0 { // the one read is renewed()'s own
		t.Errorf("renewals read the Lease %d times while nobody else wrote it, want none", n)
	}

	// Another actor writes the record (the takeover of a holder it believed dead).
	l := &coordinationv1.Lease{}
	if err := c.Get(ctx, key, l); err != nil {
		t.Fatal(err)
	}
	other := "actor-b"
	l.Spec.HolderIdentity = &other
	if err := c.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	select {
	case <-a.Lost():
	case <-time.After(3 * RenewInterval):
		t.Fatal("the holder kept its lease after another actor wrote the record")
	}
	if err := a.Check(); !errors.Is(err, ErrLeaseLost) || !strings.Contains(err.Error(), "actor-b") {
		t.Errorf("check after the takeover: %v", err)
	}
	if lctx.Err() == nil {
		t.Error("the lease's context was not cancelled")
	}
	if err := c.Get(ctx, key, l); err != nil || holderOf(l) != "actor-b" {
		t.Errorf("the record names %q after the old holder's renewals (%v), want actor-b", holderOf(l), err)
	}
}

// TestLeaseReleasedHandedToWaiter: a waiter with TakeReleased (the supervisor's failover) takes
// a lease its live holder releases while it watches (a converge giving way), so no other actor
// can slip in between; a waiter without it is refused on the same release, and a holder that
// only renews is refused to both.
func TestLeaseReleasedHandedToWaiter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var gets atomic.Int64
	c := clustertest.WrappedClient(t, env, func(r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/leases/lease-handed-mysqlctl") {
			gets.Add(1)
		}
	})
	cluster := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "lease-handed", Namespace: "default"}}
	_, a, err := AcquireLease(ctx, c, cluster, "actor-a", LeaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = AcquireLease(ctx, c, cluster, "actor-b", LeaseOptions{Wait: true, TakeReleased: true})
	if !errors.Is(err, outcome.ErrHeld) || !strings.Contains(err.Error(), "renewing") {
		t.Fatalf("a waiter beside a holder that renews: %v", err)
	}
	type acquired struct {
		l   *Lease
		err error
	}
	taker, plain := make(chan acquired, 1), make(chan acquired, 1)
	before := gets.Load()
	go func() {
		_, l, err := AcquireLease(ctx, c, cluster, "actor-b", LeaseOptions{Wait: true, TakeReleased: true})
		taker <- acquired{l, err}
	}()
	go func() {
		_, l, err := AcquireLease(ctx, c, cluster, "actor-c", LeaseOptions{Wait: true})
		plain <- acquired{l, err}
	}()
	for gets.Load()-before < 2 { // both are watching the record (each read it once)
		time.Sleep(10 * time.Millisecond)
	}
	epochA := a.Epoch
	a.Release(ctx)
	var b acquired
	select {
	case b = <-taker:
	case <-time.After(2 * RenewInterval):
		t.Fatal("the waiter did not take the released lease")
	}
	if b.err != nil {
		t.Fatalf("the waiter taking the released lease: %v", b.err)
	}
	defer b.l.Release(ctx)
	if b.l.Epoch <= epochA {
		t.Errorf("epoch %d after the hand-over, want more than %d", b.l.Epoch, epochA)
	}
	if p := <-plain; p.err == nil {
		p.l.Release(ctx)
		t.Error("a waiter without TakeReleased also acquired the lease")
	} else if !errors.Is(p.err, outcome.ErrHeld) {
		t.Errorf("a waiter without TakeReleased: %v, want ErrHeld", p.err)
	}
}

// TestLeaseFencesServersAndEndsWhenSuperseded: under a real Lease, the instances a Runner opens
// carry the Lease's fencing token (its transition count plus one, so the first holder, count 0,
// is fenced too), and a server's refusal of an older epoch (topology.ErrSuperseded) ends the
// lease at once: every later mutation and status write is refused as a lost lease (ErrHeld),
// and the stage engine reports it as ErrLeaseLost. Without a Lease, instances stay unfenced.
func TestLeaseFencesServersAndEndsWhenSuperseded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, _ := clustertest.CountingClient(t, env)
	cluster := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "superseded", Namespace: "default"}}
	_, l, err := AcquireLease(ctx, c, cluster, "actor-a", LeaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release(ctx)
	open := func(context.Context, *corev1.Pod, topology.Credentials) (*topology.Instance, error) {
		return topology.NewInstance("superseded-0", nil), nil
	}
	plain, err := (&Runner{Connect: open}).ConnectGuarded(ctx, &corev1.Pod{}, topology.Credentials{})
	if err != nil || plain.Epoch != nil {
		t.Fatalf("without a Lease: %v, epoch set %v", err, plain.Epoch != nil)
	}
	r := &Runner{Connect: open, Lease: l, Epoch: l.Epoch}
	in, err := r.ConnectGuarded(ctx, &corev1.Pod{}, topology.Credentials{})
	if err != nil {
		t.Fatal(err)
	}
	if in.Epoch == nil || in.Epoch() != int64(l.Epoch)+1 || in.Superseded == nil {
		t.Fatalf("fencing token not set from the Lease (epoch %d)", l.Epoch)
	}
	if _, err := r.guard("fence"); err != nil {
		t.Fatalf("a valid lease refused: %v", err)
	}
	in.Superseded(fmt.Errorf("superseded-0: %w", topology.ErrSuperseded))
	_, err = r.guard("fence")
	if !errors.Is(err, ErrLeaseLost) || !errors.Is(err, topology.ErrSuperseded) || !errors.Is(err, outcome.ErrHeld) {
		t.Fatalf("after a server refused the epoch, the guard says %v", err)
	}
}

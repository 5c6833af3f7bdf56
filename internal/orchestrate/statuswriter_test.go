package orchestrate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/testenv/clustertest"
)

// TestUpdateStatusUnderContention: concurrent writers each append one history record; the
// compare-and-swap with retry loses none of them, and a no-op change writes nothing.
func TestUpdateStatusUnderContention(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, writes := clustertest.CountingClient(t, env)
	cluster := &v1.MysqlCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "status-cas", Namespace: "default"},
		Spec:       v1.MysqlClusterSpec{Image: "mariadb:10.11"},
	}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := cluster.DeepCopy()
			errs <- UpdateStatus(ctx, c, own, func(s *v1.MysqlClusterStatus) error {
				now := metav1.Now()
				s.History = append(s.History, v1.OperationRecord{ID: fmt.Sprint(i), Type: "test", Result: "Succeeded", StartedAt: now, FinishedAt: now})
				return nil
			})
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	final := cluster.DeepCopy()
	if err := UpdateStatus(ctx, c, final, func(*v1.MysqlClusterStatus) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if len(final.Status.History) != writers {
		t.Fatalf("%d history records survived, want %d: lost updates", len(final.Status.History), writers)
	}
	writes.Store(0)
	if err := UpdateStatus(ctx, c, final, func(s *v1.MysqlClusterStatus) error { s.History = s.History[:writers]; return nil }); err != nil {
		t.Fatal(err)
	}
	if n := writes.Load(); n != 0 {
		t.Errorf("no-op change sent %d writes", n)
	}
	// An aborting change writes nothing and returns its error.
	want := fmt.Errorf("precondition gone")
	if err := UpdateStatus(ctx, c, final, func(s *v1.MysqlClusterStatus) error { s.Phase = v1.PhaseDegraded; return want }); !errors.Is(err, want) {
		t.Errorf("abort: %v", err)
	}
	if n := writes.Load(); n != 0 {
		t.Errorf("aborted change sent %d writes", n)
	}
}

// TestUpdateStatusFromHeldCopy: a write from the copy in hand sends no read when nobody wrote
// since, and a copy gone stale (someone else wrote meanwhile) neither loses that write nor lets
// a paused actor record a stage of an operation another actor has adopted since.
func TestUpdateStatusFromHeldCopy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var gets, writes atomic.Int64
	c := clustertest.WrappedClient(t, env, func(r *http.Request) {
		if !strings.Contains(r.URL.Path, "/mysqlclusters/status-held") {
			return
		}
		if r.Method == http.MethodGet {
			gets.Add(1)
		} else {
			writes.Add(1)
		}
	})
	cluster := &v1.MysqlCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "status-held", Namespace: "default"},
		Spec:       v1.MysqlClusterSpec{Image: "mariadb:10.11"},
	}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	record := func(id string) StatusChange {
		return func(s *v1.MysqlClusterStatus) error {
			now := metav1.Now()
			s.History = append(s.History, v1.OperationRecord{ID: id, Type: "test", Result: "Succeeded", StartedAt: now, FinishedAt: now})
			return nil
		}
	}

	// Nobody wrote since: one write, no read, and the copy in hand is the written object.
	gets.Store(0)
	if err := UpdateStatusFrom(ctx, c, cluster, record("a")); err != nil {
		t.Fatal(err)
	}
	if g, w := gets.Load(), writes.Load(); g != 0 || w != 1 {
		t.Errorf("a write from a current copy sent %d reads and %d writes, want 0 and 1", g, w)
	}
	if len(cluster.Status.History) != 1 {
		t.Fatalf("the copy in hand was not updated to the written object: %+v", cluster.Status.History)
	}

	// Someone else writes; the copy in hand is now stale. Its write conflicts and is re-applied
	// to the live object: both records survive.
	other := cluster.DeepCopy()
	if err := UpdateStatus(ctx, c, other, record("b")); err != nil {
		t.Fatal(err)
	}
	if err := UpdateStatusFrom(ctx, c, cluster, record("c")); err != nil {
		t.Fatal(err)
	}
	live := &v1.MysqlCluster{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), live); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, h := range live.Status.History {
		ids = append(ids, h.ID)
	}
	if strings.Join(ids, ",") != "a,b,c" {
		t.Errorf("history %v after a write from a stale copy, want a,b,c (no lost update)", ids)
	}

	// A paused actor: it holds a copy naming itself as the operation's holder; meanwhile
	// another actor adopts the operation. Its stage record, written from its stale copy, is
	// refused, and the record still names the adopter.
	now := metav1.Now()
	if err := UpdateStatus(ctx, c, cluster, func(s *v1.MysqlClusterStatus) error {
		s.Operation = &v1.OperationStatus{ID: "failover-1", Type: OperationFailover, Stage: StageFencing, Holder: "paused", Epoch: 1, StartedAt: now}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	paused := cluster.DeepCopy()
	if err := UpdateStatus(ctx, c, cluster, func(s *v1.MysqlClusterStatus) error {
		s.Operation.Holder, s.Operation.Epoch = "adopter", 2
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Kube: c, Holder: "paused", Epoch: 1}
	err := r.persistWith(ctx, UpdateStatusFrom, paused, paused.Status.Operation.DeepCopy(), StageElecting, nil)
	if !errors.Is(err, ErrLostRace) {
		t.Errorf("a stale actor's stage record: %v, want errLostRace", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), live); err != nil {
		t.Fatal(err)
	}
	if op := live.Status.Operation; op.Holder != "adopter" || op.Epoch != 2 || op.Stage != StageFencing {
		t.Errorf("after the stale actor's attempt the operation is %s/%d at %s, want adopter/2 at %s", op.Holder, op.Epoch, op.Stage, StageFencing)
	}

	// A change that refuses the stale copy is asked again about the live object.
	stale := live.DeepCopy()
	stale.Status.Operation = nil
	stale.ResourceVersion = paused.ResourceVersion
	if err := UpdateStatusFrom(ctx, c, stale, func(s *v1.MysqlClusterStatus) error {
		if s.Operation == nil {
			return ErrLostRace
		}
		s.Operation.Message = "seen live"
		return nil
	}); err != nil {
		t.Fatalf("a change refusing only the stale copy: %v", err)
	}
	if stale.Status.Operation == nil || stale.Status.Operation.Message != "seen live" {
		t.Errorf("the change was not applied to the live object: %+v", stale.Status.Operation)
	}
}

// TestStepRecordsFromWhatItRead: the stage engine writes a stage's record from the cluster as
// it was read, never from what the stage changed in its copy in memory, and hands the written
// object to the next load without a read.
func TestStepRecordsFromWhatItRead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var gets atomic.Int64
	c := clustertest.WrappedClient(t, env, func(r *http.Request) {
		if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/mysqlclusters/step-read") {
			gets.Add(1)
		}
	})
	cluster := &v1.MysqlCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "step-read", Namespace: "default"},
		Spec:       v1.MysqlClusterSpec{Image: "mariadb:10.11"},
	}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	if err := UpdateStatus(ctx, c, cluster, func(s *v1.MysqlClusterStatus) error {
		s.CurrentPrimary = "step-read-0"
		s.Operation = &v1.OperationStatus{ID: "failover-1", Type: OperationFailover, Stage: StageElecting, Holder: "me", Epoch: 3, StartedAt: now}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r := &Runner{Kube: c, Holder: "me", Epoch: 3}
	key := client.ObjectKeyFromObject(cluster)
	loaded, err := r.load(ctx, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	gets.Store(0)
	last := ""
	next, advanced, err := r.step(ctx, key, loaded, loaded.Status.Operation, &last, func() (string, func(*v1.MysqlClusterStatus), error) {
		loaded.Status.CurrentPrimary = "changed-in-memory" // a stage's scratch change, not its record
		return StageWaitingForRelayLog, func(s *v1.MysqlClusterStatus) { evidenceOf(s).Candidate = "step-read-1" }, nil
	})
	if err != nil || !advanced || next != StageWaitingForRelayLog {
		t.Fatalf("step: %q %v %v", next, advanced, err)
	}
	if n := gets.Load(); n != 0 {
		t.Errorf("recording the stage read the cluster %d times, want none", n)
	}
	again, err := r.load(ctx, key, loaded)
	if err != nil {
		t.Fatal(err)
	}
	if n := gets.Load(); n != 0 {
		t.Errorf("the load after a recorded stage read the cluster %d times, want none", n)
	}
	live := &v1.MysqlCluster{}
	if err := c.Get(ctx, key, live); err != nil {
		t.Fatal(err)
	}
	for what, got := range map[string]*v1.MysqlCluster{"live": live, "loaded": again} {
		if got.Status.CurrentPrimary != "step-read-0" {
			t.Errorf("%s: currentPrimary %q: the stage's change in memory was written", what, got.Status.CurrentPrimary)
		}
		if op := got.Status.Operation; op == nil || op.Stage != StageWaitingForRelayLog || op.Evidence == nil || op.Evidence.Candidate != "step-read-1" {
			t.Errorf("%s: operation %+v, want stage %s with the candidate recorded", what, op, StageWaitingForRelayLog)
		}
	}
	if again.ResourceVersion != live.ResourceVersion {
		t.Errorf("the object handed to the next load is at resourceVersion %s, the API server's at %s", again.ResourceVersion, live.ResourceVersion)
	}
	// Nothing held, or an actor whose lease is no longer valid: the load reads.
	gets.Store(0)
	if _, err := r.load(ctx, key, nil); err != nil {
		t.Fatal(err)
	}
	r.Lease = expiredLease{}
	if _, err := r.load(ctx, key, again); err != nil {
		t.Fatal(err)
	}
	if n := gets.Load(); n != 2 {
		t.Errorf("loads without a copy in hand or without a valid lease read %d times, want 2", n)
	}
}

// TestSideworkWritesEventsBeforeTheOperationReturns: an operation's Events go out off its
// critical path but in the order they were raised, and all of them are stored by the time the
// operation (here: the sidework's end) returns; without a sidework they are written at once.
func TestSideworkWritesEventsBeforeTheOperationReturns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Event writes wait at this gate while it is closed: the API server "does not answer".
	gate := make(chan struct{})
	var gated atomic.Bool
	c := clustertest.WrappedClient(t, env, func(r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/events") && gated.Load() {
			<-gate
		}
	})
	cluster := &v1.MysqlCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "side-events", Namespace: "default"},
		Spec:       v1.MysqlClusterSpec{Image: "mariadb:10.11"},
	}
	if err := c.Create(ctx, cluster); err != nil {
		t.Fatal(err)
	}
	events := func() []corev1.Event {
		list := &corev1.EventList{}
		if err := c.List(ctx, list, client.InNamespace("default")); err != nil {
			t.Fatal(err)
		}
		var out []corev1.Event
		for _, e := range list.Items {
			if e.InvolvedObject.Name == cluster.Name {
				out = append(out, e)
			}
		}
		return out
	}
	r := &Runner{Kube: c, Holder: "me"}
	r.Event(ctx, cluster, false, "Direct", "written at once")
	if n := len(events()); n != 1 {
		t.Fatalf("%d Events after a direct event, want 1", n)
	}

	const n = 25
	end := r.withSidework()
	if r.withSidework()(); r.background == nil {
		t.Fatal("a nested withSidework ended the operation's sidework")
	}
	gated.Store(true)
	raised := make(chan struct{})
	go func() {
		defer close(raised)
		for i := range n {
			r.Event(ctx, cluster, false, "Queued", fmt.Sprint(i)) // returns with its write unanswered
		}
	}()
	select {
	case <-raised:
	case <-time.After(30 * time.Second):
		close(gate)
		t.Fatal("raising Events waited for the API server to answer them")
	}
	if got := len(events()); got != 1 {
		t.Fatalf("%d Events stored while the API server held every Event write, want the 1 direct one", got)
	}
	close(gate)
	end()
	if r.background != nil {
		t.Error("the sidework is still set after its end")
	}
	// Work asked of a stopped sidework (a late caller) runs at once, never on a closed queue.
	stopped := StartSidework()
	stopped.Stop()
	ran := false
	stopped.Do(ctx, func(context.Context) { ran = true })
	if !ran {
		t.Error("work asked of a stopped sidework did not run")
	}
	var order []string
	var revs []int
	for _, e := range events() {
		if e.Reason != "Queued" {
			continue
		}
		rv := 0
		_, _ = fmt.Sscan(e.ResourceVersion, &rv)
		order, revs = append(order, e.Message), append(revs, rv)
	}
	if len(order) != n {
		t.Fatalf("%d queued Events stored when the sidework ended, want %d", len(order), n)
	}
	// Stored in the order raised: the resourceVersions (etcd revisions) grow with the messages.
	byRev := map[int]string{}
	for i, rv := range revs {
		byRev[rv] = order[i]
	}
	keys := append([]int(nil), revs...)
	slices.Sort(keys)
	for i, rv := range keys {
		if byRev[rv] != fmt.Sprint(i) {
			t.Fatalf("Event %q stored as the %dth: Events left the sidework out of order", byRev[rv], i)
		}
	}
}

// expiredLease is a lease whose validity has run out.
type expiredLease struct{}

func (expiredLease) Check() error          { return ErrLeaseLost }
func (expiredLease) ValidUntil() time.Time { return time.Time{} }

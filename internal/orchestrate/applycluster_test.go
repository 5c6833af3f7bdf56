package orchestrate

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
	"github.com/mysqlctl/mysqlctl/internal/testenv/clustertest"
)

// applySnap builds an ApplySnapshot of cluster "demo": 3 replicas before and after, primary
// demo-0, no operation, every derived object unchanged. Options change one thing each.
func applySnap(opts ...func(*ApplySnapshot)) ApplySnapshot {
	s := ApplySnapshot{
		Cluster: "demo", Exists: true, Replicas: 3, PreviousReplicas: 3, CurrentPrimary: "demo-0",
		Objects: []AppliedObject{
			{Kind: "ConfigMap", Name: "demo-config", Result: Unchanged},
			{Kind: "Service", Name: "demo-instances", Result: Unchanged},
			{Kind: "PodDisruptionBudget", Name: "demo", Result: Unchanged},
			{Kind: "StatefulSet", Name: "demo", Result: Unchanged},
		},
	}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func primary(p string) func(*ApplySnapshot) { return func(s *ApplySnapshot) { s.CurrentPrimary = p } }

// replicas changes spec.replicas and, with it, the StatefulSet.
func replicas(n int32) func(*ApplySnapshot) {
	return func(s *ApplySnapshot) {
		s.Replicas, s.SpecChanged = n, true
		changed("StatefulSet")(s)
	}
}

func changed(kind string) func(*ApplySnapshot) {
	return func(s *ApplySnapshot) {
		for i := range s.Objects {
			if s.Objects[i].Kind == kind {
				s.Objects[i].Result = Configured
			}
		}
	}
}

func specOnly(s *ApplySnapshot) { s.SpecChanged = true }

func secretMissing(s *ApplySnapshot) {
	s.Objects = append([]AppliedObject{{Kind: "Secret", Name: "demo-credentials", Result: Created}}, s.Objects...)
}

func operation(s *ApplySnapshot) {
	s.Operation = &v1.OperationStatus{ID: "switchover-7f3a", Type: OperationSwitchover, Stage: StageFencing, Holder: "mysqlctl@ws/4242"}
}

func TestDecideApply(t *testing.T) {
	for name, tc := range map[string]struct {
		snap ApplySnapshot
		// want: the changes allowed; wantErr: the refusal (and words its message must hold).
		want         []string
		writeDerived bool
		wantErr      error
		wantWords    []string
	}{
		"nothing changes":                         {snap: applySnap()},
		"nothing changes while an operation runs": {snap: applySnap(operation)},
		"only the status-derived PDB differs while an operation runs": {
			snap: applySnap(operation, changed("PodDisruptionBudget")),
		},
		"new cluster": {
			snap: applySnap(func(s *ApplySnapshot) {
				s.Exists, s.PreviousReplicas, s.CurrentPrimary = false, 0, ""
				for i := range s.Objects {
					s.Objects[i].Result = Created
				}
			}, secretMissing),
			want:         []string{"mysqlcluster/demo", "secret/demo-credentials", "configmap/demo-config", "service/demo-instances", "poddisruptionbudget/demo", "statefulset/demo"},
			writeDerived: true,
		},
		"more replicas": {
			snap: applySnap(replicas(5)), want: []string{"mysqlcluster/demo", "statefulset/demo"}, writeDerived: true,
		},
		"fewer replicas, primary stays": {
			snap: applySnap(primary("demo-1"), replicas(2)), want: []string{"mysqlcluster/demo", "statefulset/demo"}, writeDerived: true,
		},
		"fewer replicas remove the primary": {
			snap: applySnap(primary("demo-2"), replicas(2)), wantErr: outcome.ErrUnsafe,
			wantWords: []string{"spec.replicas 2 would remove pod demo-2, the current primary", "nothing was changed", "'mysqlctl switchover demo --to demo-0', then apply again"},
		},
		"fewer replicas far below the primary": {
			snap: applySnap(primary("demo-2"), replicas(1)), wantErr: outcome.ErrUnsafe,
			wantWords: []string{"spec.replicas 1 would remove pod demo-2"},
		},
		"StatefulSet out of step with an unchanged spec that excludes the primary": {
			snap:    applySnap(primary("demo-1"), changed("StatefulSet"), func(s *ApplySnapshot) { s.Replicas, s.PreviousReplicas = 1, 1 }),
			wantErr: outcome.ErrUnsafe,
		},
		"spec alone lowers replicas below the primary": {
			snap:    applySnap(primary("demo-2"), func(s *ApplySnapshot) { s.Replicas, s.SpecChanged = 2, true }),
			wantErr: outcome.ErrUnsafe,
		},
		"no primary recorded yet": {
			snap: applySnap(primary(""), replicas(1)), want: []string{"mysqlcluster/demo", "statefulset/demo"}, writeDerived: true,
		},
		"a configuration change keeps the primary": {
			snap: applySnap(primary("demo-2"), specOnly, changed("ConfigMap"), changed("StatefulSet")),
			want: []string{"mysqlcluster/demo", "configmap/demo-config", "statefulset/demo"}, writeDerived: true,
		},
		"StatefulSet change during an operation": {
			snap: applySnap(operation, replicas(5)), wantErr: outcome.ErrHeld,
			wantWords: []string{"switchover switchover-7f3a is in progress on cluster demo (stage Fencing, holder mysqlctl@ws/4242)", "would change statefulset/demo", "nothing was changed", "'resume demo'", "'abort demo'"},
		},
		"a missing Secret during an operation": {
			snap: applySnap(operation, secretMissing), wantErr: outcome.ErrHeld, wantWords: []string{"would change secret/demo-credentials"},
		},
		"removing the primary during an operation names the operation first": {
			snap: applySnap(operation, primary("demo-2"), replicas(2)), wantErr: outcome.ErrHeld,
		},
		"a spec-only change during an operation leaves the derived objects to it": {
			snap: applySnap(operation, specOnly, changed("PodDisruptionBudget")), want: []string{"mysqlcluster/demo"}, writeDerived: false,
		},
		"only the PDB differs without an operation": {
			snap: applySnap(changed("PodDisruptionBudget")), want: []string{"poddisruptionbudget/demo"}, writeDerived: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			before := tc.snap
			before.Objects = slices.Clone(tc.snap.Objects)
			d, err := DecideApply(tc.snap)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
				for _, w := range tc.wantWords {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("message lacks %q:\n%s", w, err)
					}
				}
				if d.Write() {
					t.Errorf("a refusal allows writing %v", d.Changes)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(d.Changes, tc.want) || d.Write() && d.WriteDerived != tc.writeDerived {
				t.Errorf("decision %+v, want changes %v, writeDerived %v", d, tc.want, tc.writeDerived)
			}
			if !slices.Equal(before.Objects, tc.snap.Objects) {
				t.Errorf("DecideApply modified its input")
			}
		})
	}
}

// request is one API request as a test saw it.
type request struct {
	method, path string
	dryRun       bool
}

// requestLog records the requests of a client.
type requestLog struct {
	mu   sync.Mutex
	reqs []request
}

func (l *requestLog) reset() { l.mu.Lock(); l.reqs = nil; l.mu.Unlock() }

// writes returns the requests that change stored state: neither reads nor dry runs (a dry run
// is validated and discarded by the API server).
func (l *requestLog) writes() []request {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []request
	for _, r := range l.reqs {
		if r.method != http.MethodGet && r.method != http.MethodHead && !r.dryRun {
			out = append(out, r)
		}
	}
	return out
}

// dryRuns counts the dry-run requests.
func (l *requestLog) dryRuns() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.reqs {
		if r.dryRun {
			n++
		}
	}
	return n
}

// recordingClient returns a client whose every request is recorded (method, path, dry run).
func recordingClient(t *testing.T) (client.Client, *requestLog) {
	t.Helper()
	log := &requestLog{}
	c := clustertest.WrappedClient(t, env, func(r *http.Request) {
		log.mu.Lock()
		log.reqs = append(log.reqs, request{method: r.Method, path: r.URL.Path, dryRun: r.URL.Query().Get("dryRun") == metav1.DryRunAll})
		log.mu.Unlock()
	})
	return c, log
}

// guardCluster is the definition the apply tests start from: 3 replicas.
func guardCluster(name string, replicas int32) *v1.MysqlCluster {
	c := &v1.MysqlCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1.GroupVersion.String(), Kind: "MysqlCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       v1.MysqlClusterSpec{Image: "mariadb:10.11", Replicas: replicas},
	}
	c.Default()
	return c
}

// createGuarded applies a new 3-replica cluster and records status as a running cluster's
// (through a separate client: the test's own writes are not the apply's).
func createGuarded(t *testing.T, ctx context.Context, c client.Client, name string, status func(*v1.MysqlClusterStatus)) {
	t.Helper()
	if _, err := ApplyCluster(ctx, c, guardCluster(name, 3), "test-setup"); err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}})
	})
	if status == nil {
		return
	}
	cl := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
	if err := UpdateStatus(ctx, c, cl, func(s *v1.MysqlClusterStatus) error { status(s); return nil }); err != nil {
		t.Fatalf("status of %s: %v", name, err)
	}
}

// assertUntouched checks that the stored spec and StatefulSet still say 3 replicas.
func assertUntouched(t *testing.T, ctx context.Context, c client.Client, name string) {
	t.Helper()
	cl := &v1.MysqlCluster{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, cl); err != nil {
		t.Fatal(err)
	}
	if cl.Spec.Replicas != 3 {
		t.Errorf("MysqlCluster spec.replicas is %d after a refusal, want 3", cl.Spec.Replicas)
	}
	sts := &appsv1.StatefulSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, sts); err != nil {
		t.Fatal(err)
	}
	if *sts.Spec.Replicas != 3 {
		t.Errorf("StatefulSet replicas %d after a refusal, want 3", *sts.Spec.Replicas)
	}
}

// TestApplyClusterRefusedWhileOperationRecorded: with a switchover recorded in status, an apply
// that would scale is refused with outcome.ErrHeld naming the operation and what to run, and
// writes nothing; the same definition as stored applies with no write at all.
func TestApplyClusterRefusedWhileOperationRecorded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, log := recordingClient(t)
	createGuarded(t, ctx, c, "guard-op", func(s *v1.MysqlClusterStatus) {
		s.Phase, s.CurrentPrimary = v1.PhaseSwitchingOver, "guard-op-0"
		s.Operation = &v1.OperationStatus{ID: "switchover-1", Type: OperationSwitchover, Stage: StageWaitingForCandidate,
			Holder: "mysqlctl@elsewhere/1", Epoch: 3, StartedAt: metav1.Now()}
	})

	log.reset()
	res, err := ApplyCluster(ctx, c, guardCluster("guard-op", 5), "test-apply")
	if !errors.Is(err, outcome.ErrHeld) {
		t.Fatalf("scale during a switchover: %v, want outcome.ErrHeld", err)
	}
	for _, w := range []string{"switchover switchover-1 is in progress on cluster guard-op", "statefulset/guard-op", "'resume guard-op'", "'abort guard-op'"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("message lacks %q: %s", w, err)
		}
	}
	if res.Cluster != "" || len(res.Derived) != 0 {
		t.Errorf("a refusal reports writes: %+v", res)
	}
	if w := log.writes(); len(w) != 0 {
		t.Errorf("a refused apply sent %d writes: %v", len(w), w)
	}
	assertUntouched(t, ctx, c, "guard-op")

	log.reset()
	res, err = ApplyCluster(ctx, c, guardCluster("guard-op", 3), "test-apply")
	if err != nil || res.Cluster != Unchanged || len(res.Derived) != 0 {
		t.Fatalf("unchanged apply during a switchover: %+v, %v", res, err)
	}
	if w := log.writes(); len(w) != 0 {
		t.Errorf("an unchanged apply sent %d writes: %v", len(w), w)
	}
	if n := log.dryRuns(); n != 1 {
		t.Errorf("%d dry runs, want the one of the MysqlCluster", n)
	}
}

// TestApplyClusterRefusesRemovingThePrimary: with the primary at ordinal 2, lowering replicas
// to 2 is refused with outcome.ErrUnsafe before any write (the MysqlCluster spec included),
// naming the switchover that makes it safe; after that switchover the same apply goes through.
func TestApplyClusterRefusesRemovingThePrimary(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, log := recordingClient(t)
	createGuarded(t, ctx, c, "guard-primary", func(s *v1.MysqlClusterStatus) {
		s.Phase, s.CurrentPrimary = v1.PhaseRunning, "guard-primary-2"
	})

	log.reset()
	res, err := ApplyCluster(ctx, c, guardCluster("guard-primary", 2), "test-apply")
	if !errors.Is(err, outcome.ErrUnsafe) {
		t.Fatalf("removing the primary: %v, want outcome.ErrUnsafe", err)
	}
	for _, w := range []string{"would remove pod guard-primary-2, the current primary", "'mysqlctl switchover guard-primary --to guard-primary-0', then apply again"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("message lacks %q: %s", w, err)
		}
	}
	if res.Cluster != "" {
		t.Errorf("a refusal reports writes: %+v", res)
	}
	if w := log.writes(); len(w) != 0 {
		t.Errorf("a refused apply sent %d writes: %v", len(w), w)
	}
	assertUntouched(t, ctx, c, "guard-primary")

	// Once the primary has moved below the new count, the same definition applies.
	cl := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "guard-primary", Namespace: "default"}}
	if err := UpdateStatus(ctx, c, cl, func(s *v1.MysqlClusterStatus) error { s.CurrentPrimary = "guard-primary-0"; return nil }); err != nil {
		t.Fatal(err)
	}
	res, err = ApplyCluster(ctx, c, guardCluster("guard-primary", 2), "test-apply")
	if err != nil || res.Cluster != Configured {
		t.Fatalf("after the switchover: %+v, %v", res, err)
	}
}

// TestApplyClusterRefusedWhileLeaseHeld: while another actor holds the cluster's lease, a
// changing apply is refused at once with outcome.ErrHeld naming that actor and writes nothing
// (the other actor's lease included); an unchanged apply still succeeds without a write.
func TestApplyClusterRefusedWhileLeaseHeld(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, log := recordingClient(t)
	createGuarded(t, ctx, c, "guard-lease", func(s *v1.MysqlClusterStatus) {
		s.Phase, s.CurrentPrimary = v1.PhaseRunning, "guard-lease-0"
	})
	other, _ := clustertest.CountingClient(t, env)
	_, held, err := AcquireLease(ctx, other, guardCluster("guard-lease", 3), "actor-elsewhere", LeaseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release(ctx)

	log.reset()
	start := time.Now()
	res, err := ApplyCluster(ctx, c, guardCluster("guard-lease", 4), "test-apply")
	if !errors.Is(err, outcome.ErrHeld) || !strings.Contains(err.Error(), "actor-elsewhere holds cluster guard-lease") ||
		!strings.Contains(err.Error(), "would change mysqlcluster/guard-lease, statefulset/guard-lease") {
		t.Fatalf("apply while another actor holds the lease: %v", err)
	}
	if waited := time.Since(start); waited > RenewInterval {
		t.Errorf("the apply waited %s for a live holder instead of being refused at once", waited)
	}
	if res.Cluster != "" {
		t.Errorf("a refusal reports writes: %+v", res)
	}
	if w := log.writes(); len(w) != 0 {
		t.Errorf("a refused apply sent %d writes: %v", len(w), w)
	}
	assertUntouched(t, ctx, c, "guard-lease")
	if err := held.Check(); err != nil {
		t.Errorf("the holder's lease was disturbed: %v", err)
	}

	log.reset()
	if res, err := ApplyCluster(ctx, c, guardCluster("guard-lease", 3), "test-apply"); err != nil || res.Cluster != Unchanged {
		t.Fatalf("unchanged apply while the lease is held: %+v, %v", res, err)
	}
	if w := log.writes(); len(w) != 0 {
		t.Errorf("an unchanged apply sent %d writes: %v", len(w), w)
	}
}

// TestApplyClusterWritesUnderTheLease: a permitted change takes the cluster's lease before its
// first write and releases it after its last: the lease is the first and the last object
// written, and afterwards it names no holder.
func TestApplyClusterWritesUnderTheLease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, log := recordingClient(t)
	log.reset()
	res, err := ApplyCluster(ctx, c, guardCluster("guard-ok", 3), "test-apply")
	if err != nil || res.Cluster != Created || !res.SecretCreated || len(res.Derived) != 6 {
		t.Fatalf("create: %+v, %v", res, err)
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "guard-ok", Namespace: "default"}})
	})
	assertLeased(t, ctx, c, log, "guard-ok", "mysqlclusters", "secrets", "statefulsets")

	cl := &v1.MysqlCluster{ObjectMeta: metav1.ObjectMeta{Name: "guard-ok", Namespace: "default"}}
	if err := UpdateStatus(ctx, c, cl, func(s *v1.MysqlClusterStatus) error {
		s.Phase, s.CurrentPrimary = v1.PhaseRunning, "guard-ok-0"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	log.reset()
	res, err = ApplyCluster(ctx, c, guardCluster("guard-ok", 2), "test-apply")
	if err != nil || res.Cluster != Configured {
		t.Fatalf("scale down keeping the primary: %+v, %v", res, err)
	}
	// A bootstrapped cluster's StatefulSet keeps its count: the scale the apply starts next
	// moves it, one instance at a time (detaching each removed one first).
	assertLeased(t, ctx, c, log, "guard-ok", "mysqlclusters")
	sts := &appsv1.StatefulSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "guard-ok"}, sts); err != nil {
		t.Fatal(err)
	}
	if *sts.Spec.Replicas != 3 {
		t.Errorf("StatefulSet replicas %d, want 3 (kept for the scale)", *sts.Spec.Replicas)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(cl), cl); err != nil {
		t.Fatal(err)
	}
	if pending, err := ScalePending(ctx, c, cl); err != nil || !pending {
		t.Errorf("ScalePending after an apply of a new count: %v, %v; want true", pending, err)
	}

	log.reset()
	if res, err := ApplyCluster(ctx, c, guardCluster("guard-ok", 2), "test-apply"); err != nil || res.Cluster != Unchanged || len(res.Derived) != 0 {
		t.Fatalf("second apply: %+v, %v", res, err)
	}
	if w := log.writes(); len(w) != 0 {
		t.Errorf("an unchanged apply sent %d writes (the lease included): %v", len(w), w)
	}
}

// assertLeased checks the recorded writes: the first and the last are to the cluster's Lease
// (taken, released), every resource named in between was written, and the Lease names no
// holder afterwards.
func assertLeased(t *testing.T, ctx context.Context, c client.Client, log *requestLog, name string, resources ...string) {
	t.Helper()
	w := log.writes()
	leasePath := "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	if len(w) < 3 || !strings.HasPrefix(w[0].path, leasePath) || !strings.HasPrefix(w[len(w)-1].path, leasePath) {
		t.Fatalf("writes not enclosed by taking and releasing the lease: %v", w)
	}
	for _, res := range resources {
		if !slices.ContainsFunc(w[1:len(w)-1], func(r request) bool {
			return strings.Contains(r.path, "/"+res+"/") || strings.HasSuffix(r.path, "/"+res)
		}) {
			t.Errorf("no write to %s under the lease: %v", res, w)
		}
	}
	lease := &coordinationv1.Lease{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name + "-mysqlctl"}, lease); err != nil {
		if apierrors.IsNotFound(err) {
			t.Fatalf("no Lease %s-mysqlctl was taken", name)
		}
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h == nil || *h != "" {
		t.Errorf("the Lease still names a holder after the apply: %v", h)
	}
	if lease.Spec.AcquireTime == nil {
		t.Errorf("the Lease was never acquired: %+v", lease.Spec)
	}
}

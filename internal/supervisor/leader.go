package supervisor

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
)

// LeaderElection is where `watch --leader-elect` elects its leader.
type LeaderElection struct {
	Namespace, Name, Identity string
	// SetLeader is told when this process starts and stops leading.
	SetLeader func(bool)
	Report    func(Transition)
}

// LeaderLeaseName is the default name of the leader Lease: one per scope of supervision, so
// that `watch --leader-elect demo` and `watch --leader-elect other` in one namespace do not
// elect one leader between them (and leave a cluster unsupervised). Cluster names hold no dots,
// so no cluster's own Lease can have this name.
func LeaderLeaseName(allNamespaces bool, ns, name, selector string) string {
	n := "mysqlctl.watch-leader"
	switch {
	case allNamespaces:
	case name != "":
		n += "." + ns + "." + name
	default:
		n += "." + ns
	}
	if selector != "" {
		sum := sha256.Sum256([]byte(selector))
		n += ".l-" + hex.EncodeToString(sum[:6])
	}
	return n
}

// Run supervises only while this process leads (client-go's leader election on a Lease) and
// stands by otherwise, until ctx ends or supervise returns by itself (the one cluster it was
// given was deleted). While standing by it runs standby, which prewatches the clusters' Leases
// so that a dead leader's clusters are taken over as soon as their Leases have gone unrenewed
// for a lease duration. Leadership is given up only after supervise returned (the stage in hand
// finished): the Lease is released then, explicitly, never while supervision still runs.
// Leading is an optimisation, not the safety: every cluster is still supervised only under its
// own Lease NAME-watch, and every action under the cluster's Lease.
func (l LeaderElection) Run(ctx context.Context, cfg *rest.Config, supervise, standby func(context.Context)) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: l.Namespace, Name: l.Name},
		Client:     cs.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: l.Identity},
	}
	for ctx.Err() == nil {
		done, err := l.term(ctx, lock, supervise, standby)
		if err != nil || done {
			return err
		}
	}
	return nil
}

// term stands by until this process leads, then supervises until leadership is lost or ctx
// ends. done is true when supervise returned by itself.
func (l LeaderElection) term(ctx context.Context, lock *resourcelock.LeaseLock, supervise, standby func(context.Context)) (done bool, err error) {
	// The elector runs on its own context, ended only once supervision has returned.
	elCtx, stopElector := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElector()
	supCtx, stopSupervising := context.WithCancel(ctx)
	defer stopSupervising()
	leading := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: orchestrate.LeaseDuration,
		RenewDeadline: orchestrate.LeaseDuration * 2 / 3,
		RetryPeriod:   2 * time.Second,
		Name:          l.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(leading) },
			// Renewing failed: supervision stops (its actions stay fenced by the clusters'
			// own Leases meanwhile).
			OnStoppedLeading: stopSupervising,
			OnNewLeader: func(id string) {
				if id != l.Identity && id != "" {
					l.Report(Transition{Time: time.Now(), Action: "standby", Reason: "the leader is " + id + ": standing by"})
				}
			},
		},
	})
	if err != nil {
		return false, err
	}
	elected := make(chan struct{})
	go func() { defer close(elected); le.Run(elCtx) }()
	standbyCtx, stopStandby := context.WithCancel(ctx)
	standbyDone := make(chan struct{})
	go func() { defer close(standbyDone); standby(standbyCtx) }()
	select {
	case <-leading:
		stopStandby()
		<-standbyDone
		l.SetLeader(true)
		l.Report(Transition{Time: time.Now(), Action: "leader", Reason: "leading (holding Lease " + l.Namespace + "/" + l.Name + "): supervising"})
		supervise(supCtx)
		done = supCtx.Err() == nil
		l.SetLeader(false)
		// Supervision has returned: only now is the leadership given up.
		stopElector()
		<-elected
		l.release(lock)
		if ctx.Err() == nil && !done {
			l.Report(Transition{Time: time.Now(), Action: "leader", Reason: "lost the leadership: standing by"})
		}
	case <-ctx.Done():
		stopStandby()
		<-standbyDone
	}
	return done, nil
}

// release gives the leader Lease up when this process still holds it, as client-go does on
// cancel: no holder, a one-second duration, so that a standby takes it at once.
func (l LeaderElection) release(lock *resourcelock.LeaseLock) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec, _, err := lock.Get(ctx)
	if err != nil || rec.HolderIdentity != l.Identity {
		return
	}
	now := metav1.NewTime(time.Now())
	_ = lock.Update(ctx, resourcelock.LeaderElectionRecord{
		LeaderTransitions:    rec.LeaderTransitions,
		LeaseDurationSeconds: 1,
		RenewTime:            now,
		AcquireTime:          now,
	})
}

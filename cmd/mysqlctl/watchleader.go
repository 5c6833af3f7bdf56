package main

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
)

// leaderElection is where `watch --leader-elect` elects its leader.
type leaderElection struct {
	Namespace, Name, Identity string
	// SetLeader is told when this process starts and stops leading.
	SetLeader func(bool)
	Report    func(orchestrate.Transition)
}

// run calls supervise only while this process leads (client-go's leader election on a Lease),
// and stands by otherwise, until ctx ends. Leadership lost ends supervise's context; the next
// term begins only after supervise has returned (the stage in hand finished), so one process
// never supervises twice. Leading is an optimisation, not the safety: every cluster is still
// supervised only under its own Lease NAME-watch, and every action under the cluster's Lease.
func (l leaderElection) run(ctx context.Context, cfg *rest.Config, supervise func(context.Context)) error {
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
		lctx, cancel := context.WithCancel(ctx)
		leading := make(chan struct{})
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   orchestrate.LeaseDuration,
			RenewDeadline:   orchestrate.LeaseDuration * 2 / 3,
			RetryPeriod:     2 * time.Second,
			ReleaseOnCancel: true,
			Name:            l.Name,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { close(leading) },
				// Renewing failed (or ctx ended): supervision stops.
				OnStoppedLeading: cancel,
				OnNewLeader: func(id string) {
					if id != l.Identity {
						l.Report(orchestrate.Transition{Time: time.Now(), Action: "standby", Reason: "the leader is " + id + ": standing by"})
					}
				},
			},
		})
		if err != nil {
			cancel()
			return err
		}
		elected := make(chan struct{})
		go func() { defer close(elected); le.Run(lctx) }()
		select {
		case <-leading:
			l.SetLeader(true)
			l.Report(orchestrate.Transition{Time: time.Now(), Action: "leader", Reason: "leading (holding Lease " + l.Namespace + "/" + l.Name + "): supervising"})
			supervise(lctx)
			l.SetLeader(false)
			if ctx.Err() == nil {
				l.Report(orchestrate.Transition{Time: time.Now(), Action: "leader", Reason: "lost the leadership: standing by"})
			}
		case <-elected:
		}
		// Released (ReleaseOnCancel) only after supervise returned: the next leader starts
		// after this one stopped, and this process never supervises twice.
		cancel()
		<-elected
	}
	return nil
}

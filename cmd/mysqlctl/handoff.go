package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/cmd/mysqlctl/internal/cmdutil"
	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/internal/outcome"
)

// followEvery is how often a handed-over request's progress is read.
const followEvery = 250 * time.Millisecond

// runOrHand runs fn under the cluster's Lease, unless a watch supervises the cluster: then the
// request is left for that watch, followed, and its recorded outcome returned. The message is
// what the supervisor recorded (empty when fn ran here).
func runOrHand(ctx context.Context, f *cmdutil.Factory, cluster *v1.MysqlCluster, dialer string, timeout time.Duration, wait bool, req v1.Request, fn func(context.Context, *orchestrate.Runner) error) (string, error) {
	msg, handed, err := handToWatch(ctx, f, cluster, req, timeout, wait)
	if handed {
		return msg, err
	}
	if err != nil {
		return "", err
	}
	if !wait {
		return "", noWatchToHandTo(f, cluster, req.Type)
	}
	return "", withRunner(ctx, f, cluster, dialer, timeout, fn)
}

// noWatchToHandTo is the refusal of --wait=false when no watch supervises the cluster (this
// process would have to carry the operation out itself, and so wait for it).
func noWatchToHandTo(f *cmdutil.Factory, cluster *v1.MysqlCluster, what string) error {
	return cmdutil.FlagErrorf("--wait=false hands the %s to the 'watch' that supervises %s, and none runs: leave --wait on, or start '%s watch %s' first",
		what, cluster.Name, f.DisplayName, cluster.Name)
}

// handToWatch leaves req for the watch that supervises the cluster and follows it to its
// outcome. handed is false when no watch supervises it (or the watch stopped before taking
// the request, which is then withdrawn): the caller runs it itself.
// With wait false it returns as soon as the watch has taken the request.
func handToWatch(ctx context.Context, f *cmdutil.Factory, cluster *v1.MysqlCluster, req v1.Request, timeout time.Duration, wait bool) (msg string, handed bool, err error) {
	c, err := f.Client()
	if err != nil {
		return "", false, err
	}
	sup, err := orchestrate.SupervisorOf(ctx, c, cluster)
	if err != nil || sup.Holder == "" || !sup.RenewedRecently {
		return "", false, err
	}
	key := client.ObjectKeyFromObject(cluster)
	deadline := metav1.NewTime(time.Now().Add(timeout))
	req.ID, req.By, req.At, req.Deadline = fmt.Sprintf("req-%d-%s", time.Now().Unix(), newNonce()), holderName(), metav1.Now(), &deadline
	if err := orchestrate.PostRequest(ctx, c, key, req); err != nil {
		return "", true, err
	}
	ios := f.IOStreams
	fmt.Fprintf(ios.ErrOut, "%s is supervised by the watch %s: request %s handed to it; following its progress\n", cluster.Name, sup.Holder, req.ID)
	fol := &follower{f: f, c: c, key: key, id: req.ID, start: time.Now(), sup: sup, supSeen: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		done, rs, err := fol.step(ctx)
		switch {
		case errors.Is(err, errWithdrawn) && !wait:
			return "", true, fmt.Errorf("%w: the watch stopped before it took request %s, which was withdrawn: nothing was done", outcome.ErrTimedOut, req.ID)
		case errors.Is(err, errWithdrawn):
			return "", false, nil
		case err != nil:
			return "", true, err
		case done:
			return rs.Message, true, orchestrate.RequestError(rs)
		case !wait && fol.accepted:
			return fmt.Sprintf("request %s taken by the watch %s, which carries it on: follow it with '%s status %s'", req.ID, sup.Holder, f.DisplayName, cluster.Name), true, nil
		}
		select {
		case <-ctx.Done():
			return "", true, fol.giveUp(timeout, ctx.Err())
		case <-time.After(followEvery):
		}
	}
}

// errWithdrawn means the request was withdrawn before any supervisor took it.
var errWithdrawn = errors.New("withdrawn")

// follower reads a handed-over request's progress.
type follower struct {
	f        *cmdutil.Factory
	c        client.Client
	key      client.ObjectKey
	id       string
	start    time.Time
	accepted bool
	stage    string
	sup      orchestrate.Supervision
	supSeen  time.Time // local time the supervisor Lease was last seen to change
}

// step reads the cluster once: done with the outcome, or progress printed. A supervisor that
// stops renewing its Lease before it took the request has the request withdrawn (errWithdrawn);
// one that stops after taking it ends the follow with what is recorded.
func (fo *follower) step(ctx context.Context) (bool, *v1.RequestStatus, error) {
	cl := &v1.MysqlCluster{}
	if err := fo.c.Get(ctx, fo.key, cl); err != nil {
		return false, nil, nil //nolint:nilerr // transient: the deadline bounds the follow
	}
	errOut := fo.f.IOStreams.ErrOut
	rs, pending := orchestrate.RequestOutcome(cl, fo.id)
	if rs != nil && !fo.accepted {
		fo.accepted = true
		fmt.Fprintf(errOut, "[%6.1fs] request %s taken by %s\n", time.Since(fo.start).Seconds(), fo.id, dash(rs.Holder))
	}
	if rs != nil && rs.State != v1.RequestAccepted {
		return true, rs, nil
	}
	if op := cl.Status.Operation; op != nil && op.ID+op.Stage != fo.stage {
		fo.stage = op.ID + op.Stage
		fmt.Fprintf(errOut, "[%6.1fs] %s %s\n", time.Since(fo.start).Seconds(), op.Type, op.Stage)
	}
	if rs == nil && !pending {
		if fo.accepted {
			return true, nil, fmt.Errorf("request %s was carried out by the watch, but its outcome is no longer recorded on %s (a later request replaced it): see 'mysqlctl status %s' and the cluster's Events", fo.id, fo.key.Name, fo.key.Name)
		}
		return true, nil, fmt.Errorf("request %s was removed from %s before a supervisor took it; nothing was done", fo.id, fo.key.Name)
	}
	sup, err := orchestrate.SupervisorOf(ctx, fo.c, cl)
	if err != nil {
		return false, nil, nil //nolint:nilerr // transient
	}
	if sup.Version != fo.sup.Version {
		fo.sup, fo.supSeen = sup, time.Now()
	}
	if sup.Holder != "" && time.Since(fo.supSeen) < orchestrate.LeaseDuration {
		return false, nil, nil
	}
	if fo.accepted {
		// Taken, and no supervisor renews its Lease any more: nobody carries it on now. A
		// request that began no operation is removed, so that no watch started later carries
		// it out after this command gave up on it.
		abandoned, _ := orchestrate.AbandonRequest(ctx, fo.c, fo.key, fo.id)
		where := "no operation of it is recorded"
		if op := cl.Status.Operation; op != nil && op.RequestID == fo.id {
			where = fmt.Sprintf("the %s %s it began is recorded at stage %s: a new watch, or 'mysqlctl resume %s', continues it", op.Type, op.ID, op.Stage, fo.key.Name)
		} else if abandoned {
			where = "it began no operation and was withdrawn: nothing was done"
		}
		return true, nil, fmt.Errorf("%w: the watch that took request %s stopped before answering it and no other watch supervises %s; %s",
			outcome.ErrTimedOut, fo.id, fo.key.Name, where)
	}
	// The watch stopped (its Lease is released, or unchanged for a lease duration) before it
	// took the request: withdraw it and run the command here.
	withdrawn, err := orchestrate.WithdrawRequest(ctx, fo.c, fo.key, fo.id)
	if err != nil || !withdrawn {
		return false, nil, err
	}
	fmt.Fprintf(errOut, "the watch %s stopped before taking request %s: withdrawn, running it here\n", fo.sup.Holder, fo.id)
	return true, nil, errWithdrawn
}

// giveUp ends the follow at the deadline: a request not yet taken is withdrawn; one taken
// goes on in the watch.
func (fo *follower) giveUp(timeout time.Duration, cause error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if withdrawn, err := orchestrate.WithdrawRequest(ctx, fo.c, fo.key, fo.id); err == nil && withdrawn {
		return fmt.Errorf("%w after %s: no supervisor took request %s; it was withdrawn and nothing was done (%w)", outcome.ErrTimedOut, timeout, fo.id, cause)
	}
	return fmt.Errorf("%w after %s: request %s is still being carried out by the watch; follow it with 'mysqlctl status %s' (%w)", outcome.ErrTimedOut, timeout, fo.id, fo.key.Name, cause)
}

package orchestrate

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/failover"
	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// releaseTimeout bounds the statement that releases lost acknowledgements: its own
// acknowledgement comes from replicas proven to receive, in moments. It is shorter than the
// minimum silence that fails a primary over (1.5 s at the defaults).
const releaseTimeout = time.Second

// ReleaseLostAcks releases the commits that wait on the primary (observed in primary, the view
// v's old primary) for acknowledgements that were lost: when enough replicas that receive from it
// hold everything it wrote (failover.AcksLost), it commits one statement that changes nothing
// (topology.Instance.ReleaseAckWaiters), guarded as every statement of r. It returns what it
// did, with the evidence, or why it did nothing ("" and nil error when not proven).
func (r *Runner) ReleaseLostAcks(ctx context.Context, c *v1.MysqlCluster, v FailoverView, primary topology.Snapshot, creds Credentials) (string, bool, error) {
	p := v.Pods[v.old]
	if p == nil {
		return "the primary has no pod", false, nil
	}
	ss := r.OpenSessions(ctx, v.Ready, creds)
	members, _ := v.Members(c, ss)
	ss.Close()
	holders, why, ok := failover.AcksLost(v.OldSource, primary, members)
	if !ok {
		return why, false, nil
	}
	in, err := r.ConnectGuarded(ctx, p, topology.Credentials{User: RootUser, Password: creds.Root})
	if err != nil {
		return "", false, err
	}
	defer func() { _ = in.Close() }()
	rctx, cancel := context.WithTimeout(ctx, releaseTimeout)
	defer cancel()
	if err := in.ReleaseAckWaiters(rctx); err != nil {
		return "", false, err
	}
	return fmt.Sprintf("%d commit(s) on %s waited for an acknowledgement that %s, which hold its position %s, had not sent (lost across a reconnect): released with one statement that changes nothing",
		primary.SemiSync.WaitSessions, v.old, strings.Join(holders, ", "), BoundOf(primary)), true, nil
}

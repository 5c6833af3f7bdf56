package topology

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// SentinelSession is one session held on a server so that its end is noticed at once: a killed
// server's socket closes, and a frozen or cut-off one stops answering the sleeps it is given.
type SentinelSession struct {
	in   *Instance
	conn *sql.Conn
}

// OpenSentinel logs one session in and proves it answers, within ctx: the login (a dial, and
// through a port-forward a tunnel) is never counted against a pulse's grace.
func (i *Instance) OpenSentinel(ctx context.Context) (*SentinelSession, error) {
	conn, err := i.db.Conn(ctx)
	if err != nil {
		return nil, i.fail("sentinel session", err, nil)
	}
	if err := conn.PingContext(ctx); err != nil {
		_ = conn.Close()
		return nil, i.fail("sentinel session", err, nil)
	}
	return &SentinelSession{in: i, conn: conn}, nil
}

// sentinelStatementSlack is how much longer than its sleep a pulse's statement may take before
// the session is given up: a slow answer keeps the session, only a silence ends it.
const sentinelStatementSlack = 5 * time.Second

// Pulse holds the session asleep on the server for d (a short sleep, so that a session left
// behind by a client that vanished ends soon by itself). It calls late, once, when the answer
// has not come grace after the sleep should have ended: the server is frozen, cut off or slow.
// A late answer keeps the session (Pulse returns nil when it comes); Pulse returns an error when
// the session ends (the server died and its socket closed) or no answer comes within
// sentinelStatementSlack.
func (s *SentinelSession) Pulse(ctx context.Context, d, grace time.Duration, late func()) error {
	cctx, cancel := context.WithTimeout(ctx, d+sentinelStatementSlack)
	defer cancel()
	t := time.AfterFunc(d+grace, late) // a timer fires once
	defer t.Stop()
	if _, err := s.conn.ExecContext(cctx, fmt.Sprintf("DO SLEEP(%.3f)", max(d.Seconds(), 0.001))); err != nil {
		return s.in.fail("sentinel session", err, nil)
	}
	return nil
}

// Close ends the session.
func (s *SentinelSession) Close() { _ = s.conn.Close() }

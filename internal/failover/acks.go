package failover

import (
	"fmt"
	"strings"
	"time"

	"github.com/mysqlctl/mysqlctl/internal/topology"
)

// Lost acknowledgements.
//
// A primary frozen for a moment (a stalled disk, a paused VM) can lose the acknowledgement of a
// commit its replicas did receive: they give up on the silent primary after their net timeout and
// reconnect, asking for what follows that commit, and the server keeps waiting for an
// acknowledgement nobody will send again (measured on MariaDB 10.11: after one 1.2 s freeze under
// a single writer, a commit waited until the semi-sync timeout, hours, while both replicas held
// it and were connected). Only the acknowledgement of a later commit releases it, and an
// application that retries the same row waits behind the commit's row lock, so none may come.
// The supervisor then commits one statement that changes nothing: its acknowledgement, from a
// replica that received it and so everything before it, releases every commit waiting before it.
// That is safe whatever the cause of the wait; it is done only when it is proven useful (see
// AcksLost), so a primary whose replicas are merely slow gets no extra waiting session.

// AckSample is one check's reading of the primary's semi-sync source.
type AckSample struct {
	At time.Time
	// Active: commits wait for acknowledgements (Rpl_semi_sync_master_status).
	Active bool
	// Clients are the connected semi-sync replicas; Wanted how many acknowledgements a commit
	// waits for.
	Clients, Wanted int64
	// Waiting is the number of sessions waiting for an acknowledgement now.
	Waiting int64
	// Acked and Unacked count the commits acknowledged and those that timed out (YesTx, NoTx).
	Acked, Unacked int64
}

// AckSampleOf reads a check's observation of the primary.
func AckSampleOf(s topology.SemiSyncState, wanted int64, at time.Time) AckSample {
	return AckSample{At: at, Active: s.SourceActive, Clients: s.SourceClients, Wanted: max(wanted, 1),
		Waiting: s.WaitSessions, Acked: s.YesTx, Unacked: s.NoTx}
}

// waiting reports whether commits wait beside enough connected semi-sync replicas (a primary with
// too few is starved, which re-joining replicas repairs, not this).
func (a AckSample) waiting() bool { return a.Active && a.Waiting > 0 && a.Clients >= a.Wanted }

// AckStall follows the readings of one wait: from the first reading with commits waiting, as long
// as no acknowledgement is counted and no commit timed out.
type AckStall struct {
	first *AckSample
}

// See adds a reading and reports for how long acknowledgements have stopped while commits wait
// (0 when they have not).
func (s *AckStall) See(a AckSample) time.Duration {
	switch {
	case !a.waiting():
		s.first = nil
	case s.first == nil || a.Acked != s.first.Acked || a.Unacked != s.first.Unacked:
		s.first = &a
	}
	if s.first == nil {
		return 0
	}
	return a.At.Sub(s.first.At)
}

// Reset forgets the wait followed (the primary changed, or the commits were released).
func (s *AckStall) Reset() { s.first = nil }

// AcksLost decides whether commits waiting on the primary (at bound, BoundOf its observation)
// wait for acknowledgements that were lost: at least wanted replicas that receive from the primary
// (IO thread running, source the primary, not quarantined) hold everything it wrote. It returns
// the replicas that do, and why it is not proven otherwise.
func AcksLost(source Source, members []Member, bound string, wanted int64) ([]string, string, bool) {
	var holders, others []string
	for _, m := range members {
		r := m.Snapshot.Replica
		switch {
		case m.Quarantined:
			others = append(others, m.Name+" is quarantined")
		case r == nil || !source.feeds(r) || r.IOThread != topology.ThreadRunning:
			others = append(others, m.Name+" does not receive from the primary")
		default:
			if why, ok := BoundHolds(m.Snapshot, bound); ok {
				holders = append(holders, m.Name)
			} else {
				others = append(others, m.Name+": "+why)
			}
		}
	}
	if int64(len(holders)) >= max(wanted, 1) {
		return holders, "", true
	}
	return holders, fmt.Sprintf("%d of the %d replicas an acknowledgement needs hold the primary's position %s (%s): the acknowledgements may still come",
		len(holders), max(wanted, 1), bound, strings.Join(others, "; ")), false
}

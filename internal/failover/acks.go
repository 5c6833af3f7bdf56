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

// AckSampleOf reads a check's observation of the primary: how many acknowledgements its commits
// wait for is the server's own count (MySQL's wait_for_replica_count; one on MariaDB).
func AckSampleOf(s topology.SemiSyncState, at time.Time) AckSample {
	return AckSample{At: at, Active: s.SourceActive, Clients: s.SourceClients, Wanted: max(s.WaitForReplicas, 1),
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

// AcksLost decides whether commits waiting on the primary (primary is its observation) wait for
// acknowledgements that were lost: at least as many replicas as a commit waits for, each receiving
// from the primary as a semi-sync replica (IO thread running, source the primary, semi-sync
// on, not quarantined), hold everything it wrote (its gtid_binlog_pos, which counts a commit
// once it is in the binary log, before its acknowledgement). It returns the replicas that do,
// and why it is not proven otherwise. MySQL is never proven: its gtid_executed, the only
// position read there, leaves out the commits that wait (AFTER_SYNC), so a replica still
// receiving a large one would pass for one that lost its acknowledgement.
func AcksLost(source Source, primary topology.Snapshot, members []Member) ([]string, string, bool) {
	if !primary.Flavor.IsMariaDB() {
		return nil, "on MySQL the primary's executed set leaves out the commits that wait: a lost acknowledgement is not proven", false
	}
	bound := primary.GTID.BinlogPos.String()
	wanted := max(primary.SemiSync.WaitForReplicas, 1)
	var holders, others []string
	for _, m := range members {
		r := m.Snapshot.Replica
		switch {
		case m.Quarantined:
			others = append(others, m.Name+" is quarantined")
		case r == nil || !source.feeds(r) || r.IOThread != topology.ThreadRunning:
			others = append(others, m.Name+" does not receive from the primary")
		case !m.Snapshot.SemiSync.ReplicaActive:
			others = append(others, m.Name+" receives without acknowledging (semi-sync off)")
		default:
			if why, ok := BoundHolds(m.Snapshot, bound); ok {
				holders = append(holders, m.Name)
			} else {
				others = append(others, m.Name+": "+why)
			}
		}
	}
	if int64(len(holders)) >= wanted {
		return holders, "", true
	}
	return holders, fmt.Sprintf("%d of the %d replicas an acknowledgement needs hold the primary's position %s (%s): the acknowledgements may still come",
		len(holders), wanted, bound, strings.Join(others, "; ")), false
}

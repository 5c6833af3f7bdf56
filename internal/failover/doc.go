// Package failover decides, from observations alone, whether a primary is dead and which
// replica may safely take its place. It does no I/O and reads no clock: the orchestrate
// package gathers snapshots, asks Judge and Elect, and persists their verdicts (with the
// evidence they return) before it acts on them.
//
// The rules follow DESIGN.md's failure model:
//
//   - A primary that answers and is writable is alive; a failover is refused (use switchover).
//   - A primary that answers but is read-only (it restarted: mysqlctl renders read_only=ON) is
//     down for writes and can be fenced over SQL, so a failover may proceed.
//   - A primary that does not answer is dead only when it failed the configured number of
//     consecutive checks of the same pod incarnation AND every reachable replica agrees: its
//     receiver thread lost the source. A primary the replicas still receive from is
//     "unreachable", never "dead".
//   - A candidate must hold received ∪ executed ⊇ every other survivor's, carry no errant
//     transaction (judged against the known primaries and the bootstrap provenance), and have
//     no known lag above the bound. The largest GTID set alone never wins.
package failover

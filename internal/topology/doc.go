// Package topology is how mysqlctl sees and touches MySQL and MariaDB
// servers: flavor detection, per-flavor statements, instance observation,
// replica classification, SQL actions and the dialers that reach a pod's
// port 3306.
//
// The package follows the project's "gather, then decide" shape:
//
//   - Observe / ObserveAll do all the I/O of one observation and return
//     Snapshot values (reachability and error kind, flavor, identity,
//     read-only flags, GTID state, replication threads, lag, semi-sync).
//   - Classify is pure: it turns a snapshot plus what is expected (the
//     primary, its addresses, the known-primary GTID history) into a Class
//     with the evidence behind it. Failover code builds the same input.
//   - Instance executes one small, idempotent action at a time (fence,
//     verify the fence, kill client connections, stop/start replication,
//     re-point, reset, make writable, wait for GTIDs, semi-sync, users).
//     With an Epoch, its mutations are fenced on the server too: a server
//     touched by a newer Lease epoch refuses them (fence.go, ErrSuperseded).
//
// Every statement lives in a Dialect, one per flavor (MySQL 5.7, 8.0, 8.4,
// MariaDB 10.11+), chosen from what the server reports in @@version and
// @@version_comment, never from an image name. The MySQL dialects are
// pinned by tests against recorded outputs; only MariaDB runs live here
// (see README.md).
//
// Secrets: passwords are Secret values that never print; connections are
// built with a driver Connector (no DSN string exists to leak); errors are
// rebuilt without any secret the statement or the pool carried. Timeouts:
// every observation and action is bounded by a context deadline, and dialers
// bound their handshakes.
//
// GTID algebra lives in the subpackage gtid; the test support that starts
// real mariadbd processes lives in mariadbtest.
package topology

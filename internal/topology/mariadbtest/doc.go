// Package mariadbtest starts real mariadbd processes for tests.
//
// It is an ordinary (non-test) package so that the tests of every package
// that talks SQL (topology today, failover and orchestrate later) share one
// way of running a real server instead of mocking one. Each server is a child
// process of the test binary, listens on its own loopback address
// (127.x.y.z:3306, like a pod in the local rig) and keeps its data in a
// directory copied from one template that mariadb-install-db builds once per
// test binary.
//
// The rules it follows come from running mariadbd under test on small
// machines: the process is a child that is always waited for (zombies linger
// otherwise); SIGTERM is sent only after the server has answered a query
// (a server still starting up can hang on it); only processes this package
// started are ever signalled; and everything is cleaned up through
// testing.TB.Cleanup, also when a test fails. Tests call Main from TestMain so
// that shared servers and the template are removed when the package's tests
// end.
//
// Servers run with GTID replication switched on the way this project
// configures production instances (log_bin, log_slave_updates,
// gtid_strict_mode, binlog_format=ROW, a unique server_id) and with small
// memory settings (16 MB buffer pool, performance_schema off), so five of
// them fit comfortably on a 2-core test machine.
package mariadbtest

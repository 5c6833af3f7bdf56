package topology

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Writable reports whether the server is not fenced: read_only is OFF (MariaDB), or
// super_read_only is OFF (MySQL, where read_only alone lets SUPER accounts write). It reads
// nothing but these flags, a query that never waits behind commits: a full observation does
// (SHOW BINARY LOGS waits behind commits hung for semi-sync acknowledgements), so a possibly
// writable old primary is checked with this, and fenced, before it is observed.
func (i *Instance) Writable(ctx context.Context) (bool, error) {
	d, err := i.Dialect(ctx)
	if err != nil {
		return false, err
	}
	ctx, cancel := i.bound(ctx)
	defer cancel()
	q := "SELECT @@global.read_only AS ro"
	if d.Flavor().IsMySQL() {
		q = "SELECT @@global.super_read_only AS ro"
	}
	rows, err := queryRows(ctx, i.db, stmt(q))
	if err != nil {
		return false, i.fail("read read_only", err, nil)
	}
	if len(rows) != 1 {
		return false, i.fail("read read_only", errors.New("no row"), nil)
	}
	v := rows[0]["ro"]
	return v == "0" || v == "OFF", nil
}

// Uptime is how long the server has been running (SHOW GLOBAL STATUS 'Uptime', whole seconds),
// which tells a server that restarted from one that was made read-only while it ran.
func (i *Instance) Uptime(ctx context.Context) (time.Duration, error) {
	ctx, cancel := i.bound(ctx)
	defer cancel()
	rows, err := queryRows(ctx, i.db, stmt("SHOW GLOBAL STATUS LIKE 'Uptime'"))
	if err != nil {
		return 0, i.fail("read uptime", err, nil)
	}
	if len(rows) != 1 {
		return 0, i.fail("read uptime", errors.New("no row"), nil)
	}
	secs, err := strconv.ParseInt(rows[0]["Value"], 10, 64)
	if err != nil || secs < 0 {
		return 0, i.fail("read uptime", fmt.Errorf("uptime %q is not a number of seconds", rows[0]["Value"]), nil)
	}
	return time.Duration(secs) * time.Second, nil
}

package topology

import (
	"context"
	"strconv"
	"strings"
)

// ReplicaServerIDs lists the server_ids of the replicas connected to this server as their source
// (SHOW SLAVE HOSTS; SHOW REPLICAS on MySQL 8.0.22 and later, which removed the old name in 8.4).
// A replica registers when its receiver connects and is dropped when that connection ends, on
// MariaDB whether or not it sets report_host (10.5.1 and later fill Host from the connection):
// https://mariadb.com/kb/en/show-replica-hosts/ and
// https://dev.mysql.com/doc/refman/8.4/en/show-replicas.html. A replica that is not listed was
// not receiving from this server when the statement ran.
func (i *Instance) ReplicaServerIDs(ctx context.Context) ([]uint32, error) {
	d, err := i.Dialect(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := i.bound(ctx)
	defer cancel()
	q := "SHOW SLAVE HOSTS"
	if f := d.Flavor(); f.IsMySQL() && f.Version.AtLeast(8, 0, 22) {
		q = "SHOW REPLICAS"
	}
	rows, err := queryRows(ctx, i.db, stmt(q))
	if err != nil {
		return nil, i.fail("list connected replicas", err, nil)
	}
	var ids []uint32
	for _, r := range rows {
		for k, v := range r {
			if !strings.EqualFold(k, "Server_id") {
				continue
			}
			if id, err := strconv.ParseUint(v, 10, 32); err == nil {
				ids = append(ids, uint32(id))
			}
		}
	}
	return ids, nil
}

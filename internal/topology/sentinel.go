package topology

import (
	"context"
	"fmt"
	"time"
)

// Sentinel holds one session on the server, asleep, for up to d. It returns nil when the sleep
// ran its course, and an error as soon as the session ends otherwise: a killed server's socket
// closes at once, so a supervisor learns of the death without waiting for its next check. (A
// frozen or partitioned server closes nothing; only the periodic checks can tell.) The sleep is
// short so that a session left behind by a client that vanished ends soon by itself.
func (i *Instance) Sentinel(ctx context.Context, d time.Duration) error {
	secs := max(d.Seconds(), 0.1)
	cctx, cancel := context.WithTimeout(ctx, d+5*time.Second)
	defer cancel()
	if _, err := i.db.ExecContext(cctx, fmt.Sprintf("DO SLEEP(%.1f)", secs)); err != nil {
		return i.fail("sentinel session", err, nil)
	}
	return nil
}

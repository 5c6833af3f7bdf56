package topology

import (
	"context"
	"fmt"
	"time"
)

// Sentinel holds one session on the server, asleep for d. It returns nil when the server
// answers within d plus grace, and an error as soon as the session ends otherwise or the answer
// is late: a killed server's socket closes at once, and a frozen or cut-off one cannot answer,
// so a supervisor that keeps one asleep learns of either within d plus grace of the fault,
// instead of at its next check. A late answer ends the session (the driver closes it). The sleep
// is short, so a session left behind by a client that vanished also ends soon by itself.
func (i *Instance) Sentinel(ctx context.Context, d, grace time.Duration) error {
	secs := max(d.Seconds(), 0.001)
	cctx, cancel := context.WithTimeout(ctx, d+grace)
	defer cancel()
	if _, err := i.db.ExecContext(cctx, fmt.Sprintf("DO SLEEP(%.3f)", secs)); err != nil {
		return i.fail("sentinel session", err, nil)
	}
	return nil
}

package e2e

import (
	"context"
	"database/sql"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mysqlctl/mysqlctl/internal/orchestrate"
	"github.com/mysqlctl/mysqlctl/test/rig"
)

// writableMonitor samples every pod's @@read_only while an operation runs and remembers the
// most instances it ever saw writable at once.
type writableMonitor struct {
	mu      sync.Mutex
	most    int
	samples int
	at      string
}

func watchWritable(ctx context.Context, root string, pods ...string) (*writableMonitor, func()) {
	m := &writableMonitor{}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for mctx.Err() == nil {
			var writable []string
			for _, p := range pods {
				addr, err := r.PodAddr(mctx, "default", p, 3306)
				if err != nil {
					continue // restarting: not writable
				}
				d, err := sql.Open("mysql", rig.DSN(addr, "root", root)+"&timeout=500ms&readTimeout=500ms")
				if err != nil {
					continue
				}
				var ro int
				if d.QueryRowContext(mctx, "SELECT @@read_only").Scan(&ro) == nil && ro == 0 {
					writable = append(writable, p)
				}
				_ = d.Close()
			}
			m.mu.Lock()
			m.samples++
			if len(writable) > m.most {
				m.most, m.at = len(writable), strings.Join(writable, ", ")
			}
			m.mu.Unlock()
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return m, func() { cancel(); <-done }
}

// podUIDs maps each pod of the cluster to its UID.
func podUIDs(t *testing.T, ctx context.Context, pods ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range pods {
		pod, err := r.Client.CoreV1().Pods("default").Get(ctx, p, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(pod.UID)
	}
	return out
}

// TestUpgradeRollsImageAndConfig: with a client writing through the primary Service, a new image
// and then a mysqlConfig change each roll out over all three pods, replicas first and the
// primary's role handed over by switchover: exactly one writable instance at every sample, every
// acknowledged commit on every instance, each server reporting the new version (the rig makes
// mariadb:11.4 report 11.4.0). The plan of --dry-run names the order and the handoff and changes
// nothing; a downgrade is refused with exit 4 and restarts nothing.
func TestUpgradeRollsImageAndConfig(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "up", 3)
	defer deleteCluster(t, "up")
	pods := []string{"up-0", "up-1", "up-2"}

	plan := mysqlctl(t, "upgrade", "up", "--image", "mariadb:11.4", "--dry-run")
	if plan.code != 0 {
		t.Fatalf("upgrade --dry-run: exit %d\n%s%s", plan.code, plan.stdout, plan.stderr)
	}
	for _, want := range []string{"restart up-2", "restart up-1", "switchover up-0 -> up-2", "restart up-0", "MariaDB 10.11.", "to MariaDB 11.4: allowed"} {
		if !strings.Contains(plan.stdout, want) {
			t.Errorf("the plan does not say %q:\n%s", want, plan.stdout)
		}
	}
	if c := getCluster(t, ctx, "up"); c.Spec.Image != "mariadb:10.11" || c.Status.Upgrade != nil {
		t.Fatalf("--dry-run changed the cluster: image %s, upgrade %+v", c.Spec.Image, c.Status.Upgrade)
	}

	rollout := func(args ...string) (*writer, string) {
		t.Helper()
		wr, stopWriter := startWriterAt(ctx, "up", 1+1_000_000*len(args))
		mon, stopMon := watchWritable(ctx, root, pods...)
		time.Sleep(time.Second)
		res := mysqlctl(t, append([]string{"upgrade", "up"}, args...)...)
		time.Sleep(time.Second)
		stopMon()
		stopWriter()
		if res.code != 0 {
			t.Fatalf("upgrade %v: exit %d\n%s%s", args, res.code, res.stdout, res.stderr)
		}
		if mon.most != 1 {
			t.Fatalf("upgrade %v: %d instances writable at once (%s) in %d samples", args, mon.most, mon.at, mon.samples)
		}
		c := getCluster(t, ctx, "up")
		if c.Status.Upgrade != nil || c.Status.Operation != nil || len(c.Status.History) == 0 || c.Status.History[0].Type != orchestrate.OperationUpgrade || c.Status.History[0].Result != "Succeeded" {
			t.Fatalf("after upgrade %v: upgrade %+v, operation %+v, history %+v", args, c.Status.Upgrade, c.Status.Operation, c.Status.History)
		}
		primary := c.Status.CurrentPrimary
		if n := writableCount(t, ctx, root, pods...); n != 1 {
			t.Fatalf("after upgrade %v: %d writable instances", args, n)
		}
		for _, p := range pods {
			holdsAcked(t, ctx, p, db(t, mustPodAddr(t, ctx, p), root), wr.acked)
		}
		if !allReplicating(ctx, t, root, "up", primary) {
			t.Fatalf("after upgrade %v: not every replica replicates from %s", args, primary)
		}
		t.Logf("upgrade %v: %d acknowledged writes, longest gap %s; %s", args, len(wr.acked), wr.maxGap(), c.Status.History[0].Message)
		return wr, res.stderr
	}

	_, progress := rollout("--image", "mariadb:11.4")
	for _, stage := range orchestrate.UpgradeStages {
		if !strings.Contains(progress, "upgrade "+stage) {
			t.Errorf("no progress line for stage %s:\n%s", stage, progress)
		}
	}
	for _, p := range pods {
		var v string
		if err := db(t, mustPodAddr(t, ctx, p), root).QueryRowContext(ctx, "SELECT @@version").Scan(&v); err != nil || !strings.HasPrefix(v, "11.4.0") {
			t.Fatalf("%s reports %q (%v) after the upgrade to mariadb:11.4", p, v, err)
		}
	}
	c := getCluster(t, ctx, "up")
	if !strings.Contains(c.Status.History[1].Type, orchestrate.OperationSwitchover) || c.Status.History[1].Result != "Succeeded" {
		t.Fatalf("the handoff switchover is not in the history: %+v", c.Status.History[1])
	}

	// A downgrade across a series is refused before anything changes.
	uids := podUIDs(t, ctx, pods...)
	if res := mysqlctl(t, "upgrade", "up", "--image", "mariadb:10.11"); res.code != 4 || !strings.Contains(res.stderr, "downgrade") {
		t.Fatalf("downgrade: exit %d, want 4 naming the downgrade\n%s", res.code, res.stderr)
	}
	if c := getCluster(t, ctx, "up"); c.Spec.Image != "mariadb:11.4" || c.Status.Upgrade != nil {
		t.Fatalf("the refused downgrade changed the cluster: image %s, upgrade %+v", c.Spec.Image, c.Status.Upgrade)
	}
	for p, uid := range podUIDs(t, ctx, pods...) {
		if uids[p] != uid {
			t.Fatalf("the refused downgrade restarted %s", p)
		}
	}

	// A configuration change in the spec waits for upgrade: reconcile restarts nothing.
	c = getCluster(t, ctx, "up")
	c.Spec.MysqlConfig = map[string]string{"max_connections": "321"}
	if err := kube(t).Update(ctx, c); err != nil {
		t.Fatal(err)
	}
	if res := mysqlctl(t, "reconcile", "up"); res.code != 0 {
		t.Fatalf("reconcile: %d %s", res.code, res.stderr)
	}
	for p, uid := range podUIDs(t, ctx, pods...) {
		if uids[p] != uid {
			t.Fatalf("reconcile of a mysqlConfig change restarted %s", p)
		}
	}
	rollout()
	for _, p := range pods {
		var n int
		if err := db(t, mustPodAddr(t, ctx, p), root).QueryRowContext(ctx, "SELECT @@max_connections").Scan(&n); err != nil || n != 321 {
			t.Fatalf("%s: max_connections %d (%v) after the configuration rollout", p, n, err)
		}
	}
}

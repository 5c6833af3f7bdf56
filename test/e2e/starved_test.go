package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/mysqlctl/mysqlctl/api/v1alpha1"
	"github.com/mysqlctl/mysqlctl/internal/specs"
	"github.com/mysqlctl/mysqlctl/test/rig"
)

// TestWatchStarvedPrimaryRecovers is the attack on a primary starved of acknowledgements: every
// replica of a cluster is killed at once under concurrent writers, so every commit waits for an
// acknowledgement no replica is there to give (the semi-sync timeout is a day). The replicas
// restart in seconds with replication stopped (skip_slave_start); with `watch` running and no
// command typed, writes must resume and nothing acknowledged may be lost. Before the fix the
// supervisor's check blocked behind the waiting commits (SHOW BINARY LOGS), the HA state stayed
// Suspected, the repairer (which ran only while Healthy) never re-joined the replicas, and the
// writes never resumed.
func TestWatchStarvedPrimaryRecovers(t *testing.T) {
	viaPortForward(t) // as from a workstation: through the API server and the node
	for _, tc := range []struct {
		name     string
		replicas int
		writers  int
		create   []string
	}{
		// Both replicas of a 3-instance cluster, under 8 writers whose timed-out commits stay on
		// the server waiting and fill its connection slots (max_connections 20).
		{"sv", 3, 8, []string{"--mysql-config", "max_connections=20"}},
		{"sv2", 2, 4, nil}, // the one replica of a 2-instance cluster
	} {
		t.Run(fmt.Sprintf("%d-instances", tc.replicas), func(t *testing.T) {
			starvedRound(t, tc.name, tc.replicas, tc.writers, tc.create...)
		})
	}
}

func starvedRound(t *testing.T, name string, replicas, writers int, createArgs ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	sc := startStarved(t, ctx, name, replicas, createArgs...)
	defer deleteCluster(t, name)
	ready, resumed, acked, tooMany := sc.starve(t, ctx, writers, 0)
	if len(createArgs) > 0 && tooMany == 0 {
		t.Errorf("no writer was refused with Too many connections: the waiting sessions did not fill the server's slots (the fault did not happen)")
	}
	t.Logf("%d-instance cluster, %d writers: replicas %v killed; Ready again %s after; every writer acknowledged again %s after that; %d acknowledged writes, every one on the primary %s; %d attempts refused with Too many connections",
		replicas, writers, sc.victims, ready.Round(time.Millisecond), resumed.Round(time.Millisecond), acked, sc.primary, tooMany)
	if c := getCluster(t, ctx, name); c.Status.CurrentPrimary != sc.primary {
		t.Errorf("the primary moved from %s to %s: a starved primary is alive, not failed", sc.primary, c.Status.CurrentPrimary)
	}
}

// starvedCluster is a cluster supervised by `watch`, whose replicas starve runs kill.
type starvedCluster struct {
	name, root, primary string
	victims             []string
	watch               *watchProc
	// fill is how many more application sessions open at the kill, each committing and so
	// waiting, so that the waiting sessions take every connection slot of the server's port
	// (as an application's connection pool retrying its timed-out commits does) before the
	// replicas are back; 0 for none.
	fill int
}

func startStarved(t *testing.T, ctx context.Context, name string, replicas int, createArgs ...string) *starvedCluster {
	sc := &starvedCluster{name: name, root: appCluster(t, ctx, name, replicas, createArgs...)}
	if len(createArgs) > 0 {
		sc.fill = 24 // more than max_connections (20) leaves beside the writers
	}
	sc.watch = startWatch(t, nil, name)
	sc.watch.supervising(t, ctx)
	sc.primary = getCluster(t, ctx, name).Status.CurrentPrimary
	var pods []string
	for i := range replicas {
		pods = append(pods, fmt.Sprintf("%s-%d", name, i))
	}
	sc.victims = replicasOf(pods, sc.primary)
	return sc
}

// starve kills every replica at once under the writers (their ids start at round's own range)
// and waits, with no command, until every writer is acknowledged again. It returns the time from
// the kill until the replicas were Ready again, from then until every writer was acknowledged
// again, and the acknowledged writes, after checking that the primary holds every one and that
// the replicas replicate again.
func (sc *starvedCluster) starve(t *testing.T, ctx context.Context, writers, round int) (ready, resumed time.Duration, total, tooMany int) {
	var ws []*writer
	var stops []func()
	for i := range writers {
		wr, stop := startWriterAt(ctx, sc.name, 1+round*10_000_000+i*1_000_000)
		ws, stops = append(ws, wr), append(stops, stop)
	}
	stopAll := sync.OnceFunc(func() {
		for _, s := range stops {
			s()
		}
	})
	defer stopAll()
	eventually(t, ctx, "every writer acknowledged", func() error {
		for i, wr := range ws {
			if _, ok := wr.firstAckAfter(time.Time{}); !ok {
				n, last := wr.failures()
				return fmt.Errorf("writer %d not yet (%d failed attempts, last: %s)", i, n, last)
			}
		}
		return nil
	})
	restarts := map[string]int32{}
	for _, v := range sc.victims {
		restarts[v] = restartCount(t, ctx, v)
	}
	killed := time.Now()
	for _, v := range sc.victims {
		if err := r.Inject(rig.Kill, "default", v); err != nil {
			t.Fatal(err)
		}
	}
	fillers := sc.fillSlots(ctx, round)
	defer func() {
		if t.Failed() {
			sc.dump(t, ctx)
		}
	}()
	back := sc.restarted(t, ctx, restarts)
	// No command: watch alone must bring the writes back.
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	defer wcancel()
	eventually(t, wctx, "writes acknowledged again after the replicas returned", func() error {
		for i, wr := range ws {
			if _, ok := wr.firstAckAfter(back); !ok {
				n, last := wr.failures()
				return fmt.Errorf("writer %d: none yet (%d failed attempts, last: %s)\n%s", i, n, last, sc.watch.output())
			}
		}
		return nil
	})
	var all time.Time
	for _, wr := range ws {
		a, _ := wr.firstAckAfter(back)
		all = maxTime(all, a)
	}
	stopAll()
	fillAcked, fillRefused := fillers()
	tooMany += fillRefused
	pdb := db(t, mustPodAddr(t, ctx, sc.primary), sc.root)
	for _, wr := range ws {
		wr.mu.Lock()
		acked := slices.Clone(wr.acked)
		wr.mu.Unlock()
		total, tooMany = total+len(acked), tooMany+wr.tooMany
		holdsAckedFrom(t, ctx, sc.primary, pdb, acked)
	}
	holdsAckedFrom(t, ctx, sc.primary, pdb, fillAcked)
	total += len(fillAcked)
	for _, v := range sc.victims {
		d := db(t, mustPodAddr(t, ctx, v), sc.root)
		replicatesFrom(t, ctx, v, sc.primary, d)
		// Replication reaches the primary on its admin port, which the waiting sessions cannot fill.
		if s, err := slaveStatus(ctx, d); err != nil || s["Master_Port"] != fmt.Sprint(specs.AdminPort) {
			t.Errorf("%s replicates from port %q (%v), want the admin port %d", v, s["Master_Port"], err, specs.AdminPort)
		}
	}
	return back.Sub(killed), all.Sub(back), total, tooMany
}

// fillSlots opens sc.fill application sessions on the primary at once, each committing one row
// (ids from 2,000,000,000 + round*1,000), which wait with the starved commits. The returned
// function waits for them and returns the ids acknowledged and how many sessions the server
// refused with "Too many connections".
func (sc *starvedCluster) fillSlots(ctx context.Context, round int) func() ([]int, int) {
	if sc.fill == 0 {
		return func() ([]int, int) { return nil, 0 }
	}
	addrs, err := r.ServiceAddrs(ctx, "default", sc.name+"-primary", "mysql")
	if err != nil || len(addrs) != 1 {
		return func() ([]int, int) { return nil, 0 }
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var acked []int
	refused := 0
	for i := range sc.fill {
		id := 2_000_000_000 + round*1_000 + i
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := sql.Open("mysql", rig.DSN(addrs[0], "app", "app-pass"))
			if err != nil {
				return
			}
			defer func() { _ = d.Close() }()
			fctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
			defer cancel()
			_, err = d.ExecContext(fctx, "INSERT INTO app.w VALUES (?)", id)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				acked = append(acked, id)
			case strings.Contains(err.Error(), "1040"):
				refused++
			}
		}()
	}
	return func() ([]int, int) {
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		slices.Sort(acked)
		return acked, refused
	}
}

// dump logs what the primary's sessions and semi-sync, and the replicas' receivers, show (read
// through the admin port), for a round that failed.
func (sc *starvedCluster) dump(t *testing.T, ctx context.Context) {
	addr, err := r.PodAddr(ctx, "default", sc.primary, specs.AdminPort)
	if err != nil {
		t.Logf("dump: %v", err)
		return
	}
	d := db(t, addr, sc.root)
	for _, q := range []string{
		"SELECT USER, COMMAND, STATE, TIME, LEFT(COALESCE(INFO, ''), 60) FROM information_schema.PROCESSLIST ORDER BY TIME DESC",
		"SHOW GLOBAL STATUS LIKE 'Rpl_semi_sync_master%'", "SHOW GLOBAL VARIABLES LIKE 'rpl_semi_sync_master%'", "SHOW SLAVE HOSTS",
		"SHOW GLOBAL STATUS LIKE 'Threads_connected'", "SHOW GLOBAL STATUS LIKE 'Connection_errors_max_connections'",
	} {
		rows, err := d.QueryContext(ctx, q)
		if err != nil {
			t.Logf("dump %s: %v", q, err)
			continue
		}
		cols, _ := rows.Columns()
		var lines []string
		for rows.Next() {
			vals := make([]sql.NullString, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			_ = rows.Scan(ptrs...)
			var f []string
			for _, v := range vals {
				f = append(f, v.String)
			}
			lines = append(lines, strings.Join(f, " | "))
		}
		_ = rows.Close()
		t.Logf("dump %s:\n%s", q, strings.Join(lines, "\n"))
	}
	for _, v := range sc.victims {
		s, err := slaveStatus(ctx, db(t, mustPodAddr(t, ctx, v), sc.root))
		t.Logf("dump %s: IO %s SQL %s port %s errno %s %s semi %v", v, s["Slave_IO_Running"], s["Slave_SQL_Running"], s["Master_Port"], s["Last_IO_Errno"], s["Last_IO_Error"], err)
	}
}

// restarted waits until every victim is Ready again on a new container, and returns when.
func (sc *starvedCluster) restarted(t *testing.T, ctx context.Context, restarts map[string]int32) time.Time {
	var back time.Time
	eventually(t, ctx, "the killed replicas restarted and Ready", func() error {
		for _, v := range sc.victims {
			p, err := r.Client.CoreV1().Pods("default").Get(ctx, v, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount <= restarts[v] || !podReady(p) {
				return fmt.Errorf("%s not back yet", v)
			}
		}
		back = time.Now()
		return nil
	})
	return back
}

// holdsAckedFrom checks that the server holds every acknowledged id of one writer (checked id
// by id: the ids of one writer are a range, with gaps where an attempt was not acknowledged).
func holdsAckedFrom(t *testing.T, ctx context.Context, pod string, d *sql.DB, acked []int) {
	t.Helper()
	if len(acked) == 0 {
		return
	}
	rows, err := d.QueryContext(ctx, "SELECT id FROM app.w WHERE id BETWEEN ? AND ?", acked[0], acked[len(acked)-1])
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	have := map[int]bool{}
	for rows.Next() {
		var id int
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		have[id] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var lost []int
	for _, id := range acked {
		if !have[id] {
			lost = append(lost, id)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%s lacks %d of %d acknowledged writes (first: %v)", pod, len(lost), len(acked), lost[:min(len(lost), 5)])
	}
}

func restartCount(t *testing.T, ctx context.Context, pod string) int32 {
	t.Helper()
	p, err := r.Client.CoreV1().Pods("default").Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Status.ContainerStatuses) == 0 {
		return 0
	}
	return p.Status.ContainerStatuses[0].RestartCount
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// BenchmarkStarvedPrimary measures, over starvedRounds rounds on one cluster each, how long after
// its replicas are Ready again a starved primary acknowledges every writer again (goal: within 2
// s), with `watch` supervising and no command: both replicas of a 3-instance cluster under 8
// writers (max_connections 20, which their waiting sessions fill), and the one replica of a
// 2-instance cluster under 4.
func BenchmarkStarvedPrimary(b *testing.B) {
	const starvedRounds = 10
	for _, tc := range []struct {
		name              string
		replicas, writers int
		create            []string
	}{{"bsv", 3, 8, []string{"--mysql-config", "max_connections=20"}}, {"bsv2", 2, 4, nil}} {
		b.Run(fmt.Sprintf("%d-instances", tc.replicas), func(b *testing.B) {
			t := &testing.T{}
			ctx := context.Background()
			for i := 0; i < b.N; i++ {
				sc := startStarved(t, ctx, tc.name, tc.replicas, tc.create...)
				var readies, resumes []time.Duration
				total := 0
				for round := range starvedRounds {
					ready, resumed, acked, _ := sc.starve(t, ctx, tc.writers, round)
					readies, resumes, total = append(readies, ready), append(resumes, resumed), total+acked
				}
				_ = sc.watch.cmd.Process.Kill()
				<-sc.watch.done
				deleteCluster(t, tc.name)
				if t.Failed() {
					b.Fatalf("a round failed")
				}
				b.ReportMetric(float64(percentile(resumes, 0.5).Milliseconds()), "p50-resume-after-ready-ms")
				b.ReportMetric(float64(percentile(resumes, 0.95).Milliseconds()), "p95-resume-after-ready-ms")
				b.ReportMetric(float64(percentile(readies, 0.5).Milliseconds()), "p50-replicas-ready-ms")
				b.ReportMetric(float64(total), "acked-writes-checked")
				b.Logf("resume after Ready: %v; replicas Ready after the kill: %v", resumes, readies)
			}
		})
	}
}

// TestWatchRecordsWeakenedSemiSync: a person lowers the primary's semi-sync timeout and then
// turns the source side off; `watch` records each at once (within a few checks), so that a later
// failover's receiver-fence deadline is never longer than what the server does. Before, only
// stronger observations were recorded and the 24 h deadline stood for hours.
func TestWatchRecordsWeakenedSemiSync(t *testing.T) {
	viaPortForward(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root, _ := watchedCluster(t, ctx, "ws", 2)
	defer deleteCluster(t, "ws")
	primary := getCluster(t, ctx, "ws").Status.CurrentPrimary
	record := func() v1.InstanceStatus {
		for _, i := range getCluster(t, ctx, "ws").Status.Instances {
			if i.Name == primary {
				return i
			}
		}
		t.Fatalf("no instance record of %s", primary)
		return v1.InstanceStatus{}
	}
	if rec := record(); !rec.SemiSyncSource || rec.SemiSyncTimeoutSeconds != 86400 {
		t.Fatalf("before: recorded source %v timeout %d, want true 86400", rec.SemiSyncSource, rec.SemiSyncTimeoutSeconds)
	}
	pd := db(t, mustPodAddr(t, ctx, primary), root)
	elevated(t, ctx, pd, "SET GLOBAL rpl_semi_sync_master_timeout = 3600000")
	changed := time.Now()
	eventually(t, ctx, "the lowered timeout recorded", func() error {
		if rec := record(); rec.SemiSyncTimeoutSeconds != 3600 || !rec.SemiSyncSource {
			return fmt.Errorf("recorded source %v timeout %d", rec.SemiSyncSource, rec.SemiSyncTimeoutSeconds)
		}
		return nil
	})
	t.Logf("timeout lowered to 1h: recorded %s later", time.Since(changed).Round(time.Millisecond))
	elevated(t, ctx, pd, "SET GLOBAL rpl_semi_sync_master_enabled = OFF")
	changed = time.Now()
	eventually(t, ctx, "semi-sync off recorded", func() error {
		if rec := record(); rec.SemiSyncSource {
			return fmt.Errorf("still recorded as a semi-sync source (timeout %d)", rec.SemiSyncTimeoutSeconds)
		}
		return nil
	})
	t.Logf("semi-sync off: recorded %s later", time.Since(changed).Round(time.Millisecond))
}

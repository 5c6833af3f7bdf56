package e2e

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/mysqlctl/mysqlctl/test/rig"
)

// TestLivenessSparesPrimaryWaitingForAcks: a semi-synchronous primary whose replica stopped
// acknowledging holds every commit, and its clients fill every connection slot ("Too many
// connections"). Such a server is alive and must not be restarted: a restart would bring it
// back read-only and turn a stall into an outage with hung clients lost. The StatefulSet's own
// liveness probe, run in the pod, must pass.
func TestLivenessSparesPrimaryWaitingForAcks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	root := appCluster(t, ctx, "lv", 2)
	defer deleteCluster(t, "lv")
	c := getCluster(t, ctx, "lv")
	primary := c.Status.CurrentPrimary
	replica := "lv-0"
	if primary == replica {
		replica = "lv-1"
	}
	addr := mustPodAddr(t, ctx, primary)
	d := db(t, addr, root)
	var maxConn int
	if err := d.QueryRowContext(ctx, "SELECT @@max_connections").Scan(&maxConn); err != nil {
		t.Fatal(err)
	}
	// The replica stops acknowledging: every commit on the primary now waits (semi-sync with
	// wait_no_slave and a timeout of hours).
	rd := db(t, mustPodAddr(t, ctx, replica), root)
	elevated(t, ctx, rd, "STOP SLAVE IO_THREAD")
	release := func() { elevated(t, context.Background(), rd, "START SLAVE IO_THREAD") }
	defer release()

	// Application clients: each commit hangs; more clients than slots.
	hctx, hcancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { hcancel(); release(); wg.Wait() }()
	var mu sync.Mutex
	refused := 0
	for i := range maxConn + 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			app, err := sql.Open("mysql", rig.DSN(addr, "app", "app-pass"))
			if err != nil {
				return
			}
			defer func() { _ = app.Close() }()
			if _, err := app.ExecContext(hctx, "INSERT INTO app.w VALUES (?)", 500000+i); err != nil {
				var me *mysql.MySQLError
				if errors.As(err, &me) && me.Number == 1040 {
					mu.Lock()
					refused++
					mu.Unlock()
				}
			}
		}()
		time.Sleep(5 * time.Millisecond)
	}
	eventually(t, ctx, "every connection slot held by a commit waiting for an acknowledgement", func() error {
		app, err := sql.Open("mysql", rig.DSN(addr, "app", "app-pass"))
		if err != nil {
			return err
		}
		defer func() { _ = app.Close() }()
		err = app.PingContext(ctx)
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1040 {
			return nil
		}
		return errors.New("a new application connection is still accepted")
	})
	var waiting int
	if err := d.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE STATE LIKE '%semi-sync%'").Scan(&waiting); err != nil {
		// root's extra slot may be taken too; the connection refusal above is the proof.
		t.Logf("counting waiting commits: %v", err)
	} else if waiting == 0 {
		t.Fatal("no commit waits for a semi-sync acknowledgement: the scenario did not happen")
	}
	mu.Lock()
	t.Logf("%d commits wait for an acknowledgement; %d clients refused with 1040", waiting, refused)
	mu.Unlock()

	ss := &appsv1.StatefulSet{}
	if err := kube(t).Get(ctx, client.ObjectKey{Namespace: "default", Name: "lv"}, ss); err != nil {
		t.Fatal(err)
	}
	probe := ss.Spec.Template.Spec.Containers[0].LivenessProbe
	if probe == nil || probe.Exec == nil {
		t.Fatal("the StatefulSet has no exec liveness probe")
	}
	for range 3 {
		res, err := r.Exec(ctx, "default", primary, "", time.Duration(probe.TimeoutSeconds)*time.Second, probe.Exec.Command...)
		if err != nil {
			t.Fatalf("liveness probe: %v", err)
		}
		if res.ExitCode != 0 {
			t.Fatalf("the liveness probe fails (exit %d) on a server that only waits for acknowledgements: %s", res.ExitCode, strings.TrimSpace(string(res.Output)))
		}
		time.Sleep(time.Second)
	}
	// Acknowledgements return: the held commits complete, nothing was restarted.
	release()
	hcancel()
	wg.Wait()
	eventually(t, ctx, "the primary accepts connections again", func() error { return d.PingContext(ctx) })
	if readOnly(t, ctx, d) {
		t.Error("the primary became read-only: it was restarted")
	}
}
